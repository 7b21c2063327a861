"""The send-result path: Kafka -> classify -> JVM reduction -> fault-window state -> Delta.

Two queries, chained through an internal Delta table (exactly once end to end):

1. ``send-ingest`` reads the send-result topic, classifies records in the JVM (``ingest.classify``) and,
   per micro-batch in ``foreachBatch``: appends dead letters; appends the batch's per-minute latency
   statistics to ``send_latency_minutes`` (partial aggregates, summed by readers: an append costs one
   small commit where an additive MERGE read and rewrote the table's recent files on every batch); and
   appends the *reduced* sends (``send_reduce``: a few rows per (producer, broker) plus the slow and
   failed sends) to the internal table ``_send_fault_updates``.
2. ``fault-windows`` reads ``_send_fault_updates`` as a Delta stream and keeps one fault item per
   (producer, broker) in ``applyInPandasWithState`` with the producer's fault table and semantics,
   waking up at each window's end (event-time timeout); it emits fault-window transitions and item
   status, and its sink maintains ``broker_status_current``.

Splitting the path this way keeps the heavy, per-send work in the JVM (the Python operator sees a small
fraction of the sends) while the state that needs RocketMQ's semantics stays in Python.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from streaming.job.ingest import (
    EventContract,
    IngestSettings,
    classify,
    dead_letter_columns,
    kafka_stream,
    typed_column,
)
from streaming.job.send_reduce import minute_statistics, reduce_for_fault_windows
from streaming.job.sinks import DeltaTables, run_concurrently

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

FAULT_UPDATES_TABLE = "_send_fault_updates"
FAULT_UPDATES_DDL = (
    "producer_id STRING, producer_group STRING, broker STRING, event_time_ms BIGINT, latency_ms BIGINT, "
    "outcome STRING, client_version STRING, fault_table STRING, kafka_partition INT, kafka_offset BIGINT, "
    "batch_id BIGINT"
)


@dataclass(frozen=True)
class FaultTableRule:
    """Which fault table a producer uses: first rule whose group glob / client line matches wins."""

    table: str
    producer_group_glob: str = "*"
    client_line: str | None = None  # "4.9" or "5", from the send result's client_version


def fault_table_column(rules: Sequence[FaultTableRule], default_table: str) -> Column:
    """A JVM expression naming each send's fault table (first matching rule, else the default)."""
    from pyspark.sql import functions as F

    # Same reading as ClientLine.parse: "V4_9_8"/"4.9.8" -> 4.9, "5.3.3" -> 5, an MQVersion ordinal such as
    # "409" -> 4.9 (V5_0_0 is 413); free text -> NULL (no client-line rule matches), never a failed query.
    major = "try_cast(regexp_extract(client_version, '^[Vv]?([0-9]+)', 1) AS INT)"
    line = F.expr(
        f"CASE WHEN {major} IS NULL THEN NULL WHEN {major} >= 100 THEN IF({major} >= 413, '5', '4.9') "
        f"WHEN {major} >= 5 THEN '5' ELSE '4.9' END"
    )
    expr = F.lit(default_table)
    for rule in reversed(list(rules)):
        condition = F.col("producer_group").like(rule.producer_group_glob.replace("*", "%").replace("?", "_"))
        if rule.client_line is not None:
            condition = condition & (line == F.lit(rule.client_line))
        expr = F.when(condition, F.lit(rule.table)).otherwise(expr)
    return expr


def fault_table_in_use(rules: Sequence[FaultTableRule], default_table: str, fault_enable_default: bool) -> Column:
    """The fault table a send's producer uses, NULL when it runs without ``sendLatencyFaultEnable`` (the
    send result's ``send_latency_fault_enable``, else ``fault_enable_default``): RocketMQ then keeps no
    fault items and avoids no broker (semantics 6.4), so no table applies."""
    from pyspark.sql import functions as F

    enabled = F.coalesce(F.col("send_latency_fault_enable"), F.lit(bool(fault_enable_default)))
    return F.when(enabled, fault_table_column(rules, default_table))


def latency_floor_column(floors_ms: Mapping[str, int]) -> Column:
    """Per fault table, the smallest latency with a positive not-available duration."""
    from pyspark.sql import functions as F

    expr = F.lit(min(floors_ms.values()))
    for table, floor in floors_ms.items():
        expr = F.when(F.col("fault_table") == table, F.lit(int(floor))).otherwise(expr)
    return expr


