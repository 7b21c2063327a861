"""Event types, topics and validation of the contract, for publishers, the simulator and tests.

``validate_event`` classifies a raw Kafka value exactly like the Spark job (``streaming.job.ingest``):
the same checks in the same order, the first failure naming the dead-letter reason. The schema rules are
walked in the order ``streaming.job.validation`` compiles them, and ``jsonschema`` (Draft 2020-12) is
the authority on validity: tests check that both agree on a corpus of good and bad events.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

CONSUMER_CHANNEL = "consumer_channel"
REPORTED_ASSIGNMENT = "reported_assignment"
TOPIC_ROUTE = "topic_route"
SEND_RESULT = "send_result"
EVENT_TYPES = (CONSUMER_CHANNEL, REPORTED_ASSIGNMENT, TOPIC_ROUTE, SEND_RESULT)
SUPPORTED_VERSIONS = {event_type: (1,) for event_type in EVENT_TYPES}

DEFAULT_TOPICS = {
    CONSUMER_CHANNEL: "rocketmq.consumer-channels",
    REPORTED_ASSIGNMENT: "rocketmq.reported-assignments",
    TOPIC_ROUTE: "rocketmq.topic-routes",
    SEND_RESULT: "rocketmq.send-results",
}
KINDS = ("HEARTBEAT", "UNREGISTER", "CHANNEL_CLOSE", "CHANNEL_EXCEPTION", "CHANNEL_IDLE")
OUTCOMES = ("OK", "REMOTING_ERROR", "CLIENT_ERROR", "BROKER_ERROR", "INTERRUPTED", "TIMEOUT")

# Dead-letter reasons, in the order the checks run.
REASONS = (
    "OVERSIZED", "NOT_JSON", "NOT_AN_OBJECT", "UNKNOWN_TYPE", "UNKNOWN_SCHEMA_VERSION", "MISSING_FIELD",
    "WRONG_TYPE", "INVALID_VALUE", "NEGATIVE_LATENCY", "FUTURE_TIMESTAMP",
)  # fmt: skip
# Rule-specific reasons (field.keyword -> reason); everything else is MISSING_FIELD / WRONG_TYPE / INVALID_VALUE.
REASON_OVERRIDES = {"latency_ms.minimum": "NEGATIVE_LATENCY"}
DEFAULT_MAX_EVENT_BYTES = 65_536
DEFAULT_MAX_FUTURE_SKEW_MS = 300_000


@cache
def schema(event_type: str, version: int = 1) -> Mapping[str, Any]:
    text = resources.files("streaming.contract").joinpath(f"schemas/{event_type}.v{version}.schema.json").read_text()
    return json.loads(text)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class Rejection:
    reason: str
    detail: str


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"  # 1.0 too: Spark's VARIANT types it DECIMAL(2,1), so both validators call it a number
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _violations(rules: Mapping[str, Any], value: Any, label: str) -> Iterator[Rejection]:
    """The compiler's traversal (``streaming.job.validation._Compiler.rules``) over a Python value."""
    field = label.rsplit(".", 1)[-1].rstrip("[]")

    def reason(keyword: str, default: str) -> str:
        return REASON_OVERRIDES.get(f"{field}.{keyword}", default)

    types = rules.get("type")
    if types is not None:
        types = [types] if isinstance(types, str) else list(types)
        actual = _json_type(value)
        if not (actual in types or (actual == "integer" and "number" in types)):
            yield Rejection("WRONG_TYPE", f"{label} must be {' or '.join(types)}")
    text = value if isinstance(value, str) else None
    number = value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if "const" in rules and value != rules["const"]:
        yield Rejection(reason("const", "INVALID_VALUE"), f"{label} must be {rules['const']!r}")
    if "enum" in rules and value not in rules["enum"]:
        yield Rejection(reason("enum", "INVALID_VALUE"), f"{label} must be one of {', '.join(map(str, rules['enum']))}")
    bounds = (
        ("minimum", lambda x, b: x < b),
        ("maximum", lambda x, b: x > b),
        ("exclusiveMinimum", lambda x, b: x <= b),
        ("exclusiveMaximum", lambda x, b: x >= b),
    )
    for keyword, bad in bounds:
        if keyword in rules and number is not None and bad(number, rules[keyword]):
            yield Rejection(reason(keyword, "INVALID_VALUE"), f"{label} must be {keyword} {rules[keyword]}")
    if "minLength" in rules and text is not None and len(text) < rules["minLength"]:
        yield Rejection(
            reason("minLength", "INVALID_VALUE"), f"{label} must have at least {rules['minLength']} characters"
        )
    if "maxLength" in rules and text is not None and len(text) > rules["maxLength"]:
        yield Rejection(
            reason("maxLength", "INVALID_VALUE"), f"{label} must have at most {rules['maxLength']} characters"
        )
    if "pattern" in rules and isinstance(value, str) and not re.search(rules["pattern"], value):
        yield Rejection(reason("pattern", "INVALID_VALUE"), f"{label} must match {rules['pattern']}")
    if isinstance(value, dict) and ("properties" in rules or "required" in rules):
        for name in rules.get("required", []):
            if value.get(name) is None:
                yield Rejection(
                    REASON_OVERRIDES.get(f"{name}.required", "MISSING_FIELD"), f"missing field {label}.{name}"
                )
        for name, child in rules.get("properties", {}).items():
            if name in value and (value[name] is not None or "null" in (child.get("type") or [])):
                yield from _violations(child, value[name], f"{label}.{name}")
    if isinstance(value, list):
        if "minItems" in rules and len(value) < rules["minItems"]:
            yield Rejection(
                reason("minItems", "INVALID_VALUE"), f"{label} must have at least {rules['minItems']} items"
            )
        if "maxItems" in rules and len(value) > rules["maxItems"]:
            yield Rejection(reason("maxItems", "OVERSIZED"), f"{label} must have at most {rules['maxItems']} items")
        if "items" in rules:
            for item in value:
                first = next(iter(_violations(rules["items"], item, f"{label}[]")), None)
                if first is not None:
                    yield first
                    break


