"""The configuration's building blocks: option fields with their checks, value formats, ``Options`` and
``ConfigError``; secret-looking values never appear in what they print."""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import field
from typing import Any

from streaming.contract.events import ALLOCATE_STRATEGIES, MACHINE_ROOM_NEARBY_PREFIX
from streaming.domain.errors import ConfigurationError

CLIENT_LINES = ("4.9", "5")
SEMANTICS = ("overwrite", "extend")
_SECRET_HINTS = ("password", "jaas", "secret", "key", "token", "credential")
REDACTED = "<redacted>"


def is_secret(name: str) -> bool:
    """Whether an option's value must never be printed (judged by its name)."""
    lowered = name.lower()
    return any(hint in lowered for hint in _SECRET_HINTS)


class ConfigError(ConfigurationError):
    """Every problem of a configuration, one line each (``problems``); raised by ``load_config``."""

    def __init__(self, problems: Iterable[str], origin: str = "configuration") -> None:
        self.problems: tuple[str, ...] = tuple(problems)
        count = len(self.problems)
        header = f"invalid {origin}: {count} problem{'s' if count != 1 else ''}"
        super().__init__("\n".join([header, *(f"  - {p}" for p in self.problems)]))


class Options(Mapping[str, str]):
    """An immutable table of passthrough options whose secret-looking values are redacted when printed."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, str] | Iterable[tuple[str, str]] = ()) -> None:
        self._items: dict[str, str] = dict(items)

    def __getitem__(self, key: str) -> str:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        shown = ", ".join(f"{k!r}: {REDACTED if is_secret(k) else repr(v)}" for k, v in self._items.items())
        return f"{type(self).__name__}({{{shown}}})"

    __str__ = __repr__


KafkaOptions = Options  # the name the first version of this module used


def _opt(default: Any = dataclasses.MISSING, *, factory: Callable[[], Any] | None = None, **rules: Any) -> Any:
    """A dataclass field with validation rules in its metadata (``low``, ``high``, ``choices``, ``check``...).

    A ``check`` returns None when the value is fine, else the problem; ``{got}`` in it is replaced by the value
    as written, otherwise ``, got <value>`` is appended.
    """
    if factory is not None:
        return field(default_factory=factory, metadata=rules)
    return field(default=default, metadata=rules)


def _sub(cls: type) -> Any:
    return field(default_factory=cls)


# -- formats ----------------------------------------------------------------------------------------------

_INTERVAL = re.compile(r"^\s*(?:([0-9]+)\s*(milliseconds?|seconds?|minutes?|hours?|days?)\s*)+$")
_INTERVAL_PART = re.compile(r"([0-9]+)\s*(milliseconds?|seconds?|minutes?|hours?|days?)")
_UNIT_MS = {"millisecond": 1, "second": 1_000, "minute": 60_000, "hour": 3_600_000, "day": 86_400_000}
_HOST_PORT = r"(?:[A-Za-z][A-Za-z0-9_]*://)?(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):[0-9]{1,5}"
_BOOTSTRAP = re.compile(rf"^\s*{_HOST_PORT}(?:\s*,\s*{_HOST_PORT})*\s*$")
_KAFKA_TOPIC = re.compile(r"^(?!\.{1,2}$)[A-Za-z0-9._-]{1,249}$")
_MASTER = re.compile(
    r"^(local(\[([0-9]+|\*)(,[0-9]+)?\])?|local-cluster\[[0-9]+,[0-9]+,[0-9]+\]|(spark|k8s|mesos)://\S+|yarn)$"
)
_MEMORY = re.compile(r"^[0-9]+[kmgtpKMGTP]?[bB]?$")
_IDENTIFIER = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


def interval_ms(text: str) -> int:
    """Milliseconds of a Spark interval such as ``"10 seconds"`` or ``"1 minute 30 seconds"``."""
    if not _INTERVAL.match(text):
        raise ValueError(f"not an interval: {text!r}")
    return sum(int(n) * _UNIT_MS[unit.rstrip("s")] for n, unit in _INTERVAL_PART.findall(text))


def _check_interval(value: str) -> str | None:
    return None if _INTERVAL.match(value) else 'must be a Spark interval such as "10 seconds" or "2 minutes"'


def _matches(pattern: re.Pattern[str], what: str) -> Callable[[str], str | None]:
    return lambda value: None if pattern.match(value) else f"must be {what}"


def _not_blank(value: str) -> str | None:
    return None if value.strip() else "must not be empty"


def _check_strategy(name: str) -> str | None:
    inner = name.removeprefix(MACHINE_ROOM_NEARBY_PREFIX)
    if inner in ALLOCATE_STRATEGIES:
        return None
    known = [*ALLOCATE_STRATEGIES, MACHINE_ROOM_NEARBY_PREFIX + "<one of those>"]
    close = difflib.get_close_matches(
        name, [*ALLOCATE_STRATEGIES, *(MACHINE_ROOM_NEARBY_PREFIX + s for s in ALLOCATE_STRATEGIES)], n=1
    )
    hint = f' (did you mean "{close[0]}"?)' if close else ""
    return f"unknown allocation strategy {{got}}{hint}; expected one of {', '.join(known)}"


def _check_regex(value: str) -> str | None:
    try:
        compiled = re.compile(value)
    except re.error as error:
        return f"is not a valid regular expression ({error})"
    return None if compiled.groups >= 1 else "needs a capturing group: the room is the first group's text"
