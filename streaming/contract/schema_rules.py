"""The contract's schema rules as Python predicates, in the order the job's compiler emits them.

Each rule of a schema (type, const, enum, bounds, lengths, pattern, required, item counts, items) becomes a
``Rule`` with the dead-letter reason and detail the job gives, evaluated on values read as Spark reads them.
``streaming.job.ingest.validation`` compiles the same schema files to SQL; the tests hold the two to each other.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache, partial
from typing import Any

from streaming.contract.events import REASON_OVERRIDES, Reason, schema
from streaming.contract.spark_json import TYPE_CHECKS, is_integer, is_number, spark_string

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
    return spark_string(value) != expected  # NULL-safe: a JSON null is not the constant either


def _not_in_enum(allowed: frozenset[str], value: Any) -> bool:
    text = spark_string(value)
    return text is not None and text not in allowed  # NULL IN (...) is not a violation in SQL


def _out_of_bound(bound: int | float, broken: Callable[[Any, Any], bool], value: Any) -> bool:
    # As the job: an integer against an integer bound exactly, any other number as a double.
    if not is_number(value):
        return False
    if is_integer(value) and is_integer(bound):
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
    """The rules of a present value, in ``streaming.job.ingest.validation``'s order, with its reasons and details.

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
        checks = tuple(TYPE_CHECKS[t] for t in wanted)
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
