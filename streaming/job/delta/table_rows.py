"""The one mapping from the shard engine's typed outcomes to the consumer query's typed rows.

``shard_engine.ShardEngine`` says what happened (``streaming.domain.consumers.outcomes``); this module says where it
is kept: which kind of ``bus`` (a table of ``tables.py``, a current table's deletion, or a row the metrics read)
gets which row. Each row is a dict of its kind's fields, which ``bus.values`` reads in the struct's order: a field
not filled raises; ``tests/unit/test_typed_rows.py`` maps one of every outcome against every kind's fields.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
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
    QueueHolders,
    QueueHoldersGone,
    QueueProgress,
    QueueProgressGone,
    RebalanceCost,
)
from streaming.domain.consumers.polled_views import ViewStatus
from streaming.domain.vocabulary import DEFAULT_CLUSTER, ViewFreshness
from streaming.job.delta.bus import LATE_EVENTS, MOVED_QUEUES, PROGRESS_METRICS, RETRACTED_CUTS, deleted

Row = tuple[str, dict[str, Any]]

GROUP_STATUS = Table.GROUP_STATUS_CURRENT
DEAD_LETTERS = Table.DEAD_LETTERS
PROGRESS_HISTORY = Table.CONSUME_PROGRESS
QUEUE_PROGRESS = Table.QUEUE_PROGRESS_CURRENT
REBALANCE_COST = Table.REBALANCE_COST
# The history tables a cut writes, keyed by (group, event_time_ms): what a retracted cut's rows are deleted from.
CUT_TABLES = (Table.GROUP_SNAPSHOTS, Table.EXPECTED_ASSIGNMENTS, Table.ANOMALY_EPISODES)


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
    return [(Table.BROKER_VIEWS_CURRENT, {**_view_columns(view), "stale_since_ms": stale_since})]


def _view_changed(outcome: BrokerViewChanged) -> list[Row]:
    return [(Table.BROKER_VIEW_CHANGES, _view_columns(outcome.view))]


def _view_gone(outcome: BrokerViewGone) -> list[Row]:
    key = {"group": outcome.group, "broker": outcome.broker}
    return [(deleted(Table.BROKER_VIEWS_CURRENT), {**key, "event_time_ms": outcome.event_time_ms})]


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
    }
    return [(Table.EXPECTED_ASSIGNMENTS, row), (Table.CURRENT_ASSIGNMENT, current)]


def _withdrawn(w: AssignmentWithdrawn) -> list[Row]:
    key = {"group": w.group, "topic": w.topic, "client_id": w.client_id}
    return [(deleted(Table.CURRENT_ASSIGNMENT), {**key, "event_time_ms": w.event_time_ms})]


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
            },
        )
    ]


def _episode_retracted(r: EpisodeRetracted) -> list[Row]:
    return [(deleted(Table.ANOMALIES_CURRENT), {"episode_id": r.episode_id, "event_time_ms": r.event_time_ms})]


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
            },
        )
    ]


HOLDERS = Table.QUEUE_HOLDERS_CURRENT


def _holders(h: QueueHolders) -> list[Row]:
    o = h.observation
    return [
        (
            HOLDERS,
            {
                "group": h.group,
                "topic": o.topic,
                "broker": q.queue.broker_name,
                "queue_id": q.queue.queue_id,
                "generation": h.generation,
                "expected_owners": list(q.expected),
                "holders": list(q.holders),
                "state": q.state,
                "since_ms": q.since_ms,
                "evidence_from_ms": o.evidence_from_ms,
                "not_counted": list(o.not_counted),
                "uncounted_holders": list(q.uncounted_holders),
                "event_time_ms": h.event_time_ms,
            },
        )
        for q in o.queues
    ]


def _holders_gone(g: QueueHoldersGone) -> list[Row]:
    key = {"group": g.group, "topic": g.topic, "broker": g.broker, "queue_id": g.queue_id}
    return [(deleted(HOLDERS), {**key, "event_time_ms": g.event_time_ms})]


def _gone(g: GroupGone) -> list[Row]:
    return [(deleted(GROUP_STATUS), {"group": g.group, "event_time_ms": g.event_time_ms})]


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
    """The sample's history row: the queue's ``QUEUE_PROGRESS`` row too (``bus.DERIVED_KINDS``)."""
    return [(PROGRESS_HISTORY, {**_progress_columns(p), "state_changed": p.changed})]


def _queue_progress_gone(g: QueueProgressGone) -> list[Row]:
    key = {"group": g.group, "topic": g.topic, "broker": g.broker, "queue_id": g.queue_id}
    return [(deleted(QUEUE_PROGRESS), {**key, "event_time_ms": g.event_time_ms})]


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
            "queues_by_state": [{"state": str(k), "queues": n} for k, n in sorted(t.queues_by_state.items())],
        }
        for name, t in sorted(p.topics.items())
    ]
    row = {"group": p.group, "event_time_ms": p.event_time_ms, "topics": topics, "offline_backlog": p.offline_backlog}
    return [(PROGRESS_METRICS, row)]


def _late(late: LateEvent) -> list[Row]:
    row = {
        "reason": late.reason,
        "event_type": late.event_type,
        "event_time_ms": late.event_time_ms,
        "count": late.count,
        "group": late.group,
        "broker": late.broker,
        "topic": late.topic,
    }
    return [(LATE_EVENTS, row)]


def dead_letter(
    source: str,
    kafka_topic: str,
    kafka_partition: int,
    kafka_offset: int,
    kafka_timestamp: Any,
    raw_value: str | None,
    reason: str,
    detail: str | None,
    cluster: str | None = None,
) -> dict[str, Any]:
    """A ``dead_letters`` row: a rejected input record, where it came from and why (its cluster when known)."""
    return {
        "cluster": cluster,
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
    kafka_timestamp: Any,
    raw_value: str | None,
    cluster: str | None = None,
) -> Row:
    """The dead letter of an event ``cluster``'s engine refused, at the input coordinates the caller kept for it."""
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
            cluster,
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
    QueueHolders: _holders,
    QueueHoldersGone: _holders_gone,
    GroupGone: _gone,
    LateEvent: _late,
    QueueProgress: _queue_progress,
    QueueProgressGone: _queue_progress_gone,
    ProgressSummary: _progress_summary,
    RebalanceCost: _rebalance_cost,
}


def rows_of(outcome: Outcome, cluster: str = DEFAULT_CLUSTER) -> list[Row]:
    """The ``(table, row)`` pairs one outcome of ``cluster``'s engine is kept as (an ``IgnoredEvent``: see
    ``ignored_letter``); every row names the cluster."""
    rows = _MAPPERS[type(outcome)](outcome)
    for _, row in rows:
        row["cluster"] = cluster
    return rows


def table_rows(outcomes: Iterable[Outcome], cluster: str = DEFAULT_CLUSTER) -> list[Row]:
    """The ``(table, row)`` pairs of the outcomes of ``cluster``'s engine, in their order (an outcome's rows in the
    order above)."""
    return [row for outcome in outcomes for row in rows_of(outcome, cluster)]
