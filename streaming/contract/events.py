"""The event contract in Python: event types, topics, limits, schemas and the dead-letter validator.

What publishers, the simulator and the tests use to build and check events; the job compiles the same schema
files to SQL (``streaming.job.validation``). ``validate_event`` classifies a raw Kafka value exactly as the job
does, same checks, order, reason and detail, reading JSON as Spark does. Standard library only (``jsonschema``
lazily, for the reference check). The order and Spark's JSON rules: ``docs/design/event-validation.md``.
"""

from __future__ import annotations

import copy
import enum
import json
import operator
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from functools import cache, partial
from importlib import resources
from typing import Any

# -- event types, Kafka topics and keys -----------------------------------------------------------------

CONSUMER_CHANNEL = "consumer_channel"
CONSUMER_CONNECTIONS = "consumer_connections"
REPORTED_ASSIGNMENT = "reported_assignment"
TOPIC_ROUTE = "topic_route"
SEND_RESULT = "send_result"
EVENT_TYPES = (CONSUMER_CHANNEL, CONSUMER_CONNECTIONS, REPORTED_ASSIGNMENT, TOPIC_ROUTE, SEND_RESULT)

# The schema versions the job accepts per type; anything else is dead-lettered as UNKNOWN_SCHEMA_VERSION.
SUPPORTED_VERSIONS: Mapping[str, tuple[int, ...]] = {event_type: (1,) for event_type in EVENT_TYPES}

# One topic per type by default, so each type can have its own retention (routes: compacted) and partitions;
# the required ``type`` field still lets several types share a topic. A broker's poll of a group shares the
# channel events' topic and key, so one group's polls and heartbeats stay in order in one partition.
DEFAULT_TOPICS: Mapping[str, str] = {
    CONSUMER_CHANNEL: "rocketmq.consumer-channels",
    CONSUMER_CONNECTIONS: "rocketmq.consumer-channels",
    REPORTED_ASSIGNMENT: "rocketmq.reported-assignments",
    TOPIC_ROUTE: "rocketmq.topic-routes",
    SEND_RESULT: "rocketmq.send-results",
}
# The ``[kafka.topics]`` option that names each type's topic in the job's configuration.
TOPIC_OPTIONS: Mapping[str, str] = {**{t: t for t in EVENT_TYPES}, CONSUMER_CONNECTIONS: CONSUMER_CHANNEL}
# The field whose value is the Kafka record key: it keeps one group's (topic's, producer's) events in one
# partition, in order.
KEY_FIELDS: Mapping[str, str] = {
    CONSUMER_CHANNEL: "group",
    CONSUMER_CONNECTIONS: "group",
    REPORTED_ASSIGNMENT: "group",
    TOPIC_ROUTE: "topic",
    SEND_RESULT: "producer_id",
}

# -- enumerations of the contract -----------------------------------------------------------------------

KINDS = ("HEARTBEAT", "UNREGISTER", "CHANNEL_CLOSE", "CHANNEL_EXCEPTION", "CHANNEL_IDLE")
MESSAGE_MODELS = ("CLUSTERING", "BROADCASTING")
CONSUME_TYPES = ("CONSUME_PASSIVELY", "CONSUME_ACTIVELY", "CONSUME_POP")
OUTCOMES = ("OK", "REMOTING_ERROR", "CLIENT_ERROR", "BROKER_ERROR", "INTERRUPTED", "TIMEOUT")
# Names RocketMQ's strategies return from getName(); MACHINE_ROOM_NEARBY-<inner> wraps one of the others.
# Other names are accepted (a client may run a custom strategy) and reported by the analysis.
ALLOCATE_STRATEGIES = ("AVG", "AVG_BY_CIRCLE", "CONSISTENT_HASH", "CONFIG", "MACHINE_ROOM")
MACHINE_ROOM_NEARBY_PREFIX = "MACHINE_ROOM_NEARBY-"

# -- limits (the schemas hold the per-field ones; these are the job-level defaults) ----------------------

