"""``foreachBatch`` sinks: fan the stateful operators' typed rows out into Delta and metrics.

The consumer query's batch (``bus``: a tag and one struct per kind) is persisted once (so the stateful operator
is never recomputed); each table's rows are its kind's struct, selected and written exactly once (see
``sinks``); a current table's deletions are a kind of their own. The small per-group / per-broker summaries are
applied to the driver's ``MetricsState``: the consumer's as soon as the stateful stage has produced them, before
the Delta writes, so an alert never waits for the writes (a metric may lead its table by the batch's writes; a
failed write fails the query, which replays the batch). The per-broker gauges are computed on the driver from
the sink's copy of the current table's few columns they need (``broker_gauges``), with the batch's rows
applied. The fault replay hands its outcomes to ``FaultOutputs`` on the driver. At start, ``restore_metrics``
sets every group's and broker's series from the current tables the sinks keep.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from connectors.metric_catalogue import Metrics
from streaming.contract.tables import TABLES, Table, column_names
from streaming.domain.faults.outcomes import FaultOutcome, FaultWindowChanged, SendsLate
from streaming.domain.faults.windows import WindowStatus
from streaming.domain.vocabulary import EpisodeStatus
from streaming.job.delta.broker_gauges import (
    ITEM_COLUMNS,
    ITEM_KEY,
    VIEW_COLUMNS,
    VIEW_KEY,
    Change,
    CurrentRows,
    broker_status,
    producers_all_down_per_cluster,
    view_summary,
)
from streaming.job.delta.bus import RETRACTED_CUTS, SEQ, TAG, deleted, kind_rows, struct_type, with_derived
from streaming.job.delta.fault_table_rows import FAULT_WINDOWS, PAIR_STATUS, WINDOW_FIELDS, pair_changes, window_values
from streaming.job.delta.metric_rows import (
    GROUP_GONE,
    METRIC_KINDS,
    apply_broker_metrics,
    apply_consumer_metrics,
    apply_view_metrics,
    final_cost,
    group_summary,
    metric_values,
    progress_summaries,
)
from streaming.job.delta.sinks import DeltaTables, local_frame, run_concurrently
from streaming.job.delta.table_rows import CUT_TABLES, GROUP_STATUS, QUEUE_PROGRESS, REBALANCE_COST
from streaming.job.runtime.metered import MeteredBatches

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

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
# The current tables the consumer sink applies the batch's latest change per key to, rewriting each whole in the
# JVM (``DeltaTables.upsert``): too large to hold on the driver, and a MERGE cost about twice the CPU.
UPSERTED_CURRENT_TABLES = (Table.QUEUE_HOLDERS_CURRENT, Table.BROKER_VIEWS_CURRENT, QUEUE_PROGRESS)
# The sink's own column of a current table's changes: whether the change is a deletion.
DELETED = "deleted"


def _rows(batch: DataFrame, table: str) -> DataFrame:
    """A table's rows of the batch: its kind's struct, and the event time as a timestamp where the table has one."""
    from pyspark.sql import functions as F

    frame = kind_rows(batch, table)
    if "event_time" in column_names(table):
        frame = frame.withColumn("event_time", F.timestamp_millis("event_time_ms"))
    return frame


def _changes(batch: DataFrame, table: str) -> DataFrame:
    """A current table's rows and deletions of the batch, with ``DELETED`` and ``SEQ``."""
    from pyspark.sql import functions as F

    rows = kind_rows(batch, table, with_seq=True).withColumn(DELETED, F.lit(False))
    deletions = kind_rows(batch, deleted(table), with_seq=True).withColumn(DELETED, F.lit(True))
    return rows.unionByName(deletions, allowMissingColumns=True)


def _latest_per_key(frame: DataFrame, key: tuple[str, ...]) -> DataFrame:
    """Each key's latest change by event time; of changes of the same time a deletion wins (a queue's progress row
    and the end of its tracking at one sample: the end comes after), else the one emitted last (``SEQ``: a split
    answer's parts at one sample)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    deletion_first = F.when(F.col(DELETED), 0).otherwise(1)
    window = Window.partitionBy(*key).orderBy(F.col("event_time_ms").desc(), deletion_first, F.col(SEQ).desc())
    return frame.withColumn("_rank", F.row_number().over(window)).where("_rank = 1").drop("_rank", SEQ)


def _upsert_latest_rows(tables: DeltaTables, batch: DataFrame, table: str, app_id: str, batch_id: int) -> None:
    """Apply a current table's changes of the batch: the latest per key wins; a deletion deletes."""
    from pyspark.sql import functions as F

    latest = _latest_per_key(_changes(batch, table), TABLES[table].key)
    tables.upsert(table, latest.withColumn("batch_id", F.lit(batch_id).cast("bigint")), app_id, batch_id, DELETED)


