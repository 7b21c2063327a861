"""The event-time record header: what the Python producers write, and the same name in every JVM producer and in
the job's planner (``docs/events.md``)."""

from __future__ import annotations

import re
import struct

import pytest

from connectors.jvm_artifacts import PROJECT_ROOT
from streaming.contract.events import EVENT_TIME_HEADER, event_time_headers


def test_an_events_time_is_its_header_as_eight_big_endian_bytes():
    assert event_time_headers({"event_time": 1_700_000_000_123}) == [
        (EVENT_TIME_HEADER, struct.pack(">q", 1_700_000_000_123))
    ]
    assert event_time_headers({"event_time": -1}) == [(EVENT_TIME_HEADER, b"\xff" * 8)]


@pytest.mark.parametrize("value", [None, "1700000000000", 1.7e12, True, 2**63])
def test_an_event_without_an_integer_time_has_no_header(value):
    assert event_time_headers({} if value is None else {"event_time": value}) == []


@pytest.mark.parametrize(
    "source",
    [
        "jvm/collector/src/main/java/io/github/rrm/collector/EventPublisher.java",
        "jvm/agent/src/main/java/io/github/rrm/agent/EventPublisher.java",
        "jvm/src/main/java/io/github/rrm/source/KafkaRecordTimes.java",
    ],
)
def test_every_jvm_producer_and_the_planner_name_the_same_header(source):
    names = re.findall(r'static final String (?:EVENT_TIME_)?HEADER = "([^"]+)"', (PROJECT_ROOT / source).read_text())
    assert names == [EVENT_TIME_HEADER]


def test_the_benchmarks_publish_each_event_with_its_own_time_as_the_header():
    """``bench_job``'s workloads and the latency and sizing fleets: a capped batch of a benchmark is planned by its
    events' times, as the collector's and the agent's records are."""
    import json
    from itertools import islice

    from bench.collector_fleet import CollectorFleet
    from bench.job_workload import heartbeats, progress_samples, record_headers, sends
    from bench.latency_fleet import Injector, tick_events
    from streaming.contract.events import DEFAULT_TOPICS

    fleet = CollectorFleet(4, 3, 5, 50, dict(DEFAULT_TOPICS))
    fleet_values = [
        v for t in range(0, 31_000, 100) for (_, _, v), _ in tick_events(fleet, Injector(fleet), t, t + 100)
    ]
    values = [
        *(v for _, v in islice(sends(300), 300)),
        *(v for _, v in heartbeats(2, 2, 2)),
        *(v for _, v in progress_samples(2, 2)),
        *(v for _, _, v in fleet.routes(5)),
        *fleet_values,
    ]
    kinds = {json.loads(v)["type"] for v in values}
    assert kinds >= {"send_result", "consumer_channel", "topic_route", "consume_progress", "consumer_connections"}
    for value in values:
        assert record_headers(value) == event_time_headers(json.loads(value)) != []