DEFAULT_MAX_EVENT_BYTES = 65_536
DEFAULT_MAX_FUTURE_SKEW_MS = 300_000
# Spark's VARIANT keeps integers of up to 38 digits exactly (DECIMAL(38,0)); longer ones become doubles.
_MAX_INTEGER_DIGITS = 38


class Reason(enum.StrEnum):
    """Dead-letter reasons: a small fixed set, stored in the ``dead_letters`` table and a metric label."""

    OVERSIZED = "OVERSIZED"
    NOT_JSON = "NOT_JSON"
    NOT_AN_OBJECT = "NOT_AN_OBJECT"
    UNKNOWN_TYPE = "UNKNOWN_TYPE"
    UNKNOWN_SCHEMA_VERSION = "UNKNOWN_SCHEMA_VERSION"
    MISSING_FIELD = "MISSING_FIELD"
    WRONG_TYPE = "WRONG_TYPE"
    INVALID_VALUE = "INVALID_VALUE"
    NEGATIVE_LATENCY = "NEGATIVE_LATENCY"
    FUTURE_TIMESTAMP = "FUTURE_TIMESTAMP"


REASONS: tuple[str, ...] = tuple(Reason)
# Rule-specific reasons, keyed ``<field>.<keyword>`` like the job's compiler; every other rule gets
# MISSING_FIELD (required), WRONG_TYPE (type), OVERSIZED (maxItems) or INVALID_VALUE.
REASON_OVERRIDES: Mapping[str, str] = {"latency_ms.minimum": Reason.NEGATIVE_LATENCY.value}


@dataclass(frozen=True)
class RequiredWhen:
    """A field required only when another field has a given value (JSON Schema ``if``/``then``, outside the
    subset the job compiles, so the rule is data here, read by both validators and ``docs/events.md``)."""

    field: str
    when_field: str
    equals: str
    reason: str = Reason.MISSING_FIELD.value

    @property
    def detail(self) -> str:
        return f"missing field $.{self.field} (required when $.{self.when_field} is {self.equals})"


# A HEARTBEAT's subscription list overwrites the broker's table for the group: an absent list would read
# as "subscribes to nothing" and drop every topic, so it must be explicit (an empty list is allowed).
CROSS_FIELD_RULES: Mapping[str, tuple[RequiredWhen, ...]] = {
    CONSUMER_CHANNEL: (RequiredWhen("subscriptions", "kind", "HEARTBEAT"),),
}

# -- schemas ---------------------------------------------------------------------------------------------

# The JSON Schema keywords the job's compiler translates, and those it ignores; anything else is an error
# here too, so a schema the job cannot compile never passes the Python side.
SUPPORTED_KEYWORDS = frozenset(
    {
        "type",
        "properties",
        "required",
        "enum",
        "const",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minLength",
        "maxLength",
        "pattern",
        "items",
        "minItems",
        "maxItems",
    }
)
IGNORED_KEYWORDS = frozenset(
    {
        "$schema",
        "$id",
        "title",
        "description",
        "examples",
        "default",
        "additionalProperties",
        "$comment",
        "format",
        "x-reason",
        "x-dead-letter-reason",
    }
)

_SCHEMA_PACKAGE = "streaming.contract"
_SCHEMA_FILE = re.compile(r"^(?P<type>[a-z_]+)\.v(?P<version>[0-9]+)\.schema\.json$")


class UnsupportedSchema(ValueError):
    """A schema file uses a keyword outside the subset both validators implement."""


def schema_file_name(event_type: str, version: int) -> str:
    return f"{event_type}.v{version}.schema.json"


def schema_files() -> dict[tuple[str, int], str]:
    """Every schema file shipped in the package, as ``(event_type, version) -> file name``."""
    found = {}
    for entry in resources.files(_SCHEMA_PACKAGE).joinpath("schemas").iterdir():
        match = _SCHEMA_FILE.match(entry.name)
        if match:
            found[(match["type"], int(match["version"]))] = entry.name
    return found


