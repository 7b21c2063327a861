"""The metric catalogue: one typed handle per metric (``Metrics.GROUP_MEMBERS``) with its type, labels, unit and help.

Every update names a handle, never a string: ``MetricsState`` refuses anything that is not the catalogue's handle of
the right type, and ``tests/unit/test_catalogue_literals.py`` fails when a metric's name is written as a string
anywhere else in the product. The collector, ``docs/metrics.md`` and the dashboards read it. No dependencies, so
the Spark workers that import the sinks never load the Prometheus client.
"""

from __future__ import annotations

from dataclasses import dataclass

PREFIX = "rmqmon_"


@dataclass(frozen=True)
class MetricSpec:
    name: str
    type: str  # gauge | counter | histogram | info
    labels: tuple[str, ...]
    unit: str
    help: str


def _m(name: str, type_: str, labels: tuple[str, ...], unit: str, help_: str) -> MetricSpec:
    return MetricSpec(PREFIX + name, type_, labels, unit, help_)


C = "cluster"  # first label of every series naming a group, broker, topic or producer
G = (C, "consumer_group")
GT = (*G, "topic")
B = (C, "broker")


class Metrics:
    """The catalogue: one typed handle per metric (``Metrics.GROUP_MEMBERS``), in the order of the docs."""

    # consumer groups
    GROUP_MEMBERS = _m("group_members", "gauge", G, "", "Distinct client IDs in the group's merged broker view.")
    GROUP_CHANNELS = _m(
        "group_channels",
        "gauge",
        G,
        "",
        "Entries of cidAll: the group's channels (connections) on the broker its clients read the member list "
        "from, one per channel, so a client ID on two channels counts twice; members connected to two brokers "
        "count once.",
    )
    GROUP_GENERATION = _m("group_generation", "gauge", G, "", "Current generation number of the group.")
    GROUP_DUPLICATE_CLIENT_IDS = _m(
        "group_duplicate_client_ids",
        "gauge",
        G,
        "",
        "Client IDs held by more than one channel (the same ID on several connections).",
    )
    GROUP_VIEWS_DIVERGING = _m("group_views_diverging", "gauge", G, "", "1 when brokers disagree about the group.")
    GROUP_QUEUES = _m(
        "group_queues",
        "gauge",
        (*GT, "state"),
        "",
        "Queues of a subscribed topic by owner state: assigned (1 owner), orphaned (0), double_owned (2+).",
    )
    GROUP_IDLE_MEMBERS = _m(
        "group_idle_members", "gauge", GT, "", "Subscribing members that get no queue of the topic."
    )
    GROUP_NON_SUBSCRIBING_MEMBERS = _m(
        "group_non_subscribing_members", "gauge", GT, "", "Members in cidAll that do not subscribe the topic."
    )
    GROUP_SKEW_QUEUES = _m("group_skew_queues", "gauge", GT, "", "Max minus min queues per subscribing member.")
    GROUP_REBALANCES_TOTAL = _m(
        "group_rebalances_total", "counter", G, "", "Rebalances (new generations) of the group."
    )
    GROUP_MOVED_QUEUES_TOTAL = _m(
        "group_moved_queues_total", "counter", GT, "", "Queues whose expected owner changed between generations."
    )
    GROUP_LAST_REBALANCE_TIMESTAMP_SECONDS = _m(
        "group_last_rebalance_timestamp_seconds",
        "gauge",
        G,
        "seconds",
        "Event time of the group's last rebalance.",
    )
    GROUP_OPEN_ANOMALIES = _m("group_open_anomalies", "gauge", (*G, "anomaly"), "", "Open anomaly episodes by kind.")
    # consumer groups' consume progress (consume_progress events), per (group, topic), never per queue or client
    GROUP_PROGRESS_LAG = _m(
        "group_progress_lag",
        "gauge",
        GT,
        "",
        "Messages waiting in the topic's tracked queues of the group: broker offset minus consumer offset at each "
        "queue's latest answered sample, summed (queues whose master never answered count nothing, never 0 lag).",
    )
    GROUP_PROGRESS_MAX_TIME_LAG_SECONDS = _m(
        "group_progress_max_time_lag_seconds",
        "gauge",
        GT,
        "seconds",
        "The largest time-lag estimate among the topic's tracked queues: how long ago the first unconsumed message "
        "was stored, interpolated over the queue's samples (a lower bound when older than them).",
    )
    GROUP_PROGRESS_QUEUES = _m(
        "group_progress_queues",
        "gauge",
        (*GT, "state"),
        "",
        "Tracked queues of the topic by consume-progress state (OK, IDLE, ORPHAN_CONFIRMED, STUCK_HOLDER, ...; "
        "docs/design/consume-progress.md); every state is exported, 0 included.",
    )
    # the last generation change that moved queues of the topic (rebalance_cost rows), per (group, topic)
    GROUP_LAST_REBALANCE_COST_TIMESTAMP_SECONDS = _m(
        "group_last_rebalance_cost_timestamp_seconds",
        "gauge",
        GT,
        "seconds",
        "Event time (t0) of the last generation change that moved queues of the topic and whose cost is final; the "
        "two rmqmon_group_last_rebalance_* series below describe that change.",
    )
    GROUP_LAST_REBALANCE_HANDOFF_SECONDS = _m(
        "group_last_rebalance_handoff_seconds",
        "gauge",
        GT,
        "seconds",
        "The longest hand-off gap among that change's moved queues: from the old owner's last progress to the new "
        "owner's first advance of the offset (no series while none of them was handed off within its bound).",
    )
    GROUP_LAST_REBALANCE_REDELIVERED_MESSAGES = _m(
        "group_last_rebalance_redelivered_messages",
        "gauge",
        GT,
        "",
        "Messages that change delivered again, at most, summed over its moved queues: what the old owners had "
        "received (pull offset, cached messages) beyond the offset the new owners started from.",
    )
    # brokers (producer fault tolerance)
    BROKER_PRODUCERS_AVOIDING = _m(
        "broker_producers_avoiding",
        "gauge",
        B,
        "",
        "Producers whose fault item makes the broker unavailable now.",
    )
    BROKER_PRODUCERS_AVOIDING_RATIO = _m(
        "broker_producers_avoiding_ratio",
        "gauge",
        B,
        "ratio",
        "Avoiding producers / producers that sent to it.",
    )
    BROKER_PRODUCERS_SEEN = _m(
        "broker_producers_seen",
        "gauge",
        B,
        "",
        "Producers with a fault item for the broker: those that sent to it and were not evicted (state_ttl).",
    )
    BROKER_ISOLATED = _m("broker_isolated", "gauge", B, "", "1 when at least one producer currently avoids the broker.")
    BROKER_AVOIDED_UNTIL_TIMESTAMP_SECONDS = _m(
        "broker_avoided_until_timestamp_seconds", "gauge", B, "seconds", "End of the latest fault window."
    )
    BROKER_ISOLATION_EPISODES_TOTAL = _m(
        "broker_isolation_episodes_total", "counter", B, "", "Fault windows opened against the broker."
    )
    BROKER_SEND_LATENCY_SECONDS = _m(
        "broker_send_latency_seconds",
        "histogram",
        B,
        "seconds",
        "Send latency; buckets are the fault table's latencyMax thresholds.",
    )
    PRODUCERS_ALL_BROKERS_UNAVAILABLE = _m(
        "producers_all_brokers_unavailable",
        "gauge",
        (C,),
        "",
        "Producers of the cluster for which every known broker is unavailable.",
    )
    # brokers (polled consumer views)
    BROKER_POLLED_GROUP_VIEWS = _m(
        "broker_polled_group_views",
        "gauge",
        B,
        "",
        "Group views of the broker fed by a collector's polls (consumer_connections).",
    )
    BROKER_STALE_GROUP_VIEWS = _m(
        "broker_stale_group_views",
        "gauge",
        B,
        "",
        "Polled group views of the broker without a poll within their stale_after_ms: kept as last seen.",
    )
    BROKER_LAST_POLL_TIMESTAMP_SECONDS = _m(
        "broker_last_poll_timestamp_seconds",
        "gauge",
        B,
        "seconds",
        "Event time of the broker's latest poll of any group.",
    )
    # the job itself
    INPUT_ROWS_TOTAL = _m(
        "input_rows_total", "counter", ("query",), "", "Rows read by each streaming query (completed micro-batches)."
    )
    PROCESSED_ROWS_PER_SECOND = _m(
        "processed_rows_per_second",
        "gauge",
        ("query",),
        "",
        "Rows per second the last micro-batch processed (Spark's processedRowsPerSecond): the query's capacity.",
    )
    BATCH_DURATION_SECONDS = _m(
        "batch_duration_seconds", "gauge", ("query",), "seconds", "Duration of the last micro-batch."
    )
    BATCHES_TOTAL = _m("batches_total", "counter", ("query",), "", "Micro-batches each streaming query completed.")
    BATCH_PHASE_SECONDS_TOTAL = _m(
        "batch_phase_seconds_total",
        "counter",
        ("query", "phase"),
        "seconds",
        "Time the query's micro-batches spent in each phase Spark reports (durationMs): latestOffset and getBatch "
        "(reading the sources' offsets), queryPlanning, addBatch (the stateful stage and every Delta write and "
        "metric of the batch), walCommit and commitOffsets (the checkpoint); triggerExecution is the whole batch. "
        "rate() over batches_total's is a phase's mean per batch, whatever the scrape interval.",
    )
    LAST_BATCH_TIMESTAMP_SECONDS = _m(
        "last_batch_timestamp_seconds", "gauge", ("query",), "seconds", "Wall time the last micro-batch finished."
    )
    LAST_TRIGGER_TIMESTAMP_SECONDS = _m(
        "last_trigger_timestamp_seconds",
        "gauge",
        ("query",),
        "seconds",
        "Wall time the query last looked at its sources: a micro-batch finished, or a trigger found nothing new "
        "(Spark's idle event). Quiet topics leave it moving; a stuck job does not.",
    )
    WATERMARK_TIMESTAMP_SECONDS = _m(
        "watermark_timestamp_seconds", "gauge", ("query",), "seconds", "Current event-time watermark."
    )
    STATE_ROWS = _m(
        "state_rows",
        "gauge",
        ("query",),
        "",
        "Keys in the query's state store: shards of groups for the consumer query, whose state is keyed by shard, "
        "not by group (see rmqmon_group_members); 0 for send-ingest, whose fault replay keeps its state in the "
        "checkpoint's fault-state files (see rmqmon_broker_producers_seen).",
    )
    STATE_MEMORY_BYTES = _m(
        "state_memory_bytes", "gauge", ("query",), "bytes", "Memory used by the query's state store."
    )
    KAFKA_OFFSETS_BEHIND = _m(
        "kafka_offsets_behind", "gauge", ("query",), "", "Offsets behind the latest, summed over partitions."
    )
    DEAD_LETTERS_TOTAL = _m(
        "dead_letters_total",
        "counter",
        ("query", "reason"),
        "",
        "Rejected input records by query and dead-letter reason (docs/events.md).",
    )
    LATE_EVENTS_TOTAL = _m(
        "late_events_total",
        "counter",
        ("query", "reason"),
        "",
        "Late input by reason: watermark (events at or before the watermark, not applied), late_send (sends "
        "older than their fault item's clock, ignored), stale_route (topic routes older than the route applied, "
        "ignored), stale_poll (polls older than their view's last poll, ignored).",
    )
    LABEL_VALUES_DROPPED_TOTAL = _m(
        "label_values_dropped_total",
        "counter",
        ("metric",),
        "",
        "Updates not exported because the metric already has label_value_cap distinct (cluster, group) pairs "
        "(or (cluster, broker) pairs).",
    )
    QUERY_RESTARTS_TOTAL = _m(
        "query_restarts_total",
        "counter",
        ("query",),
        "",
        "Restarts of a failed query from its checkpoint ([supervision]; the job's log says why it failed).",
    )
    UP = _m("up", "gauge", (), "", "1 while the job's queries are running.")
    BUILD_INFO = _m("build_info", "gauge", ("version", "spark_version"), "", "Build metadata (value 1).")