# The current tables the consumer sink holds whole and writes whole (``HeldCurrentTables``), each with the
# kinds of batch rows it is built from (anomalies_current from the episodes' history too: a closed one is
# deleted).
HELD_CURRENT_TABLES = {
    Table.CURRENT_ASSIGNMENT: (Table.CURRENT_ASSIGNMENT, deleted(Table.CURRENT_ASSIGNMENT)),
    Table.ANOMALIES_CURRENT: (Table.ANOMALY_EPISODES, Table.ANOMALIES_CURRENT, deleted(Table.ANOMALIES_CURRENT)),
    GROUP_STATUS: (GROUP_STATUS, GROUP_GONE),
}
_HELD_SOURCES = frozenset(k for kinds in HELD_CURRENT_TABLES.values() for k in kinds)
_VIEW_KINDS = frozenset({Table.BROKER_VIEWS_CURRENT, deleted(Table.BROKER_VIEWS_CURRENT)})


def current_rows(tables: DeltaTables, table: str, key: tuple[str, ...], columns: tuple[str, ...]) -> CurrentRows:
    """``columns`` of a current table's committed rows, kept by ``key``."""
    return CurrentRows(key, columns, (r.asDict() for r in tables.read(table).select(*columns, *key).collect()))


def _as_changes(kind: str, rows: Iterable[Mapping[str, Any]]) -> Iterator[Change]:
    """A kind's rows as changes of its current table: a deletion kind's delete, a closed episode's too."""
    if kind.startswith(deleted("")):
        return ((r, True) for r in rows)
    if kind == Table.ANOMALY_EPISODES:
        return ((r, r["status"] == EpisodeStatus.CLOSED) for r in rows)
    return ((r, False) for r in rows)


def consumer_sink(
    tables: DeltaTables, app_id: str, metrics: MetricsState | None, metered: MeteredBatches | None = None
) -> Callable[[DataFrame, int], None]:
    # A batch replayed in this process (its writes failed and the query was restarted, with a new sink) must not
    # count its rebalances, dead letters and late events twice: ``metered`` is the job's, shared by its sinks.
    metered = metered or MeteredBatches()
    views: CurrentRows | None = None  # broker_views_current as the batches' writes leave it
    held = HeldCurrentTables(tables)

    def write(batch: DataFrame, batch_id: int) -> None:
        nonlocal views
        batch = batch.persist()
        try:
            present, typed = _consumer_batch_summary(batch, metrics is not None)
            if RETRACTED_CUTS in present:  # before the appends: a retracted cut's rows of earlier batches go
                _delete_retracted_cuts(tables, batch, batch_id)
            if metrics is not None and metered.first_time(f"{app_id}:consumer", batch_id):  # before the writes
                apply_consumer_metrics(metrics, metric_values(_metric_rows(typed)))
            if metrics is not None and _VIEW_KINDS & set(present):
                if views is None:
                    views = current_rows(tables, Table.BROKER_VIEWS_CURRENT, VIEW_KEY, VIEW_COLUMNS)
                changes = (c for kind in _VIEW_KINDS for c in _as_changes(kind, typed.get(kind, ())))
                views.apply(_in_emitted_order(changes))
                apply_view_metrics(metrics, view_summary(views.rows()))
            writes = _consumer_writes(tables, batch, present, app_id, batch_id)
            writes += held.writes(batch.sparkSession, typed, app_id, batch_id)
            run_concurrently(writes)
        finally:
            batch.unpersist()

    return write


def _metric_rows(typed: Mapping[str, list[dict[str, Any]]]) -> Iterator[tuple[str, dict[str, Any]]]:
    """The batch's rows the metrics read, kind by kind; a group's summaries and its end in event-time order (the
    end after a summary of the same time)."""
    groups = [(GROUP_STATUS, r) for r in typed.get(GROUP_STATUS, ())] + [
        (GROUP_GONE, r) for r in typed.get(GROUP_GONE, ())
    ]
    yield from sorted(groups, key=lambda kr: (kr[1]["event_time_ms"], kr[0] == GROUP_GONE))
    for kind, rows in typed.items():
        if kind in METRIC_KINDS and kind not in (GROUP_STATUS, GROUP_GONE):
            yield from ((kind, r) for r in rows)


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
        self, session: SparkSession, typed: Mapping[str, list[dict[str, Any]]], app_id: str, batch_id: int
    ) -> list[Callable[[], None]]:
        """The overwrites of the tables ``typed`` (the batch's rows by kind) change."""
        writes = []
        for table, kinds in HELD_CURRENT_TABLES.items():
            changes = _in_emitted_order(c for kind in kinds for c in _as_changes(kind, typed.get(kind, ())))
            if not changes:
                continue
            current = self.held.get(table)
            if current is None:
                spec = TABLES[table]
                current = self.held[table] = current_rows(self.tables, table, spec.key, tuple(column_names(table)))
            current.apply(({**r, "batch_id": batch_id}, gone) for r, gone in changes)
            writes.append(_overwrite_rows(self.tables, session, table, current.rows(), app_id, batch_id))
        return writes


