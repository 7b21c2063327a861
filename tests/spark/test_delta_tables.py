"""The job's Delta tables are created with the configured table properties."""

from __future__ import annotations

from streaming.job.sinks import DeltaTables


def test_tables_carry_the_checkpoint_interval_and_current_tables_a_change_feed(spark, tmp_path):
    tables = DeltaTables(spark, tmp_path, checkpoint_interval=7)
    tables.ensure_all(["dead_letters", "current_assignment"])

    def properties(name: str) -> dict[str, str]:
        return spark.sql(f"DESCRIBE DETAIL delta.`{tables.path(name)}`").first()["properties"]

    assert properties("dead_letters")["delta.checkpointInterval"] == "7"
    assert "delta.enableChangeDataFeed" not in properties("dead_letters")  # history: append-only, no feed
    assert properties("current_assignment")["delta.checkpointInterval"] == "7"
    assert properties("current_assignment")["delta.enableChangeDataFeed"] == "true"