CATALOGUE: tuple[MetricSpec, ...] = tuple(v for v in vars(Metrics).values() if isinstance(v, MetricSpec))
BY_NAME = {spec.name: spec for spec in CATALOGUE}


class UnknownMetric(KeyError):
    """A metric that is not the catalogue's handle, or one updated as another type than its catalogue's."""


def handles(*types: str) -> frozenset[int]:
    """The identities of the catalogue's handles of ``types`` (what ``known`` checks a handle against)."""
    return frozenset(id(m) for m in CATALOGUE if m.type in types)


GAUGES = handles("gauge", "info")
COUNTERS = handles("counter")
HISTOGRAMS = handles("histogram")
ANY = handles("gauge", "info", "counter", "histogram")


def known(metric: MetricSpec, allowed: frozenset[int]) -> str:
    """The name of ``metric`` if it is one of the catalogue's handles ``allowed`` (``GAUGES``, ...); else
    ``UnknownMetric``. The handle's identity is checked: a copy or a name is refused, in one set lookup."""
    if id(metric) in allowed:
        return metric.name
    name = getattr(metric, "name", None)
    if not isinstance(name, str) or BY_NAME.get(name) is not metric:
        raise UnknownMetric(f"{metric!r} is not in the metric catalogue (connectors.metric_catalogue.Metrics)")
    raise UnknownMetric(f"{metric.name} is a {metric.type}, not updated this way")
