"""Typed rows back as the values the driver's metrics are set from, and those metrics set.

The consumer sink reads the batch's few rows the metrics need (``METRIC_KINDS``) as Spark rows of their structs,
and the restore reads the current tables: both become the engine's values again (``metric_values``,
``group_summary``, ``progress_summaries``), the exact inverse of ``table_rows``, tested as a round trip.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from connectors.metric_catalogue import Metrics
from streaming.domain.consumers.outcomes import (
    GroupGone,
    GroupSummary,
    LateEvent,
    ProgressSummary,
    TopicProgress,
    TopicSummary,
)
from streaming.domain.progress.verdict import QueueState
from streaming.domain.vocabulary import DEFAULT_CLUSTER, AnomalyKind, LateReason
from streaming.job.delta.bus import LATE_EVENTS, MOVED_QUEUES, PROGRESS_METRICS, deleted
from streaming.job.delta.table_rows import DEAD_LETTERS, GROUP_STATUS, REBALANCE_COST

if TYPE_CHECKING:
    from connectors.metrics import MetricsState

GROUP_GONE = deleted(GROUP_STATUS)
# The kinds the metrics are computed from (one per analysed or gone group, dead letter, late event, progress
# summary or final cost).
METRIC_KINDS = frozenset({GROUP_STATUS, GROUP_GONE, DEAD_LETTERS, LATE_EVENTS, PROGRESS_METRICS, REBALANCE_COST})


def progress_summary(row: Mapping[str, Any]) -> ProgressSummary:
    """A ``PROGRESS_METRICS`` row as the value it came from."""
    return ProgressSummary(
        row["group"],
        row["event_time_ms"],
        {
            t["topic"]: TopicProgress(
                t["lag"], t["max_time_lag_s"], {QueueState(q["state"]): q["queues"] for q in t["queues_by_state"]}
            )
            for t in row["topics"]
        },
        row["offline_backlog"],
    )


def progress_summaries(rows: Iterable[Mapping[str, Any]], now_ms: int) -> list[Clustered]:
    """Each group's ``ProgressSummary`` from its ``queue_progress_current`` rows (what a restarted job exports
    before the group's next sample): the same values the tracker's summary gave at the rows' samples. A group
    without members with a queue whose lag is above 0 has its offline backlog episode open (the tracker opens it
    at such a sample and keeps no such queue once it closes it)."""
    groups: dict[tuple[str, str], dict[str, tuple[int, float | None, dict[QueueState, int]]]] = {}
    offline: set[tuple[str, str]] = set()
    for r in rows:
        at = (r["cluster"], r["group"])
        if not r["group_online"] and (r["lag"] or 0) > 0:
            offline.add(at)
        topics = groups.setdefault(at, {})
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
        (c, ProgressSummary(g, now_ms, {t: TopicProgress(*v) for t, v in sorted(topics.items())}, (c, g) in offline))
        for (c, g), topics in sorted(groups.items())
    ]


def group_summary(row: Mapping[str, Any]) -> GroupSummary:
    """A ``group_status_current`` row (as ``table_rows`` maps it, or as the table holds it) as the value it came
    from; a row read back from the table has no queue moves (0)."""
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
# A value with the RocketMQ cluster it is about (a ``ClusterOutcome`` of the engine is one): every series naming a
# group, broker or topic carries it as its ``cluster`` label.
Clustered = tuple[str, MetricValue]


def metric_values(rows: Iterable[tuple[str, Mapping[str, Any]]]) -> list[Clustered]:
    """The values the metrics are set from, each with its row's cluster, from the typed rows ``(kind, row)`` of
    ``METRIC_KINDS`` (others are skipped), in order (a dead letter without a cluster: the default's)."""
    values: list[Clustered] = []
    for table, row in rows:
        cluster = row.get("cluster") or DEFAULT_CLUSTER
        if table == PROGRESS_METRICS:
            values.append((cluster, progress_summary(row)))
        elif table == REBALANCE_COST:
            values.append((cluster, final_cost(row)))
        elif table == GROUP_STATUS:
            values.append((cluster, group_summary(row)))
        elif table == GROUP_GONE:
            values.append((cluster, GroupGone(row["group"], row["event_time_ms"])))
        elif table == LATE_EVENTS:
            values.append(
                (
                    cluster,
                    LateEvent(
                        LateReason(row["reason"]),
                        row["event_type"],
                        row["event_time_ms"],
                        row["count"],
                        row["group"],
                        row["broker"],
                        row["topic"],
                    ),
                )
            )
        elif table == DEAD_LETTERS:
            values.append((cluster, DeadLettered(row["reason"])))
    return values


def apply_broker_metrics(metrics: MetricsState, rows: list[dict[str, Any]], all_down: Mapping[str, int]) -> None:
    """Per-broker gauges from ``broker_status_current`` rows (every broker of a cluster a producer item mentions);
    ``all_down`` per cluster."""
    # brokers no producer item mentions are gone (from the producer metrics; polled views keep their own)
    metrics.retain("broker", [(r["cluster"], r["broker"]) for r in rows], metrics=PRODUCER_BROKER_METRICS)
    for r in rows:
        labels = (r["cluster"], r["broker"])
        metrics.inc(Metrics.BROKER_ISOLATION_EPISODES_TOTAL, labels, 0)  # an explicit zero for known brokers
        metrics.set_gauge(Metrics.BROKER_PRODUCERS_AVOIDING, labels, r["producers_avoiding"])
        metrics.set_gauge(Metrics.BROKER_PRODUCERS_AVOIDING_RATIO, labels, r["avoiding_ratio"])
        metrics.set_gauge(Metrics.BROKER_PRODUCERS_SEEN, labels, r["producers_seen"])
        metrics.set_gauge(Metrics.BROKER_ISOLATED, labels, 1.0 if r["isolated"] else 0.0)
        if r["avoided_until_ms"] is not None:
            metrics.set_gauge(Metrics.BROKER_AVOIDED_UNTIL_TIMESTAMP_SECONDS, labels, r["avoided_until_ms"] / 1000)
    metrics.retain("cluster", [(c,) for c in all_down], metrics=(Metrics.PRODUCERS_ALL_BROKERS_UNAVAILABLE,))
    for cluster, down in all_down.items():
        metrics.set_gauge(Metrics.PRODUCERS_ALL_BROKERS_UNAVAILABLE, (cluster,), float(down))


# The per-broker metrics computed from producers' fault items (``apply_broker_metrics``).
PRODUCER_BROKER_METRICS = (
    Metrics.BROKER_ISOLATION_EPISODES_TOTAL,
    Metrics.BROKER_PRODUCERS_AVOIDING,
    Metrics.BROKER_PRODUCERS_AVOIDING_RATIO,
    Metrics.BROKER_PRODUCERS_SEEN,
    Metrics.BROKER_ISOLATED,
    Metrics.BROKER_AVOIDED_UNTIL_TIMESTAMP_SECONDS,
    Metrics.BROKER_SEND_LATENCY_SECONDS,
)
VIEW_METRICS = (
    Metrics.BROKER_POLLED_GROUP_VIEWS,
    Metrics.BROKER_STALE_GROUP_VIEWS,
    Metrics.BROKER_LAST_POLL_TIMESTAMP_SECONDS,
)


def apply_view_metrics(metrics: MetricsState, rows: list[dict[str, Any]]) -> None:
    """Per broker of ``broker_views_current`` (``view_summary``): the group views polls feed, how many are
    stale, and the latest poll's event time."""
    metrics.retain("broker", [(r["cluster"], r["broker"]) for r in rows], metrics=VIEW_METRICS)
    for r in rows:
        labels = (r["cluster"], r["broker"])
        metrics.set_gauge(Metrics.BROKER_POLLED_GROUP_VIEWS, labels, r["views"])
        metrics.set_gauge(Metrics.BROKER_STALE_GROUP_VIEWS, labels, r["stale"])
        if r["last_poll_ms"] is not None:
            metrics.set_gauge(Metrics.BROKER_LAST_POLL_TIMESTAMP_SECONDS, labels, r["last_poll_ms"] / 1000)


def apply_rebalance_cost_metrics(metrics: MetricsState, cluster: str, cost: FinalCost) -> None:
    """A final cost row: a newer change than the (group, topic)'s last replaces its series, another row of the
    same change adds to them (longest hand-off, summed re-delivered), an older one is ignored."""
    labels = (cluster, cost.group, cost.topic)
    t0_s = cost.t0_ms / 1000
    last = metrics.gauges.get(Metrics.GROUP_LAST_REBALANCE_COST_TIMESTAMP_SECONDS.name, {}).get(labels)
    if last is not None and t0_s < last:
        return
    same = last == t0_s
    gap = None if cost.handoff_gap_ms is None else cost.handoff_gap_ms / 1000
    handoff = metrics.gauges.get(Metrics.GROUP_LAST_REBALANCE_HANDOFF_SECONDS.name, {}).get(labels) if same else None
    redelivered = (
        metrics.gauges.get(Metrics.GROUP_LAST_REBALANCE_REDELIVERED_MESSAGES.name, {}).get(labels, 0.0) if same else 0.0
    )
    metrics.set_gauge(Metrics.GROUP_LAST_REBALANCE_COST_TIMESTAMP_SECONDS, labels, t0_s)
    longest = gap if handoff is None else handoff if gap is None else max(handoff, gap)
    if longest is None:
        metrics.drop_series(Metrics.GROUP_LAST_REBALANCE_HANDOFF_SECONDS, labels)
    else:
        metrics.set_gauge(Metrics.GROUP_LAST_REBALANCE_HANDOFF_SECONDS, labels, longest)
    metrics.set_gauge(
        Metrics.GROUP_LAST_REBALANCE_REDELIVERED_MESSAGES, labels, redelivered + (cost.redelivered_max or 0)
    )


def apply_progress_metrics(metrics: MetricsState, cluster: str, value: ProgressSummary) -> None:
    """A group's progress per topic: total lag, the largest time-lag estimate, tracked queues per state (every
    state, 0 included, so a state that empties reads 0); its open OFFLINE_GROUP_BACKLOG episode in
    ``rmqmon_group_open_anomalies`` (a group without members has no other series there). No topic: the group's
    progress series go, and that one."""
    key = (cluster, value.group)
    lag, time_lag, queues = {}, {}, {}
    for topic, t in value.topics.items():
        lag[(*key, topic)] = float(t.lag)
        if t.max_time_lag_s is not None:
            time_lag[(*key, topic)] = t.max_time_lag_s
        for state in QueueState:
            queues[(*key, topic, str(state))] = float(t.queues_by_state.get(state, 0))
    metrics.replace_series(Metrics.GROUP_PROGRESS_LAG, key, lag)
    metrics.replace_series(Metrics.GROUP_PROGRESS_MAX_TIME_LAG_SECONDS, key, time_lag)
    metrics.replace_series(Metrics.GROUP_PROGRESS_QUEUES, key, queues)
    offline = (*key, str(AnomalyKind.OFFLINE_GROUP_BACKLOG))
    if value.offline_backlog or value.topics:
        metrics.set_gauge(Metrics.GROUP_OPEN_ANOMALIES, offline, 1.0 if value.offline_backlog else 0.0)
    else:  # nothing tracked: a group gone from everywhere keeps no series
        metrics.drop_series(Metrics.GROUP_OPEN_ANOMALIES, offline)


def apply_consumer_metrics(metrics: MetricsState, values: Iterable[Clustered]) -> None:
    """Per-group gauges from the engine's ``GroupSummary`` values, each with its cluster (a ``GroupGone`` forgets
    the cluster's group's series); dead letters and late events counted by reason."""
    for cluster, value in values:
        if isinstance(value, DeadLettered):
            metrics.inc(Metrics.DEAD_LETTERS_TOTAL, ("consumer", str(value.reason)))
            continue
        if isinstance(value, LateEvent):  # one late event, or a count of them
            metrics.inc(Metrics.LATE_EVENTS_TOTAL, ("consumer", str(value.reason)), value.count)
            continue
        if isinstance(value, ProgressSummary):
            apply_progress_metrics(metrics, cluster, value)
            continue
        if isinstance(value, FinalCost):
            apply_rebalance_cost_metrics(metrics, cluster, value)
            continue
        group = value.group
        g = (cluster, group)
        if isinstance(value, GroupGone):
            metrics.forget("consumer_group", g)
            continue
        metrics.set_gauge(Metrics.GROUP_MEMBERS, g, value.members)
        metrics.set_gauge(Metrics.GROUP_CHANNELS, g, value.channels)
        metrics.set_gauge(Metrics.GROUP_GENERATION, g, value.generation)
        metrics.set_gauge(Metrics.GROUP_DUPLICATE_CLIENT_IDS, g, value.duplicate_client_ids)
        metrics.set_gauge(Metrics.GROUP_VIEWS_DIVERGING, g, 1.0 if value.views_diverge else 0.0)
        if value.last_rebalance_ms is not None:
            metrics.set_gauge(Metrics.GROUP_LAST_REBALANCE_TIMESTAMP_SECONDS, g, value.last_rebalance_ms / 1000)
        metrics.advance_counter(Metrics.GROUP_REBALANCES_TOTAL, g, value.generation)  # one per generation
        queues, idle, non_subscribing, skew = {}, {}, {}, {}
        for topic, t in value.topics.items():
            queues[(*g, topic, "assigned")] = t.assigned
            queues[(*g, topic, "orphaned")] = t.orphaned
            queues[(*g, topic, "double_owned")] = t.double_owned
            idle[(*g, topic)] = t.idle
            non_subscribing[(*g, topic)] = t.non_subscribing
            skew[(*g, topic)] = t.skew
            metrics.inc(Metrics.GROUP_MOVED_QUEUES_TOTAL, (*g, topic), t.moved)  # 0 exports the series
        metrics.replace_series(Metrics.GROUP_QUEUES, g, queues)
        metrics.replace_series(Metrics.GROUP_IDLE_MEMBERS, g, idle)
        metrics.replace_series(Metrics.GROUP_NON_SUBSCRIBING_MEMBERS, g, non_subscribing)
        metrics.replace_series(Metrics.GROUP_SKEW_QUEUES, g, skew)
        metrics.replace_series(
            Metrics.GROUP_OPEN_ANOMALIES,
            g,
            {(*g, str(k)): float(value.open_anomalies.get(k, 0)) for k in AnomalyKind},
        )
