"""Event validation in the JVM, compiled from the contract's JSON Schema files.

The contract (``streaming/contract/schemas``) is the single source of truth. Publishers validate with
``jsonschema`` in Python (``streaming.contract.validator.validate_event``); the job cannot afford a Python
round trip per event, so this module compiles the same schemas into Spark SQL over Spark 4's VARIANT:
the raw value is parsed once with ``try_parse_json``; every rule is a SQL predicate on the variant; the
first failing rule names the dead-letter reason; fields are then extracted with ``variant_get``. Valid
events mostly skip all of that through the fast path at the end of this module.

Supported JSON Schema keywords (the subset the contract uses): ``type`` (string, integer, number,
boolean, object, array, null, or a list of them), ``properties``, ``required``, ``enum``, ``const``,
``minimum``, ``maximum``, ``exclusiveMinimum``, ``exclusiveMaximum``, ``minLength``, ``maxLength``,
``pattern``, ``items``, ``minItems``, ``maxItems``. An unsupported keyword raises at start-up, so the two
validators cannot silently drift apart; a test also runs both over one corpus of good and bad events.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from streaming.contract.events import IGNORED_KEYWORDS, SUPPORTED_KEYWORDS

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


def _out_of_bound_sql(expr: str, op: str, bound: int | float) -> str:
    """SQL that is TRUE when the number ``expr`` lies beyond ``bound`` by ``op``.

    An integer value meets an integer bound exactly, as DECIMAL(38,0) (every integer Spark keeps as one): a
    double would round 2^63 - 1 up to 2^63 and let 2^63 pass a ``maximum`` of 2^63 - 1. Other numbers
    compare as doubles."""
    as_double = f"try_variant_get({expr}, '$', 'double') {op} {float(bound)!r}"
    if isinstance(bound, bool) or not isinstance(bound, int) or len(str(abs(bound))) > 38:
        return as_double
    exact = f"try_variant_get({expr}, '$', 'decimal(38,0)') {op} CAST('{bound}' AS DECIMAL(38,0))"
    return f"(CASE WHEN {_type_predicate(expr, ['integer'])} THEN {exact} ELSE {as_double} END)"


class _Compiler:
    def __init__(self, reasons: Mapping[str, str]) -> None:
        self.reasons = reasons  # keyword or field-specific overrides, e.g. {"latency_ms.minimum": "NEGATIVE_LATENCY"}
        self.depth = 0

    def reason_for(self, field: str, keyword: str, default: str) -> str:
        return self.reasons.get(f"{field}.{keyword}", default)

    def rules(self, schema: Mapping[str, Any], expr: str, label: str) -> Iterator[Rule]:
        """Rules for a value that is present and not JSON null (callers guard presence)."""
        unknown = set(schema) - SUPPORTED_KEYWORDS - IGNORED_KEYWORDS
        if unknown:
            raise UnsupportedSchema(f"{label}: unsupported JSON Schema keywords {sorted(unknown)}")
        field = label.rsplit(".", 1)[-1].rstrip("[]")
        yield from self._value_rules(schema, expr, label, field)
        if "properties" in schema or "required" in schema:
            yield from self._object_rules(schema, expr, label)
        if "minItems" in schema or "maxItems" in schema or "items" in schema:
            yield from self._array_rules(schema, expr, label, field)

    def _value_rules(self, schema: Mapping[str, Any], expr: str, label: str, field: str) -> Iterator[Rule]:
        """Type, const, enum, bounds, lengths and pattern of the value itself."""
        types = schema.get("type")
        if types is not None:
            types = [types] if isinstance(types, str) else list(types)
            yield Rule(f"NOT {_type_predicate(expr, types)}", "WRONG_TYPE", f"{label} must be {' or '.join(types)}")
        string_value = f"variant_get({expr}, '$', 'string')"
        if "const" in schema:
            yield Rule(
                f"NOT ({string_value} <=> {_sql_string(str(schema['const']))})",
                self.reason_for(field, "const", "INVALID_VALUE"),
                f"{label} must be {schema['const']!r}",
            )
        if "enum" in schema:
            allowed = ", ".join(_sql_string(str(v)) for v in schema["enum"])
            yield Rule(
                f"NOT ({string_value} IN ({allowed}))",
                self.reason_for(field, "enum", "INVALID_VALUE"),
                f"{label} must be one of {', '.join(map(str, schema['enum']))}",
            )
        for keyword, op in (("minimum", "<"), ("maximum", ">"), ("exclusiveMinimum", "<="), ("exclusiveMaximum", ">=")):
            if keyword in schema:
                yield Rule(
                    _out_of_bound_sql(expr, op, schema[keyword]),
                    self.reason_for(field, keyword, "INVALID_VALUE"),
                    f"{label} must be {keyword} {schema[keyword]}",
                )
        if "minLength" in schema:
            yield Rule(
                f"char_length({string_value}) < {int(schema['minLength'])}",
                self.reason_for(field, "minLength", "INVALID_VALUE"),
                f"{label} must have at least {schema['minLength']} characters",
            )
        if "maxLength" in schema:
            yield Rule(
                f"char_length({string_value}) > {int(schema['maxLength'])}",
                self.reason_for(field, "maxLength", "INVALID_VALUE"),
                f"{label} must have at most {schema['maxLength']} characters",
            )
        if "pattern" in schema:
            yield Rule(
                f"NOT ({string_value} RLIKE {_sql_string(schema['pattern'])})",
                self.reason_for(field, "pattern", "INVALID_VALUE"),
                f"{label} must match {schema['pattern']}",
            )

    def _object_rules(self, schema: Mapping[str, Any], expr: str, label: str) -> Iterator[Rule]:
        """Required fields, then each present property's own rules."""
        properties = schema.get("properties", {})
        for name in schema.get("required", []):
            child = f"variant_get({expr}, {_sql_string(_json_path('$', name))})"
            yield Rule(
                f"({child} IS NULL OR is_variant_null({child}))",
                self.reason_for(name, "required", "MISSING_FIELD"),
                f"missing field {label}.{name}",
            )
        for name, child_schema in properties.items():
            child = f"variant_get({expr}, {_sql_string(_json_path('$', name))})"
            present = f"({child} IS NOT NULL AND NOT is_variant_null({child}))"
            if child_schema.get("type") == "null" or "null" in (child_schema.get("type") or []):
                present = f"({child} IS NOT NULL)"
            for rule in self.rules(child_schema, child, f"{label}.{name}"):
                yield Rule(f"({present} AND {rule.violated_sql})", rule.reason, rule.detail)

    def _array_rules(self, schema: Mapping[str, Any], expr: str, label: str, field: str) -> Iterator[Rule]:
        """Item counts, then each item's rules (any item breaking one breaks it)."""
        array = f"variant_get({expr}, '$', 'array<variant>')"
        if "minItems" in schema:
            yield Rule(
                f"array_size({array}) < {int(schema['minItems'])}",
                self.reason_for(field, "minItems", "INVALID_VALUE"),
                f"{label} must have at least {schema['minItems']} items",
            )
        if "maxItems" in schema:
            yield Rule(
                f"array_size({array}) > {int(schema['maxItems'])}",
                self.reason_for(field, "maxItems", "OVERSIZED"),
                f"{label} must have at most {schema['maxItems']} items",
            )
        if "items" in schema:
            self.depth += 1
            var = f"x{self.depth}"
            for rule in self.rules(schema["items"], var, f"{label}[]"):
                # JSON null items count as present values: they fail the item's type rule.
                yield Rule(
                    f"exists({array}, {var} -> {var} IS NOT NULL AND {rule.violated_sql})", rule.reason, rule.detail
                )
            self.depth -= 1


