"""The one factory for Spark sessions: the job, the demo, the tests and the benchmarks all use it.

``local[2]`` by default and any master from configuration (the same code runs on a cluster), Delta's SQL
extensions and catalog, the Kafka connector and Delta jars resolved from Maven Central by
``connectors.jvm_artifacts`` plus the project's own compiled classes (the ingest fast path), Hadoop's S3A with the
``[storage]`` settings only when a root is on an object store (``connectors.object_store``), the RocksDB
state store with changelog checkpointing and bounded memory, a small fixed shuffle partition count (it is
pinned into every checkpoint), checkpoint files written through Hadoop's FileSystem API when the
checkpoints are local, and this interpreter for Python workers (a system Python would lack pandas/pyarrow).
With executors in processes of their own (a cluster), the project's Python packages are shipped to them as
one zip (``connectors.python_package``) and the jars through ``spark.jars``, both served by the driver.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from connectors import jvm_artifacts, object_store
from streaming import __version__
from streaming.config.sections import SparkConfig, StorageConfig

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# The [spark] section's defaults are the factory's (conf/monitor.toml writes the same; tests/unit/test_config.py).
_DEFAULTS = SparkConfig()

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


@dataclass(frozen=True)
class SparkSettings:
    """What varies between deployments; everything else is fixed by the factory."""

    master: str = _DEFAULTS.master
    app_name: str = _DEFAULTS.app_name
    shuffle_partitions: int = _DEFAULTS.shuffle_partitions
    driver_memory: str = _DEFAULTS.driver_memory
    ui_enabled: bool = _DEFAULTS.ui_enabled
    rocksdb_max_memory_mb: int = _DEFAULTS.rocksdb_max_memory_mb
    local_dir: str | None = None
    # Where the queries keep their checkpoints, and how checkpoint files are written there: "auto" writes
    # through Hadoop's FileSystem API when that place is a local directory (see spark_conf), "spark" leaves
    # Spark's choice.
    checkpoint_root: str | None = None
    checkpoint_file_manager: str = _DEFAULTS.checkpoint_file_manager
    extra_conf: Mapping[str, str] = field(default_factory=dict)
    # Set when a table or checkpoint root is on an object store: S3A's jars and the [storage] settings.
    storage: StorageConfig | None = None

    @classmethod
    def of(
        cls, spark: SparkConfig, checkpoint_root: str | None = None, storage: StorageConfig | None = None
    ) -> SparkSettings:
        """The ``[spark]`` section as the session factory reads it (``storage``: see the field)."""
        return cls(
            master=spark.master,
            app_name=spark.app_name,
            shuffle_partitions=spark.shuffle_partitions,
            driver_memory=spark.driver_memory,
            ui_enabled=spark.ui_enabled,
            rocksdb_max_memory_mb=spark.rocksdb_max_memory_mb,
            checkpoint_root=checkpoint_root,
            checkpoint_file_manager=spark.checkpoint_file_manager,
            extra_conf=dict(spark.conf),
            storage=storage,
        )


# Loggers whose warnings report routine work of Delta's, once per MERGE, that an operator can do nothing
# about: raised to ERROR so that the job's log keeps to what needs attention.
QUIETED_LOGGERS = {
    # Delta materializes every MERGE's source with localCheckpoint and unpersists it afterwards, and each
    # unpersist warns "RDD n was locally checkpointed, its lineage has been truncated and cannot be
    # recomputed after unpersisting" (two lines per consumer batch with changes in the demo).
    "org.apache.spark.rdd.MapPartitionsRDD": "ERROR",
}
COMMIT_METADATA = f"rocketmq-rebalance-monitor {__version__}"
LOCAL_LOG_STORE = "io.github.rrm.delta.LocalListingLogStore"
CHECKPOINT_FILE_MANAGER_KEY = "spark.sql.streaming.checkpointFileManagerClass"
FILESYSTEM_CHECKPOINT_FILE_MANAGER = (
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
)


def is_local(path: str) -> bool:
    """Whether ``path`` (a plain path or a URI) names a directory on this machine's file system."""
    scheme = urlsplit(path).scheme
    return scheme in ("", "file")


def executors_elsewhere(master: str) -> bool:
    """Whether executors run in processes of their own (any master but ``local``/``local[...]``), which
    import the job's Python code only from what the application ships them."""
    return not (master == "local" or master.startswith("local["))