def _in_emitted_order(changes: Iterable[Change]) -> list[Change]:
    """A batch's changes as the state function emitted them (``SEQ``): ``CurrentRows`` keeps, of one key's changes
    of the same time, the last given."""
    return sorted(changes, key=lambda change: change[0][SEQ])


def _consumer_batch_summary(batch: DataFrame, with_metrics: bool) -> tuple[dict[str, int], dict[str, list[Any]]]:
    """One pass for the kinds present (``n`` rows each) and the rows the driver reads, by kind (dicts): those the
    held current tables are built from (``HELD_CURRENT_TABLES``) and, ``with_metrics``, the small rows the metrics
    are computed from (``METRIC_KINDS``, the polled views); each row with its ``SEQ``."""
    from pyspark.sql import functions as F

    wanted = sorted(_HELD_SOURCES | METRIC_KINDS | _VIEW_KINDS if with_metrics else _HELD_SOURCES)
    lists = [F.collect_list(F.when(F.col(TAG) == k, F.struct(f"`{k}`.*", SEQ))).alias(k) for k in wanted]
    summary = batch.groupBy(TAG).agg(F.count("*").alias("n"), *lists).collect()
    present = with_derived({r[TAG]: r["n"] for r in summary})
    typed = {r[TAG]: [v.asDict(recursive=True) for v in r[r[TAG]]] for r in summary if r[TAG] in wanted}
    return present, typed


def _delete_retracted_cuts(tables: DeltaTables, batch: DataFrame, batch_id: int) -> None:
    """Delete the rows earlier batches wrote for the cuts this batch amends (``RETRACTED_CUTS``: cluster, group, time)
    from the tables a cut writes (``CUT_TABLES``). Idempotent: a replay of the batch finds nothing more to delete,
    and the batch's own rows (``batch_id``) are never deleted."""
    from functools import reduce

    from pyspark.sql import functions as F

    cuts = kind_rows(batch, RETRACTED_CUTS).distinct().collect()
    if not cuts:
        return
    matches = [
        (F.col("cluster") == c["cluster"])
        & (F.col("group") == c["group"])
        & (F.col("event_time_ms") == c["event_time_ms"])
        for c in cuts
    ]
    condition = (F.col("batch_id") < batch_id) & reduce(lambda a, b: a | b, matches)
    for table in CUT_TABLES:
        tables.delete(table, condition)


def _consumer_writes(
    tables: DeltaTables, batch: DataFrame, present: dict[str, int], app_id: str, batch_id: int
) -> list[Callable[[], None]]:
    """The batch's writes, one per table ``present``: appends to the history tables, an upsert into each of
    ``UPSERTED_CURRENT_TABLES`` with rows or deletions (the held current tables are ``HeldCurrentTables``')."""
    from pyspark.sql import functions as F

    def append(table: str) -> Callable[[], None]:
        frame = _rows(batch, table).withColumn("batch_id", F.lit(batch_id).cast("bigint"))
        return lambda: tables.append(table, frame, app_id, batch_id, present[table])

    def upsert(table: str) -> Callable[[], None]:
        return lambda: _upsert_latest_rows(tables, batch, table, app_id, batch_id)

    # All at once, with the held tables' overwrites: each write carries its own txn ids (its writer options).
    writes = [append(table) for table in HISTORY_OUTPUTS if table in present]
    writes += [upsert(t) for t in UPSERTED_CURRENT_TABLES if t in present or deleted(t) in present]
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
    apply_consumer_metrics(metrics, [(r["cluster"], group_summary(r)) for r in rows])


def restore_progress_metrics(tables: DeltaTables, metrics: MetricsState) -> None:
    """The ``rmqmon_group_progress_*`` series from ``queue_progress_current`` (one row per tracked queue)."""
    columns = ("cluster", "group", "topic", "lag", "state", "time_lag_estimate_s", "group_online", "event_time_ms")
    rows = [r.asDict() for r in tables.read(QUEUE_PROGRESS).select(*columns).collect()]
    apply_consumer_metrics(metrics, progress_summaries(rows, max((r["event_time_ms"] for r in rows), default=0)))


