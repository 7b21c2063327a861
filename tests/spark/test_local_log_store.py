"""The log store of local Delta tables (``io.github.rrm.delta.LocalListingLogStore``) lists a ``_delta_log``
exactly as Delta's default store for local paths does, and the job's sessions use it for every local table."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from streaming.job.delta.exactly_once import append_idempotent, ensure_table
from streaming.job.runtime.spark_session import LOCAL_LOG_STORE

DDL = "seq INT, batch_id BIGINT"


def listing(spark, store_class: str, directory: Path, start: str) -> list[tuple[str, int, int, bool]]:
    """``store.listFrom(directory/start)``: (name, length, modification time, is a directory) per entry."""
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    store = functools.reduce(getattr, store_class.split("."), jvm)(conf)
    entries = store.listFrom(jvm.org.apache.hadoop.fs.Path(directory.as_uri() + "/" + start), conf)
    out = []
    while entries.hasNext():
        status = entries.next()
        out.append((status.getPath().getName(), status.getLen(), status.getModificationTime(), status.isDirectory()))
    return out


@pytest.fixture
def table(spark, tmp_path) -> Path:
    path = tmp_path / "history"
    ensure_table(spark, str(path), spark.createDataFrame([], DDL).schema, properties={"delta.checkpointInterval": "3"})
    for batch_id in range(1, 8):  # two checkpoints (versions 3 and 6), commits and checksums after them
        append_idempotent(spark.createDataFrame([(batch_id, batch_id)], DDL), str(path), "app", batch_id)
    return path


def test_lists_a_delta_log_as_delta_does(spark, table):
    log = table / "_delta_log"
    # Expired commits before the checkpoint, a checksum file the local file system hides, a directory.
    for version in range(100):
        (log / f"-{version:020d}.json").write_text("{}")
    (log / ".00000000000000000007.json.crc").write_text("hidden")
    assert any(entry.is_dir() for entry in log.iterdir())  # Delta's _staged_commits
    delta_store = "io.delta.storage.HDFSLogStore"

    for start in ("00000000000000000000", "00000000000000000006", "00000000000000000007.json", "-", "zzz"):
        ours = listing(spark, LOCAL_LOG_STORE, log, start)
        assert ours == listing(spark, delta_store, log, start), start
    from_checkpoint = [name for name, *_ in listing(spark, LOCAL_LOG_STORE, log, "00000000000000000006")]
    assert from_checkpoint[0] == "00000000000000000006.checkpoint.parquet"
    assert "00000000000000000007.json" in from_checkpoint and not any(n.startswith(("-", ".")) for n in from_checkpoint)
    assert len(listing(spark, LOCAL_LOG_STORE, log, "-")) > 100  # the expired ones are there when asked for


def test_a_missing_log_directory_is_file_not_found_as_with_delta(spark, tmp_path):
    from py4j.protocol import Py4JJavaError

    for store in (LOCAL_LOG_STORE, "io.delta.storage.HDFSLogStore"):
        with pytest.raises(Py4JJavaError, match="FileNotFoundException"):
            listing(spark, store, tmp_path / "none" / "_delta_log", "00000000000000000000")


def test_the_sessions_use_it_for_local_tables(spark, table):
    jvm = spark.sparkContext._jvm
    delta_log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, str(table))
    store = delta_log.store().getDelegate(jvm.org.apache.hadoop.fs.Path((table / "_delta_log").as_uri()))
    assert store.logStoreImpl().getClass().getName() == LOCAL_LOG_STORE
