"""``foreachBatch`` sinks: fan the stateful operators' ``(table, payload)`` rows out into Delta and metrics.

The batch DataFrame is persisted once (so the stateful operator is never recomputed), each table's rows are
parsed from JSON with the table's schema and written exactly once (see ``sinks``), and the small
per-group / per-broker summaries are applied to the driver's ``MetricsState``: the consumer's as soon as the
stateful stage has produced them, before the Delta writes, so an alert never waits for the MERGEs (a metric
may lead its table by the batch's writes; a failed write fails the query, which replays the batch). The
per-broker gauges are computed on the driver from the sink's copy of the current table's few columns they need
(``broker_gauges``), with the batch's rows applied. At start, ``restore_metrics`` sets every group's and
broker's series from the current tables the sinks keep.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from connectors.metric_catalogue import Metrics
from streaming.contract.tables import TABLES, Table, column_names
from streaming.domain.consumers.outcomes import GroupGone, GroupSummary, LateEvent, ProgressSummary
from streaming.domain.faults.outcomes import FaultOutcome, FaultWindowChanged, SendsLate
from streaming.domain.faults.windows import WindowStatus
from streaming.domain.progress.verdict import QueueState
from streaming.domain.vocabulary import AnomalyKind, EpisodeStatus
from streaming.job.delta.broker_gauges import (
    ITEM_COLUMNS,
    ITEM_KEY,
    VIEW_COLUMNS,
    VIEW_KEY,
    CurrentRows,
    broker_status,
    producers_all_down,
    view_summary,
)
from streaming.job.delta.fault_table_rows import FAULT_WINDOWS, LATE_SENDS, PAIR_STATUS, fault_value, pair_status_rows
from streaming.job.delta.sinks import DeltaTables, run_concurrently
from streaming.job.delta.table_rows import (
    CUT_TABLES,
    DEAD_LETTERS,
    DELETE,
    GROUP_STATUS,
    LATE_EVENTS,
    OP,
    PROGRESS_METRICS,
    QUEUE_PROGRESS,
    REBALANCE_COST,
    RETRACTED_CUTS,
    DeadLettered,
    FinalCost,
    final_cost,
    group_summary,
    metric_values,
    progress_summaries,
)
from streaming.job.delta.table_rows import Row as TableRow
from streaming.job.runtime.metered import MeteredBatches
from streaming.job.runtime.state_blob import encode

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row, SparkSession

    from connectors.metrics import MetricsState

HISTORY_OUTPUTS = (
    Table.MEMBERSHIP_CHANGES,
    Table.GROUP_SNAPSHOTS,
    Table.EXPECTED_ASSIGNMENTS,
    Table.ANOMALY_EPISODES,
    Table.DEAD_LETTERS,
    Table.FAULT_WINDOWS,
    Table.BROKER_VIEW_CHANGES,
    Table.CONSUME_PROGRESS,
    Table.REBALANCE_COST,
)
# The current tables the consumer sink MERGEs the batch's latest row per key into (``_op = 'delete'`` deletes).
MERGED_CURRENT_TABLES = (Table.BROKER_VIEWS_CURRENT, QUEUE_PROGRESS)


def _rows(batch: DataFrame, table: str, extra_ddl: str = "") -> DataFrame:
    from pyspark.sql import functions as F

    ddl = TABLES[table].schema_ddl + (", " + extra_ddl if extra_ddl else "")
    parsed = batch.where(F.col("table") == table).select(F.from_json("payload", ddl).alias("r")).select("r.*")
    if "event_time" in [c.split(" ")[0] for c in TABLES[table].schema_ddl.split(", ")]:
        parsed = parsed.withColumn("event_time", F.timestamp_millis("event_time_ms"))
    return parsed


def _latest_per_key(frame: DataFrame, key: tuple[str, ...]) -> DataFrame:
    """Each key's latest row by event time; of rows of the same time a delete wins (a queue's progress row and
    the end of its tracking at one sample: the end comes after)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    delete_first = F.when(F.col(OP) == DELETE, 0).otherwise(1)
    window = Window.partitionBy(*key).orderBy(F.col("event_time_ms").desc(), delete_first)
    return frame.withColumn("_rank", F.row_number().over(window)).where("_rank = 1").drop("_rank")


