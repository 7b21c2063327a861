"""The send-result path: Kafka -> classify -> JVM reduction -> fault replay -> metrics and Delta.

One query, ``send-ingest``: each batch is read, checked and reduced in one JVM pass; its reduced sends (a few
per (cluster, producer, broker)) are replayed on the driver with RocketMQ's fault semantics (``fault_replay``), which
sets the broker gauges; then dead letters, per-minute latency statistics and the fault outputs are written,
exactly once, and the replay's state follows the checkpoint. The heavy per-send work stays in the JVM:
``docs/design/send-pass.md``.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from streaming.contract.events import EventType
from streaming.contract.tables import Table
from streaming.job.delta.sinks import DeltaTables, run_concurrently, start_concurrently
from streaming.job.ingest.classify import (
    EventContract,
    IngestSettings,
    classify,
    dead_letter_columns,
    kafka_stream,
    strict_events_spec,
    typed_column,
)
from streaming.job.ingest.poison import PROCESSING_ERROR, error_summary, isolate, planted_marker
from streaming.job.sends.fault_replay import FaultReplayer, KeptSend, collect_kept_sends, kept_send, shard_column
from streaming.job.sends.reduce import (
    BatchSummary,
    DriverView,
    driver_view,
    kept_sends,
    minute_partials,
    notable_send,
    reduce_in_partitions,
    reduce_kafka_batch,
    unsure_records,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

    from streaming.domain.faults.settings import FaultSettings, ProducerRule
    from streaming.job.sends.metrics import SendMetrics

log = logging.getLogger(__name__)

# The event types the send path reads, declared once: its Kafka topic and its contract follow.
SEND_EVENTS = (EventType.SEND_RESULT,)


def client_line_column() -> Column:
    """The client line ("4.9" or "5") of each send's ``client_version``, NULL where ``ClientLine.parse`` cannot
    read one (it falls back to a default there; here no client-line rule matches)."""
    from pyspark.sql import functions as F

    from streaming.domain.versions import VERSION_NUMBER_PATTERN

    # ClientLine.parse's reading, with its pattern: one regex per send (the leading number), compared as a
    # DOUBLE, which reads any run of digits where an INT would overflow. Free text gives NULL, never a failure.
    number = F.regexp_extract(F.col("client_version"), VERSION_NUMBER_PATTERN, 1).try_cast("double")
    return (
        F.when(number >= 100, F.when(number >= 413, "5").otherwise("4.9"))  # an MQVersion ordinal
        .when(number >= 5, "5")
        .when(number == 4, "4.9")
    )


def fault_table_column(rules: Sequence[ProducerRule], default_table: str, line: Column | None = None) -> Column:
    """A JVM expression naming each send's fault table (first matching rule, else the default); ``line`` is
    the client line (default ``client_line_column()``, or a column holding it). A rule names its groups with
    ``ProducerRule.group_regex``, the regex Python's ``ProducerRule.matches`` reads too."""
    from pyspark.sql import functions as F

    line = client_line_column() if line is None else line
    expr = F.lit(default_table)
    for rule in reversed(list(rules)):
        condition = F.col("producer_group").rlike(rule.group_regex)
        if rule.client_line is not None:
            condition = condition & (line == F.lit(rule.client_line))
        expr = F.when(condition, F.lit(rule.fault_table)).otherwise(expr)
    return expr


def fault_table_in_use(
    rules: Sequence[ProducerRule], default_table: str, fault_enable_default: bool, line: Column | None = None
) -> Column:
    """The fault table a send's producer uses, NULL when it runs without ``sendLatencyFaultEnable`` (the
    send result's ``send_latency_fault_enable``, else ``fault_enable_default``): RocketMQ then keeps no
    fault items and avoids no broker (semantics 6.4), so no table applies."""
    from pyspark.sql import functions as F

    enabled = F.coalesce(F.col("send_latency_fault_enable"), F.lit(bool(fault_enable_default)))
    return F.when(enabled, fault_table_column(rules, default_table, line))


def fault_table_template(
    session: SparkSession,
    rules: Sequence[ProducerRule],
    default_table: str,
    fault_enable_default: bool,
    floors_ms: Mapping[str, int],
) -> DataFrame:
    """``fault_table_in_use`` and its ``latency_floor_column`` projected over (producer_group, client_version,
    send_latency_fault_enable): ``KafkaSendReducer`` evaluates these very expressions, once per distinct triple."""
    columns = "producer_group STRING, client_version STRING, send_latency_fault_enable BOOLEAN"
    table = fault_table_in_use(rules, default_table, fault_enable_default)
    return session.createDataFrame([], columns).select(
        table.alias("fault_table"), latency_floor_column(floors_ms, table).cast("bigint").alias("latency_floor_ms")
    )


