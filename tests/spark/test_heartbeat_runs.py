"""Heartbeat runs (``heartbeat_runs.compress``, the JVM class ``HeartbeatRuns``) on batch and streaming plans.

The typed heartbeats of a Spark partition fold into one row per key (shard, channel fields, Kafka topic and
partition; NULL equal to NULL): the key's first heartbeat by (time, offset), ``event_time`` its latest, and
every (time, offset) in the run arrays, sorted; every other row passes through with NULL arrays. The
expected rows come from a plain-Python reference of that contract, and a few runs are spelt out by hand.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from streaming.job.consumer.heartbeat_runs import RUN, compress, unpack_run

# A run's heartbeats, unpacked from ``RUN`` by ``comparable``.
RUN_TIMES, RUN_OFFSETS = "run_times", "run_offsets"

# consumer_query.shard_input's output, column for column.
SHARD_INPUT_DDL = (
    "shard INT, event_time TIMESTAMP, event_type STRING, event_time_ms BIGINT, raw_value STRING, c_broker STRING, "
    "c_kind STRING, c_channel STRING, c_client_id STRING, c_group STRING, c_message_model STRING, "
    "c_consume_type STRING, c_client_version STRING, c_allocate_strategy STRING, c_cluster STRING, c_subscriptions STRING, "
    "reason STRING, detail STRING, kafka_topic STRING, kafka_partition INT, kafka_offset BIGINT, "
    "kafka_timestamp TIMESTAMP"
)
COLUMNS = [field.split(" ")[0] for field in SHARD_INPUT_DDL.split(", ")]
KEY = (
    "shard",
    "c_cluster",
    "c_group",
    "c_broker",
    "c_channel",
    "c_client_id",
    "c_message_model",
    "c_consume_type",
    "c_client_version",
    "c_allocate_strategy",
    "c_subscriptions",
    "kafka_topic",
    "kafka_partition",
)
TIMESTAMPS = ("event_time", "kafka_timestamp")
T0 = 1_717_243_200_000  # 2024-06-01T12:00:00Z
TOPIC = "rmq_consumer_channel"
SUBS = '[{"topic":"T1","expression":"*","sub_version":7}]'


def channel_event(offset: int, time_ms: int, kind: str = "HEARTBEAT", **fields: object) -> dict:
    """A typed channel event as shard_input emits it (no raw value, no Kafka timestamp)."""
    row = dict.fromkeys(COLUMNS)
    row.update(
        shard=1,
        event_type="consumer_channel",
        event_time_ms=time_ms,
        c_broker="broker-a",
        c_kind=kind,
        c_channel="10.0.0.1:40001",
        c_client_id="c1@1",
        c_group="G1",
        c_message_model="CLUSTERING",
        c_consume_type="CONSUME_PASSIVELY",
        c_client_version="V4_9_8",
        c_allocate_strategy="AVG",
        c_cluster="DefaultCluster",
        c_subscriptions=SUBS,
        kafka_topic=TOPIC,
        kafka_partition=0,
        kafka_offset=offset,
    )
    row.update(fields)
    row["event_time"] = None if row["reason"] is not None else row["event_time_ms"]
    return row


def other_row(offset: int, time_ms: int | None, **fields: object) -> dict:
    """A row that travels with its raw value: a route (valid) or a dead letter (with a reason)."""
    row = dict.fromkeys(COLUMNS)
    row.update(
        shard=0,
        event_time_ms=time_ms,
        kafka_topic=TOPIC,
        kafka_partition=0,
        kafka_offset=offset,
        kafka_timestamp=T0 + 5,
    )
    row.update(fields)
    row["event_time"] = None if row["reason"] is not None or time_ms is None else time_ms
    return row


def batch_rows() -> list[dict]:
    """The batch the tests compress: runs of channel heartbeats, then rows that pass through."""
    return channel_heartbeats() + pass_through_rows()


def channel_heartbeats() -> list[dict]:
    """Heartbeats of channels A to E and two keys with one Java hash: each key's run a case of its own."""
    rows = []
    # Channel A: out-of-order times inside the run and duplicate times; the head is offset 14 (earliest time).
    for offset, dt in zip(range(10, 16), (5000, 3000, 5000, 9000, 1000, 3000), strict=True):
        rows.append(channel_event(offset, T0 + dt))
    rows.append(channel_event(16, T0 + 2000, c_subscriptions='[{"topic":"T2"}]'))  # another payload: own run
    rows.append(channel_event(17, T0 + 4000, kafka_partition=1))  # the same channel in another Kafka partition
    rows.append(channel_event(3, T0 + 4500, kafka_partition=1))
    # Channel B, client version NULL and "V4" are two runs; equal times tie-break on the offset.
    for offset in (20, 22, 21):
        rows.append(channel_event(offset, T0 + 7000, c_channel="10.0.0.2:40002", c_client_version=None))
    rows.append(channel_event(23, T0 + 7000, c_channel="10.0.0.2:40002", c_client_version="V4"))
    # Channel C, NULL key fields (one run, NULL equal to NULL), and D/E whose fields would concatenate alike.
    for offset, dt in ((30, 800), (31, 600), (32, 700)):
        rows.append(
            channel_event(
                offset,
                T0 + dt,
                c_channel="10.0.0.3:40003",
                c_broker=None,
                c_client_id=None,
                c_allocate_strategy=None,
                c_subscriptions=None,
                c_client_version=None,
            )
        )
    rows.append(channel_event(33, T0 + 900, c_channel="x|y", c_client_id="z"))
    rows.append(channel_event(34, T0 + 900, c_channel="x", c_client_id="y|z"))
    rows.append(channel_event(35, T0 + 950, c_channel="x", c_client_id="y|z", c_group="G2", shard=2))
    # Java's String.hashCode of "Aa" and "BB" is equal: two keys with one hash, still two runs.
    rows.append(channel_event(36, T0 + 960, c_channel="h", c_client_id="Aa"))
    rows.append(channel_event(37, T0 + 970, c_channel="h", c_client_id="BB"))
    # The same channel of the same group in another RocketMQ cluster: seen once there, no run with offset 37's.
    rows.append(channel_event(38, T0 + 980, c_channel="h", c_client_id="BB", c_cluster="east"))
    return rows


