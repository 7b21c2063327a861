"""Java semantics the RocketMQ client relies on, reproduced bit for bit.

* ``String.hashCode`` over UTF-16 code units with 32-bit wrap-around;
* ``String.compareTo`` order (UTF-16 code units, not code points);
* ``String.split(regex)`` with limit 0 (trailing empty strings dropped);
* ``java.util.Random`` (the 48-bit LCG) for ``SelectMessageQueueByRandom``;
* 32-bit ``int`` arithmetic for counters such as ``ThreadLocalIndex``.
"""

from __future__ import annotations

import re
from functools import lru_cache

INT_MIN = -(2**31)
INT_MAX = 2**31 - 1
_MASK_32 = 0xFFFFFFFF
_MASK_48 = (1 << 48) - 1
_LCG_MULTIPLIER = 0x5DEECE66D
_LCG_ADDEND = 0xB


def int32(value: int) -> int:
    """Wrap a Python int to Java ``int`` (two's complement, 32 bits)."""
    value &= _MASK_32
    return value - (1 << 32) if value > INT_MAX else value


def utf16_units(text: str) -> bytes:
    """The string as big-endian UTF-16 code units: comparing these bytes is Java's ``compareTo``."""
    return text.encode("utf-16-be", "surrogatepass")


def java_sort_key(text: str) -> bytes:
    """Sort key giving ``Collections.sort`` order for Strings."""
    return utf16_units(text)


def java_string_hash(text: str) -> int:
    """``String.hashCode``: ``h = 31*h + unit`` over UTF-16 code units, as a signed 32-bit int."""
    units = utf16_units(text)
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & _MASK_32
    return h - (1 << 32) if h > INT_MAX else h


@lru_cache(maxsize=64)
def _compiled(regex: str) -> re.Pattern[str]:
    return re.compile(regex)


def java_split(text: str, regex: str) -> list[str]:
    """``String.split(regex)`` (limit 0): like Java, a leading zero-width match yields no empty first
    element, and trailing empty strings are removed (``"a@b@".split("@") == ["a", "b"]``).

    Only regexes that mean the same in Python and Java are supported; RocketMQ uses literals (``"@"``,
    ``"-"``).
    """
    parts: list[str] = []
    start = 0
    for match in _compiled(regex).finditer(text):
        if match.end() == 0:
            continue  # Java 8+: no empty leading substring for a zero-width match at index 0
        parts.append(text[start : match.start()])
        start = match.end()
    if not parts:
        return [text]
    parts.append(text[start:])
    while parts and parts[-1] == "":
        parts.pop()
    return parts


class JavaRandom:
    """``java.util.Random`` with a known seed (the 48-bit linear congruential generator)."""

    def __init__(self, seed: int) -> None:
        self._seed = (seed ^ _LCG_MULTIPLIER) & _MASK_48

    def next_bits(self, bits: int) -> int:
        self._seed = (self._seed * _LCG_MULTIPLIER + _LCG_ADDEND) & _MASK_48
        return int32(self._seed >> (48 - bits))

    def next_int(self, bound: int | None = None) -> int:
        """``nextInt()`` without a bound, else ``nextInt(bound)`` with Java's rejection loop."""
        if bound is None:
            return self.next_bits(32)
        if bound <= 0:
            from streaming.domain.errors import IllegalArgument

            raise IllegalArgument("bound must be positive", bound=bound)
        if bound & -bound == bound:  # a power of two: take the high bits
            return int32((bound * self.next_bits(31)) >> 31)
        while True:
            bits = self.next_bits(31)
            value = bits % bound
            if bits - value + (bound - 1) <= INT_MAX:
                return value