@cache
def _load_schema(event_type: str, version: int) -> Mapping[str, Any]:
    if event_type not in EVENT_TYPES:
        raise KeyError(f"unknown event type {event_type!r}; expected one of {', '.join(EVENT_TYPES)}")
    path = resources.files(_SCHEMA_PACKAGE).joinpath("schemas", schema_file_name(event_type, version))
    loaded: Mapping[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    _check_keywords(loaded, "$")
    return loaded


def schema(event_type: str, version: int | None = None) -> dict[str, Any]:
    """The JSON Schema of ``event_type`` (default: the newest supported version), as a fresh copy."""
    chosen = max(SUPPORTED_VERSIONS[event_type]) if version is None else version
    return copy.deepcopy(dict(_load_schema(event_type, chosen)))


def _check_keywords(node: Mapping[str, Any], label: str) -> None:
    unknown = set(node) - SUPPORTED_KEYWORDS - IGNORED_KEYWORDS
    if unknown:
        raise UnsupportedSchema(f"{label}: unsupported JSON Schema keywords {sorted(unknown)}")
    for name, child in node.get("properties", {}).items():
        _check_keywords(child, f"{label}.{name}")
    if "items" in node:
        _check_keywords(node["items"], f"{label}[]")


# -- JSON as Spark reads it ------------------------------------------------------------------------------


class _Decimal(float):
    """A number written with a fraction and no exponent: Spark keeps it as a DECIMAL and prints it plainly
    (``0.000001``, not ``1e-06``); ``text`` is that rendering."""

    __slots__ = ("text",)
    text: str


def _parse_int(literal: str) -> int | float:
    digits = len(literal.lstrip("-"))
    return float(literal) if digits > _MAX_INTEGER_DIGITS else int(literal)


def _parse_float(literal: str) -> int | float:
    if "e" in literal or "E" in literal:
        return float(literal)  # an exponent makes it a DOUBLE, never an integer
    value = Decimal(literal)
    # Spark keeps the literal as a DECIMAL when its precision and scale, trailing zeros included, are at most
    # 38 (``VariantBuilder.tryParseDecimal``); else it reads a DOUBLE: 12. and 37 zeros is not an integer.
    _, written, scale = value.as_tuple()
    assert isinstance(scale, int)
    if len(written) > _MAX_INTEGER_DIGITS or -scale > _MAX_INTEGER_DIGITS:
        return float(literal)
    if value == value.to_integral_value():
        return int(value)  # 1.0 and -0.0: DECIMAL(p,0), an integer for the job
    normalized = value.normalize()
    number = _Decimal(literal)
    number.text = format(normalized, "f")
    return number


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        raise ValueError("duplicate key")
    return result


_DECODER = json.JSONDecoder(
    parse_int=_parse_int, parse_float=_parse_float, parse_constant=_reject_constant, object_pairs_hook=_unique_keys
)
_JSON_WHITESPACE = " \t\n\r"
# After a number or literal, these characters would have continued the token: "1x" is not JSON for Spark.
_TOKEN_CHARS = re.compile(r"[0-9A-Za-z.+\-]")


def _parse(data: bytes) -> tuple[bool, Any]:
    """(parsed, value) for the first JSON value of ``data``, following Spark's ``try_parse_json``."""
    text = data.decode("utf-8", errors="replace").lstrip(_JSON_WHITESPACE)
    try:
        value, end = _DECODER.raw_decode(text)
    except ValueError:  # JSONDecodeError, duplicate keys, NaN/Infinity
        return False, None
    if not isinstance(value, dict | list | str) and _TOKEN_CHARS.match(text, end):
        return False, None
    if _holds_lone_surrogate(value):
        return False, None
    return True, value


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # json pairs escaped surrogates into one code point


def _holds_lone_surrogate(value: Any) -> bool:
    """Whether a string or key of the parsed value holds an unpaired surrogate (``"\\ud800"``), which
    Spark's parser refuses."""
    if isinstance(value, str):
        return _LONE_SURROGATE.search(value) is not None
    if isinstance(value, dict):
        return any(_holds_lone_surrogate(k) or _holds_lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_holds_lone_surrogate(v) for v in value)
    return False


def _java_double(value: float) -> str:
    """Java's ``Double.toString`` (what Spark prints for a DOUBLE)."""
    if value != value or value in (float("inf"), float("-inf")):
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    if value == 0:
        return "-0.0" if str(value).startswith("-") else "0.0"
    sign = "-" if value < 0 else ""
    shortest = Decimal(repr(abs(value)))
    if 1e-3 <= abs(value) < 1e7:
        plain = format(shortest, "f")
        return sign + (plain if "." in plain else plain + ".0")
    _, digits, exponent = shortest.normalize().as_tuple()
    if len(digits) == 1:
        # Java writes at least two digits, and picks the two closest to the exact value: 4.9E-324, not 5.0E-324.
        _, digits, exponent = Decimal(format(Decimal(abs(value)), ".1e")).as_tuple()
    assert isinstance(exponent, int)
    mantissa = "".join(map(str, digits))
    return f"{sign}{mantissa[0]}.{mantissa[1:] or '0'}E{exponent + len(mantissa) - 1}"


def _spark_json(value: Any) -> str:
    """JSON text of a value as Spark renders a VARIANT (object keys sorted, no ASCII escaping)."""
    if isinstance(value, dict):
        members = (f"{json.dumps(k, ensure_ascii=False)}:{_spark_json(v)}" for k, v in sorted(value.items()))
        return "{" + ",".join(members) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_spark_json(v) for v in value) + "]"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    rendered = _spark_string(value)
    return "null" if rendered is None else rendered