def _merge_latest_rows(tables: DeltaTables, batch: DataFrame, table: str, app_id: str, batch_id: int) -> None:
    """MERGE a current table's rows of the batch: the latest per key wins; ``_op = 'delete'`` deletes."""
    from pyspark.sql import functions as F

    latest = _latest_per_key(_rows(batch, table, "_op STRING"), TABLES[table].key)
    tables.merge_upsert(
        table,
        latest.withColumn("batch_id", F.lit(batch_id).cast("bigint")),
        app_id,
        batch_id,
        delete_condition="s._op = 'delete'",
    )


# The consumer rows the driver's metrics are computed from (one per analysed group, dead letter, late event or
# polled view).
_METRIC_TABLES = (GROUP_STATUS, DEAD_LETTERS, LATE_EVENTS, PROGRESS_METRICS, REBALANCE_COST, Table.BROKER_VIEWS_CURRENT)
# The current tables the consumer sink holds whole and writes whole (``HeldCurrentTables``), each with the
# batch rows it is built from.
# (anomalies_current also from its own rows: an amended cut's restored or retracted episodes, ``EpisodeRestored``.)
HELD_CURRENT_TABLES = {
    Table.CURRENT_ASSIGNMENT: (Table.CURRENT_ASSIGNMENT,),
    Table.ANOMALIES_CURRENT: (Table.ANOMALY_EPISODES, Table.ANOMALIES_CURRENT),
    GROUP_STATUS: (GROUP_STATUS,),
}
_HELD_SOURCES = tuple(sorted({t for sources in HELD_CURRENT_TABLES.values() for t in sources}))


def current_rows(tables: DeltaTables, table: str, key: tuple[str, ...], columns: tuple[str, ...]) -> CurrentRows:
    """``columns`` of a current table's committed rows, kept by ``key``."""
    return CurrentRows(key, columns, (r.asDict() for r in tables.read(table).select(*columns, *key).collect()))


def consumer_sink(
    tables: DeltaTables, app_id: str, metrics: MetricsState | None, metered: MeteredBatches | None = None
) -> Callable[[DataFrame, int], None]:
    # A batch replayed in this process (its writes failed and the query was restarted, with a new sink) must not
    # count its rebalances, dead letters and late events twice: ``metered`` is the job's, shared by its sinks.
    metered = metered or MeteredBatches()
    views: CurrentRows | None = None  # broker_views_current as the batches' MERGEs leave it
    held = HeldCurrentTables(tables)

    def write(batch: DataFrame, batch_id: int) -> None:
        nonlocal views
        batch = batch.persist()
        try:
            summary = _consumer_batch_summary(batch, metrics is not None)
            present = {r["table"]: r["n"] for r in summary}
            payloads = {r["table"]: r["payloads"] for r in summary if r["table"] in _HELD_SOURCES}
            if RETRACTED_CUTS in present:  # before the appends: a retracted cut's rows of earlier batches go
                _delete_retracted_cuts(tables, batch, batch_id)
            if metrics is not None and metered.first_time(f"{app_id}:consumer", batch_id):  # before the writes
                apply_consumer_metrics(metrics, metric_values((r["table"], p) for r in summary for p in r["payloads"]))
            if metrics is not None and Table.BROKER_VIEWS_CURRENT in present:
                if views is None:
                    views = current_rows(tables, Table.BROKER_VIEWS_CURRENT, VIEW_KEY, VIEW_COLUMNS)
                batch_views = (r["payloads"] for r in summary if r["table"] == Table.BROKER_VIEWS_CURRENT)
                views.apply(json.loads(p) for payloads in batch_views for p in payloads)
                apply_view_metrics(metrics, view_summary(views.rows()))
            writes = _consumer_writes(tables, batch, present, app_id, batch_id)
            writes += held.writes(batch.sparkSession, payloads, app_id, batch_id)
            run_concurrently(writes)
        finally:
            batch.unpersist()

    return write