def compile_rules(schema: Mapping[str, Any], root: str = "v", reasons: Mapping[str, str] | None = None) -> list[Rule]:
    """All rules of one event schema, in evaluation order, over the variant column ``root``."""
    return list(_Compiler(reasons or {}).rules(schema, root, "$"))


def compile_versioned_rules(
    schemas: Mapping[int, Mapping[str, Any]], root: str, reasons: Mapping[str, str] | None, version_sql: str
) -> list[Rule]:
    """The rules of several versions of one event schema as one list: a rule every version has is kept as is,
    one that only some have is guarded by the record's version (``version_sql``, its Spark string), so each
    version's first violated rule is the one its own schema names first (as ``schema_rules.rules(t, version)``)."""
    compiled = {version: compile_rules(schema, root, reasons) for version, schema in sorted(schemas.items())}
    merged: list[Rule] = []
    holders: dict[Rule, set[int]] = {}
    for version, rules in compiled.items():
        keys = [r for r in merged]
        matcher = difflib.SequenceMatcher(a=keys, b=rules, autojunk=False)
        combined: list[Rule] = []
        for tag, a0, a1, b0, b1 in matcher.get_opcodes():
            if tag == "equal":
                combined.extend(keys[a0:a1])
            else:
                combined.extend(keys[a0:a1])
                combined.extend(r for r in rules[b0:b1] if r not in holders)
        for rule in rules:
            holders.setdefault(rule, set()).add(version)
        merged = combined
    for version, rules in compiled.items():  # each version's rules, in its own order, and no other version's
        if [r for r in merged if version in holders[r]] != rules:
            raise UnsupportedSchema(f"the versions' rules cannot be merged in order (version {version})")
    everyone = set(compiled)
    guarded = []
    for rule in merged:
        if holders[rule] == everyone:
            guarded.append(rule)
            continue
        versions = ", ".join(_sql_string(str(v)) for v in sorted(holders[rule]))
        guarded.append(Rule(f"({version_sql} IN ({versions}) AND {rule.violated_sql})", rule.reason, rule.detail))
    return guarded


