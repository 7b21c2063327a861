"""The send-result path, JVM side: reduce a micro-batch of send results before any Python sees them.

Per (cluster, producer, broker) and batch only the sends that can change a fault item (plus the first and last, for
window ends and presence) are kept, and the per-minute latency statistics are computed as partial aggregates,
all in one JVM pass per partition (``reduce_kafka_batch``). The Spark SQL versions here are the tests' oracle.
Which sends are kept and why: ``docs/design/send-pass.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from streaming.contract.events import CLUSTER_SINCE_VERSION

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from streaming.job.ingest.classify import IngestSettings

# A kept send's pair, and a minute's statistics, belong to one RocketMQ cluster: the send's, already resolved
# (``classify.cluster_sql``; ``KafkaSendReducer`` the same way), so two clusters' same names stay apart.
PAIR_KEY = ("cluster", "producer_id", "broker")
MINUTE_KEY = ("cluster", "broker", "producer_group", "minute_start")

FAULT_UPDATE_COLUMNS = (
    "cluster",
    "producer_id",
    "producer_group",
    "broker",
    "event_time_ms",
    "latency_ms",
    "outcome",
    "client_version",
    "fault_table",
    "kafka_partition",
    "kafka_offset",
)


def notable_send(latency_floor_ms: Column) -> Column:
    from pyspark.sql import functions as F

    faulty = (F.col("outcome") != F.lit("OK")) | (F.col("latency_ms") >= latency_floor_ms)
    return F.col("fault_table").isNotNull() & faulty


def reduce_for_fault_windows(sends: DataFrame, latency_floor_ms: Column) -> DataFrame:
    """Keep only the sends that can matter to a fault item (see the module docstring)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    key = list(PAIR_KEY)
    order = ["event_time_ms", "kafka_partition", "kafka_offset"]
    # One window, so one shuffle and one sort of the batch: the last send of a key is the one without a
    # successor (the order is total: a Kafka partition and offset name one record).
    forward = Window.partitionBy(*key).orderBy(*order)
    flagged = (
        sends.withColumn("_notable", notable_send(latency_floor_ms))
        .withColumn("_previous_notable", F.lag("_notable", 1).over(forward))
        .withColumn("_first", F.row_number().over(forward) == 1)
        .withColumn("_last", F.lead(F.lit(True), 1).over(forward).isNull())
    )
    kept = flagged.where(
        F.col("_notable") | F.coalesce(F.col("_previous_notable"), F.lit(False)) | F.col("_first") | F.col("_last")
    )
    return kept.select(*FAULT_UPDATE_COLUMNS)


def minute_statistics(sends: DataFrame, bucket_upper_ms: Sequence[int]) -> DataFrame:
    """Partial per-minute statistics of one batch: counts, errors, sum/max latency, cumulative buckets.

    Buckets are cumulative counts of sends with ``latency_ms <= upper`` for each upper bound (the fault
    table's ``latencyMax`` thresholds), so Prometheus-style histograms and the client's isolation levels
    can be read from them directly.
    """
    from pyspark.sql import functions as F

    minute = F.date_trunc("minute", F.timestamp_millis(F.col("event_time_ms"))).alias("minute_start")
    bucket_counts = [
        F.sum(F.when(F.col("latency_ms") <= F.lit(upper), 1).otherwise(0)).cast("bigint") for upper in bucket_upper_ms
    ]
    return sends.groupBy("cluster", "broker", "producer_group", minute).agg(
        F.count(F.lit(1)).alias("sends"),
        F.sum(F.when(F.col("outcome") != "OK", 1).otherwise(0)).cast("bigint").alias("errors"),
        F.sum("latency_ms").cast("bigint").alias("latency_sum_ms"),
        F.max("latency_ms").cast("bigint").alias("latency_max_ms"),
        F.array(*[F.lit(int(u)).cast("bigint") for u in bucket_upper_ms]).alias("bucket_upper_ms"),
        F.array(*bucket_counts).alias("bucket_counts"),
    )


