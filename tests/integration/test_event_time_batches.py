"""Batches planned by event time (``io.github.rrm.source``, ``[kafka] batch_planning = "event_time"``).

The planner (``EventTimePlanner``, plain Java through the session's gateway) on generated partitions; Spark's
Kafka source wrapped by ``EventTimeKafkaSource`` on the project's Kafka, its batches' end offsets read from the
query progress; and the job's tables the same whether its input is read in one batch or in capped ones
(``bench.read_order``, which holds the full-size run).
"""

from __future__ import annotations

import json
import random
from typing import Any

from bench.read_order import EXCLUDED, START_MS, compare_limits, the_input
from connectors.kafka_topics import create_topics
from streaming.contract.events import event_time_headers
from streaming.job.ingest.classify import EVENT_TIME_SOURCE


def _check_plan(starts: list[int], times: list[list[int]], limit: int, ends: list[int]) -> None:
    """``ends`` as the planner must give them for partitions whose record times are ``times``."""
    latest = [s + len(t) for s, t in zip(starts, times, strict=True)]
    assert all(s <= e <= last for s, e, last in zip(starts, ends, latest, strict=True))
    if sum(map(len, times)) <= limit:
        assert ends == latest
        return
    taken = [x for s, e, t in zip(starts, ends, times, strict=True) for x in t[: e - s]]
    left = [x for s, e, t in zip(starts, ends, times, strict=True) for x in t[e - s :]]
    assert taken, "a batch reads something"
    cut = max(taken)
    assert all(x > cut for x in left), "everything at or before T in, nothing after (a partition behind first)"
    if len(taken) > limit:
        assert set(taken) == {cut} and cut == min(t[0] for t in times if t), (
            "only T's millisecond, when it alone exceeds"
        )
    elif left:
        following = min(left)
        assert len(taken) + left.count(following) > limit, "T is the largest time that fits"


def _offsets(value: Any) -> dict[str, dict[str, int]]:
    """A source's offsets in the query progress (Kafka's JSON, parsed or not; none before the first batch)."""
    parsed = json.loads(value) if isinstance(value, str) else value
    return dict(parsed or {})


def test_the_planner_ends_every_partition_at_one_event_time(spark):
    plan = spark.sparkContext._jvm.io.github.rrm.source.EventTimePlanner.planListed
    rng = random.Random(51)
    capped = 0
    for _ in range(300):
        partitions = rng.randint(1, 4)
        starts = [rng.randint(0, 1_000) for _ in range(partitions)]
        times = []
        for _ in range(partitions):
            base = 1_700_000_000_000 + rng.choice((0, 0, 5_000))  # some partitions far ahead of the others
            times.append(sorted(base + rng.randint(0, 40) for _ in range(rng.randint(0, 14))))
        limit = rng.randint(1, 12)
        ends = [int(x) for x in plan(starts, times, limit)]
        _check_plan(starts, times, limit, ends)
        capped += sum(map(len, times)) > limit
    assert capped > 200  # most cases cap the batch


def test_a_query_reads_batches_that_end_at_one_event_time(spark, kafka_broker, tmp_path):
    """Two topics, L = 5. Topic a holds one record per 100 ms; topic b is 3 s behind at first (a paused
    publisher), then holds 7 records of one millisecond, and a record without the header (planned at the time
    of the record before it). Kafka's own planning (shares of 5 by backlog) reads b's later records with a's
    earlier ones."""
    bootstrap = kafka_broker.bootstrap_servers
    topics = {"a": "etp-a", "b": "etp-b"}
    create_topics(bootstrap, topics.values())
    t0 = 1_700_000_000_000
    plan = [("a", t0 + 3_000 + 100 * i) for i in range(14)]
    plan += [("b", t0 + 200 * i) for i in range(4)] + [("b", t0 + 3_450)] * 7 + [("b", None), ("b", t0 + 4_000)]
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    times: dict[tuple[str, int], int] = {}  # (topic, offset) -> the time it is planned at
    previous: dict[str, int] = {}
    for name, at in plan:
        event = {"event_time": at} if at is not None else {}
        sent = producer.send(topics[name], json.dumps(event).encode(), headers=event_time_headers(event)).get(30)
        previous[name] = at if at is not None else previous[name]
        times[(sent.topic, sent.offset)] = previous[name]
    producer.close()

    query = (
        spark.readStream.format(EVENT_TIME_SOURCE)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", ",".join(topics.values()))
        .option("startingOffsets", "earliest")
        .option("eventTimeMaxOffsetsPerTrigger", "5")
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(300)
    batches = [p for p in query.recentProgress if p["numInputRows"] > 0]
    read: set[tuple[str, int]] = set()
    for progress in batches:
        source = progress["sources"][0]
        start, end = _offsets(source["startOffset"]), _offsets(source["endOffset"])
        batch = {
            (topic, offset)
            for topic, partitions in end.items()
            for partition, last in partitions.items()
            for offset in range(start.get(topic, {}).get(partition, 0), last)
        }
        assert progress["numInputRows"] == len(batch) and not batch & read
        read |= batch
        cut = max(times[r] for r in batch)
        assert all(times[r] > cut for r in set(times) - read), f"batch {progress['batchId']} ends at one time"
        assert len(batch) <= 5 or {times[r] for r in batch} == {t0 + 3_450}
    assert read == set(times)
    assert len(batches) >= 5  # the cap planned several batches, one of them the 7 records of one millisecond


# The job-scenarios test's member leaving under load (group G-pmove) up to 30 s: its topic's route, channel
# events, reports and progress samples on four topics, 10 records at 6 event times, through the real job at these
# limits (0: one batch, the reference). Planned by record counts, a limit of 1 reads one record of every topic per
# batch: the reports of 21 s with the heartbeats of 0 s, and 8 of the 16 tables differ.
LIMITS = [0, 1]
HORIZON_MS = 30_000


def test_the_jobs_tables_do_not_depend_on_how_its_input_is_batched(spark, kafka_broker, tmp_path):
    events: list[dict[str, Any]] = [
        e
        for e in the_input(150_000, True)
        if (e.get("group") == "G-pmove" or (e["type"] == "topic_route" and e["topic"] == "P"))
        and e["event_time"] <= START_MS + HORIZON_MS
    ]
    assert len(events) == 10 and len({e["type"] for e in events}) == 4
    runs = compare_limits(spark, kafka_broker.bootstrap_servers, tmp_path, events, LIMITS, "event_time", True)
    reference = runs[0]["rows"]
    assert reference["group_snapshots"] and reference["consume_progress"]  # the tables hold something to compare
    for run in runs[1:]:
        assert run["commits_all_queries"] > runs[0]["commits_all_queries"]  # capped: more batches
        assert run["unequal_tables"] == {}, (run["max_offsets_per_trigger"], EXCLUDED, run["unequal_tables"])