def first_violation_sql(rules: list[Rule]) -> tuple[str, str]:
    """SQL for (reason, detail) of the first violated rule, NULL when the event is valid."""
    if not rules:
        return "CAST(NULL AS STRING)", "CAST(NULL AS STRING)"
    reason = "CASE " + " ".join(f"WHEN {r.violated_sql} THEN {_sql_string(r.reason)}" for r in rules) + " END"
    detail = "CASE " + " ".join(f"WHEN {r.violated_sql} THEN {_sql_string(r.detail)}" for r in rules) + " END"
    return reason, detail


# -- the fast path ---------------------------------------------------------------------------------------
#
# Walking every rule for every event costs a variant extraction and a type probe per rule and field:
# ~10x the price of parsing. Almost every event is valid, so the job first asks a cheaper question that
# can only say "valid" when the rules would. The JVM parses each record once, strictly, into the typed
# struct below and checks its values (``jvm/src/main/java/io/github/rrm/ingest/StrictEvents.java``): every
# field declared and of exactly its JSON type, and every value constraint (required, enums, ranges, lengths,
# patterns, cross-field rules) met, each check implying the rule it stands for; or the record is not taken.
# The checks travel to the JVM as the plain description ``FastPath.checks`` builds here. They ran as SQL on
# the typed struct before: their regexes, casts and ``forall`` lambdas cost more than the parse (a 500,000
# heartbeat batch: 2.7 s to classify, 1.3 s of it without the checks). Events the fast path does not take
# (unknown fields, ``1.0`` for an integer, any violation) go through the rules above, which name the reason.

_TYPED = {"string": "STRING", "integer": "BIGINT", "number": "DOUBLE", "boolean": "BOOLEAN"}


class _NoFastPath(Exception):
    """The schema uses something the fast path does not model (the rules alone then decide)."""


@dataclass(frozen=True)
class FastPath:
    """How to accept valid events cheaply: the typed struct the JVM fills, and the value checks it applies."""

    struct_ddl: str  # the typed fields, as StrictEvents and variant_get(v, '$', struct_ddl) extract them
    checks: Mapping[str, Any]  # the value constraints of the struct, as StrictEvents reads them (``_checks``)


def _json_types(schema: Mapping[str, Any]) -> tuple[str | None, bool]:
    """(the one non-null JSON type, whether null is allowed); a const-only string counts as string."""
    declared = schema.get("type")
    if declared is None:
        if isinstance(schema.get("const"), str):
            return "string", False
        raise _NoFastPath("untyped value")
    types = [declared] if isinstance(declared, str) else list(declared)
    nullable = "null" in types
    others = [t for t in types if t != "null"]
    if len(others) != 1:
        raise _NoFastPath(f"union type {types}")
    return others[0], nullable