def on_loopback(master: str) -> bool:
    """Whether a ``spark://`` master listens on this machine's loopback address."""
    if not master.startswith("spark://"):
        return False
    hosts = {urlsplit(url).hostname for url in ("spark://" + part for part in master[8:].split(","))}
    return hosts <= {"127.0.0.1", "localhost"}


def spark_conf(settings: SparkSettings) -> dict[str, str]:
    """The complete configuration the factory applies (exposed for tests and ``--print-config``)."""
    conf = {**_base_conf(settings), **_TUNED_DEFAULTS, **_java_options(settings)}
    if settings.master.startswith("local") or on_loopback(settings.master):
        # Keep a laptop or CI run on loopback only (a cluster on this machine too: its executors reach the
        # driver at 127.0.0.1). A cluster elsewhere reaches the driver at Spark's own choice of address, or at
        # the spark.driver.host of [spark.conf].
        conf["spark.driver.host"] = "127.0.0.1"
        conf["spark.driver.bindAddress"] = "127.0.0.1"
    if settings.local_dir:
        conf["spark.local.dir"] = settings.local_dir
    if settings.checkpoint_file_manager == "auto" and settings.checkpoint_root and is_local(settings.checkpoint_root):
        # Spark writes checkpoint files (offsets, commits, every state store's changelog) through Hadoop's
        # FileContext API, which on a local disk without Hadoop's native library forks a `chmod` and
        # `readlink` process per file: about 60 ms per state-store commit, 30 ms per offsets entry here.
        # The FileSystem API does neither. Renaming a file on a local disk is atomic either way; what
        # FileContext adds is refusing to overwrite a file another JVM wrote in between, which only matters
        # for two jobs sharing a checkpoint, and that is never supported.
        conf[CHECKPOINT_FILE_MANAGER_KEY] = FILESYSTEM_CHECKPOINT_FILE_MANAGER
    if settings.storage is not None:
        conf.update(object_store.hadoop_conf(settings.storage))
    conf.update({k: v for k, v in settings.extra_conf.items() if k not in conf or not k.endswith("JavaOptions")})
    return conf


def _base_conf(settings: SparkSettings) -> dict[str, str]:
    """The master, the jars, Delta, the RocksDB state store and this interpreter for Python workers."""
    s3 = jvm_artifacts.jars("s3") if settings.storage is not None else []
    jars = ",".join(str(jar) for jar in [*jvm_artifacts.jars("spark"), *s3, jvm_artifacts.ingest_jar()])
    return {
        "spark.master": settings.master,
        "spark.app.name": settings.app_name,
        "spark.jars": jars,
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.sql.shuffle.partitions": str(settings.shuffle_partitions),
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        "spark.sql.streaming.stateStore.rocksdb.boundedMemoryUsage": "true",
        "spark.sql.streaming.stateStore.rocksdb.maxMemoryUsageMB": str(settings.rocksdb_max_memory_mb),
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        "spark.driver.memory": settings.driver_memory,
        "spark.ui.enabled": str(settings.ui_enabled).lower(),
        "spark.ui.showConsoleProgress": "false",
        "spark.databricks.delta.schema.autoMerge.enabled": "false",
        # every commit's commitInfo.userMetadata names the monitor's version (DESCRIBE HISTORY): which release
        # wrote which version of a table, across upgrades
        "spark.databricks.delta.commitInfo.userMetadata": COMMIT_METADATA,
    }


