"""Hostile input: seeded mutations of contract events, built from the JSON Schema files alone.

The generator reads ``streaming/contract/schemas/*.json`` as plain JSON and never asks the validators what is
valid: a base event per type is drawn from each property's schema (types, enums, bounds, lengths, patterns,
sampled from the pattern's own parse tree), then every field is mutated -- numbers at and beyond every bound
and integer width, in every spelling (exponents, fractions, negative zero); every JSON type in every field;
Unicode edge cases and lengths at the limits; text before and after the object; duplicate keys; arrays at
and past their item limits; records at the size limit; and each type on every other type's topic.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

try:
    from re import _parser as sre_parse  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - Python before 3.11
    import sre_parse  # type: ignore[no-redef]

SCHEMAS = Path(__file__).parents[2] / "streaming" / "contract" / "schemas"
EVENT_TIME_BASE = 1_700_000_000_000
MAX_EVENT_BYTES = 65_536  # [ingest] max_event_bytes's default: the size mutations straddle it
# Kafka's default record limit (message.max.bytes, a producer's max.request.size) is 1 MiB: a larger record
# never reaches the job, so the generator leaves out the few (arrays past a maxItems of 10,000) that exceed it.
KAFKA_MAX_RECORD_BYTES = 1_000_000

Path_ = tuple[str | int, ...]


@dataclass(frozen=True)
class Hostile:
    """One record to publish: on the topic of ``topic_type``, the bytes ``raw``; ``note`` says what was done."""

    topic_type: str
    raw: bytes
    note: str


def load_schemas() -> dict[str, dict[str, Any]]:
    """Each event type's newest schema, read from the files (``<type>.v<n>.schema.json``)."""
    found: dict[str, tuple[int, dict[str, Any]]] = {}
    for path in sorted(SCHEMAS.glob("*.schema.json")):
        match = re.fullmatch(r"([a-z_]+)\.v([0-9]+)\.schema\.json", path.name)
        if match:
            version = int(match[2])
            if match[1] not in found or found[match[1]][0] < version:
                found[match[1]] = (version, json.loads(path.read_text(encoding="utf-8")))
    return {event_type: schema for event_type, (_, schema) in found.items()}


# -- drawing valid values from a schema ------------------------------------------------------------------


def _types(schema: Mapping[str, Any]) -> list[str]:
    declared = schema.get("type")
    if declared is None:
        return ["string"] if isinstance(schema.get("const"), str) else []
    return [declared] if isinstance(declared, str) else list(declared)


def sample_pattern(pattern: str, rng: random.Random, min_length: int = 1) -> str:
    """A string ``re.search(pattern, s)`` matches, sampled from the pattern's parse tree (lookarounds skipped)."""
    for _ in range(50):
        text = _sample_tree(sre_parse.parse(pattern), rng)
        if len(text) >= min_length and re.search(pattern, text):
            return text
    raise ValueError(f"could not sample {pattern!r}")


_NEGATED_POOL = "aZ0 -_.é日\U0001f600"
_CATEGORIES = {"CATEGORY_DIGIT": "0123456789", "CATEGORY_SPACE": " ", "CATEGORY_WORD": "abcXYZ_09"}


def _sample_tree(tree: Any, rng: random.Random) -> str:
    out = []
    for op, arg in tree:
        name = str(op)
        if name == "LITERAL":
            out.append(chr(arg))
        elif name == "IN":
            choices: list[str] = []
            for kind, value in arg:
                if str(kind) == "LITERAL":
                    choices.append(chr(value))
                elif str(kind) == "RANGE":
                    choices += [chr(c) for c in range(value[0], value[1] + 1)]
                elif str(kind) == "CATEGORY":
                    choices += list(_CATEGORIES.get(str(value), "a"))
            if any(str(kind) == "NEGATE" for kind, _ in arg):  # a negated class: what it leaves of a small pool
                choices = [c for c in _NEGATED_POOL if c not in choices]
            out.append(rng.choice(choices))
        elif name in ("MAX_REPEAT", "MIN_REPEAT"):
            low, high, sub = arg
            count = rng.randint(low, min(high, low + 6))
            out += [_sample_tree(sub, rng) for _ in range(count)]
        elif name == "SUBPATTERN":
            out.append(_sample_tree(arg[-1], rng))
        elif name == "BRANCH":
            out.append(_sample_tree(rng.choice(arg[1]), rng))
        elif name == "ANY":
            out.append("a")
        # AT (anchors) and ASSERT / ASSERT_NOT (lookarounds) produce nothing
    return "".join(out)