def _struct_ddl(schema: Mapping[str, Any]) -> str:
    json_type, _ = _json_types(schema)
    if json_type in _TYPED:
        return _TYPED[json_type]
    if json_type == "array":
        if "items" not in schema:
            raise _NoFastPath("array without items")
        return f"ARRAY<{_struct_ddl(schema['items'])}>"
    if json_type == "object":
        if not schema.get("properties"):
            raise _NoFastPath("object without properties")
        fields = ", ".join(
            "`" + name.replace("`", "``") + f"`: {_struct_ddl(s)}" for name, s in schema["properties"].items()
        )
        return f"STRUCT<{fields}>"
    raise _NoFastPath(f"JSON type {json_type}")


def _checks(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The value constraints of a typed (non-null, rightly shaped) value, for StrictEvents to apply.

    Each mirrors the rule ``_Compiler`` emits for the same keyword, on the same value: ``const`` and ``enum``
    compare the value as Spark casts it to a string (``str`` of the schema's values, as the rules spell
    them); ranges compare it exactly (an integer bound travels as an integer); lengths count characters; a
    ``pattern`` must be found in the value (``RLIKE``). An object lists its ``required`` fields and the checks
    of its ``properties``; an array the checks of its ``items``. Only keys with something to check are present.
    """
    json_type, _ = _json_types(schema)
    checks: dict[str, Any] = {}
    if "const" in schema:
        checks["enum"] = [str(schema["const"])]
    if "enum" in schema:
        allowed = [str(v) for v in schema["enum"]]
        checks["enum"] = [v for v in allowed if v in checks["enum"]] if "enum" in checks else allowed
    for keyword in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        if keyword in schema:
            bound = schema[keyword]
            checks[keyword] = bound if isinstance(bound, int) and not isinstance(bound, bool) else float(bound)
    for keyword in ("minLength", "maxLength", "minItems", "maxItems"):
        applies = json_type == "array" if keyword.endswith("Items") else True
        if keyword in schema and applies:
            checks[keyword] = int(schema[keyword])
    if "pattern" in schema:
        checks["pattern"] = schema["pattern"]
    if json_type == "array":
        items = _checks(schema["items"])
        if items:
            checks["items"] = items
    if json_type == "object":
        properties = schema["properties"]
        required = list(schema.get("required", ()))
        undeclared = [name for name in required if name not in properties]
        if undeclared:
            raise _NoFastPath(f"required but not declared: {undeclared}")  # the struct could not hold them
        if required:
            checks["required"] = required
        fields = {name: inner for name, field_schema in properties.items() if (inner := _checks(field_schema))}
        if fields:
            checks["properties"] = fields
    return checks


def fast_path(schema: Mapping[str, Any], event_type: str | None = None) -> FastPath | None:
    """The fast acceptance test for one event schema (with ``event_type``'s cross-field rules, as
    ``required_when``), or None when the schema is beyond it."""
    from streaming.contract.events import CROSS_FIELD_RULES

    try:
        checks = _checks(schema)
        struct_ddl = _struct_ddl(schema)
    except _NoFastPath:
        return None
    rules = CROSS_FIELD_RULES.get(event_type, ()) if event_type else ()
    if rules:
        checks["required_when"] = [{"field": r.field, "when_field": r.when_field, "equals": r.equals} for r in rules]
    return FastPath(struct_ddl, checks)


def cross_field_rules(event_type: str, root: str = "v") -> list[Rule]:
    """The contract's cross-field rules (``events.CROSS_FIELD_RULES``), after the schema's rules."""
    from streaming.contract.events import CROSS_FIELD_RULES

    rules = []
    for rule in CROSS_FIELD_RULES.get(event_type, ()):
        child = f"variant_get({root}, {_sql_string(_json_path('$', rule.field))})"
        when = f"try_variant_get({root}, {_sql_string(_json_path('$', rule.when_field))}, 'string')"
        rules.append(
            Rule(
                f"({when} <=> {_sql_string(rule.equals)} AND ({child} IS NULL OR is_variant_null({child})))",
                rule.reason,
                rule.detail,
            )
        )
    return rules
