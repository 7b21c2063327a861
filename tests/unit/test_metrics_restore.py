"""Restoring the per-group series at start: a ``group_status_current`` row maps back to the ``group_metrics``
record it was written from, and applying it sets every series the record set, to the same value.

The records come from the real shard engine; the rows are what ``outputs.merge_group_status`` stores (the
Spark side of that is proven end to end in ``tests/integration/test_job_metrics_restart.py``).
"""

from __future__ import annotations

from connectors.metrics import MetricsState
from streaming.job.outputs import apply_consumer_metrics, group_metrics_record
from tests.unit.test_fleet import ev, hb, route, rows, run


def stored_row(record: dict) -> dict:
    """A ``group_metrics`` record as its ``group_status_current`` row (array of structs for the two maps)."""
    return {
        "group": record["group"], "generation": record["generation"], "members": record["members"],
        "channels": record["channels"], "duplicate_client_ids": record["duplicate_client_ids"],
        "views_diverge": record["views_diverge"], "last_rebalance_ms": record["last_rebalance_ms"],
        "open_anomalies": [{"anomaly": k, "episodes": n} for k, n in sorted(record["open_anomalies"].items())],
        "topics": [{"topic": t, "assigned": v["assigned"], "orphaned": v["orphaned"], "double_owned": v["double_owned"],
                    "idle_members": v["idle"], "non_subscribing_members": v["non_subscribing"],
                    "skew_queues": v["skew"]} for t, v in sorted(record["topics"].items())],
        "event_time_ms": record["event_time_ms"], "batch_id": 7,
    }  # fmt: skip


def latest_per_group(records: list[dict]) -> dict[str, dict]:
    latest: dict[str, dict] = {}
    for record in records:
        latest[record["group"]] = record
    return {g: r for g, r in latest.items() if not r.get("removed")}


def scenario() -> list[dict]:
    """Group D: a client ID on two channels (orphaned and double-owned queues); group S: two topics, one member
    not subscribing the second, one member leaving; group X: empties and is gone."""
    out, _ = run([
        ([route(0), route(0, "U", (("broker-a", 3),)),
          hb(1_000, "10.1.0.1:1", "dup@1", group="D"), hb(1_000, "10.1.0.2:1", "dup@1", group="D"),
          hb(1_000, "10.1.0.3:1", "solo@1", group="D"),
          hb(1_000, "10.2.0.1:1", "s1", ("T", "U"), group="S"), hb(1_000, "10.2.0.2:1", "s2", ("T",), group="S"),
          hb(1_000, "10.2.0.3:1", "s3", ("T", "U"), group="S"), hb(1_000, "10.3.0.1:1", "x1", group="X")], 0),
        ([ev("UNREGISTER", 5_000, "10.2.0.3:1", "s3", group="S"), ev("UNREGISTER", 5_000, "10.3.0.1:1", "x1", group="X"),
          hb(6_000, "10.1.0.3:1", "solo@1", group="D")], 0),
    ])  # fmt: skip
    return rows(out, "group_metrics")


def test_restored_records_set_every_group_series_the_engine_records_set_to_the_same_value():
    records = scenario()
    live = MetricsState()
    apply_consumer_metrics(live, [("group_metrics", r) for r in records])
    restored = MetricsState()
    current = latest_per_group(records)
    apply_consumer_metrics(restored, [("group_metrics", group_metrics_record(stored_row(r))) for r in current.values()])

    assert set(current) == {"D", "S"}  # X emptied: its row is deleted, and its series are gone from both
    assert restored.gauges == live.gauges
    assert live.gauges["rmqmon_group_duplicate_client_ids"][("D",)] == 1
    assert live.gauges["rmqmon_group_queues"][("D", "T", "orphaned")] > 0
    assert live.gauges["rmqmon_group_non_subscribing_members"][("S", "U")] == 1
    assert live.gauges["rmqmon_group_open_anomalies"][("D", "DUPLICATE_CLIENT_ID")] == 1
    # Counters: the generation is the group's own count; queue moves count from the process's start.
    assert restored.counters["rmqmon_group_rebalances_total"] == live.counters["rmqmon_group_rebalances_total"]
    moved = restored.counters["rmqmon_group_moved_queues_total"]
    assert set(moved) == set(live.counters["rmqmon_group_moved_queues_total"]) and set(moved.values()) == {0.0}


def test_a_row_without_topics_or_open_anomalies_restores_empty_series_sets():
    record = group_metrics_record({"group": "E", "generation": 3, "members": 1, "channels": 1,
                                   "duplicate_client_ids": 0, "views_diverge": True, "last_rebalance_ms": None,
                                   "open_anomalies": None, "topics": [], "event_time_ms": 5, "batch_id": 1})  # fmt: skip
    state = MetricsState()
    apply_consumer_metrics(state, [("group_metrics", record)])
    assert state.gauges["rmqmon_group_views_diverging"][("E",)] == 1.0
    assert ("E",) not in state.gauges.get("rmqmon_group_last_rebalance_timestamp_seconds", {})
    assert not state.gauges.get("rmqmon_group_queues")
    assert set(state.gauges["rmqmon_group_open_anomalies"].values()) == {0.0}