def sends_from(classified: DataFrame, table_rules: Sequence[FaultTableRule], default_table: str,
               fault_enable_default: bool) -> DataFrame:  # fmt: skip
    """Valid send results with their fields, read from the typed column ``classify`` extracted, and the
    fault table in use (``fault_table_in_use``)."""
    from pyspark.sql import functions as F

    typed = typed_column("send_result")

    def field(name: str, type_: str) -> Column:
        return F.col(f"{typed}.{name}").cast(type_).alias(name)

    return classified.where(F.col("reason").isNull()).select(
        field("producer_id", "string"), field("producer_group", "string"), field("topic", "string"),
        field("broker", "string"), field("queue_id", "int"), field("latency_ms", "bigint"),
        field("outcome", "string"), field("client_version", "string"),
        F.col("event_time_ms"), "kafka_partition", "kafka_offset",
        field("send_latency_fault_enable", "boolean"),
    ).withColumn("fault_table", fault_table_in_use(table_rules, default_table, fault_enable_default))  # fmt: skip


def start_send_ingest(
    session: SparkSession,
    tables: DeltaTables,
    ingest: IngestSettings,
    contracts: Mapping[str, EventContract],
    table_rules: Sequence[FaultTableRule],
    default_table: str,
    latency_floors_ms: Mapping[str, int],
    bucket_upper_ms: Sequence[int],
    checkpoint: str,
    app_id: str,
    trigger_interval: str | None,
    available_now: bool = False,
    fault_enable_default: bool = False,
) -> StreamingQuery:
    classified = classify(kafka_stream(session, ingest), contracts, ingest)
    updates_path = str(tables.root / FAULT_UPDATES_TABLE)

    def write_batch(batch: DataFrame, batch_id: int) -> None:
        from pyspark.sql import functions as F

        from streaming.job.delta_sink import append_idempotent

        # Cache only what the writes read: the raw value is kept for rejects alone, the variant not at all.
        # Everything below reads this cache; the Kafka records are read and classified once.
        batch = batch.select(
            "event_type", "kafka_topic", "kafka_partition", "kafka_offset", "kafka_timestamp", "event_time_ms",
            F.when(F.col("reason").isNotNull(), F.col("raw_value")).alias("raw_value"), "reason", "detail",
            typed_column("send_result"),
        ).persist()  # fmt: skip
        try:
            # One pass over the cache says which writes the batch has; an empty append would still cost a
            # commit, and a replay of the batch skips the same ones.
            counts = batch.agg(
                F.count_if(F.col("reason").isNotNull()).alias("rejected"),
                F.count_if(F.col("reason").isNull()).alias("valid"),
            ).first()
            writes = []
            if counts["rejected"]:
                dead = dead_letter_columns(batch, batch_id)
                writes.append(lambda: tables.append("dead_letters", dead, app_id, batch_id))
            if counts["valid"]:  # ingest accepts only send results here (see runner)
                sends = sends_from(batch, table_rules, default_table, fault_enable_default)
                minutes = minute_statistics(sends, bucket_upper_ms)
                minutes = minutes.withColumn("batch_id", F.lit(batch_id).cast("bigint"))
                writes.append(lambda: tables.append("send_latency_minutes", minutes, app_id, batch_id))
                reduced = reduce_for_fault_windows(sends, latency_floor_column(latency_floors_ms))
                reduced = reduced.withColumn("batch_id", F.lit(batch_id).cast("bigint"))
                writes.append(
                    lambda: append_idempotent(reduced, updates_path, f"{app_id}:{FAULT_UPDATES_TABLE}", batch_id)
                )
            run_concurrently(writes)
        finally:
            batch.unpersist()

    writer = classified.writeStream.queryName("send-ingest").foreachBatch(write_batch)
    writer = writer.option("checkpointLocation", checkpoint)
    if available_now:
        writer = writer.trigger(availableNow=True)
    elif trigger_interval:
        writer = writer.trigger(processingTime=trigger_interval)
    return writer.start()


def ensure_fault_updates_table(session: SparkSession, tables: DeltaTables) -> str:
    from streaming.job.delta_sink import ensure_table

    path = str(tables.root / FAULT_UPDATES_TABLE)
    ensure_table(session, path, FAULT_UPDATES_DDL)
    return path