def restore_rebalance_cost_metrics(tables: DeltaTables, metrics: MetricsState) -> None:
    """The ``rmqmon_group_last_rebalance_*`` series from ``rebalance_cost``: each (group, topic)'s rows of its
    latest change (a few rows per change: the table holds only moved queues)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    columns = ("cluster", "group", "topic", "t0_ms", "handoff_gap_ms", "redelivered_max")
    frame = tables.read(REBALANCE_COST).select(*columns)
    latest = frame.withColumn("_latest", F.max("t0_ms").over(Window.partitionBy("cluster", "group", "topic")))
    rows = latest.where(F.col("t0_ms") == F.col("_latest")).drop("_latest").collect()
    apply_consumer_metrics(metrics, [(r["cluster"], final_cost(r.asDict())) for r in rows])


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
    apply_broker_metrics(metrics, broker_status(items, now_ms), producers_all_down_per_cluster(items, now_ms))


def restore_view_metrics(tables: DeltaTables, metrics: MetricsState) -> None:
    """The polled-view series from ``broker_views_current``."""
    apply_view_metrics(
        metrics, view_summary(current_rows(tables, Table.BROKER_VIEWS_CURRENT, VIEW_KEY, VIEW_COLUMNS).rows())
    )


class FaultOutputs:
    """The fault replay's outcomes of a batch as Delta writes, with the broker gauges set and the isolation
    episodes and late sends counted first (the alert path, before the writes). One per query start: it holds
    producer_broker_status_current whole, read from the table at its first batch, and writes it back whole."""

    def __init__(
        self, tables: DeltaTables, app_id: str, metrics: MetricsState | None, metered: MeteredBatches | None = None
    ) -> None:
        # ``metered``: as in ``consumer_sink``, so a replayed batch's isolation episodes and late sends count once.
        self.tables, self.app_id, self.metrics = tables, app_id, metrics
        self.metered = metered or MeteredBatches()
        self.items: CurrentRows | None = None

    def writes(
        self, session: SparkSession, outcomes: Iterable[FaultOutcome], batch_id: int
    ) -> list[Callable[[], None]]:
        """The writes of a batch's fault ``outcomes``. Each write carries its own txn ids (``append_idempotent``,
        ``overwrite_idempotent``), so they may run concurrently with each other and with the query's other
        writes."""
        from pyspark.sql import functions as F

        tables, app_id, metrics = self.tables, self.app_id, self.metrics
        outcomes = list(outcomes)
        windows = [window_values(o) for o in outcomes if isinstance(o, FaultWindowChanged)]
        changes = pair_changes(outcomes)
        writes: list[Callable[[], None]] = []
        if windows:
            frame = (
                local_frame(session, windows, struct_type(WINDOW_FIELDS))
                .withColumn("event_time", F.timestamp_millis("event_time_ms"))
                .withColumn("batch_id", F.lit(batch_id).cast("bigint"))
            )
            writes.append(lambda: tables.append(FAULT_WINDOWS, frame, app_id, batch_id, len(windows)))
        if changes:
            if self.items is None:
                self.items = current_rows(tables, PAIR_STATUS, ITEM_KEY, tuple(column_names(PAIR_STATUS)))
            self.items.apply(({**row, "batch_id": batch_id}, gone) for row, gone in changes)
            latest = max(
                [o.episode.event_time_ms for o in outcomes if isinstance(o, FaultWindowChanged)]
                + [row["event_time_ms"] for row, _ in changes]
            )
            writes += _broker_status_writes(tables, session, self.items, latest, metrics, app_id, batch_id)
        if metrics is not None and self.metered.first_time(f"{app_id}:fault-outputs", batch_id):  # before writes
            _count_isolations_and_late_sends(metrics, outcomes)
        return writes


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
        apply_broker_metrics(metrics, per_broker, producers_all_down_per_cluster(current, now_ms))
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
    frame = local_frame(session, [tuple(r[c] for c in columns) for r in rows], struct_type(TABLES[table].columns))
    return lambda: tables.overwrite(table, frame, app_id, batch_id, len(rows))


def _count_isolations_and_late_sends(metrics: MetricsState, values: Iterable[FaultOutcome]) -> None:
    """Count the batch's opened fault windows (isolation episodes) and late sends."""
    for value in values:
        if isinstance(value, FaultWindowChanged) and value.episode.status is WindowStatus.OPENED:
            metrics.inc(Metrics.BROKER_ISOLATION_EPISODES_TOTAL, (value.cluster, value.episode.broker))
        elif isinstance(value, SendsLate):
            metrics.inc(Metrics.LATE_EVENTS_TOTAL, ("send-ingest", "late_send"), value.count)
