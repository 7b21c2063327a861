"""Producer latency fault tolerance: the fault table, fault items, and the monitor's fault-window replay.

Reproduces ``MQFaultStrategy`` and ``LatencyFaultToleranceImpl`` of both client lines as immutable values with
time passed in, and turns a stream of send results into the fault-window episodes the monitor stores and alerts
on. The two lines' differences and the misnamed ``startTimestamp``: ``docs/design/fault-tolerance.md``.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from .errors import ConfigurationError, IllegalArgument, NullPointer
from .versions import ClientLine

JAVA_LONG_MAX = 2**63 - 1


class FaultSemantics(enum.Enum):
    """How ``updateFaultItem`` moves a broker's ``startTimestamp``."""

    OVERWRITE = "overwrite"  # 4.9.x: a later fast success ends a window at once
    EXTEND_ONLY = "extend-only"  # 5.1.4+: windows only grow; a success never ends one early

    @property
    def client_line(self) -> ClientLine:
        """The client line whose call sites (outcome -> isolation/reachable) go with these semantics."""
        return ClientLine.V4_9 if self is FaultSemantics.OVERWRITE else ClientLine.V5


# --------------------------------------------------------------------------------------------------
# The fault table
# --------------------------------------------------------------------------------------------------


def _check_long(name: str, value: object, *, minimum: int = 0) -> int:
    # bool is an int subclass; a table written as [true, false] is a config mistake, not 1 and 0.
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigurationError(f"{name} must be an integer number of milliseconds, got {value!r}")
    if value < minimum or value > JAVA_LONG_MAX:
        raise ConfigurationError(f"{name} must be between {minimum} and {JAVA_LONG_MAX} ms, got {value}")
    return value


@dataclass(frozen=True)
class FaultTable:
    """``MQFaultStrategy``'s ``latencyMax`` -> ``notAvailableDuration`` table plus how it is used.

    Validated on construction (the Java setters accept anything): at least one level, the same number
    of thresholds and durations, thresholds strictly ascending and non-negative, durations
    non-negative. Level ``i`` covers ``latency_max_ms[i] <= latency < latency_max_ms[i + 1]``; latencies
    below the first threshold are level -1 with duration 0.
    """

    name: str
    latency_max_ms: tuple[int, ...]
    not_available_duration_ms: tuple[int, ...]
    isolation_latency_ms: int
    semantics: FaultSemantics

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ConfigurationError(f"fault table name must be a non-empty string, got {self.name!r}")
        where = f"fault table {self.name!r}"
        if not isinstance(self.latency_max_ms, tuple) or not isinstance(self.not_available_duration_ms, tuple):
            raise ConfigurationError(f"{where}: latency_max_ms and not_available_duration_ms must be tuples")
        if not self.latency_max_ms:
            raise ConfigurationError(f"{where}: latency_max_ms needs at least one threshold")
        if len(self.latency_max_ms) != len(self.not_available_duration_ms):
            raise ConfigurationError(
                f"{where}: latency_max_ms has {len(self.latency_max_ms)} thresholds but "
                f"not_available_duration_ms has {len(self.not_available_duration_ms)} durations; they pair up "
                "by position and must have the same length"
            )
        for i, value in enumerate(self.latency_max_ms):
            _check_long(f"{where}: latency_max_ms[{i}]", value)
        for i, value in enumerate(self.not_available_duration_ms):
            _check_long(f"{where}: not_available_duration_ms[{i}]", value)
        for i in range(1, len(self.latency_max_ms)):
            if self.latency_max_ms[i] <= self.latency_max_ms[i - 1]:
                raise ConfigurationError(
                    f"{where}: latency_max_ms must be strictly ascending, but latency_max_ms[{i}] = "
                    f"{self.latency_max_ms[i]} follows {self.latency_max_ms[i - 1]}"
                )
        _check_long(f"{where}: isolation_latency_ms", self.isolation_latency_ms)
        if not isinstance(self.semantics, FaultSemantics):
            raise ConfigurationError(f"{where}: semantics must be a FaultSemantics, got {self.semantics!r}")

    def level_of(self, latency_ms: int) -> int:
        """Index of the highest threshold ``<= latency_ms`` (Java scans from the top), or -1 below all."""
        for i in range(len(self.latency_max_ms) - 1, -1, -1):
            if latency_ms >= self.latency_max_ms[i]:
                return i
        return -1

    def compute_not_available_duration_ms(self, latency_ms: int) -> int:
        """``MQFaultStrategy.computeNotAvailableDuration``: the duration of the latency's level, 0 below."""
        level = self.level_of(latency_ms)
        return 0 if level < 0 else self.not_available_duration_ms[level]

    def effective_latency_ms(self, latency_ms: int, isolation: bool) -> int:
        """What ``updateFaultItem`` feeds into the table: the isolation latency replaces the real one."""
        return self.isolation_latency_ms if isolation else latency_ms

    def duration_ms(self, latency_ms: int, isolation: bool) -> int:
        """``computeNotAvailableDuration(isolation ? isolationLatency : latency)``."""
        return self.compute_not_available_duration_ms(self.effective_latency_ms(latency_ms, isolation))

    @property
    def latency_floor_ms(self) -> int | None:
        """The smallest latency whose duration is positive (None if no level has one).

        Sends below it and without an error cannot open or extend a window; the Spark reducer drops
        most of them before they reach the replay.
        """
        for threshold, duration in zip(self.latency_max_ms, self.not_available_duration_ms, strict=True):
            if duration > 0:
                return threshold
        return None

    @property
    def client_line(self) -> ClientLine:
        return self.semantics.client_line

    def to_dict(self) -> dict[str, Any]:
        """Plain form, accepted back by ``fault_table_from_config``."""
        return {
            "name": self.name,
            "latency_max_ms": list(self.latency_max_ms),
            "not_available_duration_ms": list(self.not_available_duration_ms),
            "isolation_latency_ms": self.isolation_latency_ms,
            "semantics": self.semantics.value,
        }