def valid_value(schema: Mapping[str, Any], rng: random.Random, unique: str) -> Any:
    """A value the schema accepts; ``unique`` seeds names so that records do not share groups or producers."""
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return rng.choice(schema["enum"])
    kinds = [t for t in _types(schema) if t != "null"]
    kind = kinds[0] if kinds else "string"
    if kind == "integer":
        low = int(schema.get("minimum", 0))
        high = int(schema.get("maximum", low + 1_000))
        return rng.randint(low, min(high, low + 1_000))
    if kind == "number":
        return float(schema.get("minimum", 0)) + 0.5
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "string":
        low = int(schema.get("minLength", 0))
        if "pattern" in schema:
            # A name or an address of this record's own where the pattern allows one, else a sample of it.
            own = [c for c in (unique, f"{unique}:4000") if re.search(schema["pattern"], c)]
            text = own[0] if own else sample_pattern(schema["pattern"], rng, max(low, 1))
        else:
            text = f"{unique}-{rng.randint(0, 99)}"
        return text[: int(schema.get("maxLength", len(text)))]
    if kind == "array":
        return [valid_value(schema["items"], rng, unique)]
    if kind == "object":
        return valid_object(schema, rng, unique, every_field=True)
    raise ValueError(f"no value for {schema}")


def valid_object(schema: Mapping[str, Any], rng: random.Random, unique: str, every_field: bool) -> dict[str, Any]:
    required = set(schema.get("required", ()))
    return {
        name: valid_value(child, rng, unique)
        for name, child in schema.get("properties", {}).items()
        if name in required or every_field or rng.random() < 0.5
    }


def unique_token(serial: int) -> str:
    """What a base event's names hold (a valid name and host): each record gets its own (``generate``)."""
    return f"N{serial}N"


def base_event(event_type: str, schema: Mapping[str, Any], rng: random.Random, serial: int) -> dict[str, Any]:
    """A valid event of the type: every field from its schema, names holding ``unique_token(serial)``."""
    event = valid_object(schema, rng, unique_token(serial), every_field=True)
    event["event_time"] = EVENT_TIME_BASE + serial
    if "kind" in event and "HEARTBEAT" in schema["properties"]["kind"].get("enum", ()):
        event["kind"] = "HEARTBEAT"
    return event


# -- mutations -------------------------------------------------------------------------------------------


def _fields(schema: Mapping[str, Any], event: Any, path: Path_ = ()) -> Iterator[tuple[Path_, Mapping[str, Any]]]:
    """Every (path, schema) of ``event``'s fields, nested ones through the first array item."""
    for name, child in schema.get("properties", {}).items():
        yield (*path, name), child
        value = event.get(name) if isinstance(event, dict) else None
        if "items" in child and isinstance(value, list) and value and isinstance(value[0], dict):
            yield from _fields(child["items"], value[0], (*path, name, 0))


def _set(event: dict[str, Any], path: Path_, value: Any) -> dict[str, Any]:
    copy = json.loads(json.dumps(event))
    node = copy
    for step in path[:-1]:
        node = node[step]
    if value is _REMOVE:
        node.pop(path[-1], None)
    else:
        node[path[-1]] = value
    return copy


_REMOVE = object()
_TOKEN = "\u0001LITERAL\u0001"


def _with_literal(event: dict[str, Any], path: Path_, literal: str) -> bytes:
    """The event as JSON with the field at ``path`` written as the raw JSON text ``literal``."""
    text = json.dumps(_set(event, path, _TOKEN), ensure_ascii=False)
    return text.replace(json.dumps(_TOKEN, ensure_ascii=False), literal, 1).encode()


def _number_literals(schema: Mapping[str, Any]) -> list[str]:
    """Numbers at and beyond every bound and width, in every spelling."""
    values = {
        0,
        1,
        -1,
        2**31 - 1,
        2**31,
        -(2**31) - 1,
        2**32,
        2**53,
        2**53 + 1,
        2**63 - 1,
        2**63,
        2**63 + 1,
        -(2**63),
        -(2**63) - 1,
        2**64,
        10**38 - 1,
        10**38,
        -(10**38),
        10**39,
    }
    for keyword in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        if keyword in schema:
            bound = int(schema[keyword])
            values |= {bound - 1, bound, bound + 1}
    literals = [str(v) for v in sorted(values)]
    literals += [
        "-0",
        "0.0",
        "-0.0",
        "1.0",
        "1.5",
        "1e3",
        "1E3",
        "1e-3",
        "1.0e2",
        "-1e0",
        "1e308",
        "1e400",
        "-1e400",
        "0.000000000000000000000000000000000000001",
        "12.000000000000000000000000000000000000000000",
        "9223372036854775807.0",
        "9223372036854775808.0",
        "4.9e-324",
        "00",
        "01",
        "+1",
        ".5",
        "1.",
        "0x10",
        "NaN",
        "Infinity",
        "-Infinity",
    ]
    return literals