def pass_through_rows() -> list[dict]:
    """Pass-through rows: a route (replicated into shards 0 and 1), dead letters, other channel kinds."""
    rows = []
    route = '{"type":"topic_route","topic":"T1"}'
    rows.append(other_row(40, T0 + 100, event_type="topic_route", raw_value=route))
    rows.append(other_row(40, T0 + 100, event_type="topic_route", raw_value=route, shard=1))
    rows.append(
        other_row(
            41,
            None,
            shard=-1,
            event_type="consumer_channel",
            raw_value="{not json",
            reason="unparseable",
            detail="line 1",
        )
    )
    rows.append(
        other_row(
            42,
            T0 + 300,
            shard=-1,
            event_type="consumer_channel",
            raw_value='{"kind":"HEARTBEAT"}',
            reason="missing_field",
            detail="group",
        )
    )
    rows.append(channel_event(43, T0 + 200, kind="UNREGISTER"))
    rows.append(channel_event(44, T0 + 250, reason="late", detail="a dead letter with typed fields"))
    rows.append(channel_event(45, T0 + 260, raw_value='{"type":"consumer_channel"}'))
    return rows


def as_frame(spark, rows: list[dict]) -> DataFrame:  # type: ignore[no-untyped-def]
    """Rows as a shard_input frame; the time columns given as epoch milliseconds."""
    stage = SHARD_INPUT_DDL.replace("event_time TIMESTAMP", "event_time BIGINT").replace(
        "kafka_timestamp TIMESTAMP", "kafka_timestamp BIGINT"
    )
    frame = spark.createDataFrame([tuple(r[c] for c in COLUMNS) for r in rows], stage)
    return frame.select(*[F.timestamp_millis(c).alias(c) if c in TIMESTAMPS else c for c in COLUMNS])


def comparable(frame: DataFrame) -> list[dict]:
    """The rows with timestamps as epoch microseconds (independent of the Python process's time zone), and the
    packed run as its times and offsets (``RUN_TIMES``, ``RUN_OFFSETS``: lists, or None without a run)."""
    rows = []
    for r in frame.select(*[F.unix_micros(c).alias(c) if c in TIMESTAMPS else c for c in frame.columns]).collect():
        row = r.asDict()
        packed = row.pop(RUN)
        run = unpack_run(bytes(packed)) if packed is not None else None
        row[RUN_TIMES], row[RUN_OFFSETS] = (list(run[0]), list(run[1])) if run else (None, None)
        rows.append(row)
    return rows