def latency_floor_column(floors_ms: Mapping[str, int], table: Column | None = None) -> Column:
    """Per fault table (the column ``fault_table``, or ``table``), the smallest latency with a positive
    not-available duration."""
    from pyspark.sql import functions as F

    table = F.col("fault_table") if table is None else table
    expr = F.lit(min(floors_ms.values()))
    for name, floor in floors_ms.items():
        expr = F.when(table == name, F.lit(int(floor))).otherwise(expr)
    return expr


SEND_FIELDS = (
    ("cluster", "string"),  # resolved by ``classify`` (``cluster_sql``): never NULL for a valid send
    ("producer_id", "string"),
    ("producer_group", "string"),
    ("topic", "string"),
    ("broker", "string"),
    ("queue_id", "int"),
    ("latency_ms", "bigint"),
    ("outcome", "string"),
    ("client_version", "string"),
    ("send_latency_fault_enable", "boolean"),
)


def send_batch(
    classified: DataFrame,
    table_rules: Sequence[ProducerRule],
    default_table: str,
    fault_enable_default: bool,
    latency_floors_ms: Mapping[str, int],
) -> DataFrame:
    """Every classified record of a batch with what the send path reads: the dead-letter columns (the raw
    value only for rejects), a valid send's fields from the typed column ``classify`` extracted, the fault
    table in use (``fault_table_in_use``) and whether the send is ``notable`` (``sends.reduce.notable_send``).
    The send fields are meaningful only where ``reason`` is NULL."""
    from pyspark.sql import functions as F

    typed = typed_column(EventType.SEND_RESULT)
    return (
        classified.select(
            "event_type",
            "kafka_topic",
            "kafka_partition",
            "kafka_offset",
            "kafka_timestamp",
            "event_time_ms",
            F.when(F.col("reason").isNotNull(), F.col("raw_value")).alias("raw_value"),
            "reason",
            "detail",
            *[F.col(f"{typed}.{name}").cast(type_).alias(name) for name, type_ in SEND_FIELDS],
        )
        .withColumn("client_line", client_line_column())
        .withColumn(
            # The line is read twice, so Spark keeps it in its own projection: inlined into the rules' nested CASE
            # (where code generation cannot share it) its regex ran up to four times per send, which made the
            # default rule cost a 500k-send batch about 0.1 s.
            "fault_table",
            fault_table_in_use(table_rules, default_table, fault_enable_default, F.col("client_line")),
        )
        .withColumn("notable", notable_send(latency_floor_column(latency_floors_ms)))
    )


def start_send_ingest(
    session: SparkSession,
    tables: DeltaTables,
    ingest: IngestSettings,
    contracts: Mapping[str, EventContract],
    faults: FaultSettings,
    checkpoint: str,
    app_id: str,
    trigger_interval: str | None,
    available_now: bool = False,
    fault: FaultReplayer | None = None,
    metrics: SendMetrics | None = None,
    stopping: Callable[[], bool] | None = None,
) -> StreamingQuery:
    """Start send-ingest (see the module docstring); ``faults``: the producer rules and fault tables, whose
    default table's thresholds are the latency statistics' buckets; ``fault`` replays the reduced sends (None:
    no fault outputs, as in the benchmarks of the send pass alone); ``metrics`` counts the dead letters and
    observes the latency statistics beside their appends.

    A batch whose preparation fails because of some of its records is prepared again without them, and they
    are dead-lettered as ``PROCESSING_ERROR`` (``poison``; the tests' planted marker, ``poison.planted``, makes
    the rules fail on records holding it). While ``stopping()`` is true, a failed batch is raised as it is: a stop
    interrupts a running batch, and that failure says nothing about its records."""
    strict_spec = strict_events_spec(contracts)
    if strict_spec is None or set(contracts) != {EventType.SEND_RESULT}:
        raise ValueError("send-ingest reads send results only, with the contract's fast path")
    bucket_upper_ms = list(faults.table(faults.default_table).latency_max_ms)
    template = fault_table_template(
        session, faults.rules, faults.default_table, faults.send_latency_fault_enable, faults.latency_floors_ms
    )
    batches = _SendIngestBatches(
        tables=tables,
        ingest=ingest,
        contracts=contracts,
        faults=faults,
        app_id=app_id,
        strict_spec=strict_spec,
        template=template,
        bucket_upper_ms=bucket_upper_ms,
        fault=fault,
        metrics=metrics,
        stopping=stopping,
    )
    records_stream = kafka_stream(session, ingest)
    writer = records_stream.writeStream.queryName("send-ingest").foreachBatch(batches.write_batch)
    writer = writer.option("checkpointLocation", checkpoint)
    if available_now:
        writer = writer.trigger(availableNow=True)
    elif trigger_interval:
        writer = writer.trigger(processingTime=trigger_interval)
    return writer.start()


