"""The event contract: schemas are valid and compilable, good events pass, each kind of bad input gets its reason.

The numbered table below is the contract's correctness proof on the Python side. Its cases mirror what Spark
4.2's JSON reader does (measured; see the module docstring of ``streaming.contract.spark_json``), so the job and
``validate_event`` classify them alike; ``tests/spark/test_ingest_validation.py`` runs the job's compiled
rules over a corpus of the same kind.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from streaming.contract.events import (
    CROSS_FIELD_RULES,
    DEFAULT_TOPICS,
    EVENT_TYPES,
    IGNORED_KEYWORDS,
    KEY_FIELDS,
    REASONS,
    SUPPORTED_KEYWORDS,
    SUPPORTED_VERSIONS,
    Reason,
    schema,
    schema_files,
)
from streaming.contract.validator import (
    Rejection,
    ValidEvent,
    is_valid_by_jsonschema,
    parse_like_the_job,
    validate_event,
)

DOCS = Path(__file__).parents[2] / "docs" / "events.md"
NOW = 1_700_000_000_000

SEND = {
    "type": "send_result",
    "schema_version": 1,
    "event_time": NOW,
    "producer_id": "10.0.0.9@1#88",
    "producer_group": "PG",
    "topic": "T",
    "broker": "broker-a",
    "queue_id": 1,
    "latency_ms": 12,
    "outcome": "OK",
}
HEARTBEAT = {
    "type": "consumer_channel",
    "schema_version": 1,
    "event_time": NOW,
    "broker": "broker-a",
    "kind": "HEARTBEAT",
    "channel": "10.0.0.7:51234",
    "client_id": "10.0.0.7@1#123",
    "group": "G",
    "subscriptions": [],
}
REPORT = {
    "type": "reported_assignment",
    "schema_version": 1,
    "event_time": NOW,
    "group": "G",
    "client_id": "c",
    "topic": "T",
    "queues": [{"broker": "broker-a", "queue_id": 0}],
}
ROUTE = {
    "type": "topic_route",
    "schema_version": 1,
    "event_time": NOW,
    "topic": "T",
    "brokers": [{"broker": "broker-a", "read_queue_nums": 4, "write_queue_nums": 4, "perm": 6}],
}


def w(base: dict, **changes: object) -> str:
    """``base`` as JSON with fields changed (``...`` removes one)."""
    event = dict(base)
    for key, value in changes.items():
        if value is ...:
            event.pop(key)
        else:
            event[key] = value
    return json.dumps(event)


# (number, raw value, expected reason or None for accepted, why)
CASES = [
    # size and syntax
    (1, "x" * 70_000, "OVERSIZED", "larger than max_event_bytes, checked before parsing"),
    (2, None, "NOT_JSON", "a record without a value (tombstone)"),
    (3, "", "NOT_JSON", "an empty value"),
    (4, "{not json", "NOT_JSON", "malformed"),
    (5, json.dumps(SEND)[:-1] + ', "broker": "c"}', "NOT_JSON", "duplicate keys: Spark's parser refuses them"),
    (6, w(SEND).replace('"latency_ms": 12', '"latency_ms": NaN'), "NOT_JSON", "NaN is not JSON"),
    (7, "\ufeff" + w(SEND), "NOT_JSON", "a byte-order mark"),
    (8, "1x", "NOT_JSON", "a number running into letters"),
    (9, w(SEND) + "trailing", None, "text after a complete object is ignored, as Spark does"),
    (10, " \n" + w(SEND) + " \n", None, "JSON whitespace around the object"),
    (11, "[1, 2, 3]", "NOT_AN_OBJECT", "an array"),
    (12, '"just a string"', "NOT_AN_OBJECT", "a string"),
    (13, "null", "NOT_AN_OBJECT", "JSON null"),
    # type and version
    (14, json.dumps({"type": "banana", "schema_version": 1}), "UNKNOWN_TYPE", "unknown type"),
    (15, w(SEND, type=5), "UNKNOWN_TYPE", "a non-string type is read as its text, never a known type"),
    (16, w(SEND, type=...), "UNKNOWN_TYPE", "no type and no topic default"),
    (17, w(SEND, schema_version=3), "UNKNOWN_SCHEMA_VERSION", "a version this job does not know"),
    (18, w(SEND, schema_version=True), "UNKNOWN_SCHEMA_VERSION", "a boolean version"),
    (19, w(SEND, schema_version=...), "MISSING_FIELD", "an absent version is a missing field, not an unknown version"),
    (20, w(SEND, schema_version="1"), "WRONG_TYPE", "the version as a string: known, but not an integer"),
    (21, w(SEND, schema_version=1.0), None, "1.0 is an integer for Spark"),
    # schema rules
    (22, w(SEND, broker=...), "MISSING_FIELD", "a required field absent"),
    (23, w(SEND, broker=None), "MISSING_FIELD", "a required field null"),
    (24, w(SEND, latency_ms="slow"), "WRONG_TYPE", "a string where an integer belongs"),
    (25, w(SEND, latency_ms=12.5), "WRONG_TYPE", "a fraction is not an integer"),
    (
        26,
        w(SEND).replace('"latency_ms": 12', '"latency_ms": 1e3'),
        "WRONG_TYPE",
        "an exponent makes a double, not an integer",
    ),
    (27, w(SEND, latency_ms=12.0), None, "a zero fraction is an integer"),
    (28, w(SEND, queue_id=10**40), "WRONG_TYPE", "beyond 38 digits Spark reads a double"),
    (29, w(SEND, outcome="MAYBE"), "INVALID_VALUE", "outside the enumeration"),
    (30, w(SEND, latency_ms=-5), "NEGATIVE_LATENCY", "a negative latency has its own reason"),
    (31, w(SEND, latency_ms=3_600_001), "INVALID_VALUE", "over the one-hour cap"),
    (32, w(SEND, queue_id=65_536), "INVALID_VALUE", "queue ids are 0..65535"),
    (33, w(SEND, event_time=1_700_000_000), "INVALID_VALUE", "seconds instead of milliseconds"),
    (34, w(SEND, topic="a b"), "INVALID_VALUE", "RocketMQ's topic name rule"),
    (35, w(SEND, topic="T\n"), "INVALID_VALUE", "no trailing newline (the pattern's end is the end of input)"),
    (36, w(SEND, broker="b" * 256), "INVALID_VALUE", "longer than 255 characters"),
    (37, w(SEND, broker="\U0001f600" * 255), None, "lengths count characters, not bytes or UTF-16 units"),
    (38, w(SEND, send_latency_fault_enable="yes"), "WRONG_TYPE", "an optional boolean of the wrong type"),
    (39, w(SEND, client_version=None, send_latency_fault_enable=None), None, "optional fields may be null"),
    (40, w(SEND, extra={"any": [1]}), None, "unknown fields are ignored"),
    (41, w(HEARTBEAT, kind="PING"), "INVALID_VALUE", "unknown kind"),
    (42, w(HEARTBEAT, channel="nowhere"), "INVALID_VALUE", "a channel without a port"),
    (43, w(HEARTBEAT, channel="[fe80::1%eth0]:40000"), None, "bracketed IPv6 with a zone"),
    (44, w(HEARTBEAT, channel="0:0:0:0:0:0:0:1:53412"), None, "unbracketed IPv6 as Java 8 prints it"),
    (45, w(HEARTBEAT, message_model="CLUSTER"), "INVALID_VALUE", "an optional enumeration (a pattern, so null passes)"),
    (46, w(HEARTBEAT, message_model=None, consume_type=None), None, "optional enumerations may be null"),
    (47, w(HEARTBEAT, allocate_strategy="MY_OWN_STRATEGY"), None, "custom strategies are real members too"),
    (48, w(HEARTBEAT, subscriptions=[{"topic": "T"}] * 1001), "OVERSIZED", "too many subscriptions"),
    (49, w(HEARTBEAT, subscriptions=[{"topic": "T", "sub_version": -1}]), "INVALID_VALUE", "a nested bound"),
    (
        50,
        w(REPORT, queues=[{"broker": 5, "queue_id": 0}, {"broker": "b"}]),
        "MISSING_FIELD",
        "item rules run one rule at a time over all items: required before property types",
    ),
    (51, w(REPORT, queues=[None]), "WRONG_TYPE", "a null item is present and not an object"),
    (
        52,
        w(ROUTE, brokers=[{"broker": "b", "read_queue_nums": "4", "write_queue_nums": 4, "perm": 6}]),
        "WRONG_TYPE",
        "nested wrong type",
    ),
    (
        53,
        w(ROUTE, brokers=[{"broker": "b", "read_queue_nums": 4, "write_queue_nums": 4, "perm": 8}]),
        "INVALID_VALUE",
        "perm is 0..7",
    ),
    (54, w(SEND, broker=5, latency_ms=-1), "WRONG_TYPE", "several faults: the first rule in schema order wins"),
    # cross-field rule
    (55, w(HEARTBEAT, subscriptions=...), "MISSING_FIELD", "a heartbeat must carry its subscription list"),
    (56, w(HEARTBEAT, subscriptions=None), "MISSING_FIELD", "null is absent"),
    (57, w(HEARTBEAT, kind="UNREGISTER", subscriptions=...), None, "removals need no subscriptions"),
    # time
    (58, w(SEND, event_time=NOW + 300_000), None, "exactly the allowed skew"),
    (59, w(SEND, event_time=NOW + 300_001), "FUTURE_TIMESTAMP", "beyond the allowed skew"),
    # integer bounds compare exactly, whatever the integer's size
    (60, w(HEARTBEAT, subscriptions=[{"topic": "T", "sub_version": 2**63 - 1}]), None, "the largest sub_version"),
    (
        61,
        w(HEARTBEAT, subscriptions=[{"topic": "T", "sub_version": 2**63}]),
        "INVALID_VALUE",
        "2^63 is past the maximum, though a double rounds the maximum to it",
    ),
    (62, w(HEARTBEAT, subscriptions=[{"topic": "T", "sub_version": 10**37}]), "INVALID_VALUE", "a 38-digit integer"),
    (63, w(SEND, queue_id=2**31), "INVALID_VALUE", "beyond an INT"),
    (64, w(SEND, queue_id=2**63 - 1), "INVALID_VALUE", "the largest BIGINT"),
    (65, w(REPORT) + ' {"more": 1}', None, "a report followed by another object: only the first counts"),
    (66, w(ROUTE) + "]", None, "a route followed by stray text"),
    (67, w(SEND).replace('"latency_ms": 12', '"latency_ms": 12.' + "0" * 36), None, "38 digits: a DECIMAL, 12"),
    (
        68,
        w(SEND).replace('"latency_ms": 12', '"latency_ms": 12.' + "0" * 37),
        "WRONG_TYPE",
        "39 digits, trailing zeros included: Spark reads a double",
    ),
    # the cluster (version 2)
    (69, w(SEND, schema_version=2, cluster="DefaultCluster"), None, "a version 2 event names its cluster"),
    (70, w(SEND, schema_version=2), None, "a version 2 event without a cluster: the default cluster"),
    (71, w(SEND, schema_version=2, cluster=None), None, "a null cluster is an absent one"),
    (72, w(SEND, schema_version=2, cluster=""), "INVALID_VALUE", "an empty cluster name"),
    (73, w(SEND, schema_version=2, cluster="a\tb"), "INVALID_VALUE", "a control character in a cluster name"),
    (74, w(SEND, schema_version=2, cluster="c" * 256), "INVALID_VALUE", "a cluster name over 255 characters"),
    (75, w(SEND, schema_version=2, cluster=7), "WRONG_TYPE", "a number for a cluster name"),
    (76, w(SEND, cluster=""), None, "version 1 knows no cluster: the field is ignored, as any unknown one"),
    (77, w(HEARTBEAT, schema_version=2, cluster="Ops Cluster \u00e9"), None, "spaces and letters beyond ASCII"),
]


@pytest.mark.parametrize(("number", "raw", "reason", "why"), CASES, ids=[f"{c[0]:02d}" for c in CASES])
def test_case_table(number, raw, reason, why):
    outcome = validate_event(raw, NOW)
    got = outcome.reason if isinstance(outcome, Rejection) else None
    assert got == reason, f"case {number} ({why}): {outcome}"


def test_case_table_is_numbered_in_order_and_covers_every_reason():
    assert [c[0] for c in CASES] == list(range(1, len(CASES) + 1))
    assert {c[2] for c in CASES if c[2]} == set(REASONS) == {r.value for r in Reason}


def _schema_rule_rejections():
    for number, raw, reason, _ in CASES:
        if raw is None or reason not in (
            "MISSING_FIELD",
            "WRONG_TYPE",
            "INVALID_VALUE",
            "NEGATIVE_LATENCY",
            "OVERSIZED",
        ):
            continue
        parsed, value = parse_like_the_job(raw)
        if parsed and isinstance(value, dict) and value.get("type") in EVENT_TYPES and number not in (55, 56):
            yield number, value


@pytest.mark.parametrize(("number", "event"), list(_schema_rule_rejections()))
def test_jsonschema_agrees_that_schema_rule_rejections_are_invalid(number, event):
    assert not is_valid_by_jsonschema(event), f"case {number}"


def test_jsonschema_agrees_that_accepted_cases_are_valid():
    for number, raw, reason, _ in CASES:
        if reason is None:
            assert is_valid_by_jsonschema(parse_like_the_job(raw)[1]), f"case {number}"


@pytest.mark.parametrize(("event_type", "version"), sorted(schema_files()))
def test_each_schema_file_is_valid_draft_2020_12_and_uses_only_the_compiled_subset(event_type, version):
    body = schema(event_type, version)
    jsonschema.Draft202012Validator.check_schema(body)
    assert body["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert body["properties"]["type"] == {"description": "event type discriminator", "const": event_type}
    assert body["properties"]["schema_version"]["enum"] == [version]
    assert body["required"][:3] == ["type", "schema_version", "event_time"]
    assert body["additionalProperties"] is True  # additive changes must not break older monitors

    def keywords(node):
        yield from node
        for child in node.get("properties", {}).values():
            yield from keywords(child)
        if "items" in node:
            yield from keywords(node["items"])

    assert set(keywords(body)) <= SUPPORTED_KEYWORDS | IGNORED_KEYWORDS


def test_shipped_files_are_exactly_the_supported_versions():
    assert set(schema_files()) == {(t, v) for t, versions in SUPPORTED_VERSIONS.items() for v in versions}
    assert set(DEFAULT_TOPICS) == set(KEY_FIELDS) == set(EVENT_TYPES)


def test_patterns_end_at_the_end_of_input():
    # "$" also matches before a final newline (and in Java before \r, \u2028...): the job would disagree.
    for event_type in EVENT_TYPES:
        for pattern in re.findall(r'"pattern": "([^"]+)"', json.dumps(schema(event_type))):
            assert pattern.endswith(r"(?![\\s\\S])") and "$" not in pattern, pattern


def _doc_examples():
    return [json.loads(block) for block in re.findall(r"```json\n(.*?)```", DOCS.read_text(), re.S)]


def test_every_example_in_the_docs_is_valid_and_every_type_has_one():
    examples = _doc_examples()
    for example in examples:
        outcome = validate_event(json.dumps(example), NOW + 3_600_000)
        assert isinstance(outcome, ValidEvent), (example, outcome)
        assert is_valid_by_jsonschema(example)
    assert {e["type"] for e in examples} == set(EVENT_TYPES)


def test_valid_event_carries_type_version_time_key_and_payload():
    outcome = validate_event(w(SEND, latency_ms=12.0, cluster="east").encode(), NOW)
    assert outcome == ValidEvent("send_result", 1, NOW, "10.0.0.9@1#88", {**SEND, "latency_ms": 12, "cluster": "east"})
    assert outcome.cluster() == "DefaultCluster" and outcome.cluster("west") == "west"  # version 1: the default cluster
    assert isinstance(outcome.payload["latency_ms"], int)
    assert outcome.default_topic == "rocketmq.send-results"
    assert validate_event(json.dumps(ROUTE)).key == "T"  # type: ignore[union-attr]
    named = validate_event(w(ROUTE, schema_version=2, cluster="east"))
    assert isinstance(named, ValidEvent) and named.cluster("west") == "east"
    unnamed = validate_event(w(ROUTE, schema_version=2))
    assert isinstance(unnamed, ValidEvent) and unnamed.cluster("west") == "west"


def test_the_topic_default_type_only_chooses_the_schema():
    untyped = w(SEND, type=...)
    assert validate_event(untyped, NOW).reason == "UNKNOWN_TYPE"  # type: ignore[union-attr]
    assert validate_event(untyped, NOW, default_type="send_result") == Rejection(
        "MISSING_FIELD", "missing field $.type"
    )


def test_limits_are_parameters():
    assert validate_event(w(SEND), NOW, max_event_bytes=100).reason == "OVERSIZED"  # type: ignore[union-attr]
    late = w(SEND, event_time=NOW + 10_000)
    assert validate_event(late, NOW, max_future_skew_ms=5_000).reason == "FUTURE_TIMESTAMP"  # type: ignore[union-attr]
    assert isinstance(validate_event(late, None, max_future_skew_ms=0), ValidEvent)  # no reference time, no check


def test_details_name_the_field_and_the_rule():
    def detail(raw):
        return validate_event(raw, NOW).detail  # type: ignore[union-attr]

    assert (
        detail(w(REPORT, queues=[{"broker": "b", "queue_id": 70_000}])) == "$.queues[].queue_id must be maximum 65535"
    )
    assert detail(w(SEND, schema_version=9)) == "schema_version 9 of send_result is not one of [1, 2]"
    assert detail(w(HEARTBEAT, subscriptions=...)) == CROSS_FIELD_RULES["consumer_channel"][0].detail
    assert detail("[1]") == "JSON array" and detail("2.5") == "JSON number"


def test_docs_document_every_field_reason_topic_and_cross_field_rule():
    text = DOCS.read_text()

    def paths(node, prefix=""):
        for name, child in node.get("properties", {}).items():
            yield prefix + name
            if "items" in child:
                yield from paths(child["items"], f"{prefix}{name}[].")

    for event_type in EVENT_TYPES:
        assert f"## `{event_type}`" in text
        for path in paths(schema(event_type)):
            assert f"| `{path}` |" in text, f"docs/events.md does not document {event_type}.{path}"
    for reason in REASONS:
        assert f"`{reason}`" in text
    for topic in DEFAULT_TOPICS.values():
        assert f"`{topic}`" in text
    for rule in (r for rules in CROSS_FIELD_RULES.values() for r in rules):
        assert rule.detail in text


def test_contract_and_config_import_without_spark_or_kafka():
    code = (
        "import sys, streaming.contract.validator, streaming.config; "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j', 'kafka', 'delta', 'pandas')]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[2])


def test_a_poll_is_keyed_by_group_on_the_channel_events_topic_and_its_bad_shapes_are_named():
    from tests.support.event_corpus import BAD, GOOD, KAFKA_TS, MORE_GOOD

    poll = validate_event(json.dumps(GOOD["consumer_connections"]), KAFKA_TS)
    assert isinstance(poll, ValidEvent) and poll.key == "G"
    assert poll.default_topic == DEFAULT_TOPICS["consumer_channel"]
    for raw in (r for r in MORE_GOOD if '"consumer_connections"' in r):
        assert isinstance(validate_event(raw, KAFKA_TS), ValidEvent), raw
    bad_polls = [(raw, reason) for raw, reason, _ in BAD if '"consumer_connections"' in raw]
    assert len(bad_polls) == 5
    for raw, reason in bad_polls:
        assert validate_event(raw, KAFKA_TS).reason == reason, raw  # type: ignore[union-attr]
        assert not is_valid_by_jsonschema(json.loads(raw))


def test_doubles_in_details_are_written_as_java_writes_them():
    """Spark prints a DOUBLE with Java's Double.toString: at least two digits, the two closest to the exact value
    (the hostile-input differential test met 4.9E-324, which Python's shortest repr writes 5e-324)."""
    raw = w(SEND).replace('"schema_version": 1', '"schema_version": 4.9e-324')
    assert validate_event(raw, NOW) == Rejection(
        "UNKNOWN_SCHEMA_VERSION", "schema_version 4.9E-324 of send_result is not one of [1, 2]"
    )
    raw = w(SEND).replace('"schema_version": 1', '"schema_version": 1e23')
    assert validate_event(raw, NOW).detail == "schema_version 1.0E23 of send_result is not one of [1, 2]"
