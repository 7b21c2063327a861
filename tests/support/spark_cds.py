"""A class-data-sharing archive for the tests' Spark JVMs (JDK dynamic AppCDS).

Made once per Spark install and JVM, in the background while the suite starts (``start_making``); every Spark
JVM started once it exists maps Spark's classes from it instead of loading and verifying them from the jars
(a session start with a Delta write and read: 20 -> 13-14 JVM CPU seconds). A JVM that cannot use it (another
class path, another JDK) starts as without it, silently: it changes start-up cost, never a result.
Run as ``python -m tests.support.spark_cds FILE`` it makes the archive at ``FILE``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from connectors.processes import pid_alive

ROOT = Path(__file__).parents[2]
ARCHIVE_DIR = ROOT / ".cache" / "spark-cds"
# Quiet when the archive does not fit the JVM (the JVM then loads classes as usual).
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def archive_path() -> Path:
    """Where the archive of this Spark install and JVM lives (named by the Spark jars and the java binary)."""
    import pyspark

    jars = sorted(p.name for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar"))
    java = os.path.realpath(shutil.which("java") or "java")
    key = hashlib.sha256("\n".join([pyspark.__version__, java, *jars]).encode()).hexdigest()[:16]
    return ARCHIVE_DIR / f"spark-{key}.jsa"


def jvm_options() -> str:
    """The JVM options that map the archive, or nothing while it does not exist."""
    archive = archive_path()
    return f"-XX:SharedArchiveFile={archive} {QUIET}" if archive.is_file() else ""


def start_making() -> subprocess.Popen | None:
    """Start making the archive in the background unless it exists; the process, to ``finish_making``."""
    archive = archive_path()
    if archive.is_file():
        return None
    ARCHIVE_DIR.mkdir(parents=True, exist_ok=True)
    for partial in ARCHIVE_DIR.glob(".spark-*.jsa.*"):  # left by a making that was stopped
        if not pid_alive(int(partial.suffix[1:])):
            partial.unlink(missing_ok=True)
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.spark_cds", str(archive)],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def finish_making(process: subprocess.Popen | None) -> None:
    """Stop a making that has not finished, its JVM with it (the next ``start_making`` removes its file)."""
    if process is not None and process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def make(archive: Path) -> None:
    """Run what the tests' Spark sessions run first (SQL, a Python UDF, Delta, a stateful stream) in a JVM that
    writes the classes it loaded to a temporary file at exit; then name it ``archive``."""
    from pyspark.sql import functions as F

    from streaming.job.runtime.spark_session import SparkSettings, build_spark_session
    from tests.support.job import TEST_SHUFFLE_PARTITIONS, TEST_SPARK_CONF

    work = Path(tempfile.mkdtemp(prefix="rrm-spark-cds-"))
    partial = archive.with_name(f".{archive.name}.{os.getpid()}")
    conf = dict(TEST_SPARK_CONF)
    conf["spark.driver.extraJavaOptions"] += f" -XX:ArchiveClassesAtExit={partial} {QUIET}"
    try:
        spark = build_spark_session(
            SparkSettings(
                app_name="rrm-spark-cds",
                shuffle_partitions=TEST_SHUFFLE_PARTITIONS,
                local_dir=str(work / "local"),
                checkpoint_root=str(work),
                extra_conf=conf,
            )
        )
        frame = spark.range(100).withColumn("key", F.col("id") % 7)
        frame.groupBy("key").agg(F.count("*"), F.max("id")).collect()
        frame.select(F.udf(lambda v: v + 1, "long")("id")).collect()
        frame.write.format("delta").save(str(work / "table"))
        spark.read.format("delta").load(str(work / "table")).where("key = 3").collect()
        stream = spark.readStream.format("rate").option("rowsPerSecond", 10).load()
        query = (
            stream.groupBy(F.col("value") % 3)
            .count()
            .writeStream.format("memory")
            .queryName("cds")
            .outputMode("complete")
            .option("checkpointLocation", str(work / "checkpoint"))
            .start()
        )
        query.processAllAvailable()
        query.stop()
        gateway = spark.sparkContext._gateway
        spark.stop()
        # The JVM writes the archive when it exits, which it does once its standard input closes.
        process = gateway.proc
        gateway.shutdown()
        process.stdin.close()
        process.wait(timeout=300)
        if partial.is_file() and partial.stat().st_size > 0:
            partial.replace(archive)
    finally:
        partial.unlink(missing_ok=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    make(Path(sys.argv[1]))