def is_typed_heartbeat(row: dict) -> bool:
    return (
        row["reason"] is None
        and row["raw_value"] is None
        and row["event_type"] == "consumer_channel"
        and row["c_kind"] == "HEARTBEAT"
    )


def expected_output(rows: list[dict]) -> tuple[list[dict], list[dict]]:
    """(pass-through rows, runs) in comparable form, for input whose keys each lie in one Spark partition (a run
    is per partition; the key includes the Kafka partition, so one Spark partition per Kafka partition will do).
    A key seen once is among the runs as the row it was, with NULL arrays."""
    passed, runs = [], {}
    for row in rows:
        micros = {c: None if row[c] is None else row[c] * 1000 for c in TIMESTAMPS}
        row = {**row, **micros}
        if not is_typed_heartbeat(row):
            passed.append({**row, RUN_TIMES: None, RUN_OFFSETS: None})
        else:
            runs.setdefault(tuple(row[c] for c in KEY), []).append(row)
    expected = []
    for members in runs.values():
        if len(members) == 1:
            expected.append({**members[0], RUN_TIMES: None, RUN_OFFSETS: None})
            continue
        ordered = sorted(members, key=lambda r: (r["event_time_ms"], r["kafka_offset"]))
        expected.append(
            {
                **ordered[0],
                "event_time": max(r["event_time_ms"] for r in members) * 1000,
                RUN_TIMES: [r["event_time_ms"] for r in ordered],
                RUN_OFFSETS: [r["kafka_offset"] for r in ordered],
            }
        )
    return passed, expected


def canonical(rows: list[dict]) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True) for r in rows)


@pytest.mark.parametrize(
    "layout",
    [lambda f: f.coalesce(1), lambda f: f.repartition(3, "kafka_partition")],
    ids=["one-partition", "by-kafka-partition"],
)
def test_heartbeats_fold_into_one_row_per_run(spark, layout: Callable[[DataFrame], DataFrame]):
    rows = batch_rows()
    frame = layout(as_frame(spark, rows))
    out = compress(frame)
    assert out.columns == [*COLUMNS, RUN]
    assert out.schema.fields[-1].dataType.simpleString() == "binary"

    got = comparable(out)
    passed, runs = expected_output(rows)
    got_passed = [r for r in got if r[RUN_TIMES] is None]
    got_runs = [r for r in got if r[RUN_TIMES] is not None]
    assert canonical(got) == canonical(passed + runs)  # pass-through rows and heartbeats seen once unchanged
    assert len(got_runs) == len([r for r in runs if r[RUN_TIMES] is not None]) == 4  # A, A in partition 1, B, C
    assert len(got_passed) == len(passed) + len(runs) - 4
    assert sum(len(r[RUN_TIMES]) for r in got_runs) + len(got_passed) == len(rows) == frame.count()
    assert all(len(r[RUN_TIMES]) == len(r[RUN_OFFSETS]) for r in got_runs)

    # Spelt out: channel A in Kafka partition 0, default payload.
    run_a = next(r for r in got_runs if r["kafka_offset"] == 14)
    assert run_a[RUN_TIMES] == [T0 + 1000, T0 + 3000, T0 + 3000, T0 + 5000, T0 + 5000, T0 + 9000]
    assert run_a[RUN_OFFSETS] == [14, 11, 15, 10, 12, 13]
    assert run_a["event_time"] == (T0 + 9000) * 1000 and run_a["event_time_ms"] == T0 + 1000
    assert run_a["c_subscriptions"] == SUBS and run_a["kafka_partition"] == 0
    # The same channel in Kafka partition 1: its own run, headed by the earlier time (offset 17), not offset 3.
    run_a1 = next(r for r in got_runs if r["kafka_partition"] == 1)
    assert (run_a1["kafka_offset"], run_a1[RUN_TIMES], run_a1[RUN_OFFSETS]) == (17, [T0 + 4000, T0 + 4500], [17, 3])
    # Channel B: equal times ordered by offset; the "V4" heartbeat is a run of its own.
    run_b = next(r for r in got_runs if r["c_channel"] == "10.0.0.2:40002" and r["c_client_version"] is None)
    assert run_b[RUN_OFFSETS] == [20, 21, 22] and run_b["kafka_offset"] == 20
    # Channel C: NULL key fields are one run.
    run_c = next(r for r in got_runs if r["c_channel"] == "10.0.0.3:40003")
    assert run_c[RUN_OFFSETS] == [31, 32, 30] and run_c["c_broker"] is None and run_c["c_subscriptions"] is None
    assert run_c["event_time"] == (T0 + 800) * 1000
    # Fields that would read alike when concatenated are different keys.
    assert {(r["c_channel"], r["c_client_id"], r["shard"]) for r in got if r["kafka_offset"] in (33, 34, 35)} == {
        ("x|y", "z", 1),
        ("x", "y|z", 1),
        ("x", "y|z", 2),
    }
    # ... and so are two clusters' heartbeats of one channel (offsets 37 and 38 would otherwise be one run).
    assert sorted(r["c_client_id"] for r in got if r["c_channel"] == "h") == ["Aa", "BB", "BB"]


