"""The hostile-input generator: reproducible per seed, drawn from the schema files, covering what it promises."""

from __future__ import annotations

import json
import re
from collections import Counter

from streaming.contract.events import EVENT_TYPES
from streaming.contract.validator import Rejection, validate_event
from tests.support.hostile import generate, load_schemas, sample_pattern

NOW = 1_764_000_000_000


def test_a_seed_gives_the_same_records_and_another_seed_other_ones():
    assert generate(3) == generate(3)
    assert generate(3) != generate(4)
    assert len(generate(3, budget=100)) == 100


def test_base_events_are_valid_and_every_type_on_every_topic():
    records = generate(0)
    bases = [r for r in records if r.note == "base"]
    assert sorted(r.topic_type for r in bases) == sorted(EVENT_TYPES)
    for base in bases:
        assert not isinstance(validate_event(base.raw, NOW, default_type=base.topic_type), Rejection), base.raw
    moved = {(json.loads(r.raw)["type"], r.topic_type) for r in records if r.note.startswith("on the ")}
    assert moved == {(a, b) for a in EVENT_TYPES for b in EVENT_TYPES if a != b}


def test_every_integer_field_meets_every_bound_and_width_in_every_spelling():
    records = generate(0)
    notes = {r.note for r in records}
    for event_type, schema in load_schemas().items():
        for name, field in schema["properties"].items():
            if field.get("type") == "integer" and "maximum" in field:
                for literal in (field["maximum"], field["maximum"] + 1, 2**31, 2**63, -(2**63) - 1, "1e3", "-0.0"):
                    assert f"{name}={literal}" in notes, (event_type, name, literal)


def test_the_records_meet_every_reason_and_many_stay_valid():
    verdicts = Counter()
    for record in generate(0):
        verdict = validate_event(record.raw, NOW, default_type=record.topic_type)
        verdicts[verdict.reason if isinstance(verdict, Rejection) else "valid"] += 1
    assert {
        "NOT_JSON",
        "NOT_AN_OBJECT",
        "UNKNOWN_TYPE",
        "UNKNOWN_SCHEMA_VERSION",
        "MISSING_FIELD",
        "WRONG_TYPE",
        "INVALID_VALUE",
        "NEGATIVE_LATENCY",
        "OVERSIZED",
        "FUTURE_TIMESTAMP",
        "valid",
    } <= set(verdicts)
    assert verdicts["valid"] > 200


def test_pattern_samples_match_their_pattern():
    import random

    rng = random.Random(1)
    for schema in load_schemas().values():
        for field in schema["properties"].values():
            if "pattern" in field:
                for _ in range(20):
                    assert re.search(field["pattern"], sample_pattern(field["pattern"], rng))


def test_older_versions_carry_the_newer_fields_which_their_rules_ignore():
    records = [r for r in generate(0) if r.note.startswith("version 1 with cluster=")]
    assert len(records) == 4 * len(EVENT_TYPES)
    for record in records:
        assert not isinstance(validate_event(record.raw, NOW, default_type=record.topic_type), Rejection), record.note
    broken = [r for r in generate(0) if r.note == "cluster as ''"]
    assert len(broken) == len(EVENT_TYPES)
    assert {validate_event(r.raw, NOW).reason for r in broken} == {"INVALID_VALUE"}  # type: ignore[union-attr]
