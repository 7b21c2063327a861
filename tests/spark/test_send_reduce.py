"""The send-result path's JVM side: fault table per send, the exact reduction, per-minute statistics, each per
RocketMQ cluster."""

from __future__ import annotations

from pyspark.sql import functions as F

from streaming.domain.faults.settings import ProducerRule
from streaming.job.sends.query import fault_table_column, latency_floor_column
from streaming.job.sends.reduce import minute_statistics, reduce_for_fault_windows, sum_minutes

COLUMNS = (
    "cluster STRING, producer_id STRING, producer_group STRING, broker STRING, event_time_ms BIGINT, latency_ms BIGINT, "
    "outcome STRING, client_version STRING, kafka_partition INT, kafka_offset BIGINT"
)


def test_fault_table_per_send_never_fails_on_free_text_versions(spark):
    rows = [
        ("DefaultCluster", "p", "PG", "b", 0, 1, "OK", v, 0, i)
        for i, v in enumerate(["V4_9_8", "5.3.3", "409", "441", "unknown", None])
    ]
    frame = spark.createDataFrame(rows, COLUMNS).withColumn(
        "fault_table", fault_table_column([ProducerRule("rocketmq-4", "*", "4.9")], "rocketmq-5")
    )
    got = [r["fault_table"] for r in frame.orderBy("kafka_offset").collect()]
    assert got == ["rocketmq-4", "rocketmq-5", "rocketmq-4", "rocketmq-5", "rocketmq-5", "rocketmq-5"]


def test_the_jvm_names_each_sends_fault_table_as_the_python_matcher_does(spark):
    from streaming.domain.faults.settings import FaultSettings

    rules = (
        ProducerRule("rocketmq-4", "pay_*"),
        ProducerRule("rocketmq-4", "ord[!x]r?", "5"),
        ProducerRule("rocketmq-4", "a[1]"),
        ProducerRule("rocketmq-4", "50%"),
    )
    faults = FaultSettings(rules=rules)
    groups = ["pay_eu", "payXeu", "order", "ordxr", "orders", "a[1]", "a1", "a2", "50%", "500", "", "pay_\nx"]
    rows = [("DefaultCluster", "p", g, "b", 0, 1, "OK", "5.3.3", 0, i) for i, g in enumerate(groups)]
    frame = spark.createDataFrame(rows, COLUMNS).withColumn("fault_table", fault_table_column(rules, "rocketmq-5"))
    got = [r["fault_table"] for r in frame.orderBy("kafka_offset").collect()]
    assert got == [faults.table_for(g, "5").name for g in groups]
    assert got.count("rocketmq-4") == 6  # pay_eu, orders, a[1], a1, 50%, pay_\nx


def test_reduction_keeps_exactly_the_sends_that_can_matter(spark):
    # offsets: 0 first (kept), 1 fast (dropped), 2 slow (notable), 3 fast right after (kept: may end the window),
    # 4 fast (dropped), 5 error (notable), 6 fast after it (kept), 7 fast and last (kept: presence)
    latencies = [5, 5, 900, 5, 5, 5, 5, 5]
    outcomes = ["OK", "OK", "OK", "OK", "OK", "TIMEOUT", "OK", "OK"]
    rows = [
        ("DefaultCluster", "p", "PG", "b", 1000 * i, lat, out, "V4_9_8", 0, i)
        for i, (lat, out) in enumerate(zip(latencies, outcomes, strict=False))
    ]
    frame = spark.createDataFrame(rows, COLUMNS).withColumn("fault_table", F.lit("rocketmq-4"))
    kept = reduce_for_fault_windows(frame, latency_floor_column({"rocketmq-4": 550}))
    assert sorted(r["kafka_offset"] for r in kept.collect()) == [0, 2, 3, 5, 6, 7]


