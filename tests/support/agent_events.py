"""Reading what the client agent published: the records of a Kafka topic, from the start."""

from __future__ import annotations

import json
import time
from typing import Any

from streaming.contract.events import EVENT_TIME_HEADER


def _records(bootstrap: str, topic: str, at_least: int, timeout_s: float) -> list[Any]:
    """Every record of ``topic``, polling until a poll finds nothing more and there are ``at_least`` (or time is up)."""
    from kafka import KafkaConsumer

    deadline = time.monotonic() + timeout_s
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False)
    records: list[Any] = []
    try:
        while True:
            polled = consumer.poll(timeout_ms=500)
            for batch in polled.values():
                records += batch
            if (not polled and len(records) >= at_least) or time.monotonic() > deadline:
                return records
    finally:
        consumer.close()


def read_events(bootstrap: str, topic: str, *, at_least: int = 1, timeout_s: float = 90.0) -> list[tuple[str, dict]]:
    """Every record of ``topic`` as (key, event)."""
    return [(r.key.decode(), json.loads(r.value)) for r in _records(bootstrap, topic, at_least, timeout_s)]


def read_records(
    bootstrap: str, topic: str, *, at_least: int = 1, timeout_s: float = 90.0
) -> list[tuple[dict[str, str], dict]]:
    """Every record of ``topic`` as (headers as name to text, event): UTF-8, the event-time header's 8 bytes as
    the decimal number they hold."""
    return [
        (
            {
                k: str(int.from_bytes(v, "big", signed=True)) if k == EVENT_TIME_HEADER else v.decode()
                for k, v in r.headers
            },
            json.loads(r.value),
        )
        for r in _records(bootstrap, topic, at_least, timeout_s)
    ]