@dataclass(frozen=True)
class _SendIngestBatches:
    """What send-ingest does with each micro-batch (``write_batch``), and the inputs it reads, fixed when the
    query starts: ``strict_spec`` for the fast path's reader, the ``fault_table_template`` and the latency
    statistics' buckets (``bucket_upper_ms``)."""

    tables: DeltaTables
    ingest: IngestSettings
    contracts: Mapping[str, EventContract]
    faults: FaultSettings
    app_id: str
    strict_spec: tuple[str, str]
    template: DataFrame
    bucket_upper_ms: list[int]
    fault: FaultReplayer | None
    metrics: SendMetrics | None
    stopping: Callable[[], bool] | None

    def write_batch(self, records: DataFrame, batch_id: int) -> None:
        try:
            prepared = self.prepare(records, batch_id)
        except _NOT_ABOUT_DATA:
            raise
        except Exception as error:  # noqa: BLE001 - told apart by without_poison: data, or raised again
            if self.stopping is not None and self.stopping():
                raise  # the stop may have caused it: no search, the batch replays from the checkpoint
            prepared = self.without_poison(records, batch_id, error)
        try:
            # The dead letters and minute statistics do not wait for the replay: the JVM writes them while
            # Python replays the sends. The replay sets the broker gauges before its own writes start.
            pending = start_concurrently(list(prepared.writes))
            fault_state = None
            try:
                if self.fault is not None:
                    fault_writes, fault_state = self.fault.prepare(records.sparkSession, prepared.kept, batch_id)
                    run_concurrently(fault_writes)
            finally:
                failure = pending.wait()
            if failure is not None:
                raise failure
            if fault_state is not None:  # after every fault output committed: a replay then skips them
                self.fault.commit(fault_state)  # type: ignore[union-attr]
        finally:
            for frame in prepared.cached:
                frame.unpersist()

    def judged(self, kafka: DataFrame) -> DataFrame:
        """Kafka records classified by the rules, with the send path's columns (``send_batch``)."""
        from pyspark.sql import functions as F

        classified = classify(kafka, self.contracts, self.ingest)
        marker = planted_marker()
        if marker is not None:  # tests only: processing fails on records holding the marker (``poison.planted``)
            marked = F.col("raw_value").contains(marker)
            message = F.lit(f"test poison marker '{marker}' in a send")
            reason = F.when(marked, F.raise_error(message)).otherwise(F.col("reason"))
            classified = classified.withColumn("reason", reason)
        faults = self.faults
        return send_batch(
            classified, faults.rules, faults.default_table, faults.send_latency_fault_enable, faults.latency_floors_ms
        )

    def prepare(self, records: DataFrame, batch_id: int, refused: DataFrame | None = None) -> _PreparedBatch:
        """Everything of the batch before its writes: read, checked, reduced and cached, so that a failure of the
        batch's data shows here, before anything is written; ``refused``: dead letters to add."""
        # One pass in the JVM reads the Kafka records, takes those the ingest fast path takes and reduces them,
        # leaving only the records for the rules, the sends the fault-window replay needs and the minute
        # partials (about 2 % of a batch), cached: every write below reads the cache, and the records are not
        # read again unless some need the rules or a producer's sends span partitions.
        reduced = reduce_kafka_batch(
            records, self.strict_spec, self.ingest, self.template, self.bucket_upper_ms, batch_id
        ).persist()
        cached = [reduced]
        try:
            reduced, view, rejects = self.judge_unsure(records, reduced, batch_id, cached)
            summary = view.summary
            writes = self.dead_letter_writes(summary, rejects, refused, batch_id)
            kept: list[KeptSend] = []
            if summary.minutes:  # ingest accepts only send results here (see runner)
                writes += self.send_writes(reduced, view, batch_id)
                if summary.kept_sends and self.fault is not None:
                    kept = self.kept_sends(records, reduced, view, batch_id)
            return _PreparedBatch(writes, kept, tuple(cached))
        except BaseException:
            for frame in cached:
                frame.unpersist()
            raise

    def driver_view(self, reduced: DataFrame) -> DriverView:
        """The reduction's summary, kept sends and minute partials on the driver (one job, ``driver_view``)."""
        return driver_view(reduced, shard_column(self.fault.shards if self.fault is not None else 1))

    def judge_unsure(
        self, records: DataFrame, reduced: DataFrame, batch_id: int, cached: list[DataFrame]
    ) -> tuple[DataFrame, DriverView, DataFrame | None]:
        """The batch's reduction, what the driver reads of it and its rejects (None without unsure records), once
        the records the fast path left to the rules are judged; frames it caches are added to ``cached``."""
        from pyspark.sql import functions as F

        # One pass over the cache says which writes the batch has (an empty append would still cost a commit, and
        # a replay of the batch skips the same ones) and brings the kept sends and minutes to the driver.
        view = self.driver_view(reduced)
        summary = view.summary
        if not summary.unsure:
            return reduced, view, None
        # Almost always rejects. A valid send among them (one the fast path leaves to the rules) belongs
        # in its key's replay order, so then the batch is classified and reduced again as a whole.
        unsure_judged = self.judged(unsure_records(reduced)).persist()
        cached.append(unsure_judged)
        if unsure_judged.where(F.col("reason").isNull()).limit(1).count():
            log.info("send-ingest batch %d: a valid send off the fast path; classifying the whole batch", batch_id)
            reduced.unpersist()
            reduced = reduce_in_partitions(self.judged(records), self.bucket_upper_ms, batch_id).persist()
            cached.append(reduced)
            return reduced, self.driver_view(reduced), reduced.where(F.col("kind") == "reject")
        unsure_judged.count()  # every unsure record judged now, not in a write
        view = view._replace(summary=summary._replace(rejected=summary.unsure))
        return reduced, view, unsure_judged

    def dead_letter_writes(
        self, summary: BatchSummary, rejects: DataFrame | None, refused: DataFrame | None, batch_id: int
    ) -> list[Callable[[], None]]:
        """The append of the batch's dead letters, the rules' ``rejects`` and the ``refused`` records, if any,
        and with ``metrics`` their count by reason beside it."""
        dead_rows = summary.rejected + (refused.count() if refused is not None else 0)
        if not dead_rows:
            return []
        dead = dead_letter_columns(rejects, batch_id) if rejects is not None else None
        dead = refused if dead is None else (dead if refused is None else dead.unionByName(refused, True))
        writes = [lambda: self.tables.append(Table.DEAD_LETTERS, dead, self.app_id, batch_id, dead_rows)]
        if self.metrics is not None:
            metrics = self.metrics
            writes.append(lambda: metrics.count_dead_letters(dead, batch_id))
        return writes

    def send_writes(self, reduced: DataFrame, view: DriverView, batch_id: int) -> list[Callable[[], None]]:
        """The append of the batch's minute partials to ``send_latency_minutes`` and, with ``metrics``, their
        addition into the latency histogram beside it (from the rows the driver already holds)."""
        minutes = minute_partials(reduced, self.bucket_upper_ms)
        rows = view.summary.minutes
        writes = [lambda: self.tables.append(Table.SEND_LATENCY_MINUTES, minutes, self.app_id, batch_id, rows)]
        if self.metrics is not None:
            metrics = self.metrics
            writes.append(lambda: metrics.observe_minutes(view.minutes, self.bucket_upper_ms, batch_id))
        return writes

    def kept_sends(self, records: DataFrame, reduced: DataFrame, view: DriverView, batch_id: int) -> list[KeptSend]:
        """The sends the fault replay needs (``sends.reduce.kept_sends``), with their shards: those the driver
        already holds, unless pairs' sends span partitions; then those pairs are reduced again over the whole
        batch."""
        from pyspark.sql import functions as F

        assert self.fault is not None
        default_cluster = self.fault.settings.default_cluster
        if not view.summary.spanning_keys:
            return [kept_send(row.asDict(), default_cluster) for row in view.sends]
        log.warning(
            "send-ingest batch %d: %d (cluster, producer, broker) pairs have sends in several partitions "
            "(is the send-result topic keyed by producer_id?); reducing them again over the batch",
            batch_id,
            view.summary.spanning_keys,
        )
        # Only a re-reduction reads the classified batch: planning ``classify`` costs a few tenths of a
        # second of Python and analysis, which a batch keyed as the contract says never pays.
        valid = self.judged(records).where(F.col("reason").isNull())
        floor = latency_floor_column(self.faults.latency_floors_ms)
        updates = kept_sends(reduced, valid, floor, respan=True, batch_id=batch_id)
        return collect_kept_sends(updates, self.fault.shards, default_cluster)

    def without_poison(self, records: DataFrame, batch_id: int, error: Exception) -> _PreparedBatch:
        """The batch prepared without the records its preparation fails on, and those as dead letters
        (``PROCESSING_ERROR``; see ``poison.isolate`` and docs/design/poison-pills.md)."""
        # The records held apart from Kafka first: should Kafka be gone, this fails, and it is not the data.
        held = records.localCheckpoint(eager=True)
        everything = sorted((int(r[0]), int(r[1])) for r in held.select("partition", "offset").collect())

        def attempt(items: Sequence[tuple[int, int]]) -> None:
            prepared = self.prepare(_kept_records(held, everything, items), batch_id)
            for frame in prepared.cached:
                frame.unpersist()

        log.warning(
            "send-ingest batch %d failed before its writes (%s); looking for the records it fails on",
            batch_id,
            error_summary(error),
        )
        _, refused = isolate(everything, attempt, abandon=self.stopping)
        if not refused:  # it went through this time: not the data
            raise error
        details = {item.item: item.detail for item in refused}
        for (partition, offset), detail in details.items():
            log.error(
                "send-ingest batch %d: processing fails on partition %d offset %d, dead-lettered as %s: %s",
                batch_id,
                partition,
                offset,
                PROCESSING_ERROR,
                detail,
            )
        culprits = " OR ".join(f"(partition = {p} AND offset = {o})" for p, o in details)
        letters = refused_letters(held.where(culprits), details, batch_id)
        return self.prepare(held.where(f"NOT ({culprits})"), batch_id, letters)