def sum_minutes(partials: DataFrame) -> DataFrame:
    """``send_latency_minutes`` as totals: one row per (cluster, broker, producer group, minute), whatever the
    batching.

    Counts and sums add up, the maximum is the maximum, and cumulative bucket counts add element-wise
    (rows of one minute share their bucket bounds unless the fault table changed in that minute; the
    bounds of the newest batch are kept, as the histogram does).
    """
    from pyspark.sql import functions as F

    key = list(MINUTE_KEY)
    exploded = partials.select(
        *key,
        "sends",
        "errors",
        "latency_sum_ms",
        "latency_max_ms",
        "batch_id",
        "bucket_upper_ms",
        F.posexplode_outer("bucket_counts").alias("bucket", "count"),
    )
    buckets = exploded.groupBy(*key, "bucket").agg(F.sum("count").alias("count"))
    buckets = buckets.groupBy(*key).agg(F.array_sort(F.collect_list(F.struct("bucket", "count"))).alias("_buckets"))
    totals = partials.groupBy(*key).agg(
        F.sum("sends").alias("sends"),
        F.sum("errors").alias("errors"),
        F.sum("latency_sum_ms").alias("latency_sum_ms"),
        F.max("latency_max_ms").alias("latency_max_ms"),
        F.max_by("bucket_upper_ms", "batch_id").alias("bucket_upper_ms"),
        F.max("batch_id").alias("batch_id"),
    )
    return totals.join(buckets, key, "left").select(
        *key,
        "sends",
        "errors",
        "latency_sum_ms",
        "latency_max_ms",
        "bucket_upper_ms",
        F.transform("_buckets", lambda b: b["count"]).alias("bucket_counts"),
        "batch_id",
    )


class BatchSummary(NamedTuple):
    """What ``reduce_in_partitions`` left of a batch: rows per kind, and pairs kept in several partitions."""

    rejected: int
    kept_sends: int
    minutes: int
    spanning_keys: int
    latest_send_ms: int  # the newest kept send's event time (0 without one)
    unsure: int = 0  # records reduce_kafka_batch left to the rules (rows of kind "unsure")


def reduce_in_partitions(records: DataFrame, bucket_upper_ms: Sequence[int], batch_id: int) -> DataFrame:
    """One JVM pass per partition over ``sends.query.send_batch`` rows (``SendBatchReducer``, on Spark's internal
    rows): rows of kind ``reject`` (the record's dead-letter columns), ``send`` (a kept send, with its
    ``spark_partition``), ``minute`` (a partition's partial minute statistics, ``minute_partials``) and one
    ``summary`` per partition (``summarize``); every row carries ``batch_id``."""
    from pyspark.sql import DataFrame

    session = records.sparkSession
    jvm = session.sparkContext._jvm
    assert jvm is not None
    reducer = jvm.io.github.rrm.sends.SendBatchReducer
    return DataFrame(reducer.reduce(records._jdf, [int(upper) for upper in bucket_upper_ms], int(batch_id)), session)


def reduce_kafka_batch(
    kafka: DataFrame,
    strict_spec: tuple[str, str],
    ingest: IngestSettings,
    fault_table_template: DataFrame,
    bucket_upper_ms: Sequence[int],
    batch_id: int,
) -> DataFrame:
    """``reduce_in_partitions`` straight from a micro-batch of Kafka records (``KafkaSendReducer``): each record
    the ingest fast path takes is read, given its fault table and reduced in the same JVM pass, without a row of
    classified columns per send in between; every other record is a row of kind ``unsure`` (its Kafka columns,
    ``unsure_records``) for ``classify`` to judge. ``strict_spec``: ``ingest.strict_events_spec`` of the send
    contract; ``fault_table_template``: ``sends.query.fault_table_template``. A send's cluster is resolved as
    ``classify.cluster_sql`` does, with ``ingest.default_cluster``."""
    from pyspark.sql import DataFrame

    session = kafka.sparkSession
    jvm = session.sparkContext._jvm
    assert jvm is not None
    ddl, checks = strict_spec
    reduced = jvm.io.github.rrm.sends.KafkaSendReducer.reduce(
        kafka._jdf,
        ddl,
        checks,
        dict(ingest.topics),
        int(ingest.max_event_bytes),
        int(ingest.max_future_skew_ms),
        fault_table_template._jdf,
        [int(upper) for upper in bucket_upper_ms],
        int(batch_id),
        ingest.default_cluster,
        CLUSTER_SINCE_VERSION,
    )
    return DataFrame(reduced, session)


def unsure_records(reduced: DataFrame) -> DataFrame:
    """The records ``reduce_kafka_batch`` left to the rules, with the Kafka source's columns ``classify`` reads."""
    from pyspark.sql import functions as F

    return reduced.where(F.col("kind") == "unsure").select(
        F.col("kafka_value").alias("value"),
        F.col("kafka_topic").alias("topic"),
        F.col("kafka_partition").alias("partition"),
        F.col("kafka_offset").alias("offset"),
        F.col("kafka_timestamp").alias("timestamp"),
    )


def _in_several_partitions() -> Column:
    """Per (cluster, producer, broker) group of kept sends: were they kept in more than one Spark partition?"""
    from pyspark.sql import functions as F

    return F.min("spark_partition") != F.max("spark_partition")