_UNICODE = ["é", "\u0301", "\U0001f600", "\u202e", "\u2028", "\u00a0", "\u0000", "\ufeff", "\uffff", "日本"]
_ESCAPED = ['"\\ud800"', '"\\udc00"', '"\\ud83d\\ude00"', '"\\u0000"', '"a\\u0000b"', '"\\/"', '"\\x41"', '"\\u00"']


def mutations(
    event_type: str, schema: Mapping[str, Any], event: dict[str, Any], rng: random.Random, topic_types: list[str]
) -> Iterator[Hostile]:
    """Every mutation family for one base event (see the module docstring)."""
    plain = json.dumps(event).encode()
    yield Hostile(event_type, plain, "base")
    for path, field in _fields(schema, event):
        yield from _field_mutations(event_type, event, path, field, rng)
    yield from _versions(event_type, event)
    yield from _wrapped(event_type, plain)
    yield from _duplicate_keys(event_type, event, plain)
    yield from _sized_and_broken(event_type, event, plain)
    yield from _on_other_topics(event_type, event, plain, topic_types)


def _field_mutations(
    event_type: str, event: dict[str, Any], path: Path_, field: Mapping[str, Any], rng: random.Random
) -> Iterator[Hostile]:
    """One field's numbers, other JSON types, removal, text and array lengths."""
    label = ".".join(map(str, path))
    kinds = _types(field)
    if "integer" in kinds or "number" in kinds or any(k in field for k in ("minimum", "maximum")):
        for literal in _number_literals(field):
            yield Hostile(event_type, _with_literal(event, path, literal), f"{label}={literal}")
    for other in (None, True, False, 0, 1.5, "", "x", [], [None], {}, {"a": 1}):
        yield Hostile(event_type, json.dumps(_set(event, path, other)).encode(), f"{label} as {other!r}")
    yield Hostile(event_type, json.dumps(_set(event, path, _REMOVE)).encode(), f"{label} removed")
    if "string" in kinds:
        yield from _text_mutations(event_type, event, path, field, rng)
    if "array" in kinds and "items" in field and isinstance(_get(event, path), list):
        yield from _array_lengths(event_type, event, path, field)


def _text_mutations(
    event_type: str, event: dict[str, Any], path: Path_, field: Mapping[str, Any], rng: random.Random
) -> Iterator[Hostile]:
    """A string field's Unicode edge cases, lengths at its limits and raw escapes."""
    label = ".".join(map(str, path))
    low, high = int(field.get("minLength", 0)), int(field.get("maxLength", 300))
    char = rng.choice(_UNICODE)
    base_text = valid_value(field, rng, f"H{rng.randint(0, 10**6)}") if "pattern" in field else "s"
    for text in (
        char * high,
        char * (high + 1),
        "a" * max(low - 1, 0),
        base_text + char,
        char + base_text,
        base_text + "\n",
        " " + base_text,
        base_text.upper(),
    ):
        yield Hostile(
            event_type,
            json.dumps(_set(event, path, text), ensure_ascii=rng.random() < 0.5).encode(),
            f"{label} unicode {text[:8]!r}",
        )
    for literal in _ESCAPED:
        yield Hostile(event_type, _with_literal(event, path, literal), f"{label}={literal}")


