"""Publishing contract events to Kafka (kafka-python): for services, the simulator and the demo.

``EventEmitter`` validates each event against the contract before sending (a bad event raises
``InvalidEvent`` with the dead-letter reason the job would give it), keys it as the contract says
(group, topic or producer id), adds the event-time header, batches sends, and reports delivery failures
instead of hiding them: ``flush()`` returns a ``DeliveryReport`` with the number sent and the errors seen.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from streaming.contract.events import DEFAULT_TOPICS, KEY_FIELDS, event_time_headers
from streaming.contract.validator import Rejection, validate_event

KEY_FIELD = KEY_FIELDS  # the field whose value is an event's Kafka key, per event type


class InvalidEvent(ValueError):
    def __init__(self, rejection: Rejection) -> None:
        super().__init__(f"{rejection.reason}: {rejection.detail}")
        self.rejection = rejection


@dataclass
class DeliveryReport:
    sent: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)


class EventEmitter:
    """Constructing opens nothing; the Kafka producer is created on first use."""

    def __init__(
        self,
        bootstrap_servers: str,
        topics: Mapping[str, str] | None = None,
        validate: bool = True,
        **producer_options: Any,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.topics = dict(topics or DEFAULT_TOPICS)
        self.validate = validate
        self.producer_options = {"acks": "all", "linger_ms": 20, "batch_size": 256 * 1024, **producer_options}
        self._producer: Any = None
        self._pending: list[Any] = []
        self.report = DeliveryReport()

    def _kafka(self) -> Any:
        if self._producer is None:
            from kafka import KafkaProducer

            self._producer = KafkaProducer(bootstrap_servers=self.bootstrap_servers, **self.producer_options)
        return self._producer

    def emit(self, event: Mapping[str, Any]) -> None:
        raw = json.dumps(event, separators=(",", ":")).encode()
        event_type = str(event.get("type"))
        if self.validate:
            outcome = validate_event(raw, int(time.time() * 1000) + 10**12)  # the job's future check is not ours
            if isinstance(outcome, Rejection):
                raise InvalidEvent(outcome)
        key = str(event.get(KEY_FIELD.get(event_type, ""), "")).encode() or None
        self._pending.append(
            self._kafka().send(self.topics[event_type], key=key, value=raw, headers=event_time_headers(event))
        )

    def emit_all(self, events: Iterable[Mapping[str, Any]]) -> None:
        for event in events:
            self.emit(event)

    def flush(self, timeout_s: float = 30.0) -> DeliveryReport:
        if self._producer is None:
            return self.report
        self._producer.flush(timeout_s)
        for future in self._pending:
            try:
                future.get(timeout=timeout_s)
                self.report.sent += 1
            except Exception as error:  # noqa: BLE001 - every failure is reported, none hidden
                self.report.failed += 1
                if len(self.report.errors) < 20:
                    self.report.errors.append(repr(error))
        self._pending.clear()
        return self.report

    def close(self) -> None:
        if self._producer is not None:
            self.flush()
            self._producer.close()
            self._producer = None