class HeldCurrentTables:
    """The consumer's current tables (``HELD_CURRENT_TABLES``) held whole on the driver, read from Delta at the
    first batch that changes each, and written back whole, exactly once per batch (``overwrite_idempotent``).

    Why not a MERGE per batch: under the fleet's load the three MERGEs were a change batch's last 4-5 s, and an
    incident arriving meanwhile waited for them (``docs/design/detection-latency.md``). The tables are small (a
    row per group, per open episode, per client and topic), so writing one file of them costs less than
    finding, joining and rewriting the changed rows. A replayed batch re-applies its rows to copies read after
    the failure: an upsert or delete applied twice leaves the same rows, and a write already committed is
    skipped by its txn id."""

    def __init__(self, tables: DeltaTables) -> None:
        self.tables = tables
        self.held: dict[str, CurrentRows] = {}

    def writes(
        self, session: SparkSession, payloads: Mapping[str, list[str]], app_id: str, batch_id: int
    ) -> list[Callable[[], None]]:
        """The overwrites of the tables ``payloads`` (the batch's rows by source table, as JSON) change."""
        writes = []
        for table, sources in HELD_CURRENT_TABLES.items():
            rows = [json.loads(p) for source in sources for p in payloads.get(source) or ()]
            if not rows:
                continue
            if table == Table.ANOMALIES_CURRENT:  # an episode's latest row; a closed one is deleted
                rows = [{**r, OP: DELETE if r.get("status") == EpisodeStatus.CLOSED else r.get(OP)} for r in rows]
            current = self.held.get(table)
            if current is None:
                spec = TABLES[table]
                current = self.held[table] = current_rows(self.tables, table, spec.key, tuple(column_names(table)))
            current.apply({**r, "batch_id": batch_id} for r in rows)
            writes.append(_overwrite_rows(self.tables, session, table, current.rows(), app_id, batch_id))
        return writes


def _consumer_batch_summary(batch: DataFrame, with_metrics: bool) -> list[Row]:
    """One pass for the tables present (``n`` rows each) and their ``payloads``: those the held current tables are
    built from (``HELD_CURRENT_TABLES``) and, ``with_metrics``, the small rows the metrics are computed from
    (``_METRIC_TABLES``)."""
    from pyspark.sql import functions as F

    held = list(_HELD_SOURCES)
    wanted = F.col("table").isin(*_METRIC_TABLES, *held) if with_metrics else F.col("table").isin(*held)
    return (
        batch.groupBy("table")
        .agg(F.count("*").alias("n"), F.collect_list(F.when(wanted, F.col("payload"))).alias("payloads"))
        .collect()
    )


def _delete_retracted_cuts(tables: DeltaTables, batch: DataFrame, batch_id: int) -> None:
    """Delete the rows earlier batches wrote for the cuts this batch amends (``RETRACTED_CUTS``: group and time)
    from the tables a cut writes (``CUT_TABLES``). Idempotent: a replay of the batch finds nothing more to delete,
    and the batch's own rows (``batch_id``) are never deleted."""
    from functools import reduce

    from pyspark.sql import functions as F

    cuts = (
        batch.where(F.col("table") == RETRACTED_CUTS)
        .select(F.from_json("payload", "group STRING, event_time_ms BIGINT").alias("r"))
        .select("r.*")
        .distinct()
        .collect()
    )
    if not cuts:
        return
    matches = [(F.col("group") == c["group"]) & (F.col("event_time_ms") == c["event_time_ms"]) for c in cuts]
    condition = (F.col("batch_id") < batch_id) & reduce(lambda a, b: a | b, matches)
    for table in CUT_TABLES:
        tables.delete(table, condition)