def test_minute_statistics_with_cumulative_buckets(spark):
    rows = [
        ("DefaultCluster", "p", "PG", "b", 60_000 * (i // 3), lat, "OK" if lat < 3000 else "TIMEOUT", "V5", 0, i)
        for i, lat in enumerate([10, 60, 700, 20, 3000, 40])
    ]
    stats = {
        r["minute_start"].minute: r
        for r in minute_statistics(spark.createDataFrame(rows, COLUMNS), [50, 550, 2000]).collect()
    }
    assert stats[0]["sends"] == 3 and stats[0]["bucket_counts"] == [1, 2, 3] and stats[0]["latency_max_ms"] == 700
    assert stats[1]["errors"] == 1 and stats[1]["bucket_counts"] == [2, 2, 2] and stats[1]["latency_sum_ms"] == 3060


def test_summed_partials_equal_the_statistics_of_all_sends_at_once(spark):
    """``send_latency_minutes`` holds one partial row per batch and minute: whatever the batching, the
    summed rows equal the statistics computed over every send in one go."""
    import random

    rng = random.Random(7)
    rows = [
        (
            "default",
            "p",
            rng.choice(["PG", "PH"]),
            rng.choice(["b1", "b2"]),
            rng.randrange(0, 240_000),
            rng.choice([3, 40, 80, 600, 2500, 9000]),
            rng.choice(["OK", "OK", "OK", "TIMEOUT"]),
            "V5",
            0,
            i,
        )
        for i in range(400)
    ]
    sends = spark.createDataFrame(rows, COLUMNS)
    buckets = [50, 550, 2000]
    partials = None
    for batch_id, (low, high) in enumerate([(0, 90), (90, 91), (91, 300), (300, 400)]):
        part = minute_statistics(sends.where(F.col("kafka_offset").between(low, high - 1)), buckets)
        part = part.withColumn("batch_id", F.lit(batch_id).cast("bigint"))
        partials = part if partials is None else partials.unionByName(part)
    assert partials is not None

    def by_key(frame):  # type: ignore[no-untyped-def]
        columns = ("sends", "errors", "latency_sum_ms", "latency_max_ms", "bucket_upper_ms", "bucket_counts")
        return {
            (r["broker"], r["producer_group"], r["minute_start"]): tuple(r[c] for c in columns) for r in frame.collect()
        }

    summed = by_key(sum_minutes(partials))
    assert summed == by_key(minute_statistics(sends, buckets))
    assert partials.count() > len(summed)  # the batching really split minutes


def test_fault_table_in_use_is_null_for_producers_without_send_latency_fault_enable(spark):
    from streaming.job.sends.query import fault_table_in_use

    rows = [
        ("DefaultCluster", "p", "PG", "b", 0, 1, "OK", "V4_9_8", 0, i, flag)
        for i, flag in enumerate([True, False, None])
    ]
    frame = spark.createDataFrame(rows, COLUMNS + ", send_latency_fault_enable BOOLEAN")
    rules = [ProducerRule("rocketmq-4", "*", "4.9")]
    for default, want in ((False, ["rocketmq-4", None, None]), (True, ["rocketmq-4", None, "rocketmq-4"])):
        got = frame.withColumn("fault_table", fault_table_in_use(rules, "rocketmq-5", default)).orderBy("kafka_offset")
        assert [r["fault_table"] for r in got.collect()] == want, default


def test_reduction_keeps_only_presence_of_producers_without_a_fault_table(spark):
    # the same sends as above from a producer without sendLatencyFaultEnable: the slow and failed ones change
    # no fault item, so only the first and the last (presence) are kept
    latencies = [5, 5, 900, 5, 5, 5, 5, 5]
    outcomes = ["OK", "OK", "OK", "OK", "OK", "TIMEOUT", "OK", "OK"]
    rows = [
        ("DefaultCluster", "p", "PG", "b", 1000 * i, lat, out, "V4_9_8", 0, i)
        for i, (lat, out) in enumerate(zip(latencies, outcomes, strict=True))
    ]
    frame = spark.createDataFrame(rows, COLUMNS).withColumn("fault_table", F.lit(None).cast("string"))
    kept = reduce_for_fault_windows(frame, latency_floor_column({"rocketmq-4": 550}))
    assert sorted(r["kafka_offset"] for r in kept.collect()) == [0, 7]


def _two_clusters(spark):  # type: ignore[no-untyped-def]
    """The same producer, group and broker names in two clusters, their sends interleaved in time: east's second
    send is slow, every west send is fast."""
    east = [("east", "p", "PG", "b", 2000 * i, lat, "OK", "V4_9_8", 0, i) for i, lat in enumerate([5, 900, 5, 5, 5])]
    west = [("west", "p", "PG", "b", 2000 * i + 1000, 5, "OK", "V4_9_8", 0, 5 + i) for i in range(5)]
    return spark.createDataFrame(east + west, COLUMNS).withColumn("fault_table", F.lit("rocketmq-4"))


def test_two_clusters_same_producer_and_broker_are_reduced_apart(spark):
    kept = reduce_for_fault_windows(_two_clusters(spark), latency_floor_column({"rocketmq-4": 550}))
    got = sorted((r["cluster"], r["kafka_offset"]) for r in kept.collect())
    # east: first, the slow one, the one after it, last; west: only first and last. One merged pair would keep
    # 0, 1, 6 (west's send after east's slow one) and 9 only.
    assert got == [("east", 0), ("east", 1), ("east", 2), ("east", 4), ("west", 5), ("west", 9)]


def test_two_clusters_same_broker_and_group_have_their_own_minute_statistics(spark):
    sends = _two_clusters(spark)
    partials = minute_statistics(sends, [50, 550]).withColumn("batch_id", F.lit(0).cast("bigint"))
    for frame in (partials, sum_minutes(partials)):
        stats = {r["cluster"]: (r["sends"], r["latency_max_ms"], r["bucket_counts"]) for r in frame.collect()}
        assert stats == {"east": (5, 900, [4, 4]), "west": (5, 5, [5, 5])}
