"""The job's appends add one file per table and micro-batch, however many Kafka or shuffle partitions the
batch's few result rows are spread over (``append_idempotent``'s ``rows``): a file per partition and batch
would make every query's commits slower and auto compaction run that many times as often."""

from __future__ import annotations

import json
from pathlib import Path

from connectors.kafka_topics import create_topics
from streaming.contract.events import DEFAULT_TOPICS
from streaming.domain.faults.tolerance import ROCKETMQ_4, ROCKETMQ_5
from tests.integration.test_job_fault_windows import SENDS, expected_windows, send
from tests.support.events import hb, route
from tests.support.job import job_config, publish, read, run_available

PARTITIONS = 4


def files_per_append(table_path: Path) -> list[int]:
    """Data files added by each of the table's exactly-once appends (its WRITE commits; auto compaction's
    OPTIMIZE and the CREATE are not appends)."""
    added = []
    for commit in sorted((table_path / "_delta_log").glob("*.json")):
        actions = [json.loads(line) for line in commit.read_text().splitlines()]
        if any(a.get("commitInfo", {}).get("operation") == "WRITE" for a in actions):
            added.append(sum(1 for a in actions if "add" in a))
    return added


def test_every_append_adds_one_file_whatever_the_partitions(kafka_broker, spark, tmp_path):
    prefix = "layout"
    create_topics(
        kafka_broker.bootstrap_servers, [f"{prefix}.{name}" for name in DEFAULT_TOPICS.values()], partitions=PARTITIONS
    )
    # Groups and producers over 8 state shards, whose results then come from several shuffle partitions.
    config, topics = job_config(
        kafka_broker.bootstrap_servers,
        tmp_path,
        prefix,
        sized_for_tests=False,
        RRM__MEMBERSHIP__SHARDS="8",
        RRM__PRODUCERS__STATE_SHARDS="8",
    )
    # Three members per group, one with another's client id (a duplicate-client-id anomaly), so that every
    # consumer history table has rows.
    groups = [f"G{g}" for g in range(12)]
    events = [route(0)]
    for g, group in enumerate(groups):
        events += [hb(1_000, f"10.{g}.0.{m}:4000", f"10.{g}.0.{min(m, 1)}@1", group=group) for m in range(3)]
    # Unkeyed send results land in every partition of their topic.
    events += [send(i, "P4", "V4_9_8", lat, out) for i, (lat, out) in enumerate(SENDS)]
    events += [send(i, "P5", "5.3.3", lat, out) for i, (lat, out) in enumerate(SENDS)]
    publish(kafka_broker.bootstrap_servers, events, topics)
    run_available(spark, config)

    root = Path(config.paths.delta_root).resolve()
    written = {
        table: files_per_append(root / table)
        for table in (
            "membership_changes",
            "group_snapshots",
            "expected_assignments",
            "anomaly_episodes",
            "fault_windows",
            "send_latency_minutes",
        )
    }
    assert all(written.values()), written  # every table was appended to
    assert {table: set(files) for table, files in written.items()} == {table: {1} for table in written}

    # The same rows as ever: every group joined, every send counted, the 4.x windows exact.
    assert {r["group"] for r in read(spark, config, "membership_changes")} == set(groups)
    assert sum(r["sends"] for r in read(spark, config, "send_latency_minutes")) == 2 * len(SENDS)
    got = sorted(
        (r["status"], r["producer_id"], r["window_start_ms"], r["window_end_ms"])
        for r in read(spark, config, "fault_windows")
    )
    assert got == sorted(expected_windows(ROCKETMQ_4, "P4") + expected_windows(ROCKETMQ_5, "P5"))