ROCKETMQ_4 = FaultTable(
    name="rocketmq-4",
    latency_max_ms=(50, 100, 550, 1000, 2000, 3000, 15000),
    not_available_duration_ms=(0, 0, 30000, 60000, 120000, 180000, 600000),
    isolation_latency_ms=30000,
    semantics=FaultSemantics.OVERWRITE,
)
ROCKETMQ_5 = FaultTable(
    name="rocketmq-5",
    latency_max_ms=(50, 100, 550, 1800, 3000, 5000, 15000),
    not_available_duration_ms=(0, 0, 2000, 5000, 6000, 10000, 30000),
    isolation_latency_ms=10000,
    semantics=FaultSemantics.EXTEND_ONLY,
)
PRESETS: Mapping[str, FaultTable] = MappingProxyType({t.name: t for t in (ROCKETMQ_4, ROCKETMQ_5)})


def preset(name: str) -> FaultTable:
    """A preset table by name (``rocketmq-4``, ``rocketmq-5``)."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ConfigurationError(f"unknown fault table preset {name!r}; known presets: {sorted(PRESETS)}") from None


def fault_table_for_line(line: ClientLine) -> FaultTable:
    """The default table of a client line."""
    return ROCKETMQ_4 if line is ClientLine.V4_9 else ROCKETMQ_5


def compute_not_available_duration_ms(latency_ms: int, table: FaultTable = ROCKETMQ_4) -> int:
    """``computeNotAvailableDuration`` of ``table`` (default: the 4.9.x table)."""
    return table.compute_not_available_duration_ms(latency_ms)


_CONFIG_KEYS = ("preset", "name", "latency_max_ms", "not_available_duration_ms", "isolation_latency_ms", "semantics")


# "extend" is the spelling of conf/monitor.toml; "extend-only" the enum's value.
_SEMANTICS_ALIASES = {
    "overwrite": FaultSemantics.OVERWRITE,
    "extend-only": FaultSemantics.EXTEND_ONLY,
    "extend": FaultSemantics.EXTEND_ONLY,
}


def _semantics_from(value: object) -> FaultSemantics:
    if isinstance(value, FaultSemantics):
        return value
    text = str(value).strip().lower().replace("_", "-")
    semantics = _SEMANTICS_ALIASES.get(text)
    if semantics is None:
        raise ConfigurationError(
            f"fault table semantics must be one of {sorted(_SEMANTICS_ALIASES)}, got {value!r} "
            "(overwrite = 4.x, extend-only = 5.x)"
        )
    return semantics


def _int_tuple(key: str, value: object) -> tuple[int, ...]:
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise ConfigurationError(f"{key} must be a list of integers (milliseconds), got {value!r}")
    return tuple(value)


def fault_table_from_config(mapping: Mapping[str, Any]) -> FaultTable:
    """A fault table from configuration.

    Keys: ``preset`` (start from ``rocketmq-4`` / ``rocketmq-5`` and override the other keys given),
    ``name``, ``latency_max_ms``, ``not_available_duration_ms``, ``isolation_latency_ms``, ``semantics``
    (``overwrite`` | ``extend-only``). Without a preset, both lists, the isolation latency and the
    semantics are required. Unknown keys are errors (a typo must not silently keep a default).
    """
    if not isinstance(mapping, Mapping):
        raise ConfigurationError(f"a fault table must be a mapping, got {type(mapping).__name__}")
    unknown = sorted(set(mapping) - set(_CONFIG_KEYS))
    if unknown:
        raise ConfigurationError(f"unknown fault table keys {unknown}; allowed keys: {list(_CONFIG_KEYS)}")
    base = preset(str(mapping["preset"])) if "preset" in mapping else None
    if base is None:
        missing = [k for k in _CONFIG_KEYS[2:] if k not in mapping]
        if missing:
            raise ConfigurationError(f"fault table without a preset needs {missing} (or set 'preset')")
    overridden = any(k in mapping for k in _CONFIG_KEYS[2:])
    default_name = "custom" if base is None else (f"{base.name}-custom" if overridden else base.name)
    latency = _int_tuple("latency_max_ms", mapping["latency_max_ms"]) if "latency_max_ms" in mapping else None
    durations = (
        _int_tuple("not_available_duration_ms", mapping["not_available_duration_ms"])
        if "not_available_duration_ms" in mapping
        else None
    )
    return FaultTable(
        name=str(mapping.get("name", default_name)),
        latency_max_ms=latency if latency is not None else base.latency_max_ms,  # type: ignore[union-attr]
        not_available_duration_ms=(
            durations if durations is not None else base.not_available_duration_ms  # type: ignore[union-attr]
        ),
        isolation_latency_ms=mapping.get("isolation_latency_ms", base.isolation_latency_ms if base else 0),
        semantics=_semantics_from(mapping["semantics"]) if "semantics" in mapping else base.semantics,  # type: ignore[union-attr]
    )


# --------------------------------------------------------------------------------------------------
# Fault items and LatencyFaultToleranceImpl as a value
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FaultItem:
    """``LatencyFaultToleranceImpl.FaultItem``: one broker as one producer sees it.

    ``start_timestamp_ms`` is when the broker becomes available again (Java's ``startTimestamp``); a
    5.x item created by a fast send keeps Java's default 0. ``reachable`` is 5.x's ``reachableFlag``
    (always True for 4.9.x, which has none).
    """

    name: str
    current_latency_ms: int
    start_timestamp_ms: int
    reachable: bool = True

    def is_available(self, now_ms: int) -> bool:
        """4.9.x ``now - startTimestamp >= 0`` and 5.2.0+ ``now >= startTimestamp`` (the same test)."""
        return now_ms >= self.start_timestamp_ms


def updated_fault_item(
    item: FaultItem | None,
    name: str,
    current_latency_ms: int,
    not_available_duration_ms: int,
    now_ms: int,
    semantics: FaultSemantics,
    reachable: bool = True,
) -> FaultItem:
    """``LatencyFaultToleranceImpl.updateFaultItem`` on one item (``None``: the broker has no entry yet)."""
    if semantics is FaultSemantics.OVERWRITE:
        return FaultItem(name, current_latency_ms, now_ms + not_available_duration_ms, True)
    start_ms = 0 if item is None else item.start_timestamp_ms  # a new Java FaultItem starts at 0
    # updateNotAvailableDuration: only a positive duration that ends later moves the end.
    if not_available_duration_ms > 0 and now_ms + not_available_duration_ms > start_ms:
        start_ms = now_ms + not_available_duration_ms
    return FaultItem(name, current_latency_ms, start_ms, reachable)


@dataclass(frozen=True)
class LatencyFaultTolerance:
    """The fault table of one producer (``LatencyFaultToleranceImpl.faultItemTable``) as a value.

    ``items`` keeps creation order. Java iterates a ``ConcurrentHashMap`` (hash order) before its
    stable sort in ``pickOneAtLeast``; the two orders can only matter for items that tie on
    availability, latency *and* end, which real timestamps practically never produce.
    """

    semantics: FaultSemantics
    items: tuple[FaultItem, ...] = ()

    def get(self, name: str) -> FaultItem | None:
        for item in self.items:
            if item.name == name:
                return item
        return None

    def update_fault_item(
        self,
        name: str,
        current_latency_ms: int,
        not_available_duration_ms: int,
        now_ms: int,
        reachable: bool = True,
    ) -> LatencyFaultTolerance:
        """``updateFaultItem(name, currentLatency, notAvailableDuration[, reachable])`` at ``now_ms``."""
        if name is None:
            raise NullPointer("ConcurrentHashMap does not accept a null broker name")
        old = self.get(name)
        new = updated_fault_item(
            old, name, current_latency_ms, not_available_duration_ms, now_ms, self.semantics, reachable
        )
        if old is None:
            return replace(self, items=(*self.items, new))
        return replace(self, items=tuple(new if item.name == name else item for item in self.items))

    def is_available(self, name: str, now_ms: int) -> bool:
        item = self.get(name)
        return True if item is None else item.is_available(now_ms)

    def is_reachable(self, name: str) -> bool:
        item = self.get(name)
        return True if item is None else item.reachable

    def remove(self, name: str | None) -> LatencyFaultTolerance:
        """``remove(name)``; ``None`` throws like ``ConcurrentHashMap.remove(null)``."""
        if name is None:
            raise NullPointer("ConcurrentHashMap.remove(null)")
        return replace(self, items=tuple(item for item in self.items if item.name != name))

    def pick_order(self, now_ms: int) -> tuple[FaultItem, ...]:
        """The list 4.9.4+ ``pickOneAtLeast`` sorts: available first, then latency, then end (stable)."""
        return tuple(
            sorted(self.items, key=lambda i: (not i.is_available(now_ms), i.current_latency_ms, i.start_timestamp_ms))
        )

    def pick_candidates(self, now_ms: int) -> tuple[str, ...]:
        """Brokers 4.9.x ``pickOneAtLeast`` can return: the better half of ``pick_order`` (the first item
        when there are fewer than two); which one depends on the thread's ``whichItemWorst`` index."""
        ordered = self.pick_order(now_ms)
        return tuple(i.name for i in ordered[: max(1, len(ordered) // 2)])


# --------------------------------------------------------------------------------------------------
# Send outcomes: which updateFaultItem call each one is
# --------------------------------------------------------------------------------------------------


class SendOutcome(enum.Enum):
    """The outcome of one send attempt as the event contract reports it."""

    OK = "OK"
    REMOTING_ERROR = "REMOTING_ERROR"  # RemotingException (connect/send failure)
    CLIENT_ERROR = "CLIENT_ERROR"  # MQClientException
    BROKER_ERROR = "BROKER_ERROR"  # MQBrokerException (an error response code)
    INTERRUPTED = "INTERRUPTED"  # InterruptedException
    TIMEOUT = "TIMEOUT"  # RemotingTimeoutException, a RemotingException subclass

    @classmethod
    def parse(cls, text: str) -> SendOutcome:
        try:
            return cls(text)
        except ValueError:
            raise IllegalArgument(f"unknown send outcome {text!r}", outcome=text) from None


@dataclass(frozen=True)
class FaultUpdate:
    """The ``isolation`` / ``reachable`` arguments ``sendDefaultImpl`` passes to ``updateFaultItem``."""

    isolation: bool
    reachable: bool = True


def fault_update_for(outcome: SendOutcome, line: ClientLine, detector_enabled: bool = False) -> FaultUpdate:
    """The ``updateFaultItem`` call ``DefaultMQProducerImpl.sendDefaultImpl`` makes after an attempt.

    4.9.x: success and ``InterruptedException`` -> ``isolation=false``; ``RemotingException``,
    ``MQClientException``, ``MQBrokerException`` -> ``isolation=true``.
    5.x: success, ``MQClientException``, ``InterruptedException`` -> ``(false, reachable=true)``;
    ``RemotingException`` -> ``(true, reachable = not startDetectorEnable)``; ``MQBrokerException`` ->
    ``(true, false)``. ``TIMEOUT`` is a remoting timeout (``RemotingTimeoutException`` extends
    ``RemotingException``), so it maps like ``REMOTING_ERROR``.
    """
    remoting = outcome in (SendOutcome.REMOTING_ERROR, SendOutcome.TIMEOUT)
    if line is ClientLine.V4_9:
        isolation = remoting or outcome in (SendOutcome.CLIENT_ERROR, SendOutcome.BROKER_ERROR)
        return FaultUpdate(isolation=isolation, reachable=True)
    if remoting:
        return FaultUpdate(isolation=True, reachable=not detector_enabled)
    if outcome is SendOutcome.BROKER_ERROR:
        return FaultUpdate(isolation=True, reachable=False)
    return FaultUpdate(isolation=False, reachable=True)


# --------------------------------------------------------------------------------------------------
# The monitor's replay: fault windows per (producer, broker)
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SendResult:
    """One send attempt of a producer to a broker, as the monitor receives it."""

    producer_id: str
    broker: str
    event_time_ms: int
    latency_ms: int
    outcome: SendOutcome
    # The producer's sendLatencyFaultEnable. False: MQFaultStrategy.updateFaultItem does nothing and the
    # selection never consults the fault items (semantics 6.4/6.5), so the send avoids and isolates nothing.
    fault_enabled: bool = True

    def __post_init__(self) -> None:
        # A raw string would silently miss every branch of fault_update_for: parse it or fail here.
        if not isinstance(self.outcome, SendOutcome):
            object.__setattr__(self, "outcome", SendOutcome.parse(str(self.outcome)))


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


@dataclass(frozen=True)
class TrackerStep:
    """A new tracker, the episodes produced (in event-time order) and the sends refused as late."""

    tracker: FaultWindowTracker
    episodes: tuple[FaultWindowEpisode, ...] = ()
    late: tuple[SendResult, ...] = ()


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
        if self.clock_ms is not None and send.event_time_ms < self.clock_ms:
            return TrackerStep(self, (), (send,))
        advanced = self.advance(send.event_time_ms)
        tracker, episodes = advanced.tracker, list(advanced.episodes)
        if not send.fault_enabled:
            return tracker._apply_disabled(send, episodes)
        table = self.fault_table
        update = fault_update_for(send.outcome, table.client_line, self.detector_enabled)
        trigger = _trigger(send, table, update)
        key = (send.producer_id, send.broker)
        tracked = tracker.items.get(key)
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
        episode: FaultWindowEpisode | None = None
        if window is None and unavailable:
            window = FaultWindow(now_ms, item.start_timestamp_ms, trigger, trigger)
            episode = self._episode(WindowStatus.OPENED, key, window, trigger, now_ms, None)
        elif window is not None and not unavailable:
            previous = window.window_end_ms
            closed = replace(window, window_end_ms=now_ms, last_moved_by=trigger)
            episode = self._episode(WindowStatus.CLOSED_EARLY, key, closed, trigger, now_ms, previous)
            window = None
        elif window is not None and item.start_timestamp_ms != window.window_end_ms:
            previous = window.window_end_ms
            status = WindowStatus.EXTENDED if item.start_timestamp_ms > previous else WindowStatus.SHORTENED
            window = replace(window, window_end_ms=item.start_timestamp_ms, last_moved_by=trigger)
            episode = self._episode(status, key, window, trigger, now_ms, previous)
        if episode is not None:
            episodes.append(episode)
        items = dict(tracker.items)
        items[key] = TrackedFault(send.producer_id, send.broker, item, now_ms, window)  # enabled (again)
        return TrackerStep(replace(tracker, items=MappingProxyType(items)), tuple(episodes))

    def _apply_disabled(self, send: SendResult, episodes: list[FaultWindowEpisode]) -> TrackerStep:
        """A send of a producer without sendLatencyFaultEnable: no fault item is created or updated, and the
        producer stops avoiding the broker, so an open window (from sends with the feature on) ends now."""
        key = (send.producer_id, send.broker)
        tracked = self.items.get(key)
        # No Java item exists for a new pair; an item that is available and reachable stands for none.
        item = tracked.item if tracked else FaultItem(send.broker, 0, 0, True)
        if tracked is not None and tracked.window is not None:
            trigger = Trigger(send.event_time_ms, send.latency_ms, send.outcome, False, -1, 0)
            window = tracked.window
            closed = replace(window, window_end_ms=send.event_time_ms, last_moved_by=trigger)
            episodes.append(
                self._episode(WindowStatus.CLOSED_EARLY, key, closed, trigger, send.event_time_ms, window.window_end_ms)
            )
        items = dict(self.items)
        items[key] = TrackedFault(send.producer_id, send.broker, item, send.event_time_ms, None, fault_enabled=False)
        return TrackerStep(replace(self, items=MappingProxyType(items)), tuple(episodes))

    def apply_all(self, sends: Iterable[SendResult]) -> TrackerStep:
        """Apply sends in the order given (sort them by event time first)."""
        tracker = self
        episodes: list[FaultWindowEpisode] = []
        late: list[SendResult] = []
        for send in sends:
            step = tracker.apply(send)
            tracker = step.tracker
            episodes.extend(step.episodes)
            late.extend(step.late)
        return TrackerStep(tracker, tuple(episodes), tuple(late))

    def advance(self, now_ms: int) -> TrackerStep:
        """Move the clock to ``now_ms`` (never back), expiring every window whose end is ``<= now_ms``."""
        if self.clock_ms is not None and now_ms <= self.clock_ms:
            now_ms = self.clock_ms
        expiring = sorted(
            (t for t in self.items.values() if t.window is not None and t.window.window_end_ms <= now_ms),
            key=lambda t: (t.window.window_end_ms, t.producer_id, t.broker),  # type: ignore[union-attr]
        )
        if not expiring:
            return TrackerStep(self if self.clock_ms == now_ms else replace(self, clock_ms=now_ms))
        items = dict(self.items)
        episodes = []
        for tracked in expiring:
            window = tracked.window
            assert window is not None
            key = (tracked.producer_id, tracked.broker)
            episodes.append(
                self._episode(WindowStatus.EXPIRED, key, window, window.last_moved_by, window.window_end_ms, None)
            )
            items[key] = replace(tracked, window=None)
        return TrackerStep(replace(self, clock_ms=now_ms, items=MappingProxyType(items)), tuple(episodes))

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
        return {
            "schema_version": SNAPSHOT_SCHEMA_VERSION,
            "fault_table": self.fault_table.to_dict(),
            "detector_enabled": self.detector_enabled,
            "clock_ms": self.clock_ms,
            "items": [_tracked_to_dict(t) for t in self.items.values()],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], known: Iterable[FaultTable] = ()) -> FaultWindowTracker:
        """The tracker ``to_dict`` gave; its table is the one of ``known`` it equals, else read from the data."""
        version = data.get("schema_version")
        if version != SNAPSHOT_SCHEMA_VERSION:
            raise IllegalArgument(
                f"fault tracker snapshot schema_version {version!r} is not supported "
                f"(this code reads {SNAPSHOT_SCHEMA_VERSION})"
            )
        items = {}
        for raw in data["items"]:
            tracked = _tracked_from_dict(raw)
            items[(tracked.producer_id, tracked.broker)] = tracked
        stored = data["fault_table"]
        table = next((t for t in known if t.name == stored.get("name") and t.to_dict() == stored), None)
        return cls(
            fault_table=table or fault_table_from_config(stored),
            detector_enabled=bool(data["detector_enabled"]),
            clock_ms=None if data["clock_ms"] is None else int(data["clock_ms"]),
            items=MappingProxyType(items),
        )


def _trigger_to_dict(trigger: Trigger) -> dict[str, Any]:
    return {
        "event_time_ms": trigger.event_time_ms,
        "latency_ms": trigger.latency_ms,
        "outcome": trigger.outcome.value,
        "isolation": trigger.isolation,
        "level": trigger.level,
        "duration_ms": trigger.duration_ms,
    }


def _trigger_from_dict(raw: Mapping[str, Any]) -> Trigger:
    return Trigger(
        event_time_ms=int(raw["event_time_ms"]),
        latency_ms=int(raw["latency_ms"]),
        outcome=SendOutcome.parse(raw["outcome"]),
        isolation=bool(raw["isolation"]),
        level=int(raw["level"]),
        duration_ms=int(raw["duration_ms"]),
    )


def _tracked_to_dict(tracked: TrackedFault) -> dict[str, Any]:
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
            "opened_by": _trigger_to_dict(window.opened_by),
            "last_moved_by": _trigger_to_dict(window.last_moved_by),
        },
    }


def _tracked_from_dict(raw: Mapping[str, Any]) -> TrackedFault:
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
            opened_by=_trigger_from_dict(window["opened_by"]),
            last_moved_by=_trigger_from_dict(window["last_moved_by"]),
        ),
    )