# Spark's and Delta's defaults the factory replaces, each for the reason given beside it.
_TUNED_DEFAULTS = {
    # Delta rebuilds a table's snapshot (log replay) before every idempotent MERGE, and before an append
    # whose table checksum lacks its transactions (delta_sink.append_idempotent), to read the table's
    # last txnVersion, with 50 tasks by default: for the monitor's small tables that is dozens of
    # near-empty tasks on every commit and MERGE, and it was most of a send-ingest batch's time on 2 cores
    # (26 s against 1.4 s for an empty dead-letter append at 2). One task replays a log of thousands of
    # files in well under a second and costs 15 % less CPU per append than 4 (bench_delta_commit: 3.8 vs
    # 4.5 CPU s per one-row append); a cluster with very large tables raises it through [spark.conf].
    "spark.databricks.delta.snapshotPartitions": "1",
    # A failed post-commit hook (auto compaction that lost a race or could not read a file) is logged and
    # the write it follows stands: its data is committed, only the compaction did not happen. Delta
    # rethrows instead when DELTA_TESTING is in the environment, which would stop the query over a
    # housekeeping step; pinned so the job behaves the same wherever it runs.
    "spark.databricks.delta.postCommitHook.throwOnError": "false",
    # Every Delta commit lists the table's _delta_log, which holds every commit of the log retention
    # (30 days by default: hundreds of thousands of files for a table written every few seconds). Delta's
    # default store for local paths builds a Hadoop FileStatus per file for that, about 14 us each: an
    # exactly-once append took 1.6 s with 100,000 expired files in the log and 4.8 s with 300,000, against
    # 0.21 s with none. This one (Delta's own HDFSLogStore, writes included) stats only the files from the
    # last checkpoint on: 0.26 s and 0.35 s (bench_delta_log). Other schemes keep Delta's stores.
    "spark.delta.logStore.file.impl": LOCAL_LOG_STORE,
    # The JVM talks to its Python workers over a Unix domain socket instead of loopback TCP. Over TCP a
    # runner that sends little (a stateful operator's timeout pass, a shard with a few rows) waited about
    # 40 ms for the small segments of its header, command and data to be acknowledged (Nagle's algorithm
    # against delayed ACKs); a stateful operator runs two runners per partition and batch. Measured on a
    # no-op applyInPandasWithState, one partition: 45 ms per empty runner over TCP, 3-8 ms over the socket.
    "spark.python.unix.domain.socket.enabled": "true",
    # Spark keeps the classes it compiles from generated code in one cache per JVM, 100 by default; the
    # job's queries and their writes needed about 330 (with three queries), so every batch evicted classes the next one
    # compiled again with Janino: 280-410 compiles a minute in steady state at a 2 s trigger, 12-23 s of
    # compile time a minute. With room for them it compiles about 4 a minute after warm-up, and the
    # median send-ingest batch went from 12.2 s to 5.8 s (bench_detection_latency, full fleet, 2 cores).
    "spark.sql.codegen.cache.maxEntries": "1000",
}

# HotSpot never JIT-compiles a method over 8,000 bytes of bytecode; Spark's generated code for the
# ingest rules (one CASE per contract rule) is larger, so it ran interpreted: classifying a record
# cost 2.5x parsing it, against 1.0x once compiled (JVM CPU seconds on 200,000 sends, warm JIT).
# -Xss: when a query is stopped during a foreachBatch, Spark tells an interrupt from a failure by
# matching the Python error's whole text against ``(.|\r\n|\r|\n)*`` (StreamExecution.PROXY_ERROR),
# which recurses once per character; on the default 1 MB thread stack a traceback of a few thousand
# characters overflowed it, and every clean stop printed a StackOverflowError of a thousand lines.
_JAVA_OPTIONS = "-XX:-DontCompileHugeMethods -Xss32m"


def _java_options(settings: SparkSettings) -> dict[str, str]:
    """The driver's and executors' JVM options: ``_JAVA_OPTIONS`` followed by those of ``extra_conf``."""
    return {
        key: " ".join(filter(None, [_JAVA_OPTIONS, settings.extra_conf.get(key, "")]))
        for key in ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions")
    }


def build_spark_session(settings: SparkSettings | None = None) -> SparkSession:
    """Create (or return the active) session configured as above."""
    from pyspark.sql import SparkSession

    settings = settings or SparkSettings()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder
    for key, value in spark_conf(settings).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    if executors_elsewhere(settings.master):
        # The job's packages travel with the application (the driver serves the zip, as it serves spark.jars),
        # so executors on other machines run exactly the driver's code, whatever their PYTHONPATH.
        from connectors.python_package import python_zip

        session.sparkContext.addPyFile(str(python_zip()))
    set_logger_levels(session, QUIETED_LOGGERS)
    return session


def set_logger_levels(session: SparkSession, levels: Mapping[str, str]) -> dict[str, str]:
    """Set JVM loggers' levels (log4j names, e.g. "ERROR"); returns their previous effective levels."""
    jvm = session.sparkContext._jvm
    assert jvm is not None
    log4j = jvm.org.apache.logging.log4j
    previous = {}
    for logger, level in levels.items():
        previous[logger] = str(log4j.LogManager.getLogger(logger).getLevel().name())
        log4j.core.config.Configurator.setLevel(logger, log4j.Level.toLevel(level))
    return previous
