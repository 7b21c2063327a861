"""The one-pass JVM reduction of a send batch (``SendBatchReducer``) against the Spark SQL reference rules.

Records go through the job's own ``classify`` and ``send_batch``; the one-pass path (``reduce_in_partitions``,
``summarize``, ``minute_partials`` as ``sum_minutes`` reads them, ``kept_sends``, and ``driver_view``, which brings
the summary, kept sends and minutes to the driver in one job) must give exactly the rows the SQL rules
(``reduce_for_fault_windows``, ``minute_statistics``, ``dead_letter_columns``) give over the whole batch, both
when each producer's sends are in one partition (the contract's keying) and when they are spread over all.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime

import pytest
from pyspark.sql import functions as F

from streaming.domain.faults.settings import ProducerRule
from streaming.job.ingest.classify import IngestSettings, classify, contracts_for, dead_letter_columns
from streaming.job.sends.fault_replay import collect_kept_sends, kept_send, shard_column
from streaming.job.sends.query import latency_floor_column, send_batch
from streaming.job.sends.reduce import (
    FAULT_UPDATE_COLUMNS,
    MINUTE_STATISTICS,
    driver_view,
    kept_sends,
    minute_partials,
    minute_statistics,
    reduce_for_fault_windows,
    reduce_in_partitions,
    sum_minutes,
    summarize,
)

BASE = 1_700_000_000_000
BUCKETS = [50, 100, 550, 1000, 2000, 3000, 15000]
FLOORS = {"rocketmq-4": 550, "rocketmq-5": 100}
RULES = [ProducerRule("rocketmq-5", "PG5*")]


def _records(seed: int, count: int) -> list[tuple[bytes, str, int, int, datetime]]:
    """Send results over 9 producers x 3 brokers in three RocketMQ clusters of the same names (contract version 1,
    or 2 naming east or no cluster: the default one; 2 naming west) with ties in event time, slow sends and errors,
    some producers without sendLatencyFaultEnable, and a few rejects; Kafka partition = hash of the producer."""
    rng = random.Random(seed)
    stamp = datetime.fromtimestamp(BASE / 1000 + 3600, tz=UTC)
    rows = []
    for offset in range(count):
        producer = rng.randrange(9)
        event = {
            "type": "send_result",
            "schema_version": 1,
            "event_time": BASE + rng.randrange(0, 180_000, 250),  # 250 ms steps: many ties, three minutes
            "producer_id": f"10.0.0.{producer}@{producer}#1",
            "producer_group": "PG5-orders" if producer % 3 == 0 else "PG-billing",
            "topic": "T",
            "broker": f"broker-{rng.randrange(3)}",
            "queue_id": rng.randrange(8),
            "latency_ms": rng.choice([1, 7, 49, 50, 99, 100, 549, 550, 999, 2500, 16000]),
            "outcome": rng.choice(["OK"] * 8 + ["TIMEOUT", "BROKER_ERROR"]),
            "client_version": "V4_9_8",
            "send_latency_fault_enable": producer != 4,
        }
        cluster = rng.choice(["v1", "east", "west", None])
        if cluster != "v1":
            event |= {"schema_version": 2, "cluster": cluster}
        value = json.dumps(event).encode()
        if rng.random() < 0.02:
            value = rng.choice([b"{not json", json.dumps({**event, "latency_ms": -3}).encode()])
        rows.append((value, "sends", producer % 4, offset, stamp))
    return rows


def _batch(spark, rows, keyed: bool):  # type: ignore[no-untyped-def]
    frame = spark.createDataFrame(rows, "value BINARY, topic STRING, partition INT, offset BIGINT, timestamp TIMESTAMP")
    # keyed: a Spark partition per Kafka partition, as the Kafka source reads them; else every pair everywhere
    frame = frame.repartition(4, "partition") if keyed else frame.repartition(4)
    classified = classify(
        frame, contracts_for(("send_result",)), IngestSettings("unused:9092", {"sends": "send_result"})
    )
    return send_batch(classified, RULES, "rocketmq-4", False, FLOORS)


def _rows(frame, columns):  # type: ignore[no-untyped-def]
    return sorted(tuple(row[c] for c in columns) for row in frame.collect())


def _in_order(sends):  # type: ignore[no-untyped-def]
    return sorted(sends, key=lambda k: (k.cluster, k.producer_id, k.broker, k.kafka_partition, k.kafka_offset))


@pytest.mark.parametrize("keyed", [True, False], ids=["keyed-by-producer", "spread-over-partitions"])
def test_one_pass_reduction_equals_the_sql_rules_over_the_whole_batch(spark, keyed):
    records = _batch(spark, _records(seed=11, count=3000), keyed)
    floor = latency_floor_column(FLOORS)
    reduced = reduce_in_partitions(records, BUCKETS, 7).persist()
    try:
        view = driver_view(reduced, shard_column(8))  # the job's first look: the job that fills the cache
        summary = summarize(reduced)
        assert view.summary == summary
        valid = records.where(F.col("reason").isNull())
        # the driver's kept sends and minutes: those of the reduction as it is, shards as collect_kept_sends gives
        assert _in_order(kept_send(row.asDict()) for row in view.sends) == _in_order(
            collect_kept_sends(kept_sends(reduced, valid, floor, respan=False, batch_id=7), 8)
        )
        minute_columns = ("cluster", "broker", "producer_group", *MINUTE_STATISTICS)
        assert sorted(tuple(row[c] for c in minute_columns) for row in view.minutes) == _rows(
            reduced.where(F.col("kind") == "minute"), minute_columns
        )
        expected_sends = _rows(reduce_for_fault_windows(valid, floor), FAULT_UPDATE_COLUMNS)
        updates = kept_sends(reduced, valid, floor, respan=bool(summary.spanning_keys), batch_id=7)
        assert _rows(updates, FAULT_UPDATE_COLUMNS) == expected_sends
        assert {row["batch_id"] for row in updates.collect()} == {7}  # re-reduced rows too
        assert {row["cluster"] for row in updates.collect()} == {"DefaultCluster", "east", "west"}
        assert summary.kept_sends >= len(expected_sends) > 27  # every pair's first and last, and notable sends
        assert summary.latest_send_ms == valid.agg(F.max("event_time_ms")).first()[0]  # a pair's last is kept
        kept = reduced.where(F.col("kind") == "send")
        spanning = kept.groupBy("cluster", "producer_id", "broker").agg(F.countDistinct("spark_partition").alias("n"))
        assert summary.spanning_keys == spanning.where(F.col("n") > 1).count()
        assert summary.kept_sends == kept.count()
        if keyed:
            assert summary.spanning_keys == 0
        else:
            assert summary.spanning_keys > 0
            # without the re-reduction, the per-partition rows differ from the batch's (the test can tell)
            assert (
                _rows(kept_sends(reduced, valid, floor, respan=False, batch_id=7), FAULT_UPDATE_COLUMNS)
                != expected_sends
            )

        minute_columns = (
            "cluster",
            "broker",
            "producer_group",
            "minute_start",
            "sends",
            "errors",
            "latency_sum_ms",
            "latency_max_ms",
            "bucket_upper_ms",
            "bucket_counts",
        )
        expected_minutes = _rows(minute_statistics(valid, BUCKETS), minute_columns)
        partials = minute_partials(reduced, BUCKETS)
        assert {row["batch_id"] for row in partials.collect()} == {7}
        assert _rows(sum_minutes(partials), minute_columns) == expected_minutes
        assert (
            summary.minutes == partials.count() > len(expected_minutes) == 3 * 3 * 2 * 4
        )  # clusters x brokers x groups x minutes

        dead_columns = (
            "source",
            "kafka_topic",
            "kafka_partition",
            "kafka_offset",
            "kafka_timestamp",
            "raw_value",
            "reason",
            "detail",
        )
        expected_dead = _rows(dead_letter_columns(records), dead_columns)
        assert summary.rejected == len(expected_dead) > 0
        assert _rows(dead_letter_columns(reduced.where(F.col("kind") == "reject")), dead_columns) == expected_dead
    finally:
        reduced.unpersist()


# Real clients' forms, then texts only a broken collector sends: both readings must agree on every one.
_CLIENT_VERSIONS = [
    "V4_9_8",
    "4.9.8",
    "5.3.3",
    "V5_1_4",
    "409",
    "441",
    "unknown",
    "V",
    " v4_9_8 ",
    "VV4",
    "3.0",
    "0409",
    "100.1",
    "412abc",
    "99999999999999999999999",
    "\t5",
    "",
    "4",
    "5",
    "v99",
]


def _sends_by_version(spark, versions: list[str]):  # type: ignore[no-untyped-def]
    """A valid send per version (producer ``p<offset>``), classified as the job classifies them."""
    rows = []
    for offset, version in enumerate(versions):
        event = {
            "type": "send_result",
            "schema_version": 1,
            "event_time": BASE,
            "producer_id": f"p{offset}",
            "producer_group": "PG",
            "topic": "T",
            "broker": "b",
            "queue_id": 0,
            "latency_ms": 600,
            "outcome": "OK",
            "client_version": version,
        }
        rows.append((json.dumps(event).encode(), "sends", 0, offset, datetime.fromtimestamp(BASE / 1000, tz=UTC)))
    frame = spark.createDataFrame(rows, "value BINARY, topic STRING, partition INT, offset BIGINT, timestamp TIMESTAMP")
    return classify(frame, contracts_for(("send_result",)), IngestSettings("unused:9092", {"sends": "send_result"}))


def test_client_line_rules_choose_the_table_per_send_reading_the_version_once(spark):
    from streaming.domain.versions import ClientLine

    versions = _CLIENT_VERSIONS
    classified = _sends_by_version(spark, versions)
    # A table per line and a third one for a version no line rule reads, which ClientLine.parse shows by
    # answering with whichever default it is given.
    rules = [ProducerRule("rocketmq-4", "*", "4.9"), ProducerRule("rocketmq-5", "*", "5")]
    batch = send_batch(classified, rules, "unread", True, FLOORS | {"unread": 550})
    got = {r["producer_id"]: r["fault_table"] for r in batch.where(F.col("reason").isNull()).collect()}
    expected = {}
    for offset, version in enumerate(versions):
        line, other = ClientLine.parse(version, ClientLine.V4_9), ClientLine.parse(version, ClientLine.V5)
        expected[f"p{offset}"] = "unread" if line is not other else {"4.9": "rocketmq-4", "5": "rocketmq-5"}[line.value]
    assert got == expected
    assert set(got.values()) == {"rocketmq-4", "rocketmq-5", "unread"}
    # The version's regex is evaluated in a projection of its own, not inlined into the rules' nested CASE,
    # where code generation cannot share it between its four uses.
    plan = batch._jdf.queryExecution().optimizedPlan().toString()
    fault_table_line = next(line for line in plan.splitlines() if " AS fault_table#" in line)
    assert "regexp_extract" not in fault_table_line
    assert "regexp_extract" in plan


def _kafka_records(seed: int) -> list[tuple[bytes | None, str, int, int, datetime | None]]:
    """``_records``, plus records the one-pass reader must leave to the rules: too large, from the future, no
    value or timestamp, another event type, and valid sends the fast path does not take (``1.0``, an unknown
    field), which only the rules accept."""
    rows: list[tuple[bytes | None, str, int, int, datetime | None]] = list(_records(seed, 2000))
    stamp = datetime.fromtimestamp(BASE / 1000 + 3600, tz=UTC)
    event = {
        "type": "send_result",
        "schema_version": 1,
        "event_time": BASE,
        "producer_id": "10.0.0.1@1#1",
        "producer_group": "PG-billing",
        "topic": "T",
        "broker": "broker-0",
        "queue_id": 1,
        "latency_ms": 900,
        "outcome": "OK",
        "client_version": "V4_9_8",
    }
    odd = [
        json.dumps({**event, "producer_group": "x" * 70_000}).encode(),  # OVERSIZED
        json.dumps({**event, "event_time": BASE + 3600_000 + 300_001}).encode(),  # FUTURE_TIMESTAMP
        None,
        json.dumps({"type": "topic_route", "schema_version": 1, "event_time": BASE}).encode(),
        json.dumps({**event, "schema_version": 1.0}).encode(),  # valid, for the rules only
        json.dumps({**event, "extra": {"any": [1]}}).encode(),  # valid, for the rules only
    ]
    offset = len(rows)
    for value in odd:
        rows.append((value, "sends", 1, offset, stamp))
        offset += 1
    rows.append((json.dumps(event).encode(), "sends", 1, offset, None))  # no Kafka timestamp: valid, for the rules
    return rows


def _kafka_frame(spark, keyed: bool, rules_only: bool):  # type: ignore[no-untyped-def]
    """``_kafka_records(seed=5)`` persisted in 4 partitions; the records only the rules accept only if ``rules_only``."""
    rows = _kafka_records(seed=5)
    if not rules_only:
        rows = [
            row
            for row in rows
            if row[4] is not None
            and (row[0] is None or b'"extra"' not in row[0] and b'"schema_version": 1.0' not in row[0])
        ]
    frame = spark.createDataFrame(rows, "value BINARY, topic STRING, partition INT, offset BIGINT, timestamp TIMESTAMP")
    return (frame.repartition(4, "partition") if keyed else frame.repartition(4)).persist()


def _assert_the_rules_judge_what_the_pass_leaves(  # type: ignore[no-untyped-def]
    one_pass, classified, expected, got, contracts, settings, rules, rules_only: bool
) -> None:
    """The unsure records, classified again, are the rejects and the valid sends the fast path does not take."""
    from streaming.job.sends.reduce import unsure_records

    judged = send_batch(classify(unsure_records(one_pass), contracts, settings), rules, "rocketmq-4", True, FLOORS)
    valid_for_rules = judged.where(F.col("reason").isNull()).count()
    assert valid_for_rules == (3 if rules_only else 0)
    # Left to the rules: exactly the rejects, and the valid sends the fast path does not take.
    assert got.unsure == expected.rejected + valid_for_rules
    dead_columns = (
        "source",
        "kafka_topic",
        "kafka_partition",
        "kafka_offset",
        "kafka_timestamp",
        "raw_value",
        "reason",
        "detail",
    )
    assert _rows(dead_letter_columns(judged), dead_columns) == _rows(dead_letter_columns(classified), dead_columns)
    assert {r["reason"] for r in dead_letter_columns(judged).collect()} >= {
        "OVERSIZED",
        "FUTURE_TIMESTAMP",
        "NOT_JSON",
        "UNKNOWN_TYPE",
        "NEGATIVE_LATENCY",
    }


def _assert_the_pass_reduces_as_the_rules(one_pass, classic, expected, got) -> None:  # type: ignore[no-untyped-def]
    """The one pass's kept sends, summary and minute partials equal the classic reduction's."""
    assert (got.kept_sends, got.minutes, got.spanning_keys, got.latest_send_ms) == (
        expected.kept_sends,
        expected.minutes,
        expected.spanning_keys,
        expected.latest_send_ms,
    )
    send_columns = ("spark_partition", *FAULT_UPDATE_COLUMNS)
    assert _rows(one_pass.where(F.col("kind") == "send"), send_columns) == _rows(
        classic.where(F.col("kind") == "send"), send_columns
    )
    tables = {r["fault_table"] for r in one_pass.where(F.col("kind") == "send").collect()}
    assert tables == {"rocketmq-4", "rocketmq-5", None}  # both rules, and producer 4 without fault tolerance
    clusters = {r["cluster"] for r in one_pass.where(F.col("kind") == "send").collect()}
    assert clusters == {"DefaultCluster", "east", "west"}  # v1 and v2 without a cluster: the default one
    minute_columns = (
        "spark_partition",
        "cluster",
        "broker",
        "producer_group",
        "minute_start",
        "sends",
        "errors",
        "latency_sum_ms",
        "latency_max_ms",
        "bucket_upper_ms",
        "bucket_counts",
    )
    partials = minute_partials(one_pass, BUCKETS).withColumn("spark_partition", F.lit(0))
    reference = minute_partials(classic, BUCKETS).withColumn("spark_partition", F.lit(0))
    assert _rows(partials, minute_columns) == _rows(reference, minute_columns)


@pytest.mark.parametrize("keyed", [True, False], ids=["keyed-by-producer", "spread-over-partitions"])
@pytest.mark.parametrize("rules_only", [False, True], ids=["rejects-only", "with-valid-sends-for-the-rules"])
def test_reading_kafka_records_in_the_pass_equals_classifying_them_first(spark, keyed, rules_only):
    from streaming.job.ingest.classify import strict_events_spec
    from streaming.job.sends.query import fault_table_template
    from streaming.job.sends.reduce import reduce_kafka_batch

    frame = _kafka_frame(spark, keyed, rules_only)
    contracts = contracts_for(("send_result",))
    settings = IngestSettings("unused:9092", {"sends": "send_result"})
    rules = [ProducerRule("rocketmq-5", "PG5*"), ProducerRule("rocketmq-5", "*", "5")]
    classified = send_batch(classify(frame, contracts, settings), rules, "rocketmq-4", True, FLOORS)
    classic = reduce_in_partitions(classified, BUCKETS, 3).persist()
    one_pass = reduce_kafka_batch(
        frame,
        strict_events_spec(contracts),
        settings,
        fault_table_template(spark, rules, "rocketmq-4", True, FLOORS),
        BUCKETS,
        3,
    ).persist()
    try:
        expected, got = summarize(classic), summarize(one_pass)
        assert got.rejected == 0 and expected.unsure == 0
        _assert_the_rules_judge_what_the_pass_leaves(
            one_pass, classified, expected, got, contracts, settings, rules, rules_only
        )
        if rules_only:
            return  # the job reduces such a batch the classic way (send_query.write_batch)
        _assert_the_pass_reduces_as_the_rules(one_pass, classic, expected, got)
    finally:
        classic.unpersist()
        one_pass.unpersist()
        frame.unpersist()


def test_a_micro_batch_frame_is_read_in_place_with_the_same_result(spark):
    """A Python ``foreachBatch`` hands over a micro-batch as a ``LogicalRDD`` over the rows that were read;
    ``reduce_kafka_batch`` reads that RDD's rows directly instead of planning the frame (which copies each row
    first). The reduction must be the same row for row, unsure records and their bytes included."""
    from pyspark.sql import DataFrame

    from streaming.job.ingest.classify import strict_events_spec
    from streaming.job.sends.query import fault_table_template
    from streaming.job.sends.reduce import reduce_kafka_batch

    rows = _kafka_records(seed=9)
    frame = spark.createDataFrame(rows, "value BINARY, topic STRING, partition INT, offset BIGINT, timestamp TIMESTAMP")
    frame = frame.repartition(3, "partition").persist()
    jframe = frame._jdf
    micro_batch = DataFrame(
        spark._jsparkSession.internalCreateDataFrame(jframe.queryExecution().toRdd(), jframe.schema(), False), spark
    )
    assert micro_batch._jdf.queryExecution().analyzed().nodeName() == "LogicalRDD"
    planned = micro_batch.select("*")  # the same rows, through a plan that is not a bare LogicalRDD
    assert planned._jdf.queryExecution().analyzed().nodeName() != "LogicalRDD"
    contracts = contracts_for(("send_result",))
    settings = IngestSettings("unused:9092", {"sends": "send_result"})
    template = fault_table_template(spark, RULES, "rocketmq-4", True, FLOORS)
    try:
        reduced = [
            reduce_kafka_batch(source, strict_events_spec(contracts), settings, template, BUCKETS, 4)
            for source in (micro_batch, planned)
        ]
        kinds = {row["kind"] for row in reduced[0].collect()}
        assert {"send", "minute", "unsure", "summary"} <= kinds
        # Every column of every row (nullable ones included, so compared as text).
        assert sorted(map(repr, reduced[0].collect())) == sorted(map(repr, reduced[1].collect()))
    finally:
        frame.unpersist()
