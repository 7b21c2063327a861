"""The dead-letter validator: a raw Kafka value classified exactly as the job classifies it.

What publishers, the simulator and the tests use to check events before or instead of the job: the same
checks in the same order, with the same reason and detail (``docs/design/event-validation.md``). Also the
reference check with ``jsonschema`` (imported lazily) that the tests compare the rules with.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from streaming.contract import envelope
from streaming.contract.envelope import EnvelopeCheck
from streaming.contract.events import (
    CROSS_FIELD_RULES,
    DEFAULT_CLUSTER,
    DEFAULT_MAX_EVENT_BYTES,
    DEFAULT_MAX_FUTURE_SKEW_MS,
    DEFAULT_TOPICS,
    EVENT_TYPES,
    KEY_FIELDS,
    SUPPORTED_VERSIONS,
    Reason,
    RequiredWhen,
    event_cluster,
    schema,
)
from streaming.contract.schema_rules import Rule, rules
from streaming.contract.spark_json import is_integer, json_kind, plain_python, spark_string, try_parse_json


@dataclass(frozen=True)
class Rejection:
    """Why an event is dead-lettered: one ``Reason`` and a human-readable detail."""

    reason: str
    detail: str


@dataclass(frozen=True)
class ValidEvent:
    """An accepted event: its type, version, time and Kafka key, and the parsed object as published."""

    event_type: str
    schema_version: int
    event_time_ms: int
    key: str
    payload: Mapping[str, Any]

    @property
    def default_topic(self) -> str:
        return DEFAULT_TOPICS[self.event_type]

    def cluster(self, default: str = DEFAULT_CLUSTER) -> str:
        """The RocketMQ cluster the event belongs to, ``default`` being the job's ``[ingest] default_cluster``."""
        return event_cluster(self.payload, default)


def validate_event(
    raw: bytes | str | None,
    now_ms: int | None = None,
    default_type: str | None = None,
    *,
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
    max_future_skew_ms: int = DEFAULT_MAX_FUTURE_SKEW_MS,
) -> ValidEvent | Rejection:
    """The accepted event, or the ``Rejection`` the job would dead-letter it with.

    ``raw`` is the Kafka record value (``None`` for a record without one). ``now_ms`` is the time the
    future check compares with: the job uses the record's Kafka timestamp (by default the producer's
    send time), so a publisher passes its own clock; ``None`` skips the check. ``default_type`` is the
    type of the topic the record is on, used only to pick the schema for an event without ``type``
    (which then fails as ``MISSING_FIELD``) -- without it such an event is ``UNKNOWN_TYPE``.
    """
    data = None if raw is None else raw.encode("utf-8") if isinstance(raw, str) else bytes(raw)
    facts: dict[str, Any] = {"raw_bytes": None if data is None else len(data)}
    limits: dict[str, Any] = {
        "max_event_bytes": max_event_bytes,
        "max_future_skew_ms": max_future_skew_ms,
        "kafka_timestamp_ms": now_ms,
        "event_types": EVENT_TYPES,
    }
    value: Any = None

    def fact(name: str) -> Any:  # the facts a check reads, computed once the checks before it passed
        nonlocal value
        if name not in facts and name == "json":
            assert data is not None
            parsed, value = try_parse_json(data)
            facts["json"] = (value,) if parsed else None
        elif name not in facts and name == "json_kind":
            facts["json_kind"] = json_kind(value)
        elif name not in facts and name == "event_type":
            declared = spark_string(value.get("type"))
            facts["event_type"] = default_type if declared is None else declared
        elif name not in facts and name == "schema_version":
            facts["schema_version"] = spark_string(value.get("schema_version"))
        elif name not in facts and name == "event_time_ms":
            facts["event_time_ms"] = int(value["event_time"])
        return facts[name]

    def failed(check: EnvelopeCheck) -> Rejection | None:
        if check.reason is Reason.FUTURE_TIMESTAMP and now_ms is None:
            return None  # no clock to compare with
        if not envelope.violated(check, fact(check.fact), limits):
            return None
        return Rejection(check.reason, envelope.detail(check, lambda n: facts[n] if n in facts else limits[n]))

    for check in envelope.BEFORE_RULES:
        if rejected := failed(check):
            return rejected
    event_type = facts["event_type"]
    versions = SUPPORTED_VERSIONS[event_type]
    limits["versions"] = tuple(str(v) for v in versions)
    # An absent version is left to the schema (MISSING_FIELD), as the job does.
    if rejected := failed(envelope.VERSION):
        return rejected
    version = facts["schema_version"]
    for rule in (*rules(event_type, int(version) if version else None), *_cross_field_rules(event_type)):
        if rule.violated(value):
            return Rejection(rule.reason, rule.detail)
    for check in envelope.AFTER_RULES:
        if rejected := failed(check):
            return rejected
    event_time_ms = int(facts["event_time_ms"] if "event_time_ms" in facts else value["event_time"])
    return ValidEvent(
        event_type, int(value["schema_version"]), event_time_ms, str(value[KEY_FIELDS[event_type]]), plain_python(value)
    )


def _cross_field_rules(event_type: str) -> tuple[Rule, ...]:
    return tuple(Rule(r.reason, r.detail, partial(_required_when, r)) for r in CROSS_FIELD_RULES.get(event_type, ()))


def _required_when(rule: RequiredWhen, value: Any) -> bool:
    return isinstance(value, dict) and value.get(rule.when_field) == rule.equals and value.get(rule.field) is None


# -- the reference check ---------------------------------------------------------------------------------


def jsonschema_validator(event_type: str, version: int | None = None) -> Any:
    """A ``jsonschema`` Draft 2020-12 validator for the type, with the job's notion of an integer.

    Standard JSON Schema counts ``1e3`` as an integer; the job does not (Spark reads it as a double), so
    the reference uses the same integer check as ``validate_event``. Tests compare both on the corpus.
    """
    import jsonschema

    base = jsonschema.Draft202012Validator
    checker = base.TYPE_CHECKER.redefine("integer", lambda _checker, value: is_integer(value))
    validator_class = jsonschema.validators.extend(base, type_checker=checker)
    return validator_class(schema(event_type, version))


def is_valid_by_jsonschema(event: Mapping[str, Any] | Sequence[Any] | Any) -> bool:
    """Validity by ``jsonschema`` alone against the event's own version's schema (the newest for an unknown
    version): schema rules only, no size, version, cross-field or time checks."""
    if not isinstance(event, Mapping) or event.get("type") not in EVENT_TYPES:
        return False
    event_type = str(event["type"])
    declared = event.get("schema_version")
    known = [v for v in SUPPORTED_VERSIONS[event_type] if is_integer(declared) and declared == v]
    return bool(jsonschema_validator(event_type, known[0] if known else None).is_valid(event))


def parse_like_the_job(raw: bytes | str) -> tuple[bool, Any]:
    """(parsed, value) as the job's JSON reader sees ``raw`` (for tests comparing with ``jsonschema``)."""
    return try_parse_json(raw.encode("utf-8") if isinstance(raw, str) else raw)
