"""Routes, reports and progress samples enter the engine typed, parsed once by the consumer state function.

``consumer.events.parsed_event`` turns the JSON of an event's validated fields into the engine's type; a value
no parser takes makes the state function dead-letter the record as ``PROCESSING_ERROR`` (the engine never sees
it), and what the engine refuses keeps its reason (``UNKNOWN_GROUP``, ``INCONSISTENT_PROGRESS``), with the
record's Kafka coordinates and raw value the state function kept beside the typed event.
"""

from __future__ import annotations

import json

import pytest

from streaming.domain.consumers.engine_settings import EngineSettings
from streaming.domain.consumers.group_state import RouteBroker, TopicRoute, readable_queues
from streaming.domain.consumers.progress_tracker import INCONSISTENT, ConsumeProgress, ProgressRow
from streaming.domain.consumers.reported import ReportedAssignment, ReportedQueue, held_queues
from streaming.domain.consumers.shard_engine import UNKNOWN_GROUP
from streaming.job.consumer.events import EVENT_COLUMNS, parsed_event
from streaming.job.consumer.query import _apply_isolating_poison, _as_job_rows
from streaming.job.ingest.poison import PROCESSING_ERROR
from tests.support.event_corpus import GOOD, KAFKA_TS
from tests.support.events import hb

PROGRESS = {
    "type": "consume_progress",
    "schema_version": 1,
    "event_time": KAFKA_TS,
    "group": "G",
    "broker": "broker-a",
    "queues": [
        {"topic": "T", "queue_id": 0, "broker_offset": 9, "consumer_offset": 4, "pull_offset": -1},
        {"topic": "T", "queue_id": 1, "broker_offset": 5, "consumer_offset": 5, "last_timestamp": 7, "min_offset": 2},
    ],
}


def test_a_route_parses_with_the_clients_defaults_and_its_readable_queues():
    route = dict(GOOD["topic_route"], brokers=[*GOOD["topic_route"]["brokers"], {"broker": "broker-w", "perm": 2}])
    parsed = parsed_event("topic_route", route)
    assert parsed == TopicRoute(KAFKA_TS, "T", (RouteBroker("broker-a", 4, 6), RouteBroker("broker-w", 0, 2)))
    assert [(q.broker_name, q.queue_id) for q in readable_queues(parsed)] == [("broker-a", i) for i in range(4)]


def test_a_report_parses_with_its_process_queue_info_and_keeps_only_what_it_holds():
    queues = [
        {"broker": "broker-a", "queue_id": 0, "dropped": None, "cached_msg_count": 3, "locked": True},
        {"broker": "broker-a", "queue_id": 1, "dropped": True},
    ]
    parsed = parsed_event("reported_assignment", dict(GOOD["reported_assignment"], queues=queues))
    assert parsed == ReportedAssignment(
        KAFKA_TS,
        "G",
        "10.0.0.7@1#123",
        "T",
        (ReportedQueue("broker-a", 0, cached_msg_count=3, locked=True), ReportedQueue("broker-a", 1, dropped=True)),
    )
    assert parsed.held() == [["broker-a", 0]]
    assert held_queues(parsed)["queues"] == [["broker-a", 0, None, 3, None, None, None, True, None, None, None]]


def test_a_progress_sample_parses_with_absent_and_null_fields_unknown():
    parsed = parsed_event("consume_progress", dict(PROGRESS, error=None))
    assert parsed == ConsumeProgress(
        KAFKA_TS,
        "G",
        "broker-a",
        (ProgressRow("T", 0, 9, 4, pull_offset=-1), ProgressRow("T", 1, 5, 5, last_timestamp=7, min_offset=2)),
    )
    assert [row.lag for row in parsed.queues] == [5, 0]


@pytest.mark.parametrize(
    ("event_type", "event"),
    [
        ("topic_route", dict(GOOD["topic_route"], brokers=[{"broker": "b", "read_queue_nums": "many"}])),
        ("reported_assignment", dict(GOOD["reported_assignment"], queues=[{"broker": "b", "queue_id": "x"}])),
        ("consume_progress", {k: v for k, v in PROGRESS.items() if k != "event_time"}),
    ],
)
def test_a_value_no_parser_takes_raises_in_the_adapter(event_type, event):
    with pytest.raises((ValueError, KeyError)):
        parsed_event(event_type, event)


class _NoState:
    """A shard without state, as the state function's first call for it sees it."""

    exists = False


def test_refused_and_unparsable_events_are_dead_letters_with_their_reason_and_origin():
    """A report of a group no broker knows (UNKNOWN_GROUP), a sample contradicting itself (INCONSISTENT_PROGRESS)
    and a report whose value no parser takes (PROCESSING_ERROR), among events the engine applies."""
    member = dict(hb(0, "10.0.0.7:1", "c1", "G"), event_time=KAFKA_TS)
    ghost = dict(GOOD["reported_assignment"], group="ghosts")
    twice = dict(PROGRESS, queues=PROGRESS["queues"][:1] * 2)
    broken = dict(GOOD["reported_assignment"], queues=[{"broker": "broker-a", "queue_id": "x"}])
    published = [GOOD["topic_route"], member, ghost, twice, broken]
    columns: dict[str, list] = {name: [] for name in EVENT_COLUMNS}
    for offset, event in enumerate(published):
        row = dict.fromkeys(EVENT_COLUMNS)
        raw = json.dumps(event)
        row.update(
            event_time_ms=event["event_time"],
            event_type=event["type"],
            kafka_topic=f"rmq.{event['type']}",
            kafka_partition=0,
            kafka_offset=offset,
            raw_value=raw,
            typed_json=raw,
        )
        for name in EVENT_COLUMNS:
            columns[name].append(row[name])

    _, outcomes, letter_rows, origins = _apply_isolating_poison(0, columns, _NoState(), EngineSettings(), 0)
    rows = _as_job_rows(outcomes, 0, origins) + letter_rows
    letters = {r["kafka_offset"]: r for t, r in rows if t == "dead_letters"}
    assert {offset: r["reason"] for offset, r in letters.items()} == {
        2: UNKNOWN_GROUP,
        3: INCONSISTENT,
        4: PROCESSING_ERROR,
    }
    assert all(r["raw_value"] == json.dumps(published[o]) for o, r in letters.items())
    assert letters[4]["detail"].startswith("ValueError: invalid literal for int()")
    assert any(t == "membership_changes" for t, _ in rows)  # the rest of the batch applied