def _spark_string(value: Any) -> str | None:
    """``variant_get(value, '$', 'string')``: NULL for JSON null, the text of a string, JSON for the rest."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, _Decimal):
        return value.text
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _java_double(value)
    return _spark_json(value)


def _is_integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if _is_number(value):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


_TYPE_CHECKS: Mapping[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": _is_integer,
    "number": _is_number,
    "boolean": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "null": lambda v: v is None,
}


def _plain(value: Any) -> Any:
    """The parsed event with Spark's number kinds turned back into plain Python values."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, _Decimal):
        return float(value)
    return value


# -- the schema's rules, in the job's order --------------------------------------------------------------

Check = Callable[[Any], bool]


@dataclass(frozen=True)
class Rule:
    """One rule of a schema: ``violated(value)`` is True when the value breaks it."""

    reason: str
    detail: str
    violated: Check


# Predicates of the rules, each taking the rule's parameter first and the value last (bound with partial).
def _wrong_type(checks: tuple[Check, ...], value: Any) -> bool:
    return not any(check(value) for check in checks)


def _not_const(expected: str, value: Any) -> bool:
    return _spark_string(value) != expected  # NULL-safe: a JSON null is not the constant either


def _not_in_enum(allowed: frozenset[str], value: Any) -> bool:
    text = _spark_string(value)
    return text is not None and text not in allowed  # NULL IN (...) is not a violation in SQL


def _out_of_bound(bound: int | float, broken: Callable[[Any, Any], bool], value: Any) -> bool:
    # As the job: an integer against an integer bound exactly, any other number as a double.
    if not _is_number(value):
        return False
    if _is_integer(value) and _is_integer(bound):
        return broken(value, bound)
    return broken(float(value), float(bound))


def _too_short(minimum: int, value: Any) -> bool:
    return isinstance(value, str) and len(value) < minimum


def _too_long(maximum: int, value: Any) -> bool:
    return isinstance(value, str) and len(value) > maximum


def _no_match(pattern: re.Pattern[str], value: Any) -> bool:
    return isinstance(value, str) and pattern.search(value) is None


def _missing(name: str, value: Any) -> bool:
    return not isinstance(value, dict) or value.get(name) is None


def _too_few_items(minimum: int, value: Any) -> bool:
    return isinstance(value, list) and len(value) < minimum


def _too_many_items(maximum: int, value: Any) -> bool:
    return isinstance(value, list) and len(value) > maximum


def _any_item(check: Check, value: Any) -> bool:
    return isinstance(value, list) and any(map(check, value))


_BOUNDS: tuple[tuple[str, Callable[[Any, Any], bool]], ...] = (
    ("minimum", operator.lt),
    ("maximum", operator.gt),
    ("exclusiveMinimum", operator.le),
    ("exclusiveMaximum", operator.ge),
)


