"""Publishing hostile records with their Kafka coordinates, and checking the job's outcome record by record.

Shared by the integration test (``tests/integration/test_hostile_input.py``) and ``bench/hostile_input.py``.
The expected verdict of each record is the contract's Python validator's, with the record's Kafka timestamp
as its clock; the job's queries each read their own types, so a valid event on another query's topic is
``UNKNOWN_TYPE`` there.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from streaming.contract.events import EVENT_TYPES
from streaming.contract.validator import Rejection, ValidEvent, parse_like_the_job, validate_event
from streaming.domain.consumers.progress_tracker import INCONSISTENT, ConsumeProgress, refusal
from streaming.domain.consumers.shard_engine import UNKNOWN_GROUP
from tests.support.hostile import Hostile
from tests.support.job import read

SEND_TYPES = frozenset({"send_result"})
CONSUMER_TYPES = frozenset(EVENT_TYPES) - SEND_TYPES
_BEFORE_TYPE = ("OVERSIZED", "NOT_JSON", "NOT_AN_OBJECT", "UNKNOWN_TYPE")


@dataclass(frozen=True)
class Published:
    """A record as Kafka stored it."""

    seed: int
    record: Hostile
    topic: str
    partition: int
    offset: int
    timestamp_ms: int


@dataclass
class Seen:
    """What the job left: dead letters, channels that joined, sends counted per (producer group, broker),
    consumer events counted late."""

    dead_letters: list[dict[str, Any]]
    joined: set[tuple[str, str, str]] = field(default_factory=set)
    sends: Counter[tuple[str, str]] = field(default_factory=Counter)
    late: int = 0


def publish_recorded(
    bootstrap: str, seed: int, records: Iterable[Hostile], topics: Mapping[str, str]
) -> list[Published]:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, max_request_size=2_000_000)
    try:
        pending = [(record, producer.send(topics[record.topic_type], record.raw)) for record in records]
        producer.flush(60)
        published = []
        for record, future in pending:
            meta = future.get(timeout=60)
            published.append(Published(seed, record, meta.topic, meta.partition, meta.offset, meta.timestamp))
        return published
    finally:
        producer.close()


def read_outcome(spark: Any, config: Any, jobs: Iterable[Any]) -> Seen:
    seen = Seen(read(spark, config, "dead_letters"))
    for change in read(spark, config, "membership_changes"):
        if change["change"] == "JOIN":
            seen.joined.add((change["group"], change["broker"], change["channel"]))
    for minute in read(spark, config, "send_latency_minutes"):
        seen.sends[(minute["producer_group"], minute["broker"])] += minute["sends"]
    for job in jobs:
        seen.late += int(job.metrics.counters.get("rmqmon_late_events_total", {}).get(("consumer", "watermark"), 0))
    return seen


def expected_verdict(item: Published, query_types: frozenset[str]) -> ValidEvent | Rejection:
    """The contract validator's verdict, or ``UNKNOWN_TYPE`` for an event of a type the topic's query does not
    read (checked right after the JSON checks, as the job does)."""
    verdict = validate_event(item.record.raw, item.timestamp_ms, default_type=item.record.topic_type)
    if isinstance(verdict, Rejection) and verdict.reason in _BEFORE_TYPE:
        return verdict
    _, value = parse_like_the_job(item.record.raw)
    declared = value.get("type") if isinstance(value, dict) else None
    effective = item.record.topic_type if declared is None else declared
    if effective not in query_types:
        return Rejection("UNKNOWN_TYPE", f"unknown event type {effective}")
    return verdict


def check_outcome(published: list[Published], seen: Seen, topics: Mapping[str, str], restart_after: int) -> list[str]:
    """Every broken invariant, as text: a record dead-lettered twice, with the wrong reason, not at all though
    invalid, or both dead-lettered and applied; a valid heartbeat that neither joined nor was late; sends
    counted other than once. ``restart_after``: how many of ``published`` the first run took."""
    problems: list[str] = []
    letters: dict[tuple[str, int, int], dict[str, Any]] = {}
    for letter in seen.dead_letters:
        coordinates = (letter["kafka_topic"], letter["kafka_partition"], letter["kafka_offset"])
        if coordinates in letters:
            problems.append(f"dead-lettered twice: {coordinates}")
        letters[coordinates] = letter
    send_topic = topics["send_result"]
    verdicts = [expected_verdict(p, SEND_TYPES if p.topic == send_topic else CONSUMER_TYPES) for p in published]
    # The consumer query's watermark when the second run starts: the newest valid event of the first.
    first_times = [
        v.event_time_ms
        for p, v in zip(published[:restart_after], verdicts, strict=False)
        if isinstance(v, ValidEvent) and p.topic != send_topic
    ]
    watermark = max(first_times, default=-1)
    expected_sends: Counter[tuple[str, str]] = Counter()
    expected_late = 0
    for index, (item, verdict) in enumerate(zip(published, verdicts, strict=True)):
        where = f"{item.record.note} at {item.topic}[{item.partition}]@{item.offset}: {item.record.raw[:120]!r}"
        letter = letters.pop((item.topic, item.partition, item.offset), None)
        if isinstance(verdict, Rejection):
            if letter is None:
                problems.append(f"invalid ({verdict.reason}) but not dead-lettered: {where}")
            elif letter["reason"] != verdict.reason:
                problems.append(f"dead-lettered {letter['reason']}, expected {verdict.reason}: {where}")
            continue
        event = verdict.payload
        late = verdict.event_type != "send_result" and index >= restart_after and verdict.event_time_ms <= watermark
        if (
            verdict.event_type == "consume_progress"
            and not late
            and refusal(ConsumeProgress.from_json(event)) is not None
        ):
            # valid, but contradicting itself: the engine refuses it (``progress_tracker.refusal``)
            if letter is None or letter["reason"] != INCONSISTENT:
                got = None if letter is None else letter["reason"]
                problems.append(f"refused by the engine but dead-lettered as {got}, not {INCONSISTENT}: {where}")
            continue
        if letter is not None and not (
            letter["reason"] == UNKNOWN_GROUP and verdict.event_type == "reported_assignment"
        ):
            problems.append(f"valid but dead-lettered {letter['reason']} ({letter['detail']}): {where}")
            continue
        if verdict.event_type == "send_result":
            expected_sends[(event["producer_group"], event["broker"])] += 1
        elif index >= restart_after and verdict.event_time_ms <= watermark:
            expected_late += 1
        elif verdict.event_type == "consumer_channel" and event["kind"] == "HEARTBEAT":
            if (event["group"], event["broker"], event["channel"]) not in seen.joined:
                problems.append(f"valid heartbeat that did not join: {where}")
    problems += [f"a dead letter of no published record: {coordinates}" for coordinates in letters]
    if expected_sends != seen.sends:
        missing, extra = expected_sends - seen.sends, seen.sends - expected_sends
        problems.append(f"sends counted other than once: missing {dict(missing)}, extra {dict(extra)}")
    if expected_late != seen.late:
        problems.append(f"{seen.late} consumer events counted late, expected {expected_late}")
    return problems
