"""The exactly-once append (``append_idempotent`` through ``IdempotentDeltaAppend``): a replayed batch is
skipped whether the table's checksum lists its transactions (the fast path) or not (Delta's log replay), the
commit carries Delta's own ``txn`` action, Delta's schema enforcement still applies, and a frame whose row
count is given is written as one file per ``rows_per_task`` rows, whatever its partitioning. The exactly-once
overwrite (``overwrite_idempotent``) replaces every row, as one file, and skips a replay the same way; it takes
the files it replaces from the checksum's file list, and commits what Delta's own overwrite does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streaming.job.delta.exactly_once import (
    ROWS_PER_WRITE_TASK,
    append_idempotent,
    ensure_table,
    overwrite_idempotent,
    write_tasks,
)
from streaming.job.delta.sinks import DeltaTables

DDL = "seq INT, kind STRING, batch_id BIGINT"


@pytest.fixture
def table(spark, tmp_path) -> str:
    path = str(tmp_path / "history")
    # The job's own properties for a history table: they must leave the checksum's transaction list on.
    ensure_table(
        spark,
        path,
        spark.createDataFrame([], DDL).schema,
        properties=DeltaTables(spark, tmp_path).properties("history"),
    )
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


def files_added_by(path: str, app_id: str, version: int) -> int:
    """How many data files the commit carrying the txn (``app_id``, ``version``) added (auto compaction may
    commit in between, so commits are found by their txn, not their number)."""
    for commit in sorted(Path(path, "_delta_log").glob("*.json")):
        actions = [json.loads(line) for line in commit.read_text().splitlines()]
        if any(a.get("txn", {}).get("appId") == app_id and a["txn"]["version"] == version for a in actions):
            return sum(1 for a in actions if "add" in a)
    raise AssertionError(f"no commit of ({app_id}, {version}) in {path}")


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


def test_appends_leave_each_snapshot_unreconstructed_and_the_compaction_count_true(spark, table):
    """An append reads what it needs of the table (its transactions, its file count for auto compaction) from
    the checksum its last commit wrote: no snapshot along the way has its state rebuilt by a log replay (three
    Spark jobs a commit, which the file count used to cost), and auto compaction counts the table's real files."""
    jvm = spark.sparkContext._jvm
    log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, table)
    snapshots = []
    for b in range(4):
        assert append_idempotent(batch(spark, b), table, "app-1", b)
        snapshots.append(log.unsafeVolatileSnapshot())  # the one the next append starts from
    jvm.io.github.rrm.delta.AutoCompactionCount.align(spark._jsparkSession, table)  # as before a MERGE
    versions = [s.version() for s in snapshots]
    assert versions == list(range(versions[0], versions[0] + 4))  # a snapshot per commit
    assert [s._computedStateTriggered() for s in snapshots] == [False] * 4
    stats = jvm.org.apache.spark.sql.delta.stats.AutoCompactPartitionStats.instance(spark._jsparkSession)
    live = spark.sql(f"DESCRIBE DETAIL delta.`{table}`").first()["numFiles"]  # rebuilt from the log, at last
    assert stats.maxNumFilesInTable(log.tableId()) == live > 4


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


@pytest.mark.parametrize(("rows", "tasks"), [(0, 1), (1, 1), (ROWS_PER_WRITE_TASK, 1), (ROWS_PER_WRITE_TASK + 1, 2)])
def test_write_tasks_are_one_per_rows_per_task_and_at_least_one(rows, tasks):
    assert write_tasks(rows) == tasks


def test_a_frame_of_known_size_is_written_by_as_few_tasks_as_its_rows_need(spark, table):
    def spread(batch_id: int):  # ten rows over eight partitions, none of them empty, as a micro-batch's results are
        rows = spark.sparkContext.parallelize([(i, f"k{i}", batch_id) for i in range(10)], 8)
        frame = spark.createDataFrame(rows, DDL)
        assert frame.rdd.getNumPartitions() == 8 and min(frame.rdd.glom().map(len).collect()) > 0
        return frame

    assert append_idempotent(spread(0), table, "app-1", 0)  # size unknown: a file per partition, as Delta does
    assert append_idempotent(spread(1), table, "app-1", 1, rows=10)
    assert append_idempotent(spread(2), table, "app-1", 2, rows=10, rows_per_task=4)

    assert [files_added_by(table, "app-1", b) for b in range(3)] == [8, 1, 3]
    assert rows_per_batch(spark, table) == {0: 10, 1: 10, 2: 10}  # every row written once, in any layout
    assert append_idempotent(spread(2), table, "app-1", 2, rows=10) is False  # and a replay still skipped


