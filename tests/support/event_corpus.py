"""Good and bad events, each bad one with the dead-letter reason both validators must give."""

from __future__ import annotations

import json

KAFKA_TS = 1_700_000_000_000

GOOD = {
    "consumer_channel": {
        "type": "consumer_channel",
        "schema_version": 1,
        "event_time": KAFKA_TS,
        "broker": "broker-a",
        "kind": "HEARTBEAT",
        "channel": "10.0.0.7:51234",
        "client_id": "10.0.0.7@1#123",
        "group": "G",
        "message_model": "CLUSTERING",
        "consume_type": "CONSUME_PASSIVELY",
        "client_version": "V5_3_3",
        "subscriptions": [{"topic": "T", "expression": "*", "sub_version": 1}],
        "allocate_strategy": "AVG",
    },
    "consumer_connections": {
        "type": "consumer_connections",
        "schema_version": 1,
        "event_time": KAFKA_TS,
        "broker": "broker-a",
        "group": "G",
        "stale_after_ms": 30_000,
        "collector": "collect-1",
        "message_model": "CLUSTERING",
        "consume_type": "CONSUME_PASSIVELY",
        "subscriptions": [{"topic": "T", "expression": "*", "sub_version": 1}],
        "connections": [
            {
                "channel": "10.0.0.7:51234",
                "client_id": "10.0.0.7@1#123",
                "language": "JAVA",
                "client_version": "479",
                "allocate_strategy": "AVG",
                "subscriptions": [{"topic": "T", "expression": "*", "sub_version": 1}],
            },
        ],
    },
    "reported_assignment": {
        "type": "reported_assignment",
        "schema_version": 1,
        "event_time": KAFKA_TS,
        "group": "G",
        "client_id": "10.0.0.7@1#123",
        "topic": "T",
        "queues": [{"broker": "broker-a", "queue_id": 0, "dropped": False}],
    },
    "topic_route": {
        "type": "topic_route",
        "schema_version": 1,
        "event_time": KAFKA_TS,
        "topic": "T",
        "brokers": [{"broker": "broker-a", "read_queue_nums": 4, "write_queue_nums": 4, "perm": 6}],
    },
    "send_result": {
        "type": "send_result",
        "schema_version": 1,
        "event_time": KAFKA_TS,
        "producer_id": "10.0.0.9@2#5",
        "producer_group": "PG",
        "topic": "T",
        "broker": "broker-a",
        "queue_id": 1,
        "latency_ms": 12,
        "outcome": "OK",
        "client_version": "V4_9_8",
    },
}


_ROUTE_BROKER = {"broker": "broker-a", "read_queue_nums": 4, "write_queue_nums": 4, "perm": 6}


def _with(event_type: str, **changes: object) -> str:
    event = dict(GOOD[event_type])
    for key, value in changes.items():
        if value is ...:
            event.pop(key)
        else:
            event[key] = value
    return json.dumps(event)


