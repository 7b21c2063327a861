"""Reading back what a publisher wrote to Kafka: every record of some topics, from the beginning, as JSON, with
its key and its event-time header."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from streaming.contract.events import EVENT_TIME_HEADER


class KafkaRecords:
    """Accumulates the JSON values of every record of ``topics`` (all partitions, from offset 0)."""

    def __init__(self, bootstrap: str, topics: Iterable[str], **client_options: Any) -> None:
        from kafka import KafkaConsumer, TopicPartition

        self._consumer = KafkaConsumer(
            bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None, **client_options
        )
        partitions = []
        for topic in topics:
            ids = self._consumer.partitions_for_topic(topic) or {0}
            partitions += [TopicPartition(topic, p) for p in sorted(ids)]
        self._consumer.assign(partitions)
        self._consumer.seek_to_beginning(*partitions)
        self.records: list[dict[str, Any]] = []
        self.keys: list[str] = []
        self.event_time_headers: list[int | None] = []  # each record's header as the number it holds

    def poll(self) -> list[dict[str, Any]]:
        """Fetch what arrived since the last call; returns every record so far."""
        while True:
            batch = self._consumer.poll(timeout_ms=500)
            if not batch:
                return self.records
            for records in batch.values():
                for record in records:
                    self.records.append(json.loads(record.value))
                    self.keys.append(record.key.decode())
                    header = dict(record.headers or []).get(EVENT_TIME_HEADER)
                    self.event_time_headers.append(
                        None if header is None else int.from_bytes(header, "big", signed=True)
                    )

    def close(self) -> None:
        self._consumer.close()
