"""The one mapping from the shard engine's typed outcomes to the consumer tables' rows.

``fleet.ShardEngine`` says what happened (``streaming.domain.outcomes``); this module says where it is
kept: which table of ``tables.py`` gets which row, and whether a current table's row is an upsert or a
delete (``_op``). The state function emits the rows as JSON and the sink parses each table's rows with
its schema, so a column this mapping did not fill would be a silent NULL: a unit test maps one of every
outcome and compares the keys with every consumer table's columns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from streaming.domain.membership import MembershipChange, ViewStatus
from streaming.domain.outcomes import (
    AssignmentWithdrawn,
    BrokerViewChanged,
    BrokerViewGone,
    BrokerViewState,
    EpisodeTransition,
    ExpectedAssignment,
    GenerationSnapshot,
    GroupGone,
    GroupSummary,
    IgnoredEvent,
    LateEvent,
    Outcome,
)
from streaming.domain.vocabulary import ViewFreshness

Row = tuple[str, dict[str, Any]]

# Pseudo-tables: rows the consumer sink reads for the metrics endpoint (and ``group_status_current``), not Delta
# tables.
GROUP_METRICS = "group_metrics"
LATE_EVENTS = "late_events"
DEAD_LETTERS = "dead_letters"
# The operation column of a current table's rows: the sink MERGEs upserts and deletes the others' keys.
OP = "_op"
UPSERT = "upsert"
DELETE = "delete"
# Columns the sink fills in itself: the micro-batch and the timestamp of ``event_time_ms``.
SINK_COLUMNS = frozenset({"batch_id", "event_time"})


def _membership_change(change: MembershipChange) -> list[Row]:
    return [("membership_changes", {
        "group": change.group, "broker": change.broker, "event_time_ms": change.event_time_ms,
        "change": change.change, "reason": change.reason, "client_id": change.client_id, "channel": change.channel,
        "notifies_clients": change.notifies_clients, "topics_added": list(change.topics_added),
        "topics_removed": list(change.topics_removed),
    })]  # fmt: skip


def _view_columns(view: ViewStatus) -> dict[str, Any]:
    return {"group": view.group, "broker": view.broker, "status": view.status, "polled_at_ms": view.polled_at_ms,
            "stale_after_ms": view.stale_after_ms, "channels": view.channels, "collector": view.collector,
            "event_time_ms": view.event_time_ms}  # fmt: skip


def _view_state(outcome: BrokerViewState) -> list[Row]:
    view = outcome.view
    stale_since = view.event_time_ms if view.status == ViewFreshness.STALE else None
    return [("broker_views_current", {**_view_columns(view), "stale_since_ms": stale_since, OP: UPSERT})]


def _view_changed(outcome: BrokerViewChanged) -> list[Row]:
    return [("broker_view_changes", _view_columns(outcome.view))]


def _view_gone(outcome: BrokerViewGone) -> list[Row]:
    return [("broker_views_current", {"group": outcome.group, "broker": outcome.broker,
                                      "event_time_ms": outcome.event_time_ms, OP: DELETE})]  # fmt: skip


def _snapshot(s: GenerationSnapshot) -> list[Row]:
    return [("group_snapshots", {
        "group": s.group, "generation": s.generation, "event_time_ms": s.event_time_ms, "triggers": list(s.triggers),
        "members": s.members, "channels": s.channels, "brokers": list(s.brokers), "cid_all": list(s.cid_all),
        "topics": list(s.topics), "strategy": s.strategy, "client_line": s.client_line,
        "views_diverge": s.views_diverge, "anomalies": list(s.anomalies), "details": s.details,
    })]  # fmt: skip


def _expected(a: ExpectedAssignment) -> list[Row]:
    queues = [{"broker": q.broker_name, "queue_id": q.queue_id} for q in a.queues]
    row = {"group": a.group, "generation": a.generation, "topic": a.topic, "client_id": a.client_id,
           "queues": queues, "queue_count": len(queues), "strategy": a.strategy, "event_time_ms": a.event_time_ms}
    current = {"group": a.group, "topic": a.topic, "client_id": a.client_id, "queues": queues,
               "queue_count": len(queues), "generation": a.generation, "event_time_ms": a.event_time_ms, OP: UPSERT}
    return [("expected_assignments", row), ("current_assignment", current)]  # fmt: skip


def _withdrawn(w: AssignmentWithdrawn) -> list[Row]:
    return [("current_assignment", {"group": w.group, "topic": w.topic, "client_id": w.client_id, "queues": [],
                                    "queue_count": 0, "generation": w.generation, "event_time_ms": w.event_time_ms,
                                    OP: DELETE})]  # fmt: skip


def _transition(t: EpisodeTransition) -> list[Row]:
    transition, e = t.transition, t.transition.episode
    return [("anomaly_episodes", {
        "episode_id": e.episode_id, "group": e.group, "topic": e.topic, "anomaly": e.anomaly,
        "status": transition.status, "opened_at_ms": e.opened_at_ms, "closed_at_ms": transition.closed_at_ms,
        "event_time_ms": transition.event_time_ms, "generation": t.generation, "severity": e.severity,
        "summary": e.summary, "details": e.details_json,
    })]  # fmt: skip


def _summary(s: GroupSummary) -> list[Row]:
    return [(GROUP_METRICS, {
        "group": s.group, "removed": False, "event_time_ms": s.event_time_ms, "members": s.members,
        "channels": s.channels, "generation": s.generation, "duplicate_client_ids": s.duplicate_client_ids,
        "views_diverge": s.views_diverge, "last_rebalance_ms": s.last_rebalance_ms,
        "open_anomalies": dict(s.open_anomalies),
        "topics": {name: {"assigned": t.assigned, "orphaned": t.orphaned, "double_owned": t.double_owned,
                          "idle": t.idle, "non_subscribing": t.non_subscribing, "skew": t.skew, "moved": t.moved}
                   for name, t in s.topics.items()},
    })]  # fmt: skip


def _gone(g: GroupGone) -> list[Row]:
    return [(GROUP_METRICS, {"group": g.group, "removed": True, "event_time_ms": g.event_time_ms})]


def _late(late: LateEvent) -> list[Row]:
    row: dict[str, Any] = {"reason": late.reason, "event_type": late.event_type, "count": late.count}
    for name in ("event_time_ms", "group", "broker", "topic"):
        value = getattr(late, name)
        if value is not None:
            row[name] = value
    return [(LATE_EVENTS, row)]


def dead_letter(source: str, kafka_topic: str, kafka_partition: int, kafka_offset: int, kafka_timestamp: str | None,
                raw_value: str | None, reason: str, detail: str | None) -> dict[str, Any]:
    """A ``dead_letters`` row: a rejected input record, where it came from and why."""
    return {"source": source, "kafka_topic": kafka_topic, "kafka_partition": kafka_partition,
            "kafka_offset": kafka_offset, "kafka_timestamp": kafka_timestamp, "raw_value": raw_value,
            "reason": reason, "detail": detail}  # fmt: skip


def ignored_letter(ignored: IgnoredEvent, kafka_topic: str, kafka_partition: int, kafka_offset: int,
                   kafka_timestamp: str | None, raw_value: str | None) -> Row:
    """The dead letter of an event the engine refused, at the input coordinates the caller kept for it."""
    return (DEAD_LETTERS, dead_letter(ignored.event_type, kafka_topic, kafka_partition, kafka_offset, kafka_timestamp,
                                      raw_value, ignored.reason, ignored.detail))  # fmt: skip


_MAPPERS: dict[type, Callable[[Any], list[Row]]] = {
    MembershipChange: _membership_change,
    BrokerViewState: _view_state,
    BrokerViewChanged: _view_changed,
    BrokerViewGone: _view_gone,
    GenerationSnapshot: _snapshot,
    ExpectedAssignment: _expected,
    AssignmentWithdrawn: _withdrawn,
    EpisodeTransition: _transition,
    GroupSummary: _summary,
    GroupGone: _gone,
    LateEvent: _late,
}


def rows_of(outcome: Outcome) -> list[Row]:
    """The ``(table, row)`` pairs one outcome is kept as (an ``IgnoredEvent``: see ``ignored_letter``)."""
    return _MAPPERS[type(outcome)](outcome)


def table_rows(outcomes: Iterable[Outcome]) -> list[Row]:
    """The ``(table, row)`` pairs of the outcomes, in their order (an outcome's rows in the order above)."""
    mappers = _MAPPERS
    return [row for outcome in outcomes for row in mappers[type(outcome)](outcome)]
