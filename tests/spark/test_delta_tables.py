"""The job's Delta tables are created with the configured table properties."""

from __future__ import annotations

from streaming.job.delta.sinks import DeltaTables


def test_tables_carry_the_checkpoint_interval_and_log_retention_and_current_tables_a_change_feed(spark, tmp_path):
    tables = DeltaTables(
        spark,
        tmp_path,
        checkpoint_interval=7,
        deleted_file_retention_hours=24,
        log_retention_hours=48,
        append_checkpoint_interval=70,
    )
    tables.ensure_all(["dead_letters", "current_assignment"])

    def properties(name: str) -> dict[str, str]:
        return spark.sql(f"DESCRIBE DETAIL delta.`{tables.path(name)}`").first()["properties"]

    assert properties("dead_letters")["delta.checkpointInterval"] == "70"  # append-only: its own interval
    assert "delta.enableChangeDataFeed" not in properties("dead_letters")  # history: append-only, no feed
    assert properties("current_assignment")["delta.checkpointInterval"] == "7"
    assert properties("current_assignment")["delta.enableChangeDataFeed"] == "true"
    assert {properties(name)["delta.logRetentionDuration"] for name in ("dead_letters", "current_assignment")} == {
        "interval 48 hours"
    }


def test_concurrent_writes_all_run_and_the_first_failure_reaches_the_caller(spark, tmp_path):
    import pytest

    from streaming.job.delta.sinks import run_concurrently

    tables = DeltaTables(spark, tmp_path)
    tables.ensure_all(["dead_letters", "membership_changes"])
    spark.sparkContext.setLocalProperty("rrm.test.caller", "batch-7")
    seen_properties: list[str | None] = []

    def dead_letter() -> None:
        frame = spark.createDataFrame(
            [("send_result", "t", 0, 1, None, "{", "MALFORMED_JSON", "x", 7)],
            "source STRING, kafka_topic STRING, kafka_partition INT, kafka_offset BIGINT, "
            "kafka_timestamp TIMESTAMP, raw_value STRING, reason STRING, detail STRING, batch_id BIGINT",
        )
        seen_properties.append(spark.sparkContext.getLocalProperty("rrm.test.caller"))
        tables.append("dead_letters", frame, "app", 7)

    def failing() -> None:
        raise RuntimeError("disk full")

    def membership() -> None:
        seen_properties.append(spark.sparkContext.getLocalProperty("rrm.test.caller"))
        frame = spark.createDataFrame([], tables.read("membership_changes").schema)
        tables.append("membership_changes", frame, "app", 7)

    try:
        with pytest.raises(RuntimeError, match="disk full"):
            run_concurrently([failing, dead_letter, membership])
    finally:
        spark.sparkContext.setLocalProperty("rrm.test.caller", None)
    # The failure did not stop the other writes, and the threads ran with the caller's local properties.
    assert tables.read("dead_letters").count() == 1
    assert spark.sql(f"DESCRIBE HISTORY delta.`{tables.path('membership_changes')}`").count() == 2
    assert seen_properties == ["batch-7", "batch-7"]


def test_merges_of_one_batch_run_together_each_once_and_leave_the_callers_session_without_txn_ids(spark, tmp_path):
    """Each MERGE sets its txn ids on a session of its own, so a batch's MERGEs can run at the same time, and
    the replay of the batch (same app id and batch id) changes neither table."""
    from streaming.contract.tables import column_names
    from streaming.job.delta.sinks import run_concurrently

    tables = DeltaTables(spark, tmp_path)
    tables.ensure_all(["current_assignment", "broker_status_current"])
    schema = {
        name: tables.read(name).select(*column_names(name)).schema
        for name in ("current_assignment", "broker_status_current")
    }

    def assignment(batch: int, client: str) -> None:
        row = ("G", "T", client, [("broker-a", 0)], 1, batch, 1_000 * batch, batch, "DefaultCluster")
        tables.merge_upsert(
            "current_assignment", spark.createDataFrame([row], schema["current_assignment"]), "app", batch
        )

    def status(batch: int, avoiding: int) -> None:
        row = ("broker-a", avoiding, 4, avoiding / 4, None, avoiding > 0, 1_000 * batch, batch, "DefaultCluster")
        tables.merge_upsert(
            "broker_status_current", spark.createDataFrame([row], schema["broker_status_current"]), "app", batch
        )

    run_concurrently([lambda: assignment(1, "c1"), lambda: status(1, 2)])
    run_concurrently([lambda: assignment(1, "c-replayed"), lambda: status(1, 3)])  # the replay of batch 1
    run_concurrently([lambda: assignment(2, "c2"), lambda: status(2, 0)])

    clients = sorted(r["client_id"] for r in tables.read("current_assignment").collect())
    assert clients == ["c1", "c2"]
    assert [(r["producers_avoiding"], r["batch_id"]) for r in tables.read("broker_status_current").collect()] == [
        (0, 2)
    ]
    # each table's commits carry its own app id, once per batch
    for name in ("current_assignment", "broker_status_current"):
        log = spark.read.json(f"{tables.path(name)}/_delta_log/*.json").where("txn IS NOT NULL")
        assert sorted((r["txn"]["appId"], r["txn"]["version"]) for r in log.collect()) == [
            (f"app:{name}", 1),
            (f"app:{name}", 2),
        ]
    assert spark.conf.get("spark.databricks.delta.write.txnAppId", None) is None
    assert spark.conf.get("spark.databricks.delta.write.txnVersion", None) is None


