"""Event validation in the JVM, compiled from the contract's JSON Schema files.

The contract (``streaming/contract/schemas``) is the single source of truth. Publishers validate with
``jsonschema`` in Python (``streaming.contract.events.validate_event``); the job cannot afford a Python
round trip per event, so this module compiles the same schemas into Spark SQL over Spark 4's VARIANT:
the raw value is parsed once with ``try_parse_json``; every rule is a SQL predicate on the variant; the
first failing rule names the dead-letter reason; fields are then extracted with ``variant_get``.

Supported JSON Schema keywords (the subset the contract uses): ``type`` (string, integer, number,
boolean, object, array, null, or a list of them), ``properties``, ``required``, ``enum``, ``const``,
``minimum``, ``maximum``, ``exclusiveMinimum``, ``exclusiveMaximum``, ``minLength``, ``maxLength``,
``pattern``, ``items``, ``minItems``, ``maxItems``. An unsupported keyword raises at start-up, so the two
validators cannot silently drift apart; a test also runs both over one corpus of good and bad events.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

_IGNORED_KEYWORDS = {"$schema", "$id", "title", "description", "examples", "default", "additionalProperties",
                     "$comment", "format", "x-reason", "x-dead-letter-reason"}  # fmt: skip
_SUPPORTED = {"type", "properties", "required", "enum", "const", "minimum", "maximum", "exclusiveMinimum",
              "exclusiveMaximum", "minLength", "maxLength", "pattern", "items", "minItems", "maxItems"}  # fmt: skip

_INTEGER_TYPES = "('BIGINT', 'INT', 'SMALLINT', 'TINYINT')"


class UnsupportedSchema(ValueError):
    """The contract uses a JSON Schema keyword this compiler does not translate."""


@dataclass(frozen=True)
class Rule:
    """A SQL predicate that is TRUE when the event breaks the rule."""

    violated_sql: str
    reason: str
    detail: str


def _sql_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _json_path(base: str, name: str) -> str:
    if name.isidentifier():
        return f"{base}.{name}"
    return f"{base}[{json.dumps(name)}]"


def _type_predicate(expr: str, types: list[str]) -> str:
    """SQL that is TRUE when the (non-null) variant ``expr`` has one of the JSON types."""
    kind = f"schema_of_variant({expr})"
    checks = []
    for json_type in types:
        if json_type == "string":
            checks.append(f"{kind} = 'STRING'")
        elif json_type == "integer":
            checks.append(f"({kind} IN {_INTEGER_TYPES} OR {kind} RLIKE '^DECIMAL\\\\([0-9]+,0\\\\)$')")
        elif json_type == "number":
            checks.append(f"({kind} IN {_INTEGER_TYPES} OR {kind} LIKE 'DECIMAL%' OR {kind} IN ('DOUBLE', 'FLOAT'))")
        elif json_type == "boolean":
            checks.append(f"{kind} = 'BOOLEAN'")
        elif json_type == "object":
            checks.append(f"{kind} LIKE 'OBJECT%'")
        elif json_type == "array":
            checks.append(f"{kind} LIKE 'ARRAY%'")
        elif json_type == "null":
            checks.append(f"is_variant_null({expr})")
        else:
            raise UnsupportedSchema(f"unknown JSON type {json_type!r}")
    return "(" + " OR ".join(checks) + ")"


class _Compiler:
    def __init__(self, reasons: Mapping[str, str]) -> None:
        self.reasons = reasons  # keyword or field-specific overrides, e.g. {"latency_ms.minimum": "NEGATIVE_LATENCY"}
        self.depth = 0

    def reason_for(self, field: str, keyword: str, default: str) -> str:
        return self.reasons.get(f"{field}.{keyword}", default)

    def rules(self, schema: Mapping[str, Any], expr: str, label: str) -> Iterator[Rule]:
        """Rules for a value that is present and not JSON null (callers guard presence)."""
        unknown = set(schema) - _SUPPORTED - _IGNORED_KEYWORDS
        if unknown:
            raise UnsupportedSchema(f"{label}: unsupported JSON Schema keywords {sorted(unknown)}")
        field = label.rsplit(".", 1)[-1].rstrip("[]")
        types = schema.get("type")
        if types is not None:
            types = [types] if isinstance(types, str) else list(types)
            yield Rule(f"NOT {_type_predicate(expr, types)}", "WRONG_TYPE", f"{label} must be {' or '.join(types)}")
        string_value = f"variant_get({expr}, '$', 'string')"
        number_value = f"variant_get({expr}, '$', 'double')"
        if "const" in schema:
            yield Rule(f"NOT ({string_value} <=> {_sql_string(str(schema['const']))})",
                       self.reason_for(field, "const", "INVALID_VALUE"),
                       f"{label} must be {schema['const']!r}")  # fmt: skip
        if "enum" in schema:
            allowed = ", ".join(_sql_string(str(v)) for v in schema["enum"])
            yield Rule(f"NOT ({string_value} IN ({allowed}))", self.reason_for(field, "enum", "INVALID_VALUE"),
                       f"{label} must be one of {', '.join(map(str, schema['enum']))}")  # fmt: skip
        for keyword, op in (("minimum", "<"), ("maximum", ">"), ("exclusiveMinimum", "<="), ("exclusiveMaximum", ">=")):
            if keyword in schema:
                yield Rule(f"{number_value} {op} {float(schema[keyword])!r}",
                           self.reason_for(field, keyword, "INVALID_VALUE"),
                           f"{label} must be {keyword} {schema[keyword]}")  # fmt: skip
        if "minLength" in schema:
            yield Rule(f"char_length({string_value}) < {int(schema['minLength'])}",
                       self.reason_for(field, "minLength", "INVALID_VALUE"),
                       f"{label} must have at least {schema['minLength']} characters")  # fmt: skip
        if "maxLength" in schema:
            yield Rule(f"char_length({string_value}) > {int(schema['maxLength'])}",
                       self.reason_for(field, "maxLength", "INVALID_VALUE"),
                       f"{label} must have at most {schema['maxLength']} characters")  # fmt: skip
        if "pattern" in schema:
            yield Rule(f"NOT ({string_value} RLIKE {_sql_string(schema['pattern'])})",
                       self.reason_for(field, "pattern", "INVALID_VALUE"),
                       f"{label} must match {schema['pattern']}")  # fmt: skip
        if "properties" in schema or "required" in schema:
            properties = schema.get("properties", {})
            for name in schema.get("required", []):
                child = f"variant_get({expr}, {_sql_string(_json_path('$', name))})"
                yield Rule(f"({child} IS NULL OR is_variant_null({child}))",
                           self.reason_for(name, "required", "MISSING_FIELD"),
                           f"missing field {label}.{name}")  # fmt: skip
            for name, child_schema in properties.items():
                child = f"variant_get({expr}, {_sql_string(_json_path('$', name))})"
                present = f"({child} IS NOT NULL AND NOT is_variant_null({child}))"
                if child_schema.get("type") == "null" or "null" in (child_schema.get("type") or []):
                    present = f"({child} IS NOT NULL)"
                for rule in self.rules(child_schema, child, f"{label}.{name}"):
                    yield Rule(f"({present} AND {rule.violated_sql})", rule.reason, rule.detail)
        if "minItems" in schema or "maxItems" in schema or "items" in schema:
            array = f"variant_get({expr}, '$', 'array<variant>')"
            if "minItems" in schema:
                yield Rule(f"array_size({array}) < {int(schema['minItems'])}",
                           self.reason_for(field, "minItems", "INVALID_VALUE"),
                           f"{label} must have at least {schema['minItems']} items")  # fmt: skip
            if "maxItems" in schema:
                yield Rule(f"array_size({array}) > {int(schema['maxItems'])}",
                           self.reason_for(field, "maxItems", "OVERSIZED"),
                           f"{label} must have at most {schema['maxItems']} items")  # fmt: skip
            if "items" in schema:
                self.depth += 1
                var = f"x{self.depth}"
                for rule in self.rules(schema["items"], var, f"{label}[]"):
                    # JSON null items count as present values: they fail the item's type rule.
                    yield Rule(f"exists({array}, {var} -> {var} IS NOT NULL AND {rule.violated_sql})",
                               rule.reason, rule.detail)  # fmt: skip
                self.depth -= 1


def compile_rules(schema: Mapping[str, Any], root: str = "v", reasons: Mapping[str, str] | None = None) -> list[Rule]:
    """All rules of one event schema, in evaluation order, over the variant column ``root``."""
    return list(_Compiler(reasons or {}).rules(schema, root, "$"))


def first_violation_sql(rules: list[Rule]) -> tuple[str, str]:
    """SQL for (reason, detail) of the first violated rule, NULL when the event is valid."""
    if not rules:
        return "CAST(NULL AS STRING)", "CAST(NULL AS STRING)"
    reason = "CASE " + " ".join(f"WHEN {r.violated_sql} THEN {_sql_string(r.reason)}" for r in rules) + " END"
    detail = "CASE " + " ".join(f"WHEN {r.violated_sql} THEN {_sql_string(r.detail)}" for r in rules) + " END"
    return reason, detail