def test_one_partition_emits_pass_through_rows_first_then_runs_in_first_seen_order(spark):
    rows = batch_rows()
    got = comparable(compress(as_frame(spark, rows).coalesce(1)))
    passed, _ = expected_output(rows)
    assert [r["kafka_offset"] for r in got[: len(passed)]] == [r["kafka_offset"] for r in passed]
    # Heads' offsets, in the order their keys first appear (channel A is first seen at offset 10, headed by 14).
    assert [r["kafka_offset"] for r in got[len(passed) :]] == [14, 16, 17, 20, 23, 31, 33, 34, 35, 36, 37, 38]


def test_runs_are_per_spark_partition(spark):
    """A key whose heartbeats land in several Spark partitions gives one row per partition, and nothing is lost."""
    rows = [channel_event(i, T0 + 1000 * (i % 7)) for i in range(40)]
    frame = as_frame(spark, rows).repartition(4)
    partitions = frame.select(F.spark_partition_id().alias("p")).distinct().count()
    got = comparable(compress(frame))
    assert len(got) == partitions > 1
    times = sorted(zip((t for r in got for t in r[RUN_TIMES]), (o for r in got for o in r[RUN_OFFSETS]), strict=True))
    assert times == sorted((r["event_time_ms"], r["kafka_offset"]) for r in rows)
    for r in got:
        assert r[RUN_OFFSETS][0] == r["kafka_offset"] and r["event_time"] == max(r[RUN_TIMES]) * 1000
        assert list(zip(r[RUN_TIMES], r[RUN_OFFSETS], strict=True)) == sorted(
            zip(r[RUN_TIMES], r[RUN_OFFSETS], strict=True)
        )


def test_java8_datetime_api(spark):
    """With java.time values in the decoded rows (Instant, not Timestamp) the runs and the pass-through rows
    still encode."""
    rows = batch_rows()
    spark.conf.set("spark.sql.datetime.java8API.enabled", "true")
    try:
        got = comparable(compress(as_frame(spark, rows).coalesce(1)))
    finally:
        spark.conf.unset("spark.sql.datetime.java8API.enabled")
    passed, runs = expected_output(rows)
    assert canonical(got) == canonical(passed + runs)


# The JSON files of the streaming test: shard_input's columns without the two timestamps, derived as it does.
JSON_DDL = ", ".join(f for f in SHARD_INPUT_DDL.split(", ") if f.split(" ")[0] not in TIMESTAMPS)


def to_shard_input(raw: DataFrame) -> DataFrame:
    return raw.select(
        *[
            F.when(F.col("reason").isNull(), F.timestamp_millis("event_time_ms")).alias(c)
            if c == "event_time"
            else F.lit(None).cast("timestamp").alias(c)
            if c == "kafka_timestamp"
            else c
            for c in COLUMNS
        ]
    )


