"""100,000 consumer group names through the sink's metrics path: series stay under the cap, memory stays bounded.

Driven through ``apply_consumer_metrics`` -- the function the consumer query's ``foreachBatch`` sink calls with
the engine's ``GroupSummary`` values -- and read back through the registry the metrics endpoint serves. The
same flood through Kafka and Spark is ``test_metrics_flood_job.py``; this one
isolates the metrics state so its memory can be measured exactly and at several sizes.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

from connectors.metrics import CATALOGUE, Metrics, MetricsState, new_registry
from streaming.config import load_config
from streaming.domain.consumers.outcomes import GroupGone, GroupSummary, ProgressSummary, TopicProgress, TopicSummary
from streaming.domain.progress.verdict import QueueState
from streaming.domain.vocabulary import AnomalyKind
from streaming.job.delta.metric_rows import FinalCost, apply_consumer_metrics

GROUPS = 100_000


def group_row(i: int, removed: bool = False) -> GroupSummary | GroupGone:
    group = f"flood-{i:06d}"
    if removed:
        return GroupGone(group, event_time_ms=1)
    topics = {
        t: TopicSummary(assigned=7, orphaned=1, double_owned=0, idle=0, non_subscribing=0, skew=1, moved=2)
        for t in ("orders", "payments")
    }
    return GroupSummary(
        group,
        event_time_ms=1,
        members=3,
        channels=6,
        generation=2,
        duplicate_client_ids=0,
        views_diverge=False,
        last_rebalance_ms=1_000,
        open_anomalies={AnomalyKind.ORPHANED_QUEUES: 1},
        topics=topics,
    )


def progress_row(i: int) -> ProgressSummary:
    """The group's consume progress: both topics with a backlog, some queues stuck."""
    queues = {QueueState.OK: 6, QueueState.STUCK_HOLDER: 2}
    topics = {t: TopicProgress(lag=40, max_time_lag_s=12.5, queues_by_state=queues) for t in ("orders", "payments")}
    return ProgressSummary(f"flood-{i:06d}", event_time_ms=1, topics=topics)


def feed(state: MetricsState, start: int, stop: int, chunk: int = 5_000) -> None:
    for first in range(start, stop, chunk):  # one call per "micro-batch", as the sink does
        groups = range(first, min(stop, first + chunk))
        costs = [FinalCost(f"flood-{i:06d}", t, 1_000, 4_000, 3) for i in groups for t in ("orders", "payments")]
        values = [*map(group_row, groups), *map(progress_row, groups), *costs]
        apply_consumer_metrics(state, [("east", v) for v in values])


def deep_size(obj: object, seen: set[int] | None = None) -> int:
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return 0
    seen.add(id(obj))
    size = sys.getsizeof(obj)
    if isinstance(obj, dict):
        size += sum(deep_size(k, seen) + deep_size(v, seen) for k, v in obj.items())
    elif isinstance(obj, list | tuple | set | frozenset):
        size += sum(deep_size(v, seen) for v in obj)
    return size


def state_size(state: MetricsState) -> int:
    return deep_size([state.gauges, state.counters, state.histograms, state.dropped, state._index])


def exported(state: MetricsState) -> Iterator[tuple[str, dict[str, str], float]]:
    """Every sample the metrics endpoint's registry serves (collected as the endpoint collects it; rendering and
    parsing the 680,000 lines of exposition text would take seven times as long and prove nothing more here: a
    real Prometheus scrapes that text in ``test_prometheus_e2e.py``)."""
    for family in new_registry(state).collect():
        for sample in family.samples:
            yield sample.name, sample.labels, sample.value


def test_a_flood_of_group_names_stays_under_the_cap_with_bounded_memory():
    cap = load_config(None, env={}).metrics.label_value_cap  # conf/monitor.toml's default
    assert cap < GROUPS
    state = MetricsState(label_value_cap=cap)

    feed(state, 0, 2 * cap)
    at_cap = state_size(state)
    feed(state, 2 * cap, GROUPS)
    flooded = state_size(state)
    # Beyond the cap, 80,000 more group names cost (almost) nothing: only the dropped counters grow, in value.
    assert flooded - at_cap < 0.01 * at_cap, (at_cap, flooded)

    groups_by_metric: dict[str, set[str]] = {}
    dropped: dict[str, float] = {}
    samples = list(exported(state))
    for name, labels, value in samples:
        if name == "rmqmon_label_values_dropped_total":
            dropped[labels["metric"]] = value
        elif "consumer_group" in labels:
            groups_by_metric.setdefault(name, set()).add(labels["consumer_group"])
    per_group = [s.name for s in CATALOGUE if s.labels[:2] == ("cluster", "consumer_group")]
    for name in per_group:  # the flood's rows set every per-group metric
        assert len(groups_by_metric.get(name, ())) == cap, (name, len(groups_by_metric.get(name, ())))
    # every group is updated exactly once, so every metric refused exactly the groups beyond the cap
    assert dropped["rmqmon_group_members"] == GROUPS - cap
    assert dropped["rmqmon_group_queues"] == (GROUPS - cap) * 2 * 3  # 2 topics x 3 owner states
    assert dropped["rmqmon_group_progress_queues"] == (GROUPS - cap) * 2 * len(QueueState)  # 2 topics x every state
    # about 35 membership, 2 x (2 + 13) progress and 2 x 3 rebalance-cost series per admitted group, nothing per
    # refused one
    assert len(samples) < 80 * cap


def test_gone_groups_disappear_and_free_their_place_under_the_cap():
    state = MetricsState(label_value_cap=10)
    apply_consumer_metrics(state, [("east", group_row(i)) for i in range(12)])
    names = {labels.get("consumer_group") for _, labels, _ in exported(state)}
    assert "flood-000003" in names and "flood-000011" not in names  # over the cap

    apply_consumer_metrics(state, [("east", group_row(3, removed=True)), ("east", group_row(11))])
    names = {labels.get("consumer_group") for _, labels, _ in exported(state)}
    assert "flood-000003" not in names  # gone: every series of the group disappeared
    assert "flood-000011" in names  # and its place went to a group that was refused before


def test_brokers_no_producer_mentions_disappear():
    state = MetricsState()
    for at in (("east", "broker-a"), ("east", "broker-b"), ("west", "broker-b")):
        state.set_gauge(Metrics.BROKER_ISOLATED, at, 1)
        state.observe_histogram(Metrics.BROKER_SEND_LATENCY_SECONDS, at, [0.05, 0.1], [1, 2], 3, 0.4)
    state.retain("broker", [("east", "broker-a"), ("west", "broker-b")])
    brokers = {(labels["cluster"], labels["broker"]) for _, labels, _ in exported(state) if "broker" in labels}
    assert brokers == {("east", "broker-a"), ("west", "broker-b")}  # east's broker-b is gone, west's stays
