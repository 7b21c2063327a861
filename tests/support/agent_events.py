"""Reading what the client agent published: the records of a Kafka topic as (key, event) pairs."""

from __future__ import annotations

import json
import time
from typing import Any


def read_events(
    bootstrap: str, topic: str, *, at_least: int = 0, timeout_s: float = 30.0
) -> list[tuple[str, dict[str, Any]]]:
    """Every record of ``topic`` from the start, polling until there are ``at_least`` or ``timeout_s`` passed."""
    from kafka import KafkaConsumer

    deadline = time.monotonic() + timeout_s
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False)
    records: list[tuple[str, dict[str, Any]]] = []
    try:
        while True:
            for batch in consumer.poll(timeout_ms=500).values():
                records += [(r.key.decode(), json.loads(r.value)) for r in batch]
            if len(records) >= at_least and (at_least or records) or time.monotonic() > deadline:
                # one more short poll picks up what was in flight with the last record
                for batch in consumer.poll(timeout_ms=500).values():
                    records += [(r.key.decode(), json.loads(r.value)) for r in batch]
                return records
    finally:
        consumer.close()
