"""Restoring the per-group series at start: a ``group_status_current`` row maps back to the ``GroupSummary``
it was written from, and applying it sets every series the summary set, to the same value.

The summaries come from the real shard engine; the rows are what ``table_rows`` maps them to, as the table
keeps them (the Spark side of that is proven end to end in ``tests/integration/test_job_metrics_restart.py``).
"""

from __future__ import annotations

import json

from connectors.metrics import MetricsState
from streaming.contract.tables import column_names
from streaming.domain.consumers.outcomes import GroupGone, GroupSummary
from streaming.job.delta.metric_rows import apply_consumer_metrics, group_summary, metric_values
from streaming.job.delta.table_rows import rows_of
from tests.unit.test_fleet import ev, hb, route, run
from tests.unit.test_typed_rows import collected


def stored_row(summary: GroupSummary) -> dict:
    """A summary's ``group_status_current`` row as the table holds it: its columns only (the write's schema drops
    the topics' moves), and the writing batch."""
    ((_, row),) = rows_of(summary)
    columns = set(column_names("group_status_current"))
    stored = {k: v for k, v in row.items() if k in columns}
    stored["topics"] = [{k: v for k, v in t.items() if k != "moved_queues"} for t in stored["topics"]]
    return {**json.loads(json.dumps(stored)), "batch_id": 7}


def latest_per_group(summaries: list[GroupSummary | GroupGone]) -> dict[str, GroupSummary]:
    latest: dict[str, GroupSummary | GroupGone] = {}
    for summary in summaries:
        latest[summary.group] = summary
    return {g: s for g, s in latest.items() if isinstance(s, GroupSummary)}


def scenario() -> list[GroupSummary | GroupGone]:
    """Group D: a client ID on two channels (orphaned and double-owned queues); group S: two topics, one member
    not subscribing the second, one member leaving; group X: empties and is gone."""
    out, _ = run(
        [
            (
                [
                    route(0),
                    route(0, "U", (("broker-a", 3),)),
                    hb(1_000, "10.1.0.1:1", "dup@1", group="D"),
                    hb(1_000, "10.1.0.2:1", "dup@1", group="D"),
                    hb(1_000, "10.1.0.3:1", "solo@1", group="D"),
                    hb(1_000, "10.2.0.1:1", "s1", ("T", "U"), group="S"),
                    hb(1_000, "10.2.0.2:1", "s2", ("T",), group="S"),
                    hb(1_000, "10.2.0.3:1", "s3", ("T", "U"), group="S"),
                    hb(1_000, "10.3.0.1:1", "x1", group="X"),
                ],
                0,
            ),
            (
                [
                    ev("UNREGISTER", 5_000, "10.2.0.3:1", "s3", group="S"),
                    ev("UNREGISTER", 5_000, "10.3.0.1:1", "x1", group="X"),
                    hb(6_000, "10.1.0.3:1", "solo@1", group="D"),
                ],
                0,
            ),
        ]
    )
    return [o for o in out if isinstance(o, GroupSummary | GroupGone)]


def test_restored_rows_set_every_group_series_the_engine_summaries_set_to_the_same_value():
    summaries = scenario()
    live = MetricsState()
    # as the sink does: the typed rows the state function emitted, collected, back to the values
    apply_consumer_metrics(live, metric_values((k, collected(k, r)) for s in summaries for k, r in rows_of(s)))
    restored = MetricsState()
    current = latest_per_group(summaries)
    stored = [stored_row(s) for s in current.values()]
    apply_consumer_metrics(restored, [(row["cluster"], group_summary(row)) for row in stored])

    assert set(current) == {"D", "S"}  # X emptied: its row is deleted, and its series are gone from both
    assert restored.gauges == live.gauges
    assert live.gauges["rmqmon_group_duplicate_client_ids"][("DefaultCluster", "D")] == 1
    assert live.gauges["rmqmon_group_queues"][("DefaultCluster", "D", "T", "orphaned")] > 0
    assert live.gauges["rmqmon_group_non_subscribing_members"][("DefaultCluster", "S", "U")] == 1
    assert live.gauges["rmqmon_group_open_anomalies"][("DefaultCluster", "D", "DUPLICATE_CLIENT_ID")] == 1
    # Counters: the generation is the group's own count; queue moves count from the process's start.
    assert restored.counters["rmqmon_group_rebalances_total"] == live.counters["rmqmon_group_rebalances_total"]
    moved = restored.counters["rmqmon_group_moved_queues_total"]
    assert set(moved) == set(live.counters["rmqmon_group_moved_queues_total"]) and set(moved.values()) == {0.0}


def test_a_row_without_topics_or_open_anomalies_restores_empty_series_sets():
    summary = group_summary(
        {
            "group": "E",
            "generation": 3,
            "members": 1,
            "channels": 1,
            "duplicate_client_ids": 0,
            "views_diverge": True,
            "last_rebalance_ms": None,
            "open_anomalies": None,
            "topics": [],
            "event_time_ms": 5,
            "batch_id": 1,
        }
    )
    assert isinstance(summary, GroupSummary) and summary.topics == {} and summary.open_anomalies == {}
    state = MetricsState()
    apply_consumer_metrics(state, [("east", summary)])
    assert state.gauges["rmqmon_group_views_diverging"][("east", "E")] == 1.0
    assert ("east", "E") not in state.gauges.get("rmqmon_group_last_rebalance_timestamp_seconds", {})
    assert not state.gauges.get("rmqmon_group_queues")
    assert set(state.gauges["rmqmon_group_open_anomalies"].values()) == {0.0}