def test_a_table_written_before_clusters_gets_the_column_and_its_current_rows_the_default_cluster(spark, tmp_path):
    """An earlier release's tables (no ``cluster`` column) keep working: the start adds the column; a current
    table's rows, whose key now starts with the cluster, become the default cluster's, a history table's keep
    NULL; the next write of either names its cluster."""
    from streaming.contract.tables import TABLES, Table
    from streaming.job.delta.bus import struct_type
    from streaming.job.delta.exactly_once import ensure_table

    tables = DeltaTables(spark, tmp_path, default_cluster="home")
    for name in (Table.BROKER_STATUS_CURRENT, Table.DEAD_LETTERS):
        before = [c for c in TABLES[name].columns if c.name != "cluster"]
        ensure_table(spark, tables.path(name), struct_type(before))
    old = [("broker-a", 1, 2, 0.5, 9, True, 5, 1)]
    spark.createDataFrame(old, struct_type([c for c in TABLES[Table.BROKER_STATUS_CURRENT].columns][:-1])).write.format(
        "delta"
    ).mode("append").save(tables.path(Table.BROKER_STATUS_CURRENT))
    letter = [("send_result", "t", 0, 1, None, "x", "NOT_JSON", "d", 1)]
    spark.createDataFrame(letter, struct_type([c for c in TABLES[Table.DEAD_LETTERS].columns][:-1])).write.format(
        "delta"
    ).mode("append").save(tables.path(Table.DEAD_LETTERS))

    tables.ensure_all([Table.BROKER_STATUS_CURRENT, Table.DEAD_LETTERS])

    assert [(r.broker, r.cluster) for r in tables.read(Table.BROKER_STATUS_CURRENT).collect()] == [("broker-a", "home")]
    assert [r.cluster for r in tables.read(Table.DEAD_LETTERS).collect()] == [None]
    assert tables.evolve(Table.DEAD_LETTERS) == []  # once
    frame = spark.createDataFrame(
        [("broker-a", 0, 1, 0.0, None, False, 7, 2, "east")], tables.read(Table.BROKER_STATUS_CURRENT).schema
    )
    tables.merge_upsert(Table.BROKER_STATUS_CURRENT, frame, "app", 2)
    assert sorted((r.cluster, r.event_time_ms) for r in tables.read(Table.BROKER_STATUS_CURRENT).collect()) == [
        ("east", 7),
        ("home", 5),
    ]


