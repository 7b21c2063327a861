"""The per-broker gauges and isolation-episode counts are set from the batch's own rows before the writes (a
failed write leaves them set, and the replayed batch sets the gauges again and counts nothing twice), and the
fault sink commits once per table it has rows for, exactly once per batch id, the broker rows computed
from the items as the batch leaves them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from connectors.metrics import MetricsState
from streaming.job.metered import MeteredBatches
from streaming.job.outputs import consumer_sink, fault_sink
from streaming.job.sinks import DeltaTables

FAULT_TABLES = ["fault_windows", "producer_broker_status_current", "broker_status_current"]
T = 1_700_000_000_000


class RefusingWrites(DeltaTables):
    """Tables whose MERGE into or overwrite of ``refused`` raises, as a failed Delta commit does."""

    refused = ""

    def merge_upsert(self, name, frame, app_id, batch_id, delete_condition=None):  # type: ignore[no-untyped-def]
        if name == self.refused:
            raise RuntimeError(f"MERGE into {name} refused")
        super().merge_upsert(name, frame, app_id, batch_id, delete_condition)

    def overwrite(self, name, frame, app_id, batch_id, rows):  # type: ignore[no-untyped-def]
        if name == self.refused:
            raise RuntimeError(f"overwrite of {name} refused")
        super().overwrite(name, frame, app_id, batch_id, rows)


def item(producer: str, broker: str, until: int, t: int = T, op: str = "upsert") -> tuple[str, str]:
    row = {
        "producer_id": producer,
        "producer_group": "PG",
        "broker": broker,
        "fault_table": "rocketmq-5",
        "unavailable_until_ms": until,
        "last_latency_ms": 700,
        "last_send_ms": t,
        "reachable": True,
        "event_time_ms": t,
        "_op": op,
    }
    return ("producer_broker_status_current", json.dumps(row))


def opened(producer: str, broker: str, until: int, t: int = T) -> tuple[str, str]:
    window = {
        "status": "OPENED",
        "producer_id": producer,
        "producer_group": "PG",
        "broker": broker,
        "event_time_ms": t,
        "window_start_ms": t,
        "window_end_ms": until,
        "previous_end_ms": None,
        "trigger_latency_ms": 700,
        "level": 2,
        "cause": "SLOW",
        "isolation": False,
        "fault_table": "rocketmq-5",
    }
    return ("fault_windows", json.dumps(window))


def view(group: str, broker: str, status: str, polled_at_ms: int) -> tuple[str, str]:
    row = {
        "group": group,
        "broker": broker,
        "status": status,
        "polled_at_ms": polled_at_ms,
        "stale_after_ms": 30_000,
        "channels": 2,
        "collector": "c1",
        "event_time_ms": polled_at_ms,
        "stale_since_ms": None,
        "_op": "upsert",
    }
    return ("broker_views_current", json.dumps(row))


def frame(spark, rows: list[tuple[str, str]]):  # type: ignore[no-untyped-def]
    return spark.createDataFrame(rows, "table STRING, payload STRING")


def commits(root: Path) -> dict[str, int]:
    return {t: len(list((root / t / "_delta_log").glob("*.json"))) for t in FAULT_TABLES}


@pytest.mark.parametrize("refused", ["producer_broker_status_current", "broker_status_current"])
def test_a_fault_batch_sets_the_broker_gauges_even_when_its_write_fails(spark, tmp_path, refused):
    tables = RefusingWrites(spark, tmp_path)
    tables.ensure_all(FAULT_TABLES)
    tables.refused = refused
    metrics = MetricsState()
    sink = fault_sink(tables, "test", metrics)
    batch = frame(spark, [item("p1", "a", T + 60_000), item("p2", "a", T), opened("p1", "a", T + 60_000)])
    with pytest.raises(RuntimeError, match="refused"):
        sink(batch, 0)
    assert metrics.gauges["rmqmon_broker_producers_avoiding"] == {("a",): 1.0}
    assert metrics.gauges["rmqmon_broker_producers_seen"] == {("a",): 2.0}
    assert metrics.gauges["rmqmon_broker_isolated"] == {("a",): 1.0}


def test_a_fault_batch_counts_its_isolation_episodes_before_its_writes_and_its_replay_adds_none(spark, tmp_path):
    """The episode counter is on the alert path as the gauges are (a short isolation shows only there): counted
    even when the batch's write fails, and not again when the restarted query replays the batch."""
    tables = RefusingWrites(spark, tmp_path)
    tables.ensure_all(FAULT_TABLES)
    tables.refused = "producer_broker_status_current"
    metrics, metered = MetricsState(), MeteredBatches()
    batch = [item("p1", "a", T + 60_000), opened("p1", "a", T + 60_000)]
    with pytest.raises(RuntimeError, match="refused"):
        fault_sink(tables, "test", metrics, metered)(frame(spark, batch), 0)
    assert metrics.counters["rmqmon_broker_isolation_episodes_total"] == {("a",): 1.0}
    tables.refused = ""
    fault_sink(tables, "test", metrics, metered)(frame(spark, batch), 0)  # the replay, its writes going through
    assert metrics.counters["rmqmon_broker_isolation_episodes_total"] == {("a",): 1.0}
    assert [r["broker"] for r in tables.read("broker_status_current").collect()] == ["a"]