def test_streaming_runs_and_watermark(spark, tmp_path):
    source, checkpoint = tmp_path / "in", tmp_path / "checkpoint"
    source.mkdir()
    batches: list[list[dict]] = []

    def write(name: str, rows: list[dict]) -> None:
        lines = [json.dumps({c: r[c] for c in COLUMNS if c not in TIMESTAMPS}) for r in rows]
        (source / name).write_text("\n".join(lines) + "\n")

    def run():  # type: ignore[no-untyped-def]
        stream = spark.readStream.schema(JSON_DDL).option("maxFilesPerTrigger", 1).json(str(source))
        query = (
            compress(stream.transform(to_shard_input))
            .withWatermark("event_time", "1 minute")
            .writeStream.foreachBatch(lambda frame, _: batches.append(comparable(frame)))
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        return query.lastProgress

    # The run's latest heartbeat (90 s) is the batch's latest event time; its head (0 s) and the UNREGISTER
    # (10 s) are earlier.
    first = [
        channel_event(0, T0),
        channel_event(1, T0 + 30_000),
        channel_event(2, T0 + 90_000),
        channel_event(3, T0 + 10_000, kind="UNREGISTER"),
        other_row(4, T0 + 5000, shard=-1, raw_value="x", reason="unparseable", event_type="consumer_channel"),
    ]
    write("1.json", first)
    progress = run()
    assert progress["numInputRows"] == 5 and progress["eventTime"]["max"] == "2024-06-01T12:01:30.000Z"
    (got,) = batches
    assert sorted((r["kafka_offset"], r[RUN_OFFSETS]) for r in got) == [(0, [0, 1, 2]), (3, None), (4, None)]
    assert next(r for r in got if r["kafka_offset"] == 0)["event_time"] == (T0 + 90_000) * 1000

    write("2.json", [channel_event(5, T0 + 150_000), channel_event(6, T0 + 120_000)])
    progress = run()
    assert len(batches) == 2
    assert [(r["kafka_offset"], r[RUN_TIMES], r[RUN_OFFSETS]) for r in batches[1]] == [
        (6, [T0 + 120_000, T0 + 150_000], [6, 5])
    ]
    # The watermark of the second batch comes from the first: its latest event time (the run's) minus 1 minute.
    assert progress["eventTime"]["watermark"] == "2024-06-01T12:00:30.000Z"
    assert progress["eventTime"]["max"] == "2024-06-01T12:02:30.000Z"


def test_polls_fold_by_their_fields_but_their_time(spark):
    """With ``typed_json`` in the input (a poll's fields but its time, as ``shard_input`` gives them), a broker's
    identical polls of a group fold like heartbeats, the first poll's raw value kept; other polls, a poll dead
    letter and the heartbeats (``typed_json`` NULL) keep to their own keys."""
    fields = '{"broker":"b1","group":"G1","connections":[{"channel":"c","client_id":"c1"}]}'
    other = fields.replace("c1", "c2")

    def poll(offset: int, time_ms: int, typed: str | None = fields, **extra: object) -> dict:
        raw = json.dumps({"type": "consumer_connections", "event_time": time_ms, **json.loads(typed or "{}")})
        row = other_row(offset, time_ms, event_type="consumer_connections", raw_value=raw, **extra)
        return {**row, "typed_json": typed}

    polls = [poll(50, T0 + 20_000), poll(51, T0 + 10_000), poll(52, T0 + 30_000), poll(53, T0 + 15_000, other)]
    polls.append(poll(54, T0 + 40_000, typed=None, reason="missing_field", detail="group"))
    heartbeats = [channel_event(60, T0 + 1000), channel_event(61, T0 + 2000)]
    rows = [{**r, "typed_json": r.get("typed_json")} for r in polls + heartbeats]
    stage = (SHARD_INPUT_DDL + ", typed_json STRING").replace("event_time TIMESTAMP", "event_time BIGINT")
    stage = stage.replace("kafka_timestamp TIMESTAMP", "kafka_timestamp BIGINT")
    columns = [*COLUMNS, "typed_json"]
    frame = spark.createDataFrame([tuple(r[c] for c in columns) for r in rows], stage).coalesce(1)
    frame = frame.select(*[F.timestamp_millis(c).alias(c) if c in TIMESTAMPS else c for c in columns])
    got = {r["kafka_offset"]: r for r in comparable(compress(frame))}
    assert sorted(got) == [51, 53, 54, 60]
    run = got[51]
    assert (run[RUN_TIMES], run[RUN_OFFSETS]) == ([T0 + 10_000, T0 + 20_000, T0 + 30_000], [51, 50, 52])
    assert run["event_time"] == (T0 + 30_000) * 1000 and run["typed_json"] == fields
    assert json.loads(run["raw_value"])["event_time"] == T0 + 10_000  # the first poll's, as it was
    assert got[53][RUN_TIMES] is None and got[54][RUN_TIMES] is None  # another poll seen once; a dead letter
    assert got[60][RUN_OFFSETS] == [60, 61]