def _consumer_writes(
    tables: DeltaTables, batch: DataFrame, present: dict[str, int], app_id: str, batch_id: int
) -> list[Callable[[], None]]:
    """The batch's writes, one per table ``present``: appends to the history tables, a MERGE into each of
    ``MERGED_CURRENT_TABLES`` (the held current tables are ``HeldCurrentTables``')."""
    from pyspark.sql import functions as F

    def append(table: str) -> Callable[[], None]:
        frame = _rows(batch, table).withColumn("batch_id", F.lit(batch_id).cast("bigint"))
        return lambda: tables.append(table, frame, app_id, batch_id, present[table])

    def merge(table: str) -> Callable[[], None]:
        return lambda: _merge_latest_rows(tables, batch, table, app_id, batch_id)

    # All at once, with the held tables' overwrites: each write carries its own txn ids (the MERGE in a session of
    # its own, see merge_idempotent).
    writes = [append(table) for table in HISTORY_OUTPUTS if table in present]
    writes += [merge(table) for table in MERGED_CURRENT_TABLES if table in present]
    return writes


def restore_metrics(tables: DeltaTables, metrics: MetricsState) -> None:
    """At start, before the queries run: every group's and broker's series from the current tables, as the
    last batches left them (``docs/metrics.md``)."""
    restore_group_metrics(tables, metrics)
    restore_broker_metrics(tables, metrics)
    restore_view_metrics(tables, metrics)
    restore_progress_metrics(tables, metrics)
    restore_rebalance_cost_metrics(tables, metrics)


def restore_group_metrics(tables: DeltaTables, metrics: MetricsState) -> None:
    """The ``rmqmon_group_*`` series from ``group_status_current`` (one row per group)."""
    rows = [r.asDict(recursive=True) for r in tables.read(GROUP_STATUS).collect()]
    apply_consumer_metrics(metrics, [group_summary(r) for r in rows])


def restore_progress_metrics(tables: DeltaTables, metrics: MetricsState) -> None:
    """The ``rmqmon_group_progress_*`` series from ``queue_progress_current`` (one row per tracked queue)."""
    columns = ("group", "topic", "lag", "state", "time_lag_estimate_s", "group_online", "event_time_ms")
    rows = [r.asDict() for r in tables.read(QUEUE_PROGRESS).select(*columns).collect()]
    apply_consumer_metrics(metrics, progress_summaries(rows, max((r["event_time_ms"] for r in rows), default=0)))