# (raw value, expected reason, note)
BAD = [
    ("x" * 70_000, "OVERSIZED", "larger than max_event_bytes"),
    ("{not json", "NOT_JSON", "malformed"),
    (_with("consumer_channel", client_id="10.0.0.5@1\ud800"), "NOT_JSON", "an unpaired surrogate escape"),
    ("[1, 2, 3]", "NOT_AN_OBJECT", "an array"),
    (json.dumps({"type": "banana", "schema_version": 1}), "UNKNOWN_TYPE", "unknown type"),
    (_with("send_result", schema_version=9), "UNKNOWN_SCHEMA_VERSION", "future version"),
    (_with("send_result", broker=...), "MISSING_FIELD", "no broker"),
    (_with("consumer_channel", client_id=None), "MISSING_FIELD", "null client id"),
    (_with("send_result", latency_ms="slow"), "WRONG_TYPE", "latency as a string"),
    (
        _with("topic_route", brokers=[{"broker": "b", "read_queue_nums": "4", "write_queue_nums": 4, "perm": 6}]),
        "WRONG_TYPE",
        "nested wrong type",
    ),
    (_with("send_result", outcome="MAYBE"), "INVALID_VALUE", "unknown outcome"),
    (_with("consumer_channel", kind="PING"), "INVALID_VALUE", "unknown kind"),
    (_with("consumer_channel", channel="nowhere"), "INVALID_VALUE", "channel without port"),
    (_with("send_result", latency_ms=-5), "NEGATIVE_LATENCY", "negative latency"),
    (_with("send_result", latency_ms=99_000_000), "INVALID_VALUE", "absurd latency"),
    (
        _with("reported_assignment", queues=[{"broker": "b", "queue_id": 70_000}]),
        "INVALID_VALUE",
        "queue id out of range",
    ),
    (
        _with(
            "topic_route",
            brokers=[{"broker": f"b{i}", "read_queue_nums": 1, "write_queue_nums": 1, "perm": 6} for i in range(1001)],
        ),
        "OVERSIZED",
        "too many brokers",
    ),
    (_with("send_result", event_time=KAFKA_TS + 3_600_000), "FUTURE_TIMESTAMP", "an hour ahead of Kafka"),
    # Cases a typed fast path could wrongly accept (lenient casts, merged array shapes, cross-field rules).
    (_with("send_result", broker=5), "WRONG_TYPE", "a number for a string"),
    (_with("send_result", client_version=7), "WRONG_TYPE", "a number for an optional string"),
    (_with("send_result", queue_id=True), "WRONG_TYPE", "a boolean for an integer"),
    (_with("send_result", latency_ms="12"), "WRONG_TYPE", "a numeric string for an integer"),
    (_with("topic_route", brokers=[_ROUTE_BROKER, None]), "WRONG_TYPE", "a null item among good ones"),
    (
        _with("topic_route", brokers=[_ROUTE_BROKER, {"broker": "b2", "read_queue_nums": 1, "perm": 6}]),
        "MISSING_FIELD",
        "an item missing a field the others have",
    ),
    (
        _with("consumer_channel", subscriptions=[{"topic": "T", "sub_version": 1}, {"topic": "U", "expression": 5}]),
        "WRONG_TYPE",
        "items whose field types differ",
    ),
    (_with("consumer_channel", subscriptions=...), "MISSING_FIELD", "a heartbeat without subscriptions"),
    # The cluster of version 2: a name of 1 to 255 characters without control characters.
    (_with("send_result", schema_version=2, cluster=""), "INVALID_VALUE", "an empty cluster"),
    (_with("consumer_channel", schema_version=2, cluster="east\u0085"), "INVALID_VALUE", "a C1 control character"),
    (_with("topic_route", schema_version=2, cluster="c" * 256), "INVALID_VALUE", "a cluster name too long"),
    (_with("reported_assignment", schema_version=2, cluster=["east"]), "WRONG_TYPE", "a list for a cluster"),
    # Integers past a bound by far: beyond an INT, beyond a BIGINT, and just past 2^63 - 1 (a double rounds
    # that bound up to 2^63).
    (_with("send_result", queue_id=2**40), "INVALID_VALUE", "a queue id beyond an INT"),
    (_with("send_result", queue_id=2**63), "INVALID_VALUE", "a queue id beyond a BIGINT"),
    (
        _with("consumer_channel", subscriptions=[{"topic": "T", "sub_version": 2**63}]),
        "INVALID_VALUE",
        "a sub_version of exactly 2^63",
    ),
    (
        _with("reported_assignment", queues=[{"broker": "b", "queue_id": -(2**63) - 1}]),
        "INVALID_VALUE",
        "a queue id below a BIGINT",
    ),
    (_with("consumer_connections", connections=...), "MISSING_FIELD", "a poll without its connection list"),
    (_with("consumer_connections", stale_after_ms=10), "INVALID_VALUE", "a poll stale after 10 ms"),
    (
        _with("consumer_connections", connections=[{"channel": "10.0.0.7:1"}]),
        "MISSING_FIELD",
        "a connection without id",
    ),
    (
        _with("consumer_connections", connections=[{"channel": "nowhere", "client_id": "c"}]),
        "INVALID_VALUE",
        "a connection's channel without port",
    ),
    (_with("consumer_connections", consume_type="CONSUME_SOMEHOW"), "INVALID_VALUE", "an unknown consume type"),
]

# Valid events beyond GOOD's one per type: shapes the fast path does not model (unknown fields, decimals
# with no fraction) must still pass through the rules, and optional parts may be null, empty or absent.
MORE_GOOD = [
    _with("send_result", schema_version=2, cluster="east"),
    _with("consumer_channel", schema_version=2, cluster="Ops cluster é"),
    _with("consumer_connections", schema_version=2, cluster=None),
    _with("topic_route", schema_version=2),
    _with("send_result", schema_version=2, cluster="c" * 255),
    # Version 1 knows no cluster: whatever the field holds is ignored (the fast path refuses it, the rules pass it).
    _with("reported_assignment", cluster=""),
    _with("send_result", cluster=5),
    _with("send_result", extra={"nested": [1, "a"]}),
    _with("send_result", client_version=None, send_latency_fault_enable=True),
    _with("send_result", latency_ms=12.0),
    _with("consumer_channel", kind="UNREGISTER", subscriptions=..., message_model=None),
    _with("consumer_channel", subscriptions=[]),
    _with("consumer_channel", subscriptions=[{"topic": "T"}, {"topic": "U", "expression": None, "sub_version": 2}]),
    _with("topic_route", brokers=[_ROUTE_BROKER, dict(_ROUTE_BROKER, broker="b2", machine_room="az1")]),
    _with("reported_assignment", queues=[]),
    _with("consumer_channel", subscriptions=[{"topic": "T", "sub_version": 2**63 - 1}]),
    # Text after the object is ignored (Spark reads the first JSON value).
    _with("reported_assignment") + ' {"trailing": true}',
    _with("topic_route") + " trailing text",
    _with("consumer_connections", connections=[], collector=..., message_model=None),
    _with("consumer_connections", connections=[{"channel": "10.0.0.8:1", "client_id": "c", "subscriptions": None}]),
]