def validate_event(raw: bytes | str, kafka_timestamp_ms: int | None = None, default_type: str | None = None,
                   max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
                   max_future_skew_ms: int = DEFAULT_MAX_FUTURE_SKEW_MS) -> dict[str, Any] | Rejection:  # fmt: skip
    """The parsed event, or the ``Rejection`` the job would dead-letter it with.

    ``kafka_timestamp_ms`` is the record's Kafka timestamp (publishers pass their clock); ``default_type``
    is the type of the Kafka topic the event is published to, used when the event has no ``type``.
    """
    data = raw.encode() if isinstance(raw, str) else raw
    if len(data) > max_event_bytes:
        return Rejection("OVERSIZED", f"event of {len(data)} bytes exceeds {max_event_bytes}")
    try:
        value = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return Rejection("NOT_JSON", "value is not valid JSON")
    if not isinstance(value, dict):
        kind = _json_type(value)
        return Rejection("NOT_AN_OBJECT", f"JSON {'number' if kind == 'integer' else kind}")
    event_type = value.get("type") if isinstance(value.get("type"), str) else default_type
    if event_type not in EVENT_TYPES:
        return Rejection("UNKNOWN_TYPE", f"unknown event type {event_type or '<none>'}")
    version = value.get("schema_version")
    if str(version) not in {str(v) for v in SUPPORTED_VERSIONS[event_type]} or isinstance(version, bool):
        versions = ", ".join(map(str, SUPPORTED_VERSIONS[event_type]))
        return Rejection(
            "UNKNOWN_SCHEMA_VERSION", f"schema_version {version} of {event_type} is not one of [{versions}]"
        )
    first = next(iter(_violations(schema(event_type), value, "$")), None)
    if first is not None:
        return first
    if kafka_timestamp_ms is not None and value["event_time"] > kafka_timestamp_ms + max_future_skew_ms:
        return Rejection("FUTURE_TIMESTAMP", f"event_time {value['event_time']} is more than {max_future_skew_ms} ms "
                                             "after the Kafka timestamp")  # fmt: skip
    return value


def is_valid_by_jsonschema(event: Mapping[str, Any]) -> bool:
    """The reference check (``jsonschema``), for tests comparing both validators."""
    import jsonschema

    event_type = event.get("type")
    if event_type not in EVENT_TYPES:
        return False
    return jsonschema.Draft202012Validator(schema(event_type)).is_valid(event)
