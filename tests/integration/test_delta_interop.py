"""Every table the job writes reads the same through delta-rs as through Spark, at its latest and earlier versions.

The tables are the simulated fleet's (``tests.support.fleet``: the job stopped and restarted from its
checkpoints half-way), copied, then compacted and vacuumed by ``maintain`` as after a stop
(``job_stopped``: every table gets an OPTIMIZE commit). For each table and version, delta-rs (the reader
of ``rebalance-monitor query``) and Spark must give the same schema and the same rows, and the table's
protocol must need no reader feature delta-rs lacks (``docs/design/delta-readers.md``).
"""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest
from deltalake import DeltaTable

from connectors.delta_reader import READABLE_READER_FEATURES, read_arrow
from streaming.contract.tables import TABLES, column_names
from streaming.job.delta.maintenance import maintain, monitor_tables
from streaming.job.runtime.spark_session import COMMIT_METADATA
from tests.support.fleet import fleet_run


@pytest.fixture(scope="module")
def root(kafka_broker, spark, tmp_path_factory) -> Path:
    config = fleet_run(kafka_broker, spark, tmp_path_factory)
    root = tmp_path_factory.mktemp("interop") / "delta"
    shutil.copytree(Path(config.paths.delta_root).resolve(), root)
    reports = maintain(spark, root, job_stopped=True)
    compacted = {r.table for r in reports if r.files_compacted}
    assert len(compacted) >= 5, reports  # the tables with more than one file were rewritten
    return root


def canonical(value):
    """Rows as JSON, timestamps in UTC (PySpark gives naive local times, delta-rs aware UTC ones)."""
    if isinstance(value, datetime):
        value = datetime.fromtimestamp(value.timestamp(), UTC) if value.tzinfo is None else value
        return value.astimezone(UTC).replace(tzinfo=None).isoformat()
    if isinstance(value, dict):
        return {k: canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        return [canonical(v) for v in value]
    return value


def sorted_rows(found: list[dict]) -> list[str]:
    return sorted(json.dumps(canonical(r), sort_keys=True) for r in found)


def without_metadata(schema: dict) -> dict:
    """A Delta schema (JSON) without column metadata, which neither reader needs to agree on."""
    if isinstance(schema, dict):
        return {k: without_metadata(v) for k, v in schema.items() if k != "metadata"}
    if isinstance(schema, list):
        return [without_metadata(v) for v in schema]
    return schema


def test_the_job_writes_every_table_and_each_reads_the_same_in_delta_rs_and_spark(root, spark):
    written = [name for name, _ in monitor_tables() if (root / name / "_delta_log").is_dir()]
    assert written == [name for name, _ in monitor_tables()]
    checked = 0
    for name in written:
        path = root / name
        latest = DeltaTable(str(path)).version()
        commits = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()
        history = {r["version"]: r["operation"] for r in commits}
        # every commit, the job's creates, appends and MERGEs and maintain's OPTIMIZE, names the monitor's version
        assert {r["userMetadata"] for r in commits} == {COMMIT_METADATA}, (name, history)
        assert max(history) == latest
        compaction = max((v for v, op in history.items() if op == "OPTIMIZE"), default=None)
        # latest; before the last compaction; the first data commit
        versions = sorted({latest, compaction - 1 if compaction else latest, min(latest, 1)})
        for version in versions:
            frame = spark.read.format("delta").option("versionAsOf", version).load(str(path))
            expected = [r.asDict(recursive=True) for r in frame.collect()]
            table = read_arrow(path, version=version)
            assert sorted_rows(table.to_pylist()) == sorted_rows(expected), (name, version)
            read_schema = json.loads(DeltaTable(str(path), version=version).schema().to_json())
            assert without_metadata(read_schema) == without_metadata(frame.schema.jsonValue()), (name, version)
            assert table.column_names == frame.columns
            if name in TABLES:
                assert table.column_names == column_names(name)
            checked += 1
    assert checked > 2 * len(written)


def test_the_table_features_the_job_enables_keep_every_table_readable_by_delta_rs(root):
    for name, _ in monitor_tables():
        protocol = DeltaTable(str(root / name)).protocol()
        assert protocol.min_reader_version in (1, 2, 3), (name, protocol)
        if protocol.min_reader_version == 3:
            assert set(protocol.reader_features or ()) <= READABLE_READER_FEATURES, (name, protocol)
        # writer features matter to writers only; the monitor's writer is Spark
        assert protocol.min_writer_version <= 7, (name, protocol)
