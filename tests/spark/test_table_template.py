"""Tables copied from the tests' template (``tests.support.table_template``) are the tables the job creates.

Most test roots start their job on copies instead of creating the tables, so a copy must be indistinguishable:
for every table of the catalogue the same first commit (schema, partitioning, protocol, the job's table
properties for the root's [delta] settings) with a table id and creation time of its own; written as the job
writes, the same versions, replays skipped by their txn ids from the checksum, and time travel to before the
first write reading an empty table in Spark and delta-rs alike.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from connectors.delta_reader import VersionMissing, read_arrow
from streaming.config import load_config
from streaming.contract.tables import TABLES, column_names
from streaming.job.delta.exactly_once import append_idempotent
from tests.support.job import TEST_SIZED
from tests.support.table_template import job_tables, properties_key, seed_tables

IDENTITY = {"metaData": ("id", "createdTime"), "commitInfo": ("timestamp", "txnId")}


def first_commit(table: Path) -> dict[str, dict]:
    """The actions of version 0 by kind, without what identifies one table and one commit."""
    actions = {}
    for line in (table / "_delta_log" / "00000000000000000000.json").read_text().splitlines():
        ((kind, action),) = json.loads(line).items()
        actions[kind] = {k: v for k, v in action.items() if k not in IDENTITY.get(kind, ())}
    return actions


def table_id(spark, path: Path) -> str:
    return spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()["id"]


def checksum_lists_transactions(spark, path: Path) -> bool:
    helper = spark.sparkContext._jvm.io.github.rrm.delta.IdempotentDeltaAppend
    return bool(helper.checksumListsTransactions(spark._jsparkSession, str(path)))


def test_each_delta_setting_of_a_table_has_a_template_of_its_own():
    tests = load_config(None, env=TEST_SIZED)
    for setting, value in [
        ("CHECKPOINT_INTERVAL", "7"),
        ("APPEND_CHECKPOINT_INTERVAL", "70"),
        ("AUTO_COMPACT", "true"),
        ("DELETED_FILE_RETENTION_HOURS", "24"),
        ("LOG_RETENTION_HOURS", "200"),
    ]:
        other = load_config(None, env={**TEST_SIZED, f"RRM__DELTA__{setting}": value})
        assert properties_key(other) != properties_key(tests), setting


def test_copied_tables_are_the_tables_the_job_creates(spark, tmp_path):
    config = load_config(None, env=TEST_SIZED)
    job_tables(spark, tmp_path / "created", config).ensure_all()
    before_copy_ms = int(time.time() * 1000) - 1  # the copies' commit times are later (file times are in ms)
    time.sleep(0.01)
    assert seed_tables(tmp_path / "copied", config) == list(TABLES)
    assert seed_tables(tmp_path / "copied", config) == []  # tables already there are left alone
    seed_tables(tmp_path / "another", config)

    for name in TABLES:
        created, copied = tmp_path / "created" / name, tmp_path / "copied" / name
        assert first_commit(copied) == first_commit(created), name
        assert len({table_id(spark, p) for p in (created, copied, tmp_path / "another" / name)}) == 3, name
        assert checksum_lists_transactions(spark, copied) == checksum_lists_transactions(spark, created), name
        with pytest.raises(VersionMissing, match="first commit is later"):
            read_arrow(copied, as_of_ms=before_copy_ms)  # a copy is as new as a created table

    for root in ("created", "copied"):
        tables = job_tables(spark, tmp_path / root, config)
        tables.ensure_all()  # the job's start: nothing to create
        history = tables.path("dead_letters")
        frame = spark.createDataFrame(
            [("send_result", "t", 0, 1, None, "{", "MALFORMED_JSON", "x", 0, None)], TABLES["dead_letters"].schema_ddl
        )
        assert append_idempotent(frame, history, "app:dead_letters", 0) is True
        assert checksum_lists_transactions(spark, Path(history))  # the job's append reads its txn ids from there
        assert append_idempotent(frame, history, "app:dead_letters", 0) is False  # a replay
        current = tables.path("current_assignment")
        row = ("G", "T", "c1", [("broker-a", 0)], 1, 0, 1_000, 0, "DefaultCluster")
        schema = tables.read("current_assignment").select(*column_names("current_assignment")).schema
        for client in ("c1", "c-replayed"):
            frame = spark.createDataFrame([(row[0], row[1], client, *row[3:])], schema)
            tables.merge_upsert("current_assignment", frame, "app", 0)

        for path in (history, current):
            commits = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").orderBy("version").collect()
            assert [r["operation"] for r in commits] == ["CREATE TABLE", "WRITE" if path == history else "MERGE"]
            assert spark.read.format("delta").option("versionAsOf", 0).load(path).count() == 0
            created_at = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").where("version = 0")
            created_at = created_at.selectExpr("CAST(timestamp AS STRING)").first()[0]  # in the session's time zone
            assert spark.read.format("delta").option("timestampAsOf", created_at).load(path).count() == 0
            assert read_arrow(path, version=0).num_rows == 0
            assert read_arrow(path).num_rows == 1
        assert [r["client_id"] for r in tables.read("current_assignment").collect()] == ["c1"]
