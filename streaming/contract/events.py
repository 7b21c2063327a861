"""The event contract's vocabulary: event types, topics, keys, enumerations, limits, reasons and schemas.

What publishers, the simulator, the configuration and the job name events by. The schema files are loaded
and held to the JSON Schema subset both validators implement (``streaming.contract.schema_rules`` turns them
into Python rules, ``streaming.job.ingest.validation`` into SQL); ``streaming.contract.validator`` classifies raw
values with them. Standard library and the domain's vocabulary only. The order of checks:
``docs/design/event-validation.md``.
"""

from __future__ import annotations

import copy
import enum
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from functools import cache
from importlib import resources
from typing import Any

from streaming.domain.vocabulary import DEFAULT_CLUSTER as DEFAULT_CLUSTER  # the contract names it too
from streaming.domain.vocabulary import EventType

# -- event types, Kafka topics and keys -----------------------------------------------------------------

# The names are the domain's ``EventType`` (the engine names them too and imports nothing of the contract).
CONSUMER_CHANNEL = EventType.CONSUMER_CHANNEL
CONSUMER_CONNECTIONS = EventType.CONSUMER_CONNECTIONS
REPORTED_ASSIGNMENT = EventType.REPORTED_ASSIGNMENT
TOPIC_ROUTE = EventType.TOPIC_ROUTE
SEND_RESULT = EventType.SEND_RESULT
CONSUME_PROGRESS = EventType.CONSUME_PROGRESS
EVENT_TYPES: tuple[EventType, ...] = tuple(EventType)

# The schema versions the job accepts per type; anything else is dead-lettered as UNKNOWN_SCHEMA_VERSION.
# Version 2 is version 1 with the optional ``cluster`` field.
SUPPORTED_VERSIONS: Mapping[str, tuple[int, ...]] = {event_type: (1, 2) for event_type in EVENT_TYPES}

# -- the RocketMQ cluster an event is about --------------------------------------------------------------

# Broker, group and topic names are unique within one RocketMQ cluster only, so every event belongs to one
# cluster: its ``cluster`` field from version 2 on; a version 1 event, or a later one without the field, to
# the job's ``[ingest] default_cluster`` (``docs/events.md``, "Clusters").
CLUSTER_FIELD = "cluster"
CLUSTER_SINCE_VERSION = 2


def event_cluster(event: Mapping[str, Any], default: str = DEFAULT_CLUSTER) -> str:
    """The cluster a valid event belongs to: its ``cluster`` from version 2 on, else the default cluster."""
    declared = event.get(CLUSTER_FIELD)
    version = event.get("schema_version")
    if isinstance(declared, str) and isinstance(version, int | float | Decimal) and not isinstance(version, bool):
        return declared if version >= CLUSTER_SINCE_VERSION else default
    return default


# One topic per type by default, so each type can have its own retention (routes: compacted) and partitions;
# the required ``type`` field still lets several types share a topic. A broker's poll of a group shares the
# channel events' topic and key, so one group's polls and heartbeats stay in order in one partition.
DEFAULT_TOPICS: Mapping[str, str] = {
    CONSUMER_CHANNEL: "rocketmq.consumer-channels",
    CONSUMER_CONNECTIONS: "rocketmq.consumer-channels",
    REPORTED_ASSIGNMENT: "rocketmq.reported-assignments",
    TOPIC_ROUTE: "rocketmq.topic-routes",
    SEND_RESULT: "rocketmq.send-results",
    CONSUME_PROGRESS: "rocketmq.consume-progress",
}
# The settings each type's topic is created with (``topic_configs``; ``docs/deploy.md``, "Topics"). Routes are
# published only when they change (and every ``route_republish_interval_ms``): their topic is compacted, so a new
# checkpoint reading from ``earliest`` finds every topic's latest route. The others are read once, as they
# arrive: a week's retention covers an outage of the monitor over a weekend (beyond it the job skips what is
# gone, ``[kafka] fail_on_data_loss``), and Kafka's default of the same length is stated rather than assumed.
RETENTION_MS = str(7 * 24 * 3600 * 1000)
_DELETED_AFTER_A_WEEK: Mapping[str, str] = {"cleanup.policy": "delete", "retention.ms": RETENTION_MS}
TOPIC_CONFIGS: Mapping[str, Mapping[str, str]] = {
    CONSUMER_CHANNEL: _DELETED_AFTER_A_WEEK,
    CONSUMER_CONNECTIONS: _DELETED_AFTER_A_WEEK,
    REPORTED_ASSIGNMENT: _DELETED_AFTER_A_WEEK,
    TOPIC_ROUTE: {"cleanup.policy": "compact"},
    SEND_RESULT: _DELETED_AFTER_A_WEEK,
    CONSUME_PROGRESS: _DELETED_AFTER_A_WEEK,
}


def topic_configs(topics: Mapping[str, str]) -> dict[str, Mapping[str, str]]:
    """Per topic of ``topics`` (event type -> topic): the settings of the types it carries; none (the broker's
    defaults) for a topic whose types ask for different ones (routes sharing another type's topic)."""
    by_topic: dict[str, list[Mapping[str, str]]] = {}
    for event_type, topic in topics.items():
        by_topic.setdefault(topic, []).append(TOPIC_CONFIGS[event_type])
    return {topic: wanted[0] if all(w == wanted[0] for w in wanted) else {} for topic, wanted in by_topic.items()}


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
    CONSUME_PROGRESS: "group",
}

# The record header every producer adds beside the value: the event's ``event_time`` as an 8-byte big-endian
# integer. Advisory (the value's ``event_time`` is the truth); the job plans capped batches by it without reading
# values (``docs/events.md``).
EVENT_TIME_HEADER = "rrm-event-time"


def event_time_headers(event: Mapping[str, Any]) -> list[tuple[str, bytes]]:
    """The Kafka record headers of ``event``: its event time, or none when it has no integer one."""
    value = event.get("event_time")
    if not isinstance(value, int) or isinstance(value, bool) or not -(2**63) <= value < 2**63:
        return []
    return [(EVENT_TIME_HEADER, value.to_bytes(8, "big", signed=True))]


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
        raise KeyError(f"no schema for event type {event_type!r}; expected one of {', '.join(EVENT_TYPES)}")
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


def cluster_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a cluster's name (the newest schemas' ``cluster`` rules), or None."""
    rules = schema(EventType.SEND_RESULT)["properties"][CLUSTER_FIELD]
    if not rules["minLength"] <= len(name) <= rules["maxLength"]:
        return f"must have {rules['minLength']} to {rules['maxLength']} characters"
    if re.search(rules["pattern"], name) is None:
        return "must not contain control characters"
    return None