def test_an_upsert_leaves_the_rows_delta_merge_leaves_and_a_replay_changes_nothing(spark, tmp_path):
    """``upsert`` against Delta's own MERGE of the same changes (``merge_upsert``): batch by batch, updates,
    inserts, deletions (one of a key the table lacks) and a NULL in a key column leave the same rows, unchanged
    rows keeping the batch id that wrote them; the replay of a batch, with other changes, writes nothing."""
    import random

    from pyspark.sql import functions as F
    from pyspark.sql.types import BooleanType, StructField, StructType

    from streaming.contract.tables import column_names

    name = "queue_holders_current"
    upserted, merged = DeltaTables(spark, tmp_path / "upserted"), DeltaTables(spark, tmp_path / "merged")
    for tables in (upserted, merged):
        tables.ensure_all([name])
    schema = upserted.read(name).select(*column_names(name)).schema
    rng = random.Random(7)

    def change(queue_id: int, batch: int, topic: str | None = "T") -> tuple:
        owners = [f"c{rng.randrange(4)}"]
        return ("G", topic, "broker-a", queue_id, batch, owners, owners, "HELD", batch, batch, [], [], batch, batch)

    def changes(batch: int) -> tuple[list[tuple], list[bool]]:
        if batch == 0:
            rows = [change(q, 0) for q in range(12)] + [change(99, 0, topic=None)]
            return rows, [False] * len(rows)
        queues = rng.sample(range(14), 5)
        rows = [change(q, batch) for q in queues] + [change(99, batch, topic=None)]
        return rows, [rng.random() < 0.3 for _ in rows]

    def frame(rows: list[tuple], gone: list[bool]):  # type: ignore[no-untyped-def]
        data = [(*row, "DefaultCluster", deleted) for row, deleted in zip(rows, gone, strict=True)]
        return spark.createDataFrame(data, StructType([*schema.fields, StructField("deleted", BooleanType())]))

    def table(tables: DeltaTables) -> list[tuple]:
        return sorted((tuple(r) for r in tables.read(name).select(*column_names(name)).collect()), key=repr)

    for batch in range(8):
        rows, gone = changes(batch)
        upserted.upsert(name, frame(rows, gone), "app", batch, "deleted")
        merged.merge_upsert(name, frame(rows, gone), "app", batch, delete_condition="s.`deleted`")
        assert table(upserted) == table(merged), batch
    assert {r["batch_id"] for r in upserted.read(name).collect()} > {7}  # rows of earlier batches kept as written

    before = table(upserted)
    upserted.upsert(name, frame([change(0, 7), change(50, 7)], [True, False]), "app", 7, "deleted")  # a replay
    assert table(upserted) == before
    history = spark.sql(f"DESCRIBE HISTORY delta.`{upserted.path(name)}`").where(F.col("version") > 0)
    assert history.count() == 8  # one commit per batch, none for the replay


def test_upserts_read_and_replace_the_checksums_files_without_rebuilding_a_snapshot(spark, tmp_path):
    """An upsert reads the table from the files its checksum lists and replaces exactly those: the snapshots the
    upserts start from are never rebuilt by a log replay (Delta builds a new table's first post-commit snapshot
    itself, once), and the rows are what Delta's own read of the table gives. With the list gone (Delta's
    threshold lowered to no file), ``read_latest`` is Delta's own read and gives the same rows."""
    from pyspark.sql.types import BooleanType, StructField, StructType

    from streaming.contract.tables import column_names
    from streaming.job.delta.exactly_once import read_latest

    name = "broker_views_current"
    tables = DeltaTables(spark, tmp_path)
    tables.ensure_all([name])
    path = tables.path(name)
    template = tables.read(name).select(*column_names(name)).schema
    jvm = spark.sparkContext._jvm
    log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path)

    def changes(batch: int):  # type: ignore[no-untyped-def]
        """Four groups' views: odd batches shift the groups by one (an insert), batch 3 deletes two."""
        rows = [
            (
                f"G{g + batch % 2}",
                "broker-a",
                "FRESH",
                batch,
                30_000,
                None,
                2,
                "c",
                batch,
                batch,
                "DefaultCluster",
                batch == 3 and g < 2,
            )
            for g in range(4)
        ]
        return spark.createDataFrame(rows, StructType([*template.fields, StructField("deleted", BooleanType())]))

    snapshots = []
    for batch in range(5):
        snapshots.append(log.unsafeVolatileSnapshot())
        tables.upsert(name, changes(batch), "app", batch, "deleted")
    assert [s._computedStateTriggered() for s in snapshots[2:]] == [False, False, False]

    def rows(frame) -> list[tuple]:  # type: ignore[no-untyped-def]
        return sorted(map(tuple, frame.select(*column_names(name)).collect()), key=repr)

    def deltas_read() -> list[tuple]:
        return rows(spark.read.format("delta").load(path))

    ours = rows(read_latest(spark, path))
    assert ours == deltas_read() and {r[column_names(name).index("batch_id")] for r in ours} == {3, 4}
    threshold = "spark.databricks.delta.allFilesInCrc.thresholdNumFiles"
    spark.conf.set(threshold, "0")
    try:
        tables.upsert(name, changes(5), "app", 5, "deleted")  # two files before the commit: no list after it
        assert log.unsafeVolatileSnapshot().checksumOpt().get().allFiles().isEmpty()
        listless = rows(read_latest(spark, path))
    finally:
        spark.conf.unset(threshold)
    assert listless == deltas_read() and len(listless) > 0