def _array_lengths(event_type: str, event: dict[str, Any], path: Path_, field: Mapping[str, Any]) -> Iterator[Hostile]:
    """An array field empty, at its item limit and one past it."""
    label = ".".join(map(str, path))
    items = _get(event, path)
    limit = int(field.get("maxItems", 10))
    for count in (0, limit, limit + 1):
        filled = (items * (count // max(len(items), 1) + 1))[:count] if items else []
        yield Hostile(event_type, json.dumps(_set(event, path, filled)).encode(), f"{label} x{count}")


def _versions(event_type: str, event: dict[str, Any]) -> Iterator[Hostile]:
    """The base event as every older version, with its own and broken values of fields that version lacks (a
    version 1 event's ``cluster`` is an unknown field, so ignored)."""
    newest = event.get("schema_version")
    newer = [name for name in ("cluster",) if name in event]
    if not isinstance(newest, int) or not newer:
        return
    for version in range(1, newest):
        for name in newer:
            for value in (event[name], "", "a\u0001b", 5):
                changed = {**event, "schema_version": version, name: value}
                yield Hostile(event_type, json.dumps(changed).encode(), f"version {version} with {name}={value!r}")


def _wrapped(event_type: str, plain: bytes) -> Iterator[Hostile]:
    """The whole record with text before or after it."""
    text = plain.decode()
    for before, after in (
        ("", " trailing"),
        ("", "}"),
        ("", "{}"),
        ("", "\n"),
        ("", "\u0000"),
        ("", ' {"type": 1}'),
        (" \t\r\n", ""),
        ("\ufeff", ""),
        ("\u00a0", ""),
        ("[", "]"),
        ("x", ""),
        ("", ","),
    ):
        yield Hostile(event_type, (before + text + after).encode(), f"wrapped {before!r}...{after!r}")


def _duplicate_keys(event_type: str, event: dict[str, Any], plain: bytes) -> Iterator[Hostile]:
    """The first key written again at the end, with its own value, another and null."""
    text = plain.decode()
    first_key = next(iter(event))
    for duplicate in (json.dumps(event[first_key]), json.dumps("other"), "null"):
        yield Hostile(
            event_type, (text[:-1] + f", {json.dumps(first_key)}: {duplicate}}}").encode(), f"duplicate {first_key}"
        )


def _sized_and_broken(event_type: str, event: dict[str, Any], plain: bytes) -> Iterator[Hostile]:
    """Records at and one past the size limit, then empty, cut, re-encoded or invalid bytes."""
    text = plain.decode()
    padding = MAX_EVENT_BYTES - len(plain) - len(', "pad": ""')
    for extra in (padding, padding + 1):
        yield Hostile(event_type, json.dumps({**event, "pad": "p" * extra}).encode(), f"padded to {extra}")
    yield Hostile(event_type, b"", "empty value")
    yield Hostile(event_type, text.encode()[: len(plain) // 2], "cut in half")
    yield Hostile(event_type, text.encode("utf-16"), "UTF-16")
    yield Hostile(event_type, plain.replace(b'"', b"'"), "single quotes")
    yield Hostile(event_type, plain + b"\xff\xfe", "invalid UTF-8 after the object")
    yield Hostile(event_type, plain.replace(b"}", b"\xc3}", 1), "invalid UTF-8 inside")


def _on_other_topics(event_type: str, event: dict[str, Any], plain: bytes, topic_types: list[str]) -> Iterator[Hostile]:
    """The event, with and without its type, on every other type's topic."""
    for other in topic_types:
        if other != event_type:
            yield Hostile(other, plain, f"on the {other} topic")
            yield Hostile(
                other,
                json.dumps({k: v for k, v in event.items() if k != "type"}).encode(),
                f"without type on the {other} topic",
            )


def _get(event: Any, path: Path_) -> Any:
    node = event
    for step in path:
        node = node[step] if isinstance(node, (dict, list)) else None
    return node


def generate(seed: int, budget: int | None = None) -> list[Hostile]:
    """Seed ``seed``'s records, one base event per type and its mutations; ``budget`` keeps a sample of them
    (every family is sampled from, in the order generated)."""
    rng = random.Random(seed)
    schemas = load_schemas()
    topic_types = sorted(schemas)
    records: list[Hostile] = []
    for index, event_type in enumerate(topic_types):
        serial = seed * 10 + index
        event = base_event(event_type, schemas[event_type], rng, serial)
        token = unique_token(serial).encode()
        for number, record in enumerate(mutations(event_type, schemas[event_type], event, rng, topic_types)):
            # Each record's names its own (groups, producers, channels), so its effect can be told apart;
            # records sized to the byte keep their base's names.
            own = unique_token(serial * 100_000 + number).encode()
            raw = record.raw if record.note.startswith("padded") else record.raw.replace(token, own)
            if len(raw) <= KAFKA_MAX_RECORD_BYTES:
                records.append(Hostile(record.topic_type, raw, record.note))
    if budget is not None and budget < len(records):
        keep = sorted(rng.sample(range(len(records)), budget))
        records = [records[i] for i in keep]
    return records