def _ordered_rules(node: Mapping[str, Any], label: str, reasons: Mapping[str, str]) -> Iterator[Rule]:
    """The rules of a present value, in ``streaming.job.validation``'s order, with its reasons and details.

    Keyword order per node: type, const, enum, bounds, lengths, pattern, then required and properties, then
    minItems, maxItems, items. Array items are checked rule by rule across all items (the first rule any
    item breaks wins), as the job's ``exists(array, x -> ...)`` does.
    """
    yield from _value_rules(node, label, reasons)
    if "properties" in node or "required" in node:
        yield from _object_rules(node, label, reasons)
    yield from _array_rules(node, label, reasons)


def _reason_for(reasons: Mapping[str, str], label: str) -> Callable[[str, str], str]:
    """The reason a keyword of this value gives: the contract's override for ``<field>.<keyword>``, else the default."""
    field = label.rsplit(".", 1)[-1].rstrip("[]")
    return lambda keyword, default: reasons.get(f"{field}.{keyword}", default)


def _value_rules(node: Mapping[str, Any], label: str, reasons: Mapping[str, str]) -> Iterator[Rule]:
    """Type, const, enum, bounds, lengths and pattern of the value itself."""
    reason = _reason_for(reasons, label)
    types = node.get("type")
    if types is not None:
        wanted = [types] if isinstance(types, str) else list(types)
        checks = tuple(_TYPE_CHECKS[t] for t in wanted)
        yield Rule(Reason.WRONG_TYPE, f"{label} must be {' or '.join(wanted)}", partial(_wrong_type, checks))
    if "const" in node:
        yield Rule(
            reason("const", Reason.INVALID_VALUE),
            f"{label} must be {node['const']!r}",
            partial(_not_const, str(node["const"])),
        )
    if "enum" in node:
        allowed = frozenset(str(v) for v in node["enum"])
        yield Rule(
            reason("enum", Reason.INVALID_VALUE),
            f"{label} must be one of {', '.join(map(str, node['enum']))}",
            partial(_not_in_enum, allowed),
        )
    for keyword, broken in _BOUNDS:
        if keyword in node:
            yield Rule(
                reason(keyword, Reason.INVALID_VALUE),
                f"{label} must be {keyword} {node[keyword]}",
                partial(_out_of_bound, node[keyword], broken),
            )
    if "minLength" in node:
        yield Rule(
            reason("minLength", Reason.INVALID_VALUE),
            f"{label} must have at least {node['minLength']} characters",
            partial(_too_short, int(node["minLength"])),
        )
    if "maxLength" in node:
        yield Rule(
            reason("maxLength", Reason.INVALID_VALUE),
            f"{label} must have at most {node['maxLength']} characters",
            partial(_too_long, int(node["maxLength"])),
        )
    if "pattern" in node:
        yield Rule(
            reason("pattern", Reason.INVALID_VALUE),
            f"{label} must match {node['pattern']}",
            partial(_no_match, re.compile(node["pattern"])),
        )


def _object_rules(node: Mapping[str, Any], label: str, reasons: Mapping[str, str]) -> Iterator[Rule]:
    """Required fields, then each present property's own rules."""
    for name in node.get("required", []):
        yield Rule(
            reasons.get(f"{name}.required", Reason.MISSING_FIELD),
            f"missing field {label}.{name}",
            partial(_missing, name),
        )
    for name, child in node.get("properties", {}).items():
        child_types = child.get("type") or []
        nullable = child_types == "null" or (isinstance(child_types, list) and "null" in child_types)
        for rule in _ordered_rules(child, f"{label}.{name}", reasons):
            yield Rule(rule.reason, rule.detail, _in_property(name, nullable, rule.violated))


