"""The event contract: schemas are valid, good events pass, each kind of bad input gets its reason."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from streaming.contract.events import EVENT_TYPES, REASONS, Rejection, is_valid_by_jsonschema, schema, validate_event
from tests.support.event_corpus import BAD, GOOD, KAFKA_TS

DOCS = Path(__file__).parents[2] / "docs" / "events.md"


@pytest.mark.parametrize("event_type", EVENT_TYPES)
def test_schema_is_valid_draft_2020_12_and_good_example_validates(event_type):
    jsonschema.Draft202012Validator.check_schema(schema(event_type))
    assert is_valid_by_jsonschema(GOOD[event_type])
    assert validate_event(json.dumps(GOOD[event_type]), KAFKA_TS) == GOOD[event_type]


@pytest.mark.parametrize(("raw", "reason", "note"), BAD, ids=[b[2] for b in BAD])
def test_bad_event_gets_its_reason(raw, reason, note):
    outcome = validate_event(raw, KAFKA_TS)
    assert isinstance(outcome, Rejection), note
    assert outcome.reason == reason, outcome.detail


def test_every_reason_is_exercised_by_the_corpus():
    assert {reason for _, reason, _ in BAD} == set(REASONS)


@pytest.mark.parametrize(
    ("raw", "reason", "note"),
    [
        b
        for b in BAD
        if b[1]
        not in ("OVERSIZED", "NOT_JSON", "NOT_AN_OBJECT", "UNKNOWN_TYPE", "UNKNOWN_SCHEMA_VERSION", "FUTURE_TIMESTAMP")
    ],
)
def test_jsonschema_agrees_that_schema_level_rejections_are_invalid(raw, reason, note):
    assert not is_valid_by_jsonschema(json.loads(raw)), note


def test_event_without_type_takes_the_topic_default():
    untyped = {k: v for k, v in GOOD["send_result"].items() if k != "type"}
    assert isinstance(validate_event(json.dumps(untyped), KAFKA_TS), Rejection)
    assert validate_event(json.dumps(untyped), KAFKA_TS, default_type="send_result") == untyped


def test_docs_mention_every_field_of_every_schema():
    text = DOCS.read_text()
    for event_type in EVENT_TYPES:

        def fields(node, prefix=""):
            for name, child in node.get("properties", {}).items():
                yield name
                yield from fields(child.get("items", child))

        for name in fields(schema(event_type)):
            assert f"{name}`" in text, f"docs/events.md does not document {event_type}.{name}"
