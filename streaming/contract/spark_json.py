"""JSON as Spark reads it: the job's JSON reader, reproduced in Python for the contract's validator.

The job accepts or rejects events, so where Spark's reader differs from Python's ``json`` module (number
kinds, duplicate keys, NaN, trailing text, lone surrogates), the Python side follows Spark. Also renders
values as Spark's ``variant_get(..., 'string')`` does, which the rules compare with. Standard library
only. The rules, as measured: ``docs/design/event-validation.md``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

# Spark's VARIANT keeps integers of up to 38 digits exactly (DECIMAL(38,0)); longer ones become doubles.
_MAX_INTEGER_DIGITS = 38


class _Decimal(float):
    """A number written with a fraction and no exponent: Spark keeps it as a DECIMAL and prints it plainly
    (``0.000001``, not ``1e-06``); ``text`` is that rendering."""

    __slots__ = ("text",)
    text: str


def _parse_int(literal: str) -> int | float:
    digits = len(literal.lstrip("-"))
    return float(literal) if digits > _MAX_INTEGER_DIGITS else int(literal)


def _parse_float(literal: str) -> int | float:
    if "e" in literal or "E" in literal:
        return float(literal)  # an exponent makes it a DOUBLE, never an integer
    value = Decimal(literal)
    # Spark keeps the literal as a DECIMAL when its precision and scale, trailing zeros included, are at most
    # 38 (``VariantBuilder.tryParseDecimal``); else it reads a DOUBLE: 12. and 37 zeros is not an integer.
    _, written, scale = value.as_tuple()
    assert isinstance(scale, int)
    if len(written) > _MAX_INTEGER_DIGITS or -scale > _MAX_INTEGER_DIGITS:
        return float(literal)
    if value == value.to_integral_value():
        return int(value)  # 1.0 and -0.0: DECIMAL(p,0), an integer for the job
    normalized = value.normalize()
    number = _Decimal(literal)
    number.text = format(normalized, "f")
    return number


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        raise ValueError("duplicate key")
    return result


_DECODER = json.JSONDecoder(
    parse_int=_parse_int, parse_float=_parse_float, parse_constant=_reject_constant, object_pairs_hook=_unique_keys
)
_JSON_WHITESPACE = " \t\n\r"
# After a number or literal, these characters would have continued the token: "1x" is not JSON for Spark.
_TOKEN_CHARS = re.compile(r"[0-9A-Za-z.+\-]")


def try_parse_json(data: bytes) -> tuple[bool, Any]:
    """(parsed, value) for the first JSON value of ``data``, following Spark's ``try_parse_json``."""
    text = data.decode("utf-8", errors="replace").lstrip(_JSON_WHITESPACE)
    try:
        value, end = _DECODER.raw_decode(text)
    except ValueError:  # JSONDecodeError, duplicate keys, NaN/Infinity
        return False, None
    if not isinstance(value, dict | list | str) and _TOKEN_CHARS.match(text, end):
        return False, None
    if _holds_lone_surrogate(value):
        return False, None
    return True, value


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # json pairs escaped surrogates into one code point


def _holds_lone_surrogate(value: Any) -> bool:
    """Whether a string or key of the parsed value holds an unpaired surrogate (``"\\ud800"``), which
    Spark's parser refuses."""
    if isinstance(value, str):
        return _LONE_SURROGATE.search(value) is not None
    if isinstance(value, dict):
        return any(_holds_lone_surrogate(k) or _holds_lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_holds_lone_surrogate(v) for v in value)
    return False


def _java_double(value: float) -> str:
    """Java's ``Double.toString`` (what Spark prints for a DOUBLE)."""
    if value != value or value in (float("inf"), float("-inf")):
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    if value == 0:
        return "-0.0" if str(value).startswith("-") else "0.0"
    sign = "-" if value < 0 else ""
    shortest = Decimal(repr(abs(value)))
    if 1e-3 <= abs(value) < 1e7:
        plain = format(shortest, "f")
        return sign + (plain if "." in plain else plain + ".0")
    _, digits, exponent = shortest.normalize().as_tuple()
    if len(digits) == 1:
        # Java writes at least two digits, and picks the two closest to the exact value: 4.9E-324, not 5.0E-324.
        _, digits, exponent = Decimal(format(Decimal(abs(value)), ".1e")).as_tuple()
    assert isinstance(exponent, int)
    mantissa = "".join(map(str, digits))
    return f"{sign}{mantissa[0]}.{mantissa[1:] or '0'}E{exponent + len(mantissa) - 1}"


def _spark_json(value: Any) -> str:
    """JSON text of a value as Spark renders a VARIANT (object keys sorted, no ASCII escaping)."""
    if isinstance(value, dict):
        members = (f"{json.dumps(k, ensure_ascii=False)}:{_spark_json(v)}" for k, v in sorted(value.items()))
        return "{" + ",".join(members) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_spark_json(v) for v in value) + "]"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    rendered = spark_string(value)
    return "null" if rendered is None else rendered


def spark_string(value: Any) -> str | None:
    """``variant_get(value, '$', 'string')``: NULL for JSON null, the text of a string, JSON for the rest."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, _Decimal):
        return value.text
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _java_double(value)
    return _spark_json(value)


def is_integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if is_number(value):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


TYPE_CHECKS: Mapping[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": is_integer,
    "number": is_number,
    "boolean": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "null": lambda v: v is None,
}


def plain_python(value: Any) -> Any:
    """The parsed event with Spark's number kinds turned back into plain Python values."""
    if isinstance(value, dict):
        return {k: plain_python(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain_python(v) for v in value]
    if isinstance(value, _Decimal):
        return float(value)
    return value