def test_an_overwrite_replaces_every_row_once_per_batch(spark, tmp_path):
    path = str(tmp_path / "current")
    ensure_table(
        spark,
        path,
        spark.createDataFrame([], DDL).schema,
        properties=DeltaTables(spark, tmp_path).properties("current"),
    )
    spread = spark.sparkContext.parallelize([(i, f"k{i}", 0) for i in range(5)], 4)
    assert overwrite_idempotent(spark.createDataFrame(spread, DDL), path, "app-1", 0, rows=5)
    assert overwrite_idempotent(batch(spark, 1, rows=3), path, "app-1", 1, rows=3)

    assert rows_per_batch(spark, path) == {1: 3}  # batch 0's rows are gone, not added to
    assert files_added_by(path, "app-1", 0) == 1  # spread over four partitions, written as one file
    assert overwrite_idempotent(batch(spark, 0, rows=9), path, "app-1", 0, rows=9) is False  # a replay
    assert overwrite_idempotent(batch(spark, 1, rows=9), path, "app-1", 1, rows=9) is False
    assert rows_per_batch(spark, path) == {1: 3}
    assert committed_txns(path) == [("app-1", 0), ("app-1", 1)]

    assert overwrite_idempotent(batch(spark, 2, rows=0), path, "app-1", 2, rows=0)  # nothing left: an empty table
    assert rows_per_batch(spark, path) == {}


def changes_of(spark, path: str) -> list[tuple[int, str, int, int, str]]:
    """The table's change feed after its first commit, as (commit order, change type, row), commit versions
    replaced by their order so two tables' feeds compare."""
    rows = spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", 1).load(path).collect()
    order = {v: i for i, v in enumerate(sorted({r["_commit_version"] for r in rows}))}
    return sorted((order[r["_commit_version"]], r["_change_type"], r["seq"], r["batch_id"], r["kind"]) for r in rows)


def last_write(spark, path: str):
    return spark.sql(f"DESCRIBE HISTORY delta.`{path}`").where("operation = 'WRITE'").orderBy("version").collect()[-1]


def test_an_overwrite_commits_what_deltas_own_overwrite_does_without_rebuilding_a_snapshot(spark, tmp_path):
    """An overwrite takes the files it replaces from the checksum's file list: the snapshots it starts from are
    never rebuilt by a log replay, and a twin table overwritten by Delta's own ``mode("overwrite")`` with the same
    frames ends with the same rows, the same change feed (every old row deleted, every new one inserted) and
    the same operation and removal figures in its history."""
    jvm = spark.sparkContext._jvm
    schema = spark.createDataFrame([], DDL).schema
    ours, delta_s = str(tmp_path / "ours"), str(tmp_path / "deltas")
    for path in (ours, delta_s):
        ensure_table(spark, path, schema, properties=DeltaTables(spark, tmp_path).properties("current"))
    log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, ours)
    frames = [
        spark.createDataFrame(spark.sparkContext.parallelize([(i, f"k{i}", b) for i in range(b + 2)], 2), DDL)
        for b in range(4)
    ]
    snapshots = []
    for b, frame in enumerate(frames):
        snapshots.append(log.unsafeVolatileSnapshot())  # the one this overwrite starts from
        assert overwrite_idempotent(frame, ours, "app-1", b, rows=b + 2)
        frame.coalesce(1).write.format("delta").mode("overwrite").save(delta_s)  # one file, as ours

    # Delta builds the state of a new table's first post-commit snapshot itself (appends too), once.
    assert [s.version() for s in snapshots] == [0, 1, 2, 3]
    assert [s._computedStateTriggered() for s in snapshots[2:]] == [False, False]
    assert rows_per_batch(spark, ours) == rows_per_batch(spark, delta_s) == {3: 5}
    assert changes_of(spark, ours) == changes_of(spark, delta_s)
    assert {c[1] for c in changes_of(spark, ours)} == {"insert", "delete"}
    mine, theirs = last_write(spark, ours), last_write(spark, delta_s)
    assert mine["operationParameters"]["mode"] == theirs["operationParameters"]["mode"] == "Overwrite"
    for metric in ("numFiles", "numOutputRows", "numRemovedFiles"):
        assert mine["operationMetrics"][metric] == theirs["operationMetrics"][metric], metric
    assert int(mine["operationMetrics"]["numRemovedFiles"]) >= 1
    assert int(mine["operationMetrics"]["numRemovedBytes"]) > 0


def test_an_overwrite_without_the_checksums_file_list_is_deltas_own(spark, tmp_path):
    """Past Delta's file-list threshold (here lowered to 1 file) the checksum lists no files, and the overwrite
    is Delta's own: it still replaces every row once per batch."""
    path = str(tmp_path / "current")
    ensure_table(spark, path, spark.createDataFrame([], DDL).schema)
    threshold = "spark.databricks.delta.allFilesInCrc.thresholdNumFiles"
    spark.conf.set(threshold, "1")
    try:
        assert append_idempotent(batch(spark, 0, rows=4), path, "app-0", 0)
        assert append_idempotent(batch(spark, 1, rows=4), path, "app-0", 1)  # two files: no list from here
        jvm = spark.sparkContext._jvm
        snapshot = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path).update(
            False, jvm.scala.Option.empty(), jvm.scala.Option.empty()
        )
        assert snapshot.checksumOpt().get().allFiles().isEmpty()
        assert overwrite_idempotent(batch(spark, 2, rows=3), path, "app-1", 2, rows=3)
        assert overwrite_idempotent(batch(spark, 2, rows=3), path, "app-1", 2, rows=3) is False
    finally:
        spark.conf.unset(threshold)
    assert rows_per_batch(spark, path) == {2: 3}
