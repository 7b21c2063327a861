"""Prometheus metrics served by the job's driver: one catalogue, a collector per family over the latest values.

The catalogue (``connectors.metric_catalogue``) is the single description of every metric: name, type, labels,
unit and help, one typed handle each. The collector, ``docs/metrics.md`` (``python -m connectors.metrics``) and
the dashboard tests all read it, and ``MetricsState`` takes handles only. Domain values are not pushed into
long-lived metric objects: the sinks hand the driver small per-batch results, ``MetricsState`` keeps the latest
value per group/topic/broker, and a ``FamilyCollector`` per family renders it at scrape time -- so a group or broker
that is gone is simply absent from the next scrape. Counters are kept as monotonically increasing totals in the state.

Labels are bounded: ``cluster``, ``consumer_group``, ``topic``, ``broker``, ``state``, ``anomaly``, ``reason``,
``query`` -- never client IDs or addresses. Every series naming a group, broker or topic names its RocketMQ
cluster first (names are unique within a cluster only). Each labelled metric family admits at most
``label_value_cap`` distinct (cluster, consumer group) pairs (or (cluster, broker) pairs); values beyond the cap
are not exported and are counted in ``rmqmon_label_values_dropped_total{metric}``. A group that the engine
reports removed, and a broker no producer item mentions any more, are forgotten (``forget``, ``retain``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from connectors.metric_catalogue import (
    ANY,
    CATALOGUE,
    COUNTERS,
    GAUGES,
    HISTOGRAMS,
    Metrics,
    MetricSpec,
    known,
)
from connectors.metric_catalogue import BY_NAME as BY_NAME  # the catalogue by name, for the metrics' readers
from streaming.config.sections import MetricsConfig

_DEFAULTS = MetricsConfig()  # the [metrics] section's defaults
# Per metric: how many leading label values key a series (cluster and group or broker, else the first), and
# the label that names what the key is about (``consumer_group``, ``broker``, ``query``, ...).
KEY_WIDTH = {spec.name: 2 if spec.labels[:1] == ("cluster",) and len(spec.labels) > 1 else 1 for spec in CATALOGUE}
_KEY_LABEL = {spec.name: spec.labels[KEY_WIDTH[spec.name] - 1] for spec in CATALOGUE if spec.labels}


@dataclass
class MetricsState:
    """Latest values, replaced by the sinks after each batch; read by the collector at scrape time.

    Every labelled series is indexed by its key: its cluster and the group or broker it names (the first two
    label values of a metric whose first label is ``cluster``), else its first label value (a query). So the cap
    check, ``replace_series``, ``forget`` and ``retain`` cost what one group or broker has, not what the whole
    table has, and two clusters' groups of one name are two keys: a flood of names is refused at the cap in
    constant time per update.
    """

    label_value_cap: int = _DEFAULTS.label_value_cap
    lock: threading.Lock = field(default_factory=threading.Lock)
    # metric name -> label tuple -> value
    gauges: dict[str, dict[tuple[str, ...], float]] = field(default_factory=dict)
    counters: dict[str, dict[tuple[str, ...], float]] = field(default_factory=dict)
    histograms: dict[str, dict[tuple[str, ...], tuple[list[tuple[str, float]], float]]] = field(default_factory=dict)
    # metric name -> updates refused because the metric already had ``label_value_cap`` keys
    dropped: dict[str, float] = field(default_factory=dict)
    # metric name -> key (``series_key``) -> label tuples of that key's series
    _index: dict[str, dict[tuple[str, ...], set[tuple[str, ...]]]] = field(default_factory=dict, repr=False)

    def _admit(self, name: str, table: Mapping[tuple[str, ...], Any], labels: tuple[str, ...]) -> bool:
        if labels in table or not labels:
            return True
        index = self._index.setdefault(name, {})
        key = labels[: KEY_WIDTH[name]]
        series = index.get(key)
        if series is None:
            if len(index) >= self.label_value_cap:
                self.dropped[name] = self.dropped.get(name, 0.0) + 1
                return False
            series = index[key] = set()
        series.add(labels)
        return True

    def _drop_key(self, name: str, table: dict[tuple[str, ...], Any], key: tuple[str, ...]) -> None:
        for labels in self._index.get(name, {}).pop(key, ()):
            table.pop(labels, None)

    def _tables(self) -> Iterator[tuple[str, dict[tuple[str, ...], Any]]]:
        for family in (self.gauges, self.counters, self.histograms):
            yield from family.items()

    def set_gauge(self, metric: MetricSpec, labels: tuple[str, ...], value: float) -> None:
        name = known(metric, GAUGES)
        with self.lock:
            table = self.gauges.setdefault(name, {})
            if self._admit(name, table, labels):
                table[labels] = float(value)

    def inc(self, metric: MetricSpec, labels: tuple[str, ...], amount: float = 1.0) -> None:
        name = known(metric, COUNTERS)
        with self.lock:
            table = self.counters.setdefault(name, {})
            if self._admit(name, table, labels):
                table[labels] = table.get(labels, 0.0) + float(amount)

    def set_counter(self, metric: MetricSpec, labels: tuple[str, ...], total: float) -> None:
        """A counter kept as a total elsewhere (e.g. rows summed by the progress listener)."""
        name = known(metric, COUNTERS)
        with self.lock:
            table = self.counters.setdefault(name, {})
            if self._admit(name, table, labels):
                table[labels] = float(total)

    def advance_counter(self, metric: MetricSpec, labels: tuple[str, ...], total: float) -> None:
        """Raise a counter to ``total`` if it is below (a count the source keeps, e.g. a group's generation)."""
        name = known(metric, COUNTERS)
        with self.lock:
            table = self.counters.setdefault(name, {})
            if self._admit(name, table, labels):
                table[labels] = max(table.get(labels, 0.0), float(total))

    def set_histogram(
        self, metric: MetricSpec, labels: tuple[str, ...], buckets: list[tuple[str, float]], total: float
    ) -> None:
        name = known(metric, HISTOGRAMS)
        with self.lock:
            table = self.histograms.setdefault(name, {})
            if self._admit(name, table, labels):
                table[labels] = (buckets, total)

    def observe_histogram(
        self,
        metric: MetricSpec,
        labels: tuple[str, ...],
        upper_bounds: Sequence[float],
        cumulative: Sequence[float],
        count: float,
        total: float,
    ) -> None:
        """Add one batch's cumulative bucket counts (``<= upper``), its count and sum into a histogram."""
        name = known(metric, HISTOGRAMS)
        les = [_le(u) for u in upper_bounds] + ["+Inf"]
        counts = [float(c) for c in cumulative] + [float(count)]
        with self.lock:
            table = self.histograms.setdefault(name, {})
            if not self._admit(name, table, labels):
                return
            previous = table.get(labels)
            if previous is not None and [le for le, _ in previous[0]] == les:
                counts = [a + b for a, b in zip((c for _, c in previous[0]), counts, strict=True)]
                total += previous[1]
            table[labels] = (list(zip(les, counts, strict=True)), float(total))

    def forget(self, label_name: str, key: tuple[str, ...]) -> None:
        """Drop every series of the metrics keyed by ``label_name`` (their first labels ``cluster, label_name``)
        whose key is ``key``, e.g. ``("east", "orders")``: a group that is gone."""
        with self.lock:
            for name, table in self._tables():
                if _KEY_LABEL.get(name) == label_name:
                    self._drop_key(name, table, key)

    def retain(
        self, label_name: str, keys: Iterable[tuple[str, ...]], metrics: Iterable[MetricSpec] | None = None
    ) -> None:
        """Drop the series of every key (``(cluster, broker)``) of the metrics keyed by ``label_name`` not in
        ``keys``: brokers that are gone (from ``metrics`` only, when given: each source of broker metrics knows
        its own brokers)."""
        keep = set(keys)
        only = None if metrics is None else {known(m, ANY) for m in metrics}
        with self.lock:
            for name, table in self._tables():
                if _KEY_LABEL.get(name) != label_name or (only and name not in only):
                    continue
                for key in [k for k in self._index.get(name, {}) if k not in keep]:
                    self._drop_key(name, table, key)

    def replace_series(self, metric: MetricSpec, key: tuple[str, ...], series: Mapping[tuple[str, ...], float]) -> None:
        """Replace all series of ``metric`` whose key is ``key`` (e.g. one cluster's group's topics)."""
        name = known(metric, GAUGES)
        with self.lock:
            table = self.gauges.setdefault(name, {})
            index = self._index.get(name, {})
            stale = index.get(key, set()) - set(series)
            for labels in stale:
                del table[labels]
            if key in index and not index[key] - stale:
                del index[key]
            elif key in index:
                index[key] -= stale
            for labels, value in series.items():
                if self._admit(name, table, labels):
                    table[labels] = float(value)

    def drop_series(self, metric: MetricSpec, labels: tuple[str, ...]) -> None:
        """Drop one series of ``name`` (a value whose source is gone while the metric's others stay)."""
        name = known(metric, ANY)
        with self.lock:
            for family in (self.gauges, self.counters, self.histograms):
                family.get(name, {}).pop(labels, None)
            index = self._index.get(name, {})
            key = labels[: KEY_WIDTH[name]]
            series = index.get(key) if labels else None
            if series is not None:
                series.discard(labels)
                if not series:
                    del index[key]

    def series_count(self, metric: MetricSpec) -> int:
        name = known(metric, ANY)
        with self.lock:
            for family in (self.gauges, self.counters, self.histograms):
                if name in family:
                    return len(family[name])
        return 0


def _le(upper: float) -> str:
    return repr(float(upper))


def latency_buckets_seconds(latency_max_ms: Sequence[int]) -> tuple[float, ...]:
    """The send-latency histogram's upper bounds: a fault table's ``latencyMax`` thresholds, in seconds."""
    return tuple(ms / 1000 for ms in latency_max_ms)


class FamilyCollector(Collector):
    """Renders one catalogue family of ``MetricsState`` at scrape time. The registry holds one per family, so a
    scrape that asks for some families (``/metrics?name[]=rmqmon_group_members``) reads and renders only those: a
    restricted scrape costs what its families hold, not what the whole page holds (a watcher asking for a few
    families every 100 ms at 3,000 groups otherwise spent most of the driver's Python time building the page)."""

    def __init__(self, state: MetricsState, spec: MetricSpec) -> None:
        self.state, self.spec = state, spec

    def describe(self) -> Iterator[Metric]:
        """The family without samples: the registry learns the names this collector exports."""
        yield _family(self.spec)

    def collect(self) -> Iterator[Metric]:
        spec, state = self.spec, self.state
        with state.lock:
            if spec is Metrics.LABEL_VALUES_DROPPED_TOTAL:
                series: list[tuple[Any, Any]] = [((metric,), value) for metric, value in state.dropped.items()]
            elif spec.type == "counter":
                series = list(state.counters.get(spec.name, {}).items())
            elif spec.type == "histogram":
                series = list(state.histograms.get(spec.name, {}).items())
            else:
                series = list(state.gauges.get(spec.name, {}).items())
        family = _family(spec)
        for labels, value in sorted(series, key=lambda item: item[0]):
            if spec.type == "histogram":
                buckets, total = value
                family.add_metric(list(labels), list(buckets), total)
            else:
                family.add_metric(list(labels), value)
        yield family


def _family(spec: MetricSpec) -> Any:
    """An empty family of the spec's type (the collector adds the samples)."""
    kind = {"counter": CounterMetricFamily, "histogram": HistogramMetricFamily}.get(spec.type, GaugeMetricFamily)
    return kind(spec.name, spec.help, labels=list(spec.labels))


def new_registry(state: MetricsState) -> CollectorRegistry:
    """The job's registry: a ``FamilyCollector`` per catalogue family, in the catalogue's order."""
    registry = CollectorRegistry(auto_describe=False)
    for spec in CATALOGUE:
        registry.register(FamilyCollector(state, spec))
    return registry


def serve(registry: CollectorRegistry, host: str = _DEFAULTS.host, port: int = _DEFAULTS.port) -> Any:
    """Start the HTTP endpoint (``/metrics``) in a daemon thread; returns the server to shut it down."""
    from prometheus_client import start_http_server

    server, _thread = start_http_server(port, addr=host, registry=registry)
    return server


def render_markdown(specs: Iterable[MetricSpec] = CATALOGUE) -> str:
    lines = [
        "# Metrics",
        "",
        "Generated from `connectors/metrics.py` (`python -m connectors.metrics`).",
        "",
        "| name | type | labels | unit | help |",
        "|---|---|---|---|---|",
    ]
    for spec in specs:
        lines.append(f"| `{spec.name}` | {spec.type} | {', '.join(spec.labels)} | {spec.unit} | {spec.help} |")
    return "\n".join(lines + ["", *NOTES.splitlines()]) + "\n"


NOTES = """## The `cluster` label

Broker, group and topic names are unique within one RocketMQ cluster only, so every series that names a
consumer group, broker, topic or producer carries the RocketMQ cluster it is about as its first label,
`cluster`: the event's `cluster`, else the job's `[ingest] default_cluster` (`docs/events.md`, "Clusters"). Two
clusters' `orders` groups or `broker-a` brokers are two series each, and `label_value_cap` counts
(cluster, group) or (cluster, broker) pairs. The job's own series (`query`, `metric`, `up`, `build_info`) have
none. The alerts group by it (`by (cluster, consumer_group)`, `by (cluster, broker)`), and every dashboard has a
`cluster` variable its group and broker panels filter by. The send path's reduction does not read a send's
cluster yet (`docs/design/clusters.md`): the producer-side `rmqmon_broker_*` series are the default
cluster's.

## When the series change

* **Before the tables.** A batch's series are set as soon as the stateful stage has produced the batch's
  results, before the batch's Delta writes: an alert does not wait for the current tables' writes. The
  consumer query sets the group series and the polled-view `rmqmon_broker_*` series, send-ingest (its fault
  replay) the producer-side `rmqmon_broker_*` series and `rmqmon_producers_all_brokers_unavailable`; the
  per-broker values are computed on the driver from the current table as committed plus the batch's rows, as
  its write will leave it. A metric may therefore briefly lead its tables (`group_status_current`,
  `current_assignment`, `anomalies_current`, `broker_views_current`, `producer_broker_status_current`,
  `broker_status_current` and the history tables) by the batch's writes, a few seconds; should a write fail,
  the query stops and the batch is replayed, to the same values. The tables stay exactly-once: every write
  still commits once per batch id. Counters (isolation episodes, late sends) are counted before the writes
  too, once per batch (see "A failed query").
* **A gauge is the state at a batch's end.** The producer-side gauges hold each pair's state at the latest send
  time of the send-ingest batch that set them. An isolation that opens and closes within the sends one batch
  covers is never 1 in `rmqmon_broker_isolated`: a 5.x producer isolates a broker for 10 s after one 5 s send,
  and on 2 busy cores at a 2 s trigger a batch can cover 15-20 s of sends (`bench_detection_latency`). Its
  window is in `fault_windows` all the same, and `rmqmon_broker_isolation_episodes_total` counts it: alert on
  `increase()` of the counter to see short isolations too.
* **A failed query.** The job restarts it from its checkpoint (`[supervision]`), and it replays the batch that
  failed. Counters count each batch once per process (`streaming/job/runtime/metered.py`): a replayed batch sets the
  gauges again and adds nothing to the counters or the send-latency histogram.
* **After a restart.** Before its first batch the job sets every group's and broker's series from the current
  tables, to the value it had before the stop (`streaming/job/delta/outputs.py`, `restore_metrics`): the
  `rmqmon_group_*` series from `group_status_current` (per group, the record its last analysis set them from),
  the producer-side `rmqmon_broker_*` series and `rmqmon_producers_all_brokers_unavailable` from
  `producer_broker_status_current` at the event time of the last `broker_status_current` computation, and the
  polled-view series from `broker_views_current`. The tables hold what the batches committed and a metric may
  lead them by a batch (above): a batch whose series were set but whose writes had not committed at the stop is
  replayed after the restart, and sets them again. `rmqmon_group_rebalances_total` is the group's generation
  again; the other counters (queue moves, isolation episodes, dead letters, late events, input rows) and the
  send-latency histogram count from the process's start, as any Prometheus counter after a restart (`rate` and
  `increase` take the reset). Why from the tables: `docs/design/metrics-restore.md`."""


if __name__ == "__main__":
    print(render_markdown(), end="")