def test_a_polled_view_batch_sets_the_view_gauges_even_when_its_merge_fails(spark, tmp_path):
    tables = RefusingWrites(spark, tmp_path)
    tables.ensure_all(["broker_views_current"])
    tables.refused = "broker_views_current"
    metrics = MetricsState()
    sink = consumer_sink(tables, "test", metrics)
    batch = frame(spark, [view("g1", "a", "FRESH", T), view("g2", "a", "STALE", T + 5_000)])
    with pytest.raises(RuntimeError, match="refused"):
        sink(batch, 0)
    assert metrics.gauges["rmqmon_broker_polled_group_views"] == {("a",): 2.0}
    assert metrics.gauges["rmqmon_broker_stale_group_views"] == {("a",): 1.0}
    assert metrics.gauges["rmqmon_broker_last_poll_timestamp_seconds"] == {("a",): (T + 5_000) / 1000}


def test_the_fault_sink_commits_once_per_table_with_rows_and_a_replay_commits_nothing(spark, tmp_path):
    tables = DeltaTables(spark, tmp_path)
    tables.ensure_all(FAULT_TABLES)
    metrics = MetricsState()
    # Counted from the second batch on: the first batch into the new tables made one commit more.
    fault_sink(tables, "test", metrics)(frame(spark, [item("p0", "a", T - 1_000, t=T - 1_000)]), 0)
    before = commits(tmp_path)
    first = [item("p1", "a", T + 60_000), item("p2", "a", T), item("p2", "b", T), opened("p1", "a", T + 60_000)]
    fault_sink(tables, "test", metrics)(frame(spark, first), 1)
    assert {t: n - before[t] for t, n in commits(tmp_path).items()} == dict.fromkeys(FAULT_TABLES, 1)

    # A batch without windows: no fault_windows commit. p2 leaves b: no item names b, so b has no row left.
    second = [item("p1", "a", T + 60_000, t=T + 1_000), item("p2", "b", T, t=T + 1_000, op="delete")]
    before = commits(tmp_path)
    sink = fault_sink(tables, "test", metrics)  # a new sink (a restarted query) reads the items from the table
    sink(frame(spark, second), 2)
    made = {t: n - before[t] for t, n in commits(tmp_path).items()}
    assert made == {"fault_windows": 0, "producer_broker_status_current": 1, "broker_status_current": 1}

    # The replay of batch 2 (its commits done, the query restarted) commits nothing and leaves the rows.
    before = commits(tmp_path)
    fault_sink(tables, "test", metrics)(frame(spark, second), 2)
    assert commits(tmp_path) == before
    status = {r["broker"]: r.asDict() for r in tables.read("broker_status_current").collect()}
    assert status["a"]["producers_avoiding"] == 1
    assert status["a"]["producers_seen"] == 3  # p0, p1, p2
    assert status["a"]["event_time_ms"] == T + 1_000
    assert status["a"]["batch_id"] == 2
    assert "b" not in status  # as b has no gauges
    assert metrics.gauges["rmqmon_broker_producers_seen"] == {("a",): 3.0}
    items = {
        (r["producer_id"], r["broker"]): r["batch_id"] for r in tables.read("producer_broker_status_current").collect()
    }
    assert items == {("p0", "a"): 0, ("p1", "a"): 2, ("p2", "a"): 1}  # a row keeps the batch that last changed it
    assert metrics.counters["rmqmon_broker_isolation_episodes_total"] == {("a",): 1.0}


def test_a_batch_replayed_by_a_restarted_query_counts_its_episodes_once(spark, tmp_path):
    # The batch's writes were done and its commit was not (the query failed): the supervisor restarts the query,
    # whose new sink replays the batch. The job's MeteredBatches outlives the sink, so the counter holds.
    tables = DeltaTables(spark, tmp_path)
    tables.ensure_all(FAULT_TABLES)
    metrics, metered = MetricsState(), MeteredBatches()
    batch = [item("p1", "a", T + 60_000), opened("p1", "a", T + 60_000)]
    fault_sink(tables, "test", metrics, metered)(frame(spark, batch), 0)
    fault_sink(tables, "test", metrics, metered)(frame(spark, batch), 0)
    assert metrics.counters["rmqmon_broker_isolation_episodes_total"] == {("a",): 1.0}
    # A sink of its own (no shared record) would have counted the replay again.
    fault_sink(tables, "test", metrics)(frame(spark, batch), 0)
    assert metrics.counters["rmqmon_broker_isolation_episodes_total"] == {("a",): 2.0}