def _kept_records(
    held: DataFrame, everything: Sequence[tuple[int, int]], items: Sequence[tuple[int, int]]
) -> DataFrame:
    """The ``held`` records at (partition, offset) ``items``, a prefix of what is still kept of the sorted
    ``everything``: those up to its last, but the ones set aside before."""
    if not items:
        return held.limit(0)
    last = items[-1]
    upto = bisect.bisect_right(everything, last)
    gone = set(everything[:upto]) - set(items) if upto != len(items) else set()
    condition = f"(partition < {last[0]} OR (partition = {last[0]} AND offset <= {last[1]}))"
    if gone:
        condition += " AND NOT (" + " OR ".join(f"(partition = {p} AND offset = {o})" for p, o in gone) + ")"
    return held.where(condition)


@dataclass(frozen=True)
class _PreparedBatch:
    """A send-ingest batch ready to write: its writes, its reduced sends on the driver (for the fault replay),
    and the frames to release after."""

    writes: list[Callable[[], None]]
    kept: list[KeptSend]
    cached: tuple[DataFrame, ...]


# Failures that say nothing about a batch's records (``poison``): raised without a search.
_NOT_ABOUT_DATA: tuple[type[BaseException], ...] = (MemoryError,)


def refused_letters(records: DataFrame, details: Mapping[tuple[int, int], str], batch_id: int) -> DataFrame:
    """``dead_letters`` rows (``PROCESSING_ERROR``) for Kafka ``records``; ``details`` by (partition, offset)."""
    from pyspark.sql import functions as F

    detail = F.lit(None).cast("string")
    for (partition, offset), text in details.items():
        detail = F.when((F.col("partition") == partition) & (F.col("offset") == offset), F.lit(text)).otherwise(detail)
    return records.select(
        F.lit(EventType.SEND_RESULT).alias("source"),
        F.col("topic").alias("kafka_topic"),
        F.col("partition").alias("kafka_partition"),
        F.col("offset").alias("kafka_offset"),
        F.col("timestamp").alias("kafka_timestamp"),
        F.substring(F.col("value").cast("string"), 1, 65_536).alias("raw_value"),
        F.lit(PROCESSING_ERROR).alias("reason"),
        detail.alias("detail"),
        F.lit(batch_id).cast("bigint").alias("batch_id"),
    )