def restore_rebalance_cost_metrics(tables: DeltaTables, metrics: MetricsState) -> None:
    """The ``rmqmon_group_last_rebalance_*`` series from ``rebalance_cost``: each (group, topic)'s rows of its
    latest change (a few rows per change: the table holds only moved queues)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    frame = tables.read(REBALANCE_COST).select("group", "topic", "t0_ms", "handoff_gap_ms", "redelivered_max")
    latest = frame.withColumn("_latest", F.max("t0_ms").over(Window.partitionBy("group", "topic")))
    rows = latest.where(F.col("t0_ms") == F.col("_latest")).drop("_latest").collect()
    apply_consumer_metrics(metrics, [final_cost(r.asDict()) for r in rows])


def restore_broker_metrics(tables: DeltaTables, metrics: MetricsState) -> None:
    """The producer-side ``rmqmon_broker_*`` series (and ``rmqmon_producers_all_brokers_unavailable``) as the
    fault replay's last batch set them: recomputed from ``producer_broker_status_current`` at the event
    time that batch computed ``broker_status_current`` at (its rows carry the batch's id and time)."""
    from pyspark.sql import functions as F

    last = tables.read(Table.BROKER_STATUS_CURRENT).orderBy(F.col("batch_id").desc()).limit(1).collect()
    if not last:
        return
    now_ms = int(last[0]["event_time_ms"])
    items = current_rows(tables, Table.PRODUCER_BROKER_STATUS_CURRENT, ITEM_KEY, ITEM_COLUMNS).rows()
    apply_broker_metrics(metrics, broker_status(items, now_ms), producers_all_down(items, now_ms))


def restore_view_metrics(tables: DeltaTables, metrics: MetricsState) -> None:
    """The polled-view series from ``broker_views_current``."""
    apply_view_metrics(
        metrics, view_summary(current_rows(tables, Table.BROKER_VIEWS_CURRENT, VIEW_KEY, VIEW_COLUMNS).rows())
    )


# The fault replay's rows the driver reads: the items the broker rows are computed from, and with metrics, what
# is counted.
_FAULT_COUNTED = (FAULT_WINDOWS, LATE_SENDS)


class FaultOutputs:
    """The fault replay's rows of a batch as Delta writes, with the broker gauges set and the isolation episodes
    and late sends counted first (the alert path, before the writes). One per query start: it holds
    producer_broker_status_current whole, read from the table at its first batch, and writes it back whole."""

    def __init__(
        self, tables: DeltaTables, app_id: str, metrics: MetricsState | None, metered: MeteredBatches | None = None
    ) -> None:
        # ``metered``: as in ``consumer_sink``, so a replayed batch's isolation episodes and late sends count once.
        self.tables, self.app_id, self.metrics = tables, app_id, metrics
        self.metered = metered or MeteredBatches()
        self.items: CurrentRows | None = None

    def writes(self, session: SparkSession, rows: Iterable[TableRow], batch_id: int) -> list[Callable[[], None]]:
        """``rows``: ``(table, row)`` of ``fault_table_rows.fault_rows``. Each write carries its own txn ids
        (``append_idempotent``, ``overwrite_idempotent``), so they may run concurrently with each other and with
        the query's other writes."""
        from pyspark.sql import functions as F

        tables, app_id, metrics = self.tables, self.app_id, self.metrics
        rows = list(rows)
        read = {PAIR_STATUS, *_FAULT_COUNTED} if metrics is not None else {PAIR_STATUS}
        present: dict[str, int] = {}
        latest: list[int] = []
        values = []
        for table, row in rows:
            present[table] = present.get(table, 0) + 1
            if table != LATE_SENDS and row.get("event_time_ms") is not None:
                latest.append(int(row["event_time_ms"]))
            if table in read:
                values.append(fault_value(table, row))
        writes: list[Callable[[], None]] = []
        if FAULT_WINDOWS in present:  # the append parses the rows in the JVM, with the table's schema (``_rows``)
            written = [(table, encode(row)) for table, row in rows if table == FAULT_WINDOWS]
            batch = session.createDataFrame(written, "table STRING, payload STRING")
            frame = _rows(batch, FAULT_WINDOWS).withColumn("batch_id", F.lit(batch_id).cast("bigint"))
            n = present[FAULT_WINDOWS]
            writes.append(lambda: tables.append(FAULT_WINDOWS, frame, app_id, batch_id, n))
        if PAIR_STATUS in present:
            if self.items is None:
                self.items = current_rows(tables, PAIR_STATUS, ITEM_KEY, column_names(PAIR_STATUS))
            self.items.apply({**row, "batch_id": batch_id} for row in pair_status_rows(values))
            writes += _broker_status_writes(
                tables, session, self.items, max(latest, default=0), metrics, app_id, batch_id
            )
        if metrics is not None and self.metered.first_time(f"{app_id}:fault-outputs", batch_id):  # before writes
            _count_isolations_and_late_sends(metrics, values)
        return writes


def fault_sink(
    tables: DeltaTables, app_id: str, metrics: MetricsState | None, metered: MeteredBatches | None = None
) -> Callable[[DataFrame, int], None]:
    """``FaultOutputs`` as a ``foreachBatch`` sink of ``(table, payload)`` rows (benchmarks and tests)."""
    outputs = FaultOutputs(tables, app_id, metrics, metered)

    def write(batch: DataFrame, batch_id: int) -> None:
        rows = [(r["table"], json.loads(r["payload"])) for r in batch.select("table", "payload").collect()]
        run_concurrently(outputs.writes(batch.sparkSession, rows, batch_id))

    return write


def _broker_status_writes(
    tables: DeltaTables,
    session: SparkSession,
    items: CurrentRows,
    now_ms: int,
    metrics: MetricsState | None,
    app_id: str,
    batch_id: int,
) -> list[Callable[[], None]]:
    """With the batch's ``items`` applied (every column of ``producer_broker_status_current``): the per-broker
    metrics set at ``now_ms`` (the alert path, before the writes), and both tables overwritten with what the
    driver holds. Each is small and held whole here, and nearly every row changes in every batch (a pair's
    last send), so a MERGE would read, join and rewrite the whole table for the same result."""
    current = items.rows()
    per_broker = broker_status(current, now_ms)
    if metrics is not None:  # the alert path first, before the writes
        apply_broker_metrics(metrics, per_broker, producers_all_down(current, now_ms))
    brokers = [{**r, "batch_id": batch_id} for r in per_broker]
    return [
        _overwrite_rows(tables, session, PAIR_STATUS, current, app_id, batch_id),
        _overwrite_rows(tables, session, Table.BROKER_STATUS_CURRENT, brokers, app_id, batch_id),
    ]


def _overwrite_rows(
    tables: DeltaTables, session: SparkSession, table: str, rows: list[dict[str, Any]], app_id: str, batch_id: int
) -> Callable[[], None]:
    """The write replacing ``table``'s rows with ``rows`` (dicts holding every column)."""
    columns = column_names(table)
    frame = session.createDataFrame([tuple(r[c] for c in columns) for r in rows], TABLES[table].schema_ddl)
    return lambda: tables.overwrite(table, frame, app_id, batch_id, len(rows))


def _count_isolations_and_late_sends(metrics: MetricsState, values: Iterable[FaultOutcome]) -> None:
    """Count the batch's opened fault windows (isolation episodes) and late sends."""
    for value in values:
        if isinstance(value, FaultWindowChanged) and value.episode.status is WindowStatus.OPENED:
            metrics.inc(Metrics.BROKER_ISOLATION_EPISODES_TOTAL, (value.episode.broker,))
        elif isinstance(value, SendsLate):
            metrics.inc(Metrics.LATE_EVENTS_TOTAL, ("send-ingest", "late_send"), value.count)


def apply_broker_metrics(metrics: MetricsState, rows: list[dict[str, Any]], all_down: int) -> None:
    """Per-broker gauges from ``broker_status_current`` rows (every broker a producer item mentions)."""
    # brokers no producer item mentions are gone (from the producer metrics; polled views keep their own)
    metrics.retain("broker", [r["broker"] for r in rows], metrics=PRODUCER_BROKER_METRICS)
    for r in rows:
        labels = (r["broker"],)
        metrics.inc(Metrics.BROKER_ISOLATION_EPISODES_TOTAL, labels, 0)  # an explicit zero for known brokers
        metrics.set_gauge(Metrics.BROKER_PRODUCERS_AVOIDING, labels, r["producers_avoiding"])
        metrics.set_gauge(Metrics.BROKER_PRODUCERS_AVOIDING_RATIO, labels, r["avoiding_ratio"])
        metrics.set_gauge(Metrics.BROKER_PRODUCERS_SEEN, labels, r["producers_seen"])
        metrics.set_gauge(Metrics.BROKER_ISOLATED, labels, 1.0 if r["isolated"] else 0.0)
        if r["avoided_until_ms"] is not None:
            metrics.set_gauge(Metrics.BROKER_AVOIDED_UNTIL_TIMESTAMP_SECONDS, labels, r["avoided_until_ms"] / 1000)
    metrics.set_gauge(Metrics.PRODUCERS_ALL_BROKERS_UNAVAILABLE, (), float(all_down))


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
    metrics.retain("broker", [r["broker"] for r in rows], metrics=VIEW_METRICS)
    for r in rows:
        labels = (r["broker"],)
        metrics.set_gauge(Metrics.BROKER_POLLED_GROUP_VIEWS, labels, r["views"])
        metrics.set_gauge(Metrics.BROKER_STALE_GROUP_VIEWS, labels, r["stale"])
        if r["last_poll_ms"] is not None:
            metrics.set_gauge(Metrics.BROKER_LAST_POLL_TIMESTAMP_SECONDS, labels, r["last_poll_ms"] / 1000)


ConsumerMetricValue = GroupSummary | GroupGone | LateEvent | DeadLettered | ProgressSummary | FinalCost


def apply_rebalance_cost_metrics(metrics: MetricsState, cost: FinalCost) -> None:
    """A final cost row: a newer change than the (group, topic)'s last replaces its series, another row of the
    same change adds to them (longest hand-off, summed re-delivered), an older one is ignored."""
    labels = (cost.group, cost.topic)
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


def apply_progress_metrics(metrics: MetricsState, value: ProgressSummary) -> None:
    """A group's progress per topic: total lag, the largest time-lag estimate, tracked queues per state (every
    state, 0 included, so a state that empties reads 0); its open OFFLINE_GROUP_BACKLOG episode in
    ``rmqmon_group_open_anomalies`` (a group without members has no other series there). No topic: the group's
    progress series go, and that one."""
    group = value.group
    lag, time_lag, queues = {}, {}, {}
    for topic, t in value.topics.items():
        lag[(group, topic)] = float(t.lag)
        if t.max_time_lag_s is not None:
            time_lag[(group, topic)] = t.max_time_lag_s
        for state in QueueState:
            queues[(group, topic, str(state))] = float(t.queues_by_state.get(state, 0))
    metrics.replace_series(Metrics.GROUP_PROGRESS_LAG, group, lag)
    metrics.replace_series(Metrics.GROUP_PROGRESS_MAX_TIME_LAG_SECONDS, group, time_lag)
    metrics.replace_series(Metrics.GROUP_PROGRESS_QUEUES, group, queues)
    offline = (group, str(AnomalyKind.OFFLINE_GROUP_BACKLOG))
    if value.offline_backlog or value.topics:
        metrics.set_gauge(Metrics.GROUP_OPEN_ANOMALIES, offline, 1.0 if value.offline_backlog else 0.0)
    else:  # nothing tracked: a group gone from everywhere keeps no series
        metrics.drop_series(Metrics.GROUP_OPEN_ANOMALIES, offline)


def apply_consumer_metrics(metrics: MetricsState, values: Iterable[ConsumerMetricValue]) -> None:
    """Per-group gauges from the engine's ``GroupSummary`` values (a ``GroupGone`` forgets the group's series);
    dead letters and late events counted by reason."""
    for value in values:
        if isinstance(value, DeadLettered):
            metrics.inc(Metrics.DEAD_LETTERS_TOTAL, ("consumer", str(value.reason)))
            continue
        if isinstance(value, LateEvent):  # one late event, or a count of them
            metrics.inc(Metrics.LATE_EVENTS_TOTAL, ("consumer", str(value.reason)), value.count)
            continue
        if isinstance(value, ProgressSummary):
            apply_progress_metrics(metrics, value)
            continue
        if isinstance(value, FinalCost):
            apply_rebalance_cost_metrics(metrics, value)
            continue
        group = value.group
        if isinstance(value, GroupGone):
            metrics.forget("consumer_group", group)
            continue
        g = (group,)
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
            queues[(group, topic, "assigned")] = t.assigned
            queues[(group, topic, "orphaned")] = t.orphaned
            queues[(group, topic, "double_owned")] = t.double_owned
            idle[(group, topic)] = t.idle
            non_subscribing[(group, topic)] = t.non_subscribing
            skew[(group, topic)] = t.skew
            metrics.inc(Metrics.GROUP_MOVED_QUEUES_TOTAL, (group, topic), t.moved)  # 0 exports the series
        metrics.replace_series(Metrics.GROUP_QUEUES, group, queues)
        metrics.replace_series(Metrics.GROUP_IDLE_MEMBERS, group, idle)
        metrics.replace_series(Metrics.GROUP_NON_SUBSCRIBING_MEMBERS, group, non_subscribing)
        metrics.replace_series(Metrics.GROUP_SKEW_QUEUES, group, skew)
        metrics.replace_series(
            Metrics.GROUP_OPEN_ANOMALIES,
            group,
            {(group, str(k)): float(value.open_anomalies.get(k, 0)) for k in AnomalyKind},
        )
