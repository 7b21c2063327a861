"""Producer latency fault tolerance: the fault table, fault items and the send outcomes that update them.

Reproduces ``MQFaultStrategy`` and ``LatencyFaultToleranceImpl`` of both client lines as immutable values with
time passed in, and maps each send outcome to the ``updateFaultItem`` call the client makes. The replay into
fault windows: ``faults.tracker``. The two lines' differences and the misnamed ``startTimestamp``:
``docs/design/fault-tolerance.md``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from streaming.domain.errors import ConfigurationError, IllegalArgument, NullPointer
from streaming.domain.versions import ClientLine

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


def shape_problems(latency_max_ms: Sequence[int], not_available_duration_ms: Sequence[int]) -> list[tuple[str, str]]:
    """What is wrong with a fault table's levels, as (field, problem) pairs ("" for the table as a whole): at
    least one threshold, as many durations as thresholds, thresholds strictly ascending. The one statement of
    these rules, for ``FaultTable`` and for the configuration's per-option report."""
    problems = []
    if not latency_max_ms:
        problems.append(("latency_max_ms", "needs at least one threshold"))
    if len(latency_max_ms) != len(not_available_duration_ms):
        problems.append(
            (
                "",
                f"latency_max_ms has {len(latency_max_ms)} thresholds but not_available_duration_ms has "
                f"{len(not_available_duration_ms)} durations; they pair up by position and must have the same length",
            )
        )
    for i in range(1, len(latency_max_ms)):
        if latency_max_ms[i] <= latency_max_ms[i - 1]:
            problems.append(
                (
                    "latency_max_ms",
                    f"must be strictly ascending, but {latency_max_ms[i]} follows {latency_max_ms[i - 1]}",
                )
            )
            break
    return problems


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
        for i, value in enumerate(self.latency_max_ms):
            _check_long(f"{where}: latency_max_ms[{i}]", value)
        for i, value in enumerate(self.not_available_duration_ms):
            _check_long(f"{where}: not_available_duration_ms[{i}]", value)
        problems = shape_problems(self.latency_max_ms, self.not_available_duration_ms)
        if problems:
            field, problem = problems[0]
            raise ConfigurationError(f"{where}: {field + ' ' if field else ''}{problem}")
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
