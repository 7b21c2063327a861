"""The one mapping from the shard engine's typed outcomes to the consumer tables' rows, and back for metrics.

``shard_engine.ShardEngine`` says what happened (``streaming.domain.consumers.outcomes``); this module says where it is
kept: which table of ``tables.py`` gets which row, and whether a current table's row is an upsert or a
delete (``_op``). The state function emits the rows as JSON and the sink parses each table's rows with
its schema, so a column this mapping did not fill would be a silent NULL: a unit test maps one of every
outcome and compares the keys with every consumer table's columns. The metrics read typed values again
(``metric_values``, ``group_summary``): the exact inverse, tested as a round trip.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from streaming.contract.tables import Table
from streaming.domain.consumers.membership import MembershipChange
from streaming.domain.consumers.outcomes import (
    AssignmentWithdrawn,
    BrokerViewChanged,
    BrokerViewGone,
    BrokerViewState,
    CutRetracted,
    EpisodeRestored,
    EpisodeRetracted,
    EpisodeTransition,
    ExpectedAssignment,
    GenerationSnapshot,
    GroupGone,
    GroupSummary,
    IgnoredEvent,
    LateEvent,
    Outcome,
    ProgressSummary,
    QueueProgress,
    QueueProgressGone,
    RebalanceCost,
    TopicProgress,
    TopicSummary,
)
from streaming.domain.consumers.polled_views import ViewStatus
from streaming.domain.progress.verdict import QueueState
from streaming.domain.vocabulary import AnomalyKind, LateReason, ViewFreshness

Row = tuple[str, dict[str, Any]]

GROUP_STATUS = Table.GROUP_STATUS_CURRENT
DEAD_LETTERS = Table.DEAD_LETTERS
# Not a Delta table: the late input the metrics count.
LATE_EVENTS = "late_events"
PROGRESS_HISTORY = Table.CONSUME_PROGRESS
QUEUE_PROGRESS = Table.QUEUE_PROGRESS_CURRENT
REBALANCE_COST = Table.REBALANCE_COST
# Not a Delta table: a group's progress per topic, which the metrics are set from.
PROGRESS_METRICS = "progress_metrics"
# The operation column of a current table's rows: the sink upserts them and deletes the others' keys.
OP = "_op"
UPSERT = "upsert"
DELETE = "delete"
# Not a Delta table: the cuts whose history rows the sink deletes (``CutRetracted``) before the batch's appends.
RETRACTED_CUTS = "retracted_cuts"
# The history tables a cut writes, keyed by (group, event_time_ms): what a retracted cut's rows are deleted from.
CUT_TABLES = (Table.GROUP_SNAPSHOTS, Table.EXPECTED_ASSIGNMENTS, Table.ANOMALY_EPISODES)
# Columns the sink fills in itself: the micro-batch and the timestamp of ``event_time_ms``.
SINK_COLUMNS = frozenset({"batch_id", "event_time"})


def _membership_change(change: MembershipChange) -> list[Row]:
    return [
        (
            Table.MEMBERSHIP_CHANGES,
            {
                "group": change.group,
                "broker": change.broker,
                "event_time_ms": change.event_time_ms,
                "change": change.change,
                "reason": change.reason,
                "client_id": change.client_id,
                "channel": change.channel,
                "notifies_clients": change.notifies_clients,
                "topics_added": list(change.topics_added),
                "topics_removed": list(change.topics_removed),
            },
        )
    ]


def _view_columns(view: ViewStatus) -> dict[str, Any]:
    return {
        "group": view.group,
        "broker": view.broker,
        "status": view.status,
        "polled_at_ms": view.polled_at_ms,
        "stale_after_ms": view.stale_after_ms,
        "channels": view.channels,
        "collector": view.collector,
        "event_time_ms": view.event_time_ms,
    }


def _view_state(outcome: BrokerViewState) -> list[Row]:
    view = outcome.view
    stale_since = view.event_time_ms if view.status == ViewFreshness.STALE else None
    return [(Table.BROKER_VIEWS_CURRENT, {**_view_columns(view), "stale_since_ms": stale_since, OP: UPSERT})]


def _view_changed(outcome: BrokerViewChanged) -> list[Row]:
    return [(Table.BROKER_VIEW_CHANGES, _view_columns(outcome.view))]


def _view_gone(outcome: BrokerViewGone) -> list[Row]:
    return [
        (
            Table.BROKER_VIEWS_CURRENT,
            {"group": outcome.group, "broker": outcome.broker, "event_time_ms": outcome.event_time_ms, OP: DELETE},
        )
    ]


def _snapshot(s: GenerationSnapshot) -> list[Row]:
    return [
        (
            Table.GROUP_SNAPSHOTS,
            {
                "group": s.group,
                "generation": s.generation,
                "event_time_ms": s.event_time_ms,
                "triggers": list(s.triggers),
                "members": s.members,
                "channels": s.channels,
                "brokers": list(s.brokers),
                "cid_all": list(s.cid_all),
                "topics": list(s.topics),
                "strategy": s.strategy,
                "client_line": s.client_line,
                "views_diverge": s.views_diverge,
                "anomalies": list(s.anomalies),
                "details": s.details,
            },
        )
    ]


def _expected(a: ExpectedAssignment) -> list[Row]:
    queues = [{"broker": q.broker_name, "queue_id": q.queue_id} for q in a.queues]
    row = {
        "group": a.group,
        "generation": a.generation,
        "topic": a.topic,
        "client_id": a.client_id,
        "queues": queues,
        "queue_count": len(queues),
        "strategy": a.strategy,
        "event_time_ms": a.event_time_ms,
    }
    current = {
        "group": a.group,
        "topic": a.topic,
        "client_id": a.client_id,
        "queues": queues,
        "queue_count": len(queues),
        "generation": a.generation,
        "event_time_ms": a.event_time_ms,
        OP: UPSERT,
    }
    return [(Table.EXPECTED_ASSIGNMENTS, row), (Table.CURRENT_ASSIGNMENT, current)]


def _withdrawn(w: AssignmentWithdrawn) -> list[Row]:
    return [
        (
            Table.CURRENT_ASSIGNMENT,
            {
                "group": w.group,
                "topic": w.topic,
                "client_id": w.client_id,
                "queues": [],
                "queue_count": 0,
                "generation": w.generation,
                "event_time_ms": w.event_time_ms,
                OP: DELETE,
            },
        )
    ]


def _transition(t: EpisodeTransition) -> list[Row]:
    transition, e = t.transition, t.transition.episode
    return [
        (
            Table.ANOMALY_EPISODES,
            {
                "episode_id": e.episode_id,
                "group": e.group,
                "topic": e.topic,
                "anomaly": e.anomaly,
                "status": transition.status,
                "opened_at_ms": e.opened_at_ms,
                "closed_at_ms": transition.closed_at_ms,
                "event_time_ms": transition.event_time_ms,
                "generation": t.generation,
                "severity": e.severity,
                "summary": e.summary,
                "details": e.details_json,
            },
        )
    ]


def _retracted(r: CutRetracted) -> list[Row]:
    return [(RETRACTED_CUTS, {"group": r.group, "event_time_ms": r.event_time_ms})]


def _episode_restored(r: EpisodeRestored) -> list[Row]:
    e = r.episode
    return [
        (
            Table.ANOMALIES_CURRENT,
            {
                "episode_id": e.episode_id,
                "group": e.group,
                "topic": e.topic,
                "anomaly": e.anomaly,
                "opened_at_ms": e.opened_at_ms,
                "event_time_ms": r.row_ms,
                "generation": r.generation,
                "severity": e.severity,
                "summary": e.summary,
                "details": e.details_json,
                OP: UPSERT,
            },
        )
    ]


def _episode_retracted(r: EpisodeRetracted) -> list[Row]:
    row = {"episode_id": r.episode_id, "group": r.group, "event_time_ms": r.event_time_ms, OP: DELETE}
    return [(Table.ANOMALIES_CURRENT, row)]


# A topic's queues moved by the analysis: the metrics count them, the table does not keep them (a restart
# counts moves from then on), so its schema drops them when the sink parses the row.
MOVED_QUEUES = "moved_queues"


def _summary(s: GroupSummary) -> list[Row]:
    return [
        (
            GROUP_STATUS,
            {
                "group": s.group,
                "generation": s.generation,
                "members": s.members,
                "channels": s.channels,
                "duplicate_client_ids": s.duplicate_client_ids,
                "views_diverge": s.views_diverge,
                "last_rebalance_ms": s.last_rebalance_ms,
                "open_anomalies": [{"anomaly": k, "episodes": n} for k, n in sorted(s.open_anomalies.items())],
                "topics": [
                    {
                        "topic": name,
                        "assigned": t.assigned,
                        "orphaned": t.orphaned,
                        "double_owned": t.double_owned,
                        "idle_members": t.idle,
                        "non_subscribing_members": t.non_subscribing,
                        "skew_queues": t.skew,
                        MOVED_QUEUES: t.moved,
                    }
                    for name, t in sorted(s.topics.items())
                ],
                "event_time_ms": s.event_time_ms,
                OP: UPSERT,
            },
        )
    ]


def _gone(g: GroupGone) -> list[Row]:
    return [(GROUP_STATUS, {"group": g.group, "event_time_ms": g.event_time_ms, OP: DELETE})]


def _progress_columns(p: QueueProgress) -> dict[str, Any]:
    """A queue at a sample: offsets as the master answered (NULL, never 0, when it did not), the verdict of the
    window then (``lag`` is the latest answered sample's, kept while unanswered samples are judged UNKNOWN)."""
    s, v = p.sample, p.verdict
    return {
        "group": p.group,
        "topic": p.topic,
        "broker": p.broker,
        "queue_id": p.queue_id,
        "event_time_ms": s.at_ms,
        "answered": s.answered,
        "broker_offset": s.broker_offset if s.answered else None,
        "consumer_offset": s.consumer_offset if s.answered else None,
        "pull_offset": s.pull_offset,
        "min_offset": s.min_offset,
        "last_timestamp_ms": (s.last_timestamp_ms or None) if s.answered else None,
        "lag": v.lag,
        "state": v.state,
        "rule": v.rule,
        "severity": v.severity,
        "cause": v.cause,
        "complete": v.complete,
        "time_lag_upper_s": v.time_lag.upper_s,
        "time_lag_estimate_s": v.time_lag.estimate_s,
        "time_lag_bounded": v.time_lag.bounded,
        "expired_unconsumed": v.expired_unconsumed,
        "holders": sorted(s.holder_ids()),
        "holders_reported": p.holders_reported,
        "expected_owner": s.expected_owner,
        "view_fresh": s.view_fresh,
        "group_online": p.online,
        "state_since_ms": p.state_since_ms,
    }


def _queue_progress(p: QueueProgress) -> list[Row]:
    columns = _progress_columns(p)
    return [
        (PROGRESS_HISTORY, {**columns, "state_changed": p.changed}),
        (QUEUE_PROGRESS, {**columns, OP: UPSERT}),
    ]


def _queue_progress_gone(g: QueueProgressGone) -> list[Row]:
    key = {"group": g.group, "topic": g.topic, "broker": g.broker, "queue_id": g.queue_id}
    return [(QUEUE_PROGRESS, {**key, "event_time_ms": g.event_time_ms, OP: DELETE})]


def _rebalance_cost(r: RebalanceCost) -> list[Row]:
    h = r.handoff
    spike = None if h.peak_lag is None or h.lag_at_t0 is None else max(0, h.peak_lag - h.lag_at_t0)
    return [
        (
            REBALANCE_COST,
            {
                "group": r.group,
                "topic": r.topic,
                "broker": r.broker,
                "queue_id": r.queue_id,
                "generation": h.generation,
                "t0_ms": h.t0_ms,
                "old_owner": h.old_owner,
                "new_owner": h.new_owner,
                "handoff_start_ms": h.start_ms,
                "handoff_start_bounded": h.start_bounded,
                "handoff_end_ms": h.handoff_end_ms,
                "handoff_gap_ms": h.handoff_gap_ms,
                "orphaned_ms": h.orphaned_ms,
                "double_held_ms": h.double_held_ms,
                "committed_before": h.committed_before,
                "received_before": h.received_before,
                "start_offset": h.start_offset,
                "rewound": h.rewound,
                "redelivered_max": h.redelivered_max,
                "lag_at_t0": h.lag_at_t0,
                "peak_lag": h.peak_lag,
                "lag_spike": spike,
                "recovered_ms": h.recovered_ms,
                "recovery_ms": None if h.recovered_ms is None else h.recovered_ms - h.t0_ms,
                "samples": h.samples,
                "final_reason": r.reason,
                "event_time_ms": r.event_time_ms,
            },
        )
    ]


def _progress_summary(p: ProgressSummary) -> list[Row]:
    topics = [
        {
            "topic": name,
            "lag": t.lag,
            "max_time_lag_s": t.max_time_lag_s,
            "queues_by_state": {str(k): n for k, n in sorted(t.queues_by_state.items())},
        }
        for name, t in sorted(p.topics.items())
    ]
    row = {"group": p.group, "event_time_ms": p.event_time_ms, "topics": topics, "offline_backlog": p.offline_backlog}
    return [(PROGRESS_METRICS, row)]


def progress_summary(row: Mapping[str, Any]) -> ProgressSummary:
    """A ``PROGRESS_METRICS`` row as the value it came from."""
    return ProgressSummary(
        row["group"],
        row["event_time_ms"],
        {
            t["topic"]: TopicProgress(
                t["lag"], t["max_time_lag_s"], {QueueState(k): n for k, n in t["queues_by_state"].items()}
            )
            for t in row["topics"]
        },
        row["offline_backlog"],
    )


def progress_summaries(rows: Iterable[Mapping[str, Any]], now_ms: int) -> list[ProgressSummary]:
    """Each group's ``ProgressSummary`` from its ``queue_progress_current`` rows (what a restarted job exports
    before the group's next sample): the same values the tracker's summary gave at the rows' samples. A group
    without members with a queue whose lag is above 0 has its offline backlog episode open (the tracker opens it
    at such a sample and keeps no such queue once it closes it)."""
    groups: dict[str, dict[str, tuple[int, float | None, dict[QueueState, int]]]] = {}
    offline: set[str] = set()
    for r in rows:
        if not r["group_online"] and (r["lag"] or 0) > 0:
            offline.add(r["group"])
        topics = groups.setdefault(r["group"], {})
        lag, worst, states = topics.get(r["topic"], (0, None, {}))
        estimate = r["time_lag_estimate_s"]
        state = QueueState(r["state"])
        states[state] = states.get(state, 0) + 1
        topics[r["topic"]] = (
            lag + (r["lag"] or 0),
            estimate if worst is None else worst if estimate is None else max(worst, estimate),
            states,
        )
    return [
        ProgressSummary(g, now_ms, {t: TopicProgress(*v) for t, v in sorted(topics.items())}, g in offline)
        for g, topics in sorted(groups.items())
    ]


def group_summary(row: Mapping[str, Any]) -> GroupSummary | GroupGone:
    """A ``group_status_current`` row (as mapped above, or as the table holds it) as the value it came from;
    a row read back from the table has no queue moves (0)."""
    if row.get(OP) == DELETE:
        return GroupGone(row["group"], row["event_time_ms"])
    return GroupSummary(
        row["group"],
        row["event_time_ms"],
        row["members"],
        row["channels"],
        row["generation"],
        row["duplicate_client_ids"],
        row["views_diverge"],
        row["last_rebalance_ms"],
        {AnomalyKind(a["anomaly"]): a["episodes"] for a in row["open_anomalies"] or ()},
        {
            t["topic"]: TopicSummary(
                t["assigned"],
                t["orphaned"],
                t["double_owned"],
                t["idle_members"],
                t["non_subscribing_members"],
                t["skew_queues"],
                t.get(MOVED_QUEUES) or 0,
            )
            for t in row["topics"] or ()
        },
    )


@dataclass(frozen=True, slots=True)
class DeadLettered:
    """An input record the consumer path wrote as a dead letter, for the metrics' count by reason."""

    reason: str | None


@dataclass(frozen=True)
class FinalCost:
    """A ``rebalance_cost`` row as the metrics read it."""

    group: str
    topic: str
    t0_ms: int
    handoff_gap_ms: int | None
    redelivered_max: int | None


def final_cost(row: Mapping[str, Any]) -> FinalCost:
    return FinalCost(row["group"], row["topic"], row["t0_ms"], row["handoff_gap_ms"], row["redelivered_max"])


MetricValue = GroupSummary | GroupGone | LateEvent | DeadLettered | ProgressSummary | FinalCost


def metric_values(rows: Iterable[tuple[str, str]]) -> list[MetricValue]:
    """The values the metrics are set from, from the JSON rows of ``GROUP_STATUS``, ``LATE_EVENTS``,
    ``DEAD_LETTERS``, ``PROGRESS_METRICS`` and ``REBALANCE_COST`` (others are skipped), in order."""
    values: list[MetricValue] = []
    for table, text in rows:
        row = json.loads(text)
        if table == PROGRESS_METRICS:
            values.append(progress_summary(row))
        elif table == REBALANCE_COST:
            values.append(final_cost(row))
        elif table == GROUP_STATUS:
            values.append(group_summary(row))
        elif table == LATE_EVENTS:
            values.append(
                LateEvent(
                    LateReason(row["reason"]),
                    row["event_type"],
                    row.get("event_time_ms"),
                    row["count"],
                    row.get("group"),
                    row.get("broker"),
                    row.get("topic"),
                )
            )
        elif table == DEAD_LETTERS:
            values.append(DeadLettered(row.get("reason")))
    return values


def _late(late: LateEvent) -> list[Row]:
    row: dict[str, Any] = {"reason": late.reason, "event_type": late.event_type, "count": late.count}
    for name in ("event_time_ms", "group", "broker", "topic"):
        value = getattr(late, name)
        if value is not None:
            row[name] = value
    return [(LATE_EVENTS, row)]


def dead_letter(
    source: str,
    kafka_topic: str,
    kafka_partition: int,
    kafka_offset: int,
    kafka_timestamp: str | None,
    raw_value: str | None,
    reason: str,
    detail: str | None,
) -> dict[str, Any]:
    """A ``dead_letters`` row: a rejected input record, where it came from and why."""
    return {
        "source": source,
        "kafka_topic": kafka_topic,
        "kafka_partition": kafka_partition,
        "kafka_offset": kafka_offset,
        "kafka_timestamp": kafka_timestamp,
        "raw_value": raw_value,
        "reason": reason,
        "detail": detail,
    }


def ignored_letter(
    ignored: IgnoredEvent,
    kafka_topic: str,
    kafka_partition: int,
    kafka_offset: int,
    kafka_timestamp: str | None,
    raw_value: str | None,
) -> Row:
    """The dead letter of an event the engine refused, at the input coordinates the caller kept for it."""
    return (
        DEAD_LETTERS,
        dead_letter(
            ignored.event_type,
            kafka_topic,
            kafka_partition,
            kafka_offset,
            kafka_timestamp,
            raw_value,
            ignored.reason,
            ignored.detail,
        ),
    )


_MAPPERS: dict[type, Callable[[Any], list[Row]]] = {
    MembershipChange: _membership_change,
    BrokerViewState: _view_state,
    BrokerViewChanged: _view_changed,
    BrokerViewGone: _view_gone,
    GenerationSnapshot: _snapshot,
    ExpectedAssignment: _expected,
    AssignmentWithdrawn: _withdrawn,
    EpisodeTransition: _transition,
    CutRetracted: _retracted,
    EpisodeRestored: _episode_restored,
    EpisodeRetracted: _episode_retracted,
    GroupSummary: _summary,
    GroupGone: _gone,
    LateEvent: _late,
    QueueProgress: _queue_progress,
    QueueProgressGone: _queue_progress_gone,
    ProgressSummary: _progress_summary,
    RebalanceCost: _rebalance_cost,
}


def rows_of(outcome: Outcome) -> list[Row]:
    """The ``(table, row)`` pairs one outcome is kept as (an ``IgnoredEvent``: see ``ignored_letter``)."""
    return _MAPPERS[type(outcome)](outcome)


def table_rows(outcomes: Iterable[Outcome]) -> list[Row]:
    """The ``(table, row)`` pairs of the outcomes, in their order (an outcome's rows in the order above)."""
    mappers = _MAPPERS
    return [row for outcome in outcomes for row in mappers[type(outcome)](outcome)]