def summarize(reduced: DataFrame) -> BatchSummary:
    """Counts per kind, how many (cluster, producer, broker) pairs have kept sends from more than one partition, and
    the newest kept send's event time: added up in the JVM from the partitions' ``summary`` rows (one collect,
    no shuffle; on a persisted reduction it is the job that fills the cache)."""
    jvm = reduced.sparkSession.sparkContext._jvm
    assert jvm is not None
    totals = jvm.io.github.rrm.sends.SendBatchReducer.summarize(reduced._jdf)
    return BatchSummary(*(int(value) for value in totals))


# What a ``summary`` row holds (``SendBatchReducer.summarize`` reads these), and a minute partial's statistics.
SUMMARY_COLUMNS = (
    "spark_partition",
    "rejected_rows",
    "kept_send_rows",
    "minute_rows",
    "latest_send_ms",
    "key_fingerprints",
    "unsure_rows",
)
MINUTE_STATISTICS = ("minute_start_ms", "sends", "errors", "latency_sum_ms", "latency_max_ms", "bucket_counts")


class DriverView(NamedTuple):
    """What the driver reads of a reduction, from one job (``driver_view``): the ``summarize`` totals, the kept
    sends (``FAULT_UPDATE_COLUMNS``, ``shard``) and the minute partials (``MINUTE_KEY``'s columns but the minute,
    ``MINUTE_STATISTICS``), as rows."""

    summary: BatchSummary
    sends: list[Any]
    minutes: list[Any]


def driver_view(reduced: DataFrame, shard: Column) -> DriverView:
    """The reduction's ``DriverView`` in one collect, ``shard`` the column giving each kept send its shard. On a
    persisted reduction that collect is the job that fills the cache (as ``summarize``'s would), and the kept
    sends and minutes reach the driver from it, without a job of their own."""
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    jvm = reduced.sparkSession.sparkContext._jvm
    assert jvm is not None
    sends = [c for c in FAULT_UPDATE_COLUMNS if c not in SUMMARY_COLUMNS]
    view = reduced.where(F.col("kind").isin("summary", "send", "minute")).select(
        "kind",
        *SUMMARY_COLUMNS,
        *sends,
        shard.alias("shard"),
        *[c for c in MINUTE_STATISTICS if c not in sends],
    )
    totals, rows = jvm.io.github.rrm.sends.SendBatchReducer.collectForDriver(view._jdf)
    collected = DataFrame(rows, reduced.sparkSession).collect()
    return DriverView(
        BatchSummary(*(int(value) for value in totals)),
        [row for row in collected if row["kind"] == "send"],
        [row for row in collected if row["kind"] == "minute"],
    )


def minute_partials(reduced: DataFrame, bucket_upper_ms: Sequence[int]) -> DataFrame:
    """The batch's ``send_latency_minutes`` rows (``minute_statistics``'s columns and ``batch_id``): each
    partition's partial statistics per (cluster, broker, producer group, minute), as they are; ``sum_minutes`` adds them
    up."""
    from pyspark.sql import functions as F

    return reduced.where(F.col("kind") == "minute").select(
        "cluster",
        "broker",
        "producer_group",
        F.timestamp_millis("minute_start_ms").alias("minute_start"),
        "sends",
        "errors",
        "latency_sum_ms",
        "latency_max_ms",
        F.array(*[F.lit(int(u)).cast("bigint") for u in bucket_upper_ms]).alias("bucket_upper_ms"),
        "bucket_counts",
        "batch_id",
    )


def kept_sends(
    reduced: DataFrame, valid_sends: DataFrame | None, latency_floor_ms: Column, respan: bool, batch_id: int
) -> DataFrame:
    """The batch's reduced sends (``FAULT_UPDATE_COLUMNS`` and ``batch_id``). With ``respan``, the pairs whose
    sends were seen in more than one partition are reduced again by ``reduce_for_fault_windows`` over
    ``valid_sends`` (the whole batch: a per-partition reduction may have dropped the send right after another
    partition's notable one)."""
    from pyspark.sql import functions as F

    sends = reduced.where(F.col("kind") == "send")
    kept = sends.select(*FAULT_UPDATE_COLUMNS, "batch_id")
    if not respan:
        return kept
    if valid_sends is None:
        raise ValueError("re-reducing spanning pairs needs the batch's valid sends")
    key = list(PAIR_KEY)
    spanning = sends.groupBy(*key).agg(_in_several_partitions().alias("_spans")).where(F.col("_spans")).select(*key)
    again = reduce_for_fault_windows(valid_sends.join(spanning, key, "left_semi"), latency_floor_ms)
    again = again.withColumn("batch_id", F.lit(int(batch_id)).cast("bigint"))
    return kept.join(spanning, key, "left_anti").unionByName(again)
