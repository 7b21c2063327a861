"""Fault windows as values: what the monitor's replay keeps and emits per (producer, broker).

A window is the span in which a producer's client avoids a broker; each transition of one is an episode,
the row the job stores and alerts on. Also the per-broker and fallback views of the replay, and the plain
snapshot form of a tracked fault item. The replay itself: ``faults.tracker``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from streaming.domain.faults.tolerance import FaultItem, SendOutcome


class WindowStatus(enum.Enum):
    OPENED = "OPENED"  # the broker became unavailable to the producer
    EXTENDED = "EXTENDED"  # a later send moved the end later
    SHORTENED = "SHORTENED"  # 4.9.x overwrite: a later, shorter duration moved the end earlier
    CLOSED_EARLY = "CLOSED_EARLY"  # 4.9.x overwrite: a send with duration 0 ended the window at once
    EXPIRED = "EXPIRED"  # the end was reached

    @property
    def closes(self) -> bool:
        return self in (WindowStatus.CLOSED_EARLY, WindowStatus.EXPIRED)


@dataclass(frozen=True)
class Trigger:
    """The send that caused a transition: its latency, the table level it fell in, and why."""

    event_time_ms: int
    latency_ms: int
    outcome: SendOutcome
    isolation: bool
    level: int  # level of the latency fed to the table (the isolation latency when isolating); -1 below all
    duration_ms: int


@dataclass(frozen=True)
class FaultWindow:
    """An open window: since when, until when, and the sends that opened and last moved it."""

    window_start_ms: int
    window_end_ms: int
    opened_by: Trigger
    last_moved_by: Trigger


@dataclass(frozen=True)
class FaultWindowEpisode:
    """One transition of a fault window (the job keeps every one in a history table).

    ``window_end_ms`` is the end *after* the transition (CLOSED_EARLY: the closing send's time;
    EXPIRED: the end that was reached, which is also ``event_time_ms``). ``trigger_latency_ms``,
    ``level``, ``cause`` and ``isolation`` describe the send that caused the transition; for EXPIRED,
    the send that last set the end.
    """

    status: WindowStatus
    producer_id: str
    broker: str
    event_time_ms: int
    window_start_ms: int
    window_end_ms: int
    previous_end_ms: int | None
    trigger_latency_ms: int
    level: int
    cause: str
    isolation: bool
    fault_table: str

    def as_row(self) -> dict[str, Any]:
        return {
            "status": self.status.value,
            "producer_id": self.producer_id,
            "broker": self.broker,
            "event_time_ms": self.event_time_ms,
            "window_start_ms": self.window_start_ms,
            "window_end_ms": self.window_end_ms,
            "previous_end_ms": self.previous_end_ms,
            "trigger_latency_ms": self.trigger_latency_ms,
            "level": self.level,
            "cause": self.cause,
            "isolation": self.isolation,
            "fault_table": self.fault_table,
        }


@dataclass(frozen=True)
class TrackedFault:
    """The fault item of one (producer, broker) plus its open window, if any."""

    producer_id: str
    broker: str
    item: FaultItem
    last_event_ms: int
    window: FaultWindow | None = None
    # False while the producer's sends say sendLatencyFaultEnable is off: it avoids no broker, whatever
    # ``item`` holds (kept as it was, as the Java table keeps its items when the setter turns the feature off).
    fault_enabled: bool = True

    @property
    def avoids_at(self) -> int | None:
        """Until when the producer avoids the broker (its item's end), None when it cannot avoid it."""
        return self.item.start_timestamp_ms if self.fault_enabled else None

    def is_available(self, now_ms: int) -> bool:
        return not self.fault_enabled or self.item.is_available(now_ms)


@dataclass(frozen=True)
class BrokerAvoidance:
    """Per broker at one instant: producers that sent to it, those avoiding it, and until when."""

    broker: str
    producers_seen: int
    producers_avoiding: int
    avoided_until_ms: int | None

    @property
    def avoiding_ratio(self) -> float:
        return self.producers_avoiding / self.producers_seen if self.producers_seen else 0.0


@dataclass(frozen=True)
class FallbackView:
    """Whether a producer has no available broker among ``known_brokers``, and where it then sends.

    4.9.x: ``pickOneAtLeast`` candidates (better half of all the producer's items; the exact one depends on
    the thread's ``whichItemWorst``). 5.x: the reachable known brokers, else every known broker (plain
    round robin).
    """

    all_unavailable: bool
    candidates: tuple[str, ...]


def trigger_to_dict(trigger: Trigger) -> dict[str, Any]:
    """A trigger in the plain form of a fault tracker snapshot."""
    return {
        "event_time_ms": trigger.event_time_ms,
        "latency_ms": trigger.latency_ms,
        "outcome": trigger.outcome.value,
        "isolation": trigger.isolation,
        "level": trigger.level,
        "duration_ms": trigger.duration_ms,
    }


def trigger_from_dict(raw: Mapping[str, Any]) -> Trigger:
    """The trigger ``trigger_to_dict`` gave."""
    return Trigger(
        event_time_ms=int(raw["event_time_ms"]),
        latency_ms=int(raw["latency_ms"]),
        outcome=SendOutcome.parse(raw["outcome"]),
        isolation=bool(raw["isolation"]),
        level=int(raw["level"]),
        duration_ms=int(raw["duration_ms"]),
    )


def tracked_to_dict(tracked: TrackedFault) -> dict[str, Any]:
    """A tracked fault item and its open window in the plain form of a fault tracker snapshot."""
    window = tracked.window
    return {
        "producer_id": tracked.producer_id,
        "broker": tracked.broker,
        "current_latency_ms": tracked.item.current_latency_ms,
        "start_timestamp_ms": tracked.item.start_timestamp_ms,
        "reachable": tracked.item.reachable,
        "last_event_ms": tracked.last_event_ms,
        "fault_enabled": tracked.fault_enabled,
        "window": None
        if window is None
        else {
            "window_start_ms": window.window_start_ms,
            "window_end_ms": window.window_end_ms,
            "opened_by": trigger_to_dict(window.opened_by),
            "last_moved_by": trigger_to_dict(window.last_moved_by),
        },
    }


def tracked_from_dict(raw: Mapping[str, Any]) -> TrackedFault:
    """The tracked fault ``tracked_to_dict`` gave (one written before ``fault_enabled`` existed: enabled)."""
    window = raw.get("window")
    return TrackedFault(
        producer_id=str(raw["producer_id"]),
        broker=str(raw["broker"]),
        item=FaultItem(
            name=str(raw["broker"]),
            current_latency_ms=int(raw["current_latency_ms"]),
            start_timestamp_ms=int(raw["start_timestamp_ms"]),
            reachable=bool(raw["reachable"]),
        ),
        last_event_ms=int(raw["last_event_ms"]),
        fault_enabled=bool(raw.get("fault_enabled", True)),
        window=None
        if window is None
        else FaultWindow(
            window_start_ms=int(window["window_start_ms"]),
            window_end_ms=int(window["window_end_ms"]),
            opened_by=trigger_from_dict(window["opened_by"]),
            last_moved_by=trigger_from_dict(window["last_moved_by"]),
        ),
    )
