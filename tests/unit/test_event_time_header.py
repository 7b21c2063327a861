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
