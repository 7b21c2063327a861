"""The monitor's fault-window replay: send results in, one fault item per (producer, broker), episodes out.

``FaultWindowTracker`` applies ``faults.tolerance``' update rule and call sites in event-time order, expires windows
as its clock moves, answers which brokers a producer avoids, and snapshots itself for the job's state
store through ``state_codec``.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from streaming.domain.faults.tolerance import (
    FaultItem,
    FaultSemantics,
    FaultTable,
    FaultUpdate,
    LatencyFaultTolerance,
    SendResult,
    fault_table_from_config,
    fault_update_for,
    updated_fault_item,
)
from streaming.domain.faults.windows import (
    BrokerAvoidance,
    FallbackView,
    FaultWindow,
    FaultWindowEpisode,
    TrackedFault,
    Trigger,
    WindowStatus,
    tracked_from_dict,
    tracked_to_dict,
)
from streaming.domain.state_codec import unwrap_state, wrap_state


@dataclass(frozen=True)
class TrackerStep:
    """A new tracker, the episodes produced (in event-time order) and the sends refused as late."""

    tracker: FaultWindowTracker
    episodes: tuple[FaultWindowEpisode, ...] = ()
    late: tuple[SendResult, ...] = ()


SNAPSHOT_KIND = "fault tracker"
SNAPSHOT_SCHEMA_VERSION = 1
Key = tuple[str, str]


def _trigger(send: SendResult, table: FaultTable, update: FaultUpdate) -> Trigger:
    fed_ms = table.effective_latency_ms(send.latency_ms, update.isolation)
    return Trigger(
        event_time_ms=send.event_time_ms,
        latency_ms=send.latency_ms,
        outcome=send.outcome,
        isolation=update.isolation,
        level=table.level_of(fed_ms),
        duration_ms=table.compute_not_available_duration_ms(fed_ms),
    )


@dataclass(frozen=True)
class FaultWindowTracker:
    """Replays send results into one fault item per (producer, broker) and emits window episodes.

    Each send says whether its producer runs with ``sendLatencyFaultEnable`` (``SendResult.fault_enabled``):
    without it the client keeps no fault items and avoids no broker, so such sends open no window (they
    keep the pair known, as a producer that sends there and avoids nothing). ``fault_table.semantics``
    selects both the update rule and the call sites
    (``fault_update_for``); ``detector_enabled`` is 5.x ``startDetectorEnable`` (it makes remoting
    errors unreachable).

    Time only moves forward: ``apply`` first expires windows whose end is at or before the send's event
    time, then updates the item; ``advance(now_ms)`` expires windows with ``end <= now_ms`` (the broker
    is available at its end instant). A send older than the tracker's clock is returned in ``late``,
    not applied: the client applied its updates in time order, and replaying one out of order could
    reopen a window already reported closed. Feed sends sorted by event time.
    """

    fault_table: FaultTable
    detector_enabled: bool = False
    clock_ms: int | None = None
    items: Mapping[Key, TrackedFault] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        if not isinstance(self.items, MappingProxyType):
            object.__setattr__(self, "items", MappingProxyType(dict(self.items)))

    def __reduce__(self) -> tuple[Any, ...]:
        # A read-only mapping proxy cannot be pickled; rebuild from a plain dict instead.
        return (type(self), (self.fault_table, self.detector_enabled, self.clock_ms, dict(self.items)))

    # -- transitions ---------------------------------------------------------------------------------

    def apply(self, send: SendResult) -> TrackerStep:
        """Apply one send result at its event time."""
        return self.apply_all((send,))

    def apply_all(self, sends: Iterable[SendResult]) -> TrackerStep:
        """Apply sends in the order given (sort them by event time first), each at its event time.

        The sends are applied one by one to one working copy of the items, so a pair's sends of a batch
        build one tracker, not one per send (the replay's cost was mostly those copies)."""
        items = dict(self.items)
        clock = self.clock_ms
        episodes: list[FaultWindowEpisode] = []
        late: list[SendResult] = []
        applied = False
        for send in sends:
            if clock is not None and send.event_time_ms < clock:
                late.append(send)  # the client applied its updates in time order: not applied
                continue
            clock = self._expire(items, clock, send.event_time_ms, episodes)
            if send.fault_enabled:
                self._apply_enabled(items, send, episodes)
            else:
                self._apply_disabled(items, send, episodes)
            applied = True
        tracker = replace(self, clock_ms=clock, items=MappingProxyType(items)) if applied else self
        return TrackerStep(tracker, tuple(episodes), tuple(late))

    def _apply_enabled(
        self, items: dict[Key, TrackedFault], send: SendResult, episodes: list[FaultWindowEpisode]
    ) -> None:
        """One send of a producer with sendLatencyFaultEnable, its broker's expired windows already closed."""
        table = self.fault_table
        update = fault_update_for(send.outcome, table.client_line, self.detector_enabled)
        trigger = _trigger(send, table, update)
        key = (send.producer_id, send.broker)
        tracked = items.get(key)
        item = updated_fault_item(
            tracked.item if tracked else None,
            send.broker,
            send.latency_ms,
            trigger.duration_ms,
            send.event_time_ms,
            table.semantics,
            update.reachable,
        )
        window = tracked.window if tracked else None
        now_ms = send.event_time_ms
        unavailable = item.start_timestamp_ms > now_ms
        if window is None and unavailable:
            window = FaultWindow(now_ms, item.start_timestamp_ms, trigger, trigger)
            episodes.append(self._episode(WindowStatus.OPENED, key, window, trigger, now_ms, None))
        elif window is not None and not unavailable:
            previous = window.window_end_ms
            closed = replace(window, window_end_ms=now_ms, last_moved_by=trigger)
            episodes.append(self._episode(WindowStatus.CLOSED_EARLY, key, closed, trigger, now_ms, previous))
            window = None
        elif window is not None and item.start_timestamp_ms != window.window_end_ms:
            previous = window.window_end_ms
            status = WindowStatus.EXTENDED if item.start_timestamp_ms > previous else WindowStatus.SHORTENED
            window = replace(window, window_end_ms=item.start_timestamp_ms, last_moved_by=trigger)
            episodes.append(self._episode(status, key, window, trigger, now_ms, previous))
        items[key] = TrackedFault(send.producer_id, send.broker, item, now_ms, window)  # enabled (again)

    def _apply_disabled(
        self, items: dict[Key, TrackedFault], send: SendResult, episodes: list[FaultWindowEpisode]
    ) -> None:
        """A send of a producer without sendLatencyFaultEnable: no fault item is created or updated, and the
        producer stops avoiding the broker, so an open window (from sends with the feature on) ends now."""
        key = (send.producer_id, send.broker)
        tracked = items.get(key)
        # No Java item exists for a new pair; an item that is available and reachable stands for none.
        item = tracked.item if tracked else FaultItem(send.broker, 0, 0, True)
        if tracked is not None and tracked.window is not None:
            trigger = Trigger(send.event_time_ms, send.latency_ms, send.outcome, False, -1, 0)
            window = tracked.window
            closed = replace(window, window_end_ms=send.event_time_ms, last_moved_by=trigger)
            episodes.append(
                self._episode(WindowStatus.CLOSED_EARLY, key, closed, trigger, send.event_time_ms, window.window_end_ms)
            )
        items[key] = TrackedFault(send.producer_id, send.broker, item, send.event_time_ms, None, fault_enabled=False)

    def advance(self, now_ms: int) -> TrackerStep:
        """Move the clock to ``now_ms`` (never back), expiring every window whose end is ``<= now_ms``."""
        items = dict(self.items)
        episodes: list[FaultWindowEpisode] = []
        clock = self._expire(items, self.clock_ms, now_ms, episodes)
        if not episodes:
            return TrackerStep(self if self.clock_ms == clock else replace(self, clock_ms=clock))
        return TrackerStep(replace(self, clock_ms=clock, items=MappingProxyType(items)), tuple(episodes))

    def _expire(
        self, items: dict[Key, TrackedFault], clock_ms: int | None, now_ms: int, episodes: list[FaultWindowEpisode]
    ) -> int:
        """``advance`` on a working copy of the items: the windows ending at or before the clock's new time
        expire, in end order; returns that time (the clock never moves back)."""
        if clock_ms is not None and now_ms <= clock_ms:
            now_ms = clock_ms
        expiring = sorted(
            (t for t in items.values() if t.window is not None and t.window.window_end_ms <= now_ms),
            key=lambda t: (t.window.window_end_ms, t.producer_id, t.broker),  # type: ignore[union-attr]
        )
        for tracked in expiring:
            window = tracked.window
            assert window is not None
            key = (tracked.producer_id, tracked.broker)
            episodes.append(
                self._episode(WindowStatus.EXPIRED, key, window, window.last_moved_by, window.window_end_ms, None)
            )
            items[key] = replace(tracked, window=None)
        return now_ms

    def evict_idle(self, now_ms: int, idle_ms: int) -> FaultWindowTracker:
        """Forget items with no open window, reachable, and no send for ``idle_ms``.

        The Java client never forgets an item (4.9.x), so this is a memory bound for the monitor: an
        evicted item is indistinguishable for availability and reachability, but no longer competes in
        the 4.9.x ``pickOneAtLeast`` ordering.
        """
        keep = {
            k: t
            for k, t in self.items.items()
            if t.window is not None or not t.item.reachable or t.last_event_ms > now_ms - idle_ms
        }
        return self if len(keep) == len(self.items) else replace(self, items=MappingProxyType(keep))

    def _episode(
        self,
        status: WindowStatus,
        key: Key,
        window: FaultWindow,
        trigger: Trigger,
        event_time_ms: int,
        previous_end_ms: int | None,
    ) -> FaultWindowEpisode:
        return FaultWindowEpisode(
            status=status,
            producer_id=key[0],
            broker=key[1],
            event_time_ms=event_time_ms,
            window_start_ms=window.window_start_ms,
            window_end_ms=window.window_end_ms,
            previous_end_ms=previous_end_ms,
            trigger_latency_ms=trigger.latency_ms,
            level=trigger.level,
            cause=trigger.outcome.value,
            isolation=trigger.isolation,
            fault_table=self.fault_table.name,
        )

    # -- queries -------------------------------------------------------------------------------------

    def get(self, producer_id: str, broker: str) -> TrackedFault | None:
        return self.items.get((producer_id, broker))

    def is_available(self, producer_id: str, broker: str, now_ms: int) -> bool:
        """Whether the producer's client would consider the broker available at ``now_ms``."""
        tracked = self.items.get((producer_id, broker))
        return True if tracked is None else tracked.is_available(now_ms)

    def is_reachable(self, producer_id: str, broker: str) -> bool:
        tracked = self.items.get((producer_id, broker))
        return True if tracked is None else tracked.item.reachable

    def producers(self) -> tuple[str, ...]:
        return tuple(sorted({p for p, _ in self.items}))

    def fault_tolerance(self, producer_id: str) -> LatencyFaultTolerance:
        """The producer's ``LatencyFaultToleranceImpl`` state, for ``producer.MQFaultStrategy``."""
        items = tuple(t.item for (p, _), t in self.items.items() if p == producer_id)
        return LatencyFaultTolerance(self.fault_table.semantics, items)

    def all_brokers_unavailable(self, producer_id: str, known_brokers: Collection[str], now_ms: int) -> bool:
        """True when every known broker is unavailable to the producer at ``now_ms``: the 4.9.x client
        then falls back to ``pickOneAtLeast``, the 5.x client to reachable-only, then plain round robin.
        No known broker is False (that is "no route", a different failure)."""
        return bool(known_brokers) and not any(self.is_available(producer_id, b, now_ms) for b in known_brokers)

    def fallback(self, producer_id: str, known_brokers: Collection[str], now_ms: int) -> FallbackView:
        """The fallback path's view for one producer (see ``FallbackView``)."""
        if not self.all_brokers_unavailable(producer_id, known_brokers, now_ms):
            return FallbackView(False, ())
        if self.fault_table.semantics is FaultSemantics.OVERWRITE:
            return FallbackView(True, self.fault_tolerance(producer_id).pick_candidates(now_ms))
        brokers = sorted(set(known_brokers))
        reachable = tuple(b for b in brokers if self.is_reachable(producer_id, b))
        return FallbackView(True, reachable or tuple(brokers))

    def open_windows(self) -> tuple[TrackedFault, ...]:
        return tuple(t for t in self.items.values() if t.window is not None)

    def next_expiry_ms(self) -> int | None:
        """The earliest end among open windows: when ``advance`` will next have something to do."""
        ends = [t.window.window_end_ms for t in self.items.values() if t.window is not None]
        return min(ends) if ends else None

    def broker_status(self, now_ms: int) -> tuple[BrokerAvoidance, ...]:
        """Per broker: producers seen, producers for which it is unavailable at ``now_ms``, latest end."""
        seen: dict[str, int] = {}
        avoiding: dict[str, int] = {}
        until: dict[str, int] = {}
        for (_, broker), tracked in self.items.items():
            seen[broker] = seen.get(broker, 0) + 1
            if not tracked.is_available(now_ms):
                avoiding[broker] = avoiding.get(broker, 0) + 1
                until[broker] = max(until.get(broker, 0), tracked.item.start_timestamp_ms)
        return tuple(BrokerAvoidance(b, seen[b], avoiding.get(b, 0), until.get(b)) for b in sorted(seen))

    # -- snapshot / restore --------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Plain, JSON-ready state (for a Spark state store), with ``schema_version``."""
        payload = {
            "fault_table": self.fault_table.to_dict(),
            "detector_enabled": self.detector_enabled,
            "clock_ms": self.clock_ms,
            "items": [tracked_to_dict(t) for t in self.items.values()],
        }
        return wrap_state(SNAPSHOT_KIND, SNAPSHOT_SCHEMA_VERSION, payload)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], known: Iterable[FaultTable] = ()) -> FaultWindowTracker:
        """The tracker ``to_dict`` gave; its table is the one of ``known`` it equals, else read from the data."""
        data = unwrap_state(SNAPSHOT_KIND, SNAPSHOT_SCHEMA_VERSION, data)
        items = {}
        for raw in data["items"]:
            tracked = tracked_from_dict(raw)
            items[(tracked.producer_id, tracked.broker)] = tracked
        stored = data["fault_table"]
        table = next((t for t in known if t.name == stored.get("name") and t.to_dict() == stored), None)
        return cls(
            fault_table=table or fault_table_from_config(stored),
            detector_enabled=bool(data["detector_enabled"]),
            clock_ms=None if data["clock_ms"] is None else int(data["clock_ms"]),
            items=MappingProxyType(items),
        )
