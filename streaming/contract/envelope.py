"""The envelope checks: what a record must be before its schema's rules apply, and after them, as one table.

Each check reads one fact of the record (its size, whether it parses, its JSON kind, its type, its version, its
event time), tests it against the job's settings and names the dead-letter reason and the detail's template.
``streaming.contract.validator`` evaluates the table in Python, ``streaming.job.ingest.classify`` compiles it to
SQL, so the order, the reasons and the messages are written once (``docs/design/event-validation.md``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from streaming.contract.events import Reason

NONE = "<none>"  # how a detail shows a fact the record does not have


@dataclass(frozen=True)
class EnvelopeCheck:
    """``fact`` fails ``test`` against ``limit``: the record is dead-lettered with ``reason`` and ``detail``.

    Tests: ``missing`` (the fact is absent), ``above`` (greater than the sum of the ``limit`` terms), ``not_in``
    (not one of ``limit``'s values; an absent fact fails only when ``absent_fails``), ``is_not`` (differs from
    the literal ``limit``). ``detail`` names facts and limits in braces; an absent fact shows as ``<none>``.
    """

    reason: Reason
    fact: str
    test: str
    limit: tuple[str, ...] = ()
    detail: str = ""
    absent_fails: bool = False

    @property
    def placeholders(self) -> tuple[str, ...]:
        return tuple(re.findall(r"\{(\w+)\}", self.detail))


# Before the schema's rules, in order; the version check is per event type (its limit is the type's versions).
BEFORE_RULES = (
    EnvelopeCheck(Reason.NOT_JSON, "raw_bytes", "missing", detail="empty record value"),
    EnvelopeCheck(
        Reason.OVERSIZED,
        "raw_bytes",
        "above",
        ("max_event_bytes",),
        "event of {raw_bytes} bytes exceeds {max_event_bytes}",
    ),
    EnvelopeCheck(Reason.NOT_JSON, "json", "missing", detail="value is not valid JSON"),
    EnvelopeCheck(Reason.NOT_AN_OBJECT, "json_kind", "is_not", ("object",), "JSON {json_kind}"),
    EnvelopeCheck(
        Reason.UNKNOWN_TYPE, "event_type", "not_in", ("event_types",), "unknown event type {event_type}", True
    ),
)
VERSION = EnvelopeCheck(
    Reason.UNKNOWN_SCHEMA_VERSION,
    "schema_version",
    "not_in",
    ("versions",),
    "schema_version {schema_version} of {event_type} is not one of [{versions}]",
)
# After the schema's rules (which prove event_time an integer).
AFTER_RULES = (
    EnvelopeCheck(
        Reason.FUTURE_TIMESTAMP,
        "event_time_ms",
        "above",
        ("kafka_timestamp_ms", "max_future_skew_ms"),
        "event_time {event_time_ms} is more than {max_future_skew_ms} ms after the Kafka timestamp",
    ),
)


def violated(check: EnvelopeCheck, fact: Any, limits: Mapping[str, Any]) -> bool:
    """The check in Python: ``fact`` is the record's (None when absent), ``limits`` the settings by name."""
    if check.test == "missing":
        return fact is None
    if fact is None:
        return check.test == "not_in" and check.absent_fails
    if check.test == "above":
        return bool(fact > sum(limits[term] for term in check.limit))
    if check.test == "not_in":
        return fact not in limits[check.limit[0]]
    if check.test == "is_not":
        return bool(fact != check.limit[0])
    raise ValueError(f"unknown envelope test {check.test!r}")


def detail(check: EnvelopeCheck, value: Callable[[str], Any]) -> str:
    """The check's detail, each placeholder's value from ``value`` (a fact or a limit; a sequence is listed)."""

    def shown(name: str) -> str:
        v = value(name)
        if v is None:
            return NONE
        return ", ".join(map(str, v)) if isinstance(v, (tuple, list, frozenset, set)) else str(v)

    return re.sub(r"\{(\w+)\}", lambda m: shown(m.group(1)), check.detail)