def _array_rules(node: Mapping[str, Any], label: str, reasons: Mapping[str, str]) -> Iterator[Rule]:
    """Item counts, then each item's rules."""
    reason = _reason_for(reasons, label)
    if "minItems" in node:
        yield Rule(
            reason("minItems", Reason.INVALID_VALUE),
            f"{label} must have at least {node['minItems']} items",
            partial(_too_few_items, int(node["minItems"])),
        )
    if "maxItems" in node:
        yield Rule(
            reason("maxItems", Reason.OVERSIZED),
            f"{label} must have at most {node['maxItems']} items",
            partial(_too_many_items, int(node["maxItems"])),
        )
    if "items" in node:
        for rule in _ordered_rules(node["items"], f"{label}[]", reasons):
            yield Rule(rule.reason, rule.detail, partial(_any_item, rule.violated))


def _in_property(name: str, nullable: bool, check: Check) -> Check:
    # A property is checked only when present; JSON null counts as absent unless the type allows null.
    def violated(value: Any) -> bool:
        if not isinstance(value, dict) or name not in value:
            return False
        child = value[name]
        return (child is not None or nullable) and check(child)

    return violated


@cache
def rules(event_type: str, version: int | None = None) -> tuple[Rule, ...]:
    """The schema rules of one event type, in evaluation order (``REASON_OVERRIDES`` applied)."""
    return tuple(_ordered_rules(schema(event_type, version), "$", REASON_OVERRIDES))


# -- validation ------------------------------------------------------------------------------------------


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
    if raw is None:
        return Rejection(Reason.NOT_JSON, "empty record value")
    data = raw.encode("utf-8") if isinstance(raw, str) else bytes(raw)
    if len(data) > max_event_bytes:
        return Rejection(Reason.OVERSIZED, f"event of {len(data)} bytes exceeds {max_event_bytes}")
    parsed, value = _parse(data)
    if not parsed:
        return Rejection(Reason.NOT_JSON, "value is not valid JSON")
    if not isinstance(value, dict):
        return Rejection(Reason.NOT_AN_OBJECT, f"JSON {_json_kind(value)}")
    declared = _spark_string(value.get("type"))
    event_type = default_type if declared is None else declared
    if event_type not in EVENT_TYPES:
        return Rejection(Reason.UNKNOWN_TYPE, f"unknown event type {'<none>' if event_type is None else event_type}")
    versions = SUPPORTED_VERSIONS[event_type]
    version = _spark_string(value.get("schema_version"))
    # An absent version is left to the schema (MISSING_FIELD), as the job does.
    if version is not None and version not in {str(v) for v in versions}:
        return Rejection(
            Reason.UNKNOWN_SCHEMA_VERSION,
            f"schema_version {version} of {event_type} is not one of [{', '.join(map(str, versions))}]",
        )
    for rule in (*rules(event_type, int(version) if version else None), *_cross_field_rules(event_type)):
        if rule.violated(value):
            return Rejection(rule.reason, rule.detail)
    event_time_ms = int(value["event_time"])
    if now_ms is not None and event_time_ms > now_ms + max_future_skew_ms:
        return Rejection(
            Reason.FUTURE_TIMESTAMP,
            f"event_time {event_time_ms} is more than {max_future_skew_ms} ms after the Kafka timestamp",
        )
    return ValidEvent(
        event_type, int(value["schema_version"]), event_time_ms, str(value[KEY_FIELDS[event_type]]), _plain(value)
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
    checker = base.TYPE_CHECKER.redefine("integer", lambda _checker, value: _is_integer(value))
    validator_class = jsonschema.validators.extend(base, type_checker=checker)
    return validator_class(schema(event_type, version))


def is_valid_by_jsonschema(event: Mapping[str, Any] | Sequence[Any] | Any) -> bool:
    """Validity by ``jsonschema`` alone (schema rules only: no size, version, cross-field or time checks)."""
    if not isinstance(event, Mapping) or event.get("type") not in EVENT_TYPES:
        return False
    return bool(jsonschema_validator(str(event["type"])).is_valid(event))


def parse_like_the_job(raw: bytes | str) -> tuple[bool, Any]:
    """(parsed, value) as the job's JSON reader sees ``raw`` (for tests comparing with ``jsonschema``)."""
    return _parse(raw.encode("utf-8") if isinstance(raw, str) else raw)
