"""The job's Delta tables are created with the configured table properties."""

from __future__ import annotations

from streaming.job.sinks import DeltaTables


def test_tables_carry_the_checkpoint_interval_and_log_retention_and_current_tables_a_change_feed(spark, tmp_path):
    tables = DeltaTables(spark, tmp_path, checkpoint_interval=7, deleted_file_retention_hours=24,
                         log_retention_hours=48)  # fmt: skip
    tables.ensure_all(["dead_letters", "current_assignment"])

    def properties(name: str) -> dict[str, str]:
        return spark.sql(f"DESCRIBE DETAIL delta.`{tables.path(name)}`").first()["properties"]

    assert properties("dead_letters")["delta.checkpointInterval"] == "7"
    assert "delta.enableChangeDataFeed" not in properties("dead_letters")  # history: append-only, no feed
    assert properties("current_assignment")["delta.checkpointInterval"] == "7"
    assert properties("current_assignment")["delta.enableChangeDataFeed"] == "true"
    assert {properties(name)["delta.logRetentionDuration"] for name in ("dead_letters", "current_assignment")} == {
        "interval 48 hours"
    }


def test_concurrent_writes_all_run_and_the_first_failure_reaches_the_caller(spark, tmp_path):
    import pytest

    from streaming.job.sinks import run_concurrently

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
