"""The exactly-once append (``append_idempotent`` through ``IdempotentDeltaAppend``): a replayed batch is
skipped whether the table's checksum lists its transactions (the fast path) or not (Delta's log replay), the
commit carries Delta's own ``txn`` action, and Delta's schema enforcement still applies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streaming.job.delta_sink import append_idempotent, ensure_table
from streaming.job.sinks import DeltaTables

DDL = "seq INT, kind STRING, batch_id BIGINT"


@pytest.fixture
def table(spark, tmp_path) -> str:
    path = str(tmp_path / "history")
    # The job's own properties for a history table: they must leave the checksum's transaction list on.
    ensure_table(spark, path, DDL, properties=DeltaTables(spark, tmp_path).properties("history"))
    return path


def batch(spark, batch_id: int, rows: int = 2):
    return spark.createDataFrame([(i, f"k{i}", batch_id) for i in range(rows)], DDL)


def checksum_lists_transactions(spark, path: str) -> bool:
    helper = spark.sparkContext._jvm.io.github.rrm.delta.IdempotentDeltaAppend
    return bool(helper.checksumListsTransactions(spark._jsparkSession, path))


def committed_txns(path: str) -> list[tuple[str, int]]:
    """The ``txn`` actions of every commit in the table's log, in commit order."""
    txns = []
    for commit in sorted(Path(path, "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "txn" in action:
                txns.append((action["txn"]["appId"], action["txn"]["version"]))
    return txns


def rows_per_batch(spark, path: str) -> dict[int, int]:
    rows = spark.read.format("delta").load(path).groupBy("batch_id").count().collect()
    return {row["batch_id"]: row["count"] for row in rows}


def test_replays_are_skipped_from_the_checksum(spark, table):
    assert [append_idempotent(batch(spark, b), table, "app-1", b) for b in range(3)] == [True, True, True]
    assert checksum_lists_transactions(spark, table)

    assert append_idempotent(batch(spark, 2), table, "app-1", 2) is False  # the replay of the last batch
    assert append_idempotent(batch(spark, 1), table, "app-1", 1) is False  # an older one
    assert append_idempotent(batch(spark, 3), table, "app-1", 3) is True
    assert append_idempotent(batch(spark, 3), table, "app-1", 3) is False
    assert append_idempotent(batch(spark, 0), table, "app-2", 0) is True  # a new checkpoint's app id

    assert rows_per_batch(spark, table) == {0: 4, 1: 2, 2: 2, 3: 2}
    # Each append committed Delta's own txn action, which any Delta reader or writer honours.
    assert committed_txns(table) == [("app-1", 0), ("app-1", 1), ("app-1", 2), ("app-1", 3), ("app-2", 0)]


def test_replays_are_skipped_by_log_replay_when_the_checksum_is_missing(spark, table):
    for b in range(2):
        assert append_idempotent(batch(spark, b), table, "app-1", b)
    # A table last written by an engine that writes no checksum: Delta must replay the log.
    for checksum in Path(table, "_delta_log").glob("*.crc"):
        checksum.unlink()
    spark.sparkContext._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()
    assert not checksum_lists_transactions(spark, table)

    assert append_idempotent(batch(spark, 1), table, "app-1", 1) is False
    assert append_idempotent(batch(spark, 2), table, "app-1", 2) is True
    assert rows_per_batch(spark, table) == {0: 2, 1: 2, 2: 2}


def test_delta_still_enforces_the_table_schema(spark, table):
    from pyspark.errors import AnalysisException
    from pyspark.sql import functions as F

    extra_column = batch(spark, 0).withColumn("surprise", F.lit(1))
    with pytest.raises(AnalysisException, match="surprise"):
        append_idempotent(extra_column, table, "app-1", 0)
    # The failed attempt committed nothing, so the batch is still to be written.
    assert append_idempotent(batch(spark, 0), table, "app-1", 0) is True
    assert rows_per_batch(spark, table) == {0: 2}
