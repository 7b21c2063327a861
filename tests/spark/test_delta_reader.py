"""delta-rs reads what Spark writes: whole commits while Spark commits, and every reader feature it claims.

``connectors.delta_reader`` is how ``rebalance-monitor query`` reads the job's tables. A reader running
next to the writer must see each table at one committed version (every appended batch whole, none twice)
while Spark appends through the job's exactly-once append, compacts and writes checkpoints; and a table
with each reader feature listed in ``READABLE_READER_FEATURES`` must read as Spark reads it.
"""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime

import pytest
from deltalake import DeltaTable

from connectors.delta_reader import READABLE_READER_FEATURES, read_arrow
from streaming.contract.tables import TABLES
from streaming.job.delta.sinks import DeltaTables
from tests.support.job import job_shuffle_partitions

BATCHES = 12
ROWS_PER_BATCH = 5


@pytest.fixture(autouse=True)
def job_default_partitions(spark):
    """What another reader sees of the job's tables is this file's subject: the job's own shuffle partition
    count, not the tests' smaller one."""
    with job_shuffle_partitions(spark):
        yield


def dead_letters(spark, batch: int):
    values = [
        ("send_result", "t", 0, batch * ROWS_PER_BATCH + i, None, "{", "MALFORMED_JSON", "x", batch, None)
        for i in range(ROWS_PER_BATCH)
    ]
    return spark.createDataFrame(values, TABLES["dead_letters"].schema_ddl)


def test_a_reader_sees_whole_commits_while_spark_appends_compacts_and_checkpoints(spark, tmp_path):
    from delta.tables import DeltaTable as SparkDeltaTable

    tables = DeltaTables(spark, tmp_path, append_checkpoint_interval=3)
    tables.ensure_all(["dead_letters"])
    path = tables.path("dead_letters")
    failures: list[BaseException] = []

    def write() -> None:
        try:
            for batch in range(BATCHES):
                tables.append("dead_letters", dead_letters(spark, batch), "app", batch)
                if batch % 4 == 3:
                    SparkDeltaTable.forPath(spark, path).optimize().executeCompaction()
        except BaseException as failure:  # noqa: BLE001 - reported by the test below
            failures.append(failure)

    writer = threading.Thread(target=write)
    writer.start()
    seen = []
    while writer.is_alive():
        table = read_arrow(path)
        batches = len(set(table["batch_id"].to_pylist()))
        # one committed version: batches 0..k-1, each with all its rows, none twice
        assert sorted(table["kafka_offset"].to_pylist()) == list(range(batches * ROWS_PER_BATCH))
        seen.append(batches)
        time.sleep(0.1)  # leave the writer its share of a small machine
    writer.join()
    assert not failures, failures
    history = {r["operation"] for r in spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()}
    assert "OPTIMIZE" in history and list((tmp_path / "dead_letters" / "_delta_log").glob("*.checkpoint*.parquet"))
    assert len(set(seen)) > 2  # the reads met several versions
    assert read_arrow(path).num_rows == BATCHES * ROWS_PER_BATCH


def canonical(found: list[dict]) -> list[str]:
    """Rows as JSON text; a naive time is local (PySpark's TIMESTAMP; either reader's TIMESTAMP_NTZ)."""

    def plain(value):
        if isinstance(value, datetime):
            value = datetime.fromtimestamp(value.timestamp(), UTC) if value.tzinfo is None else value
            return value.astimezone(UTC).isoformat()
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        if isinstance(value, list):
            return [plain(v) for v in value]
        return value

    return sorted(json.dumps(plain(r), sort_keys=True) for r in found)


def test_a_table_with_every_claimed_reader_feature_reads_as_spark_reads(spark, tmp_path):
    path = tmp_path / "features"
    spark.sql(
        f"CREATE TABLE delta.`{path}` ({TABLES['expected_assignments'].schema_ddl}) USING delta TBLPROPERTIES ("
        "'delta.enableDeletionVectors' = 'true', 'delta.columnMapping.mode' = 'name', "
        "'delta.checkpointPolicy' = 'v2', 'delta.checkpointInterval' = '2', "
        "'delta.feature.timestampNtz' = 'supported')"
    )
    for generation in range(4):
        spark.sql(
            f"INSERT INTO delta.`{path}` SELECT 'g', {generation}, 't', concat('c', id), "
            "array(named_struct('broker', 'b', 'queue_id', CAST(id AS INT))), 1, 'AVG', "
            f"{generation * 1000}, timestamp_millis({generation * 1000}), {generation}, 'DefaultCluster' FROM range(6)"
        )
    spark.sql(f"DELETE FROM delta.`{path}` WHERE client_id IN ('c1', 'c4')")  # deletion vectors
    spark.sql(f"ALTER TABLE delta.`{path}` RENAME COLUMN strategy TO strategy_name")  # column mapping
    spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMN seen_at TIMESTAMP_NTZ")
    spark.sql(f"UPDATE delta.`{path}` SET seen_at = TIMESTAMP_NTZ'2026-01-02 03:04:05' WHERE generation = 3")

    protocol = DeltaTable(str(path)).protocol()
    features = set(protocol.reader_features or ())
    assert {"deletionVectors", "columnMapping", "v2Checkpoint", "timestampNtz"} <= features, protocol
    assert features <= READABLE_READER_FEATURES, protocol
    assert list((path / "_delta_log").glob("*.checkpoint*"))
    expected = [r.asDict(recursive=True) for r in spark.read.format("delta").load(str(path)).collect()]
    got = read_arrow(path).to_pylist()  # timestamps aware UTC, TIMESTAMP_NTZ naive
    assert len(got) == 4 * 4 and canonical(got) == canonical(expected)
    assert {r["seen_at"] for r in got if r["generation"] == 3} == {datetime(2026, 1, 2, 3, 4, 5)}
    first = spark.read.format("delta").option("versionAsOf", 1).load(str(path)).collect()
    first = [r.asDict(recursive=True) for r in first]
    assert canonical(read_arrow(path, version=1).to_pylist()) == canonical(first)
