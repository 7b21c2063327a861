"""How a configured rule names groups: an exact name or a glob, the first matching rule winning.

A rule names groups by an exact name or a glob (``*``, ``?``, ``[seq]``, ``[!seq]``); the first matching rule
wins. ``glob_regex`` is the one translation of a rule's name: Python matches with it here and the JVM with
the same text in the send path, so both agree on every name. Design: ``docs/design/configuration.md``.
"""

from __future__ import annotations

import re
from functools import lru_cache


def _literal(char: str) -> str:
    """``char`` as a regex literal that Python's ``re`` and ``java.util.regex`` read alike."""
    return char if char.isalnum() else "\\" + char


def _char_class(body: str) -> str:
    """A glob's ``[...]`` body (without brackets) as a regex class; ``a-c`` is a range, one with its ends
    out of order matches nothing."""
    negated = body.startswith("!")
    chars = body[1:] if negated else body
    parts: list[str] = []
    i = 0
    while i < len(chars):
        if i + 2 < len(chars) and chars[i + 1] == "-":
            low, high = chars[i], chars[i + 2]
            if low <= high:
                parts.append(f"{_literal(low)}-{_literal(high)}")
            i += 3
        else:
            parts.append(_literal(chars[i]))
            i += 1
    if not parts:
        return "." if negated else "(?!)"
    return f"[{'^' if negated else ''}{''.join(parts)}]"


def _glob_body(pattern: str) -> str:
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        char = pattern[i]
        i += 1
        if char == "*":
            if not out or out[-1] != ".*":
                out.append(".*")
        elif char == "?":
            out.append(".")
        elif char == "[":
            j = i + 1 if i < n and pattern[i] == "!" else i
            j = j + 1 if j < n and pattern[j] == "]" else j
            while j < n and pattern[j] != "]":
                j += 1
            if j >= n:
                out.append(_literal("["))
            else:
                out.append(_char_class(pattern[i:j]))
                i = j + 1
        else:
            out.append(_literal(char))
    return "".join(out)


@lru_cache(maxsize=1024)
def glob_regex(pattern: str) -> str:
    """A regex, read alike by Python and the JVM (``rlike``), matching the whole of a name that equals
    ``pattern`` or matches it as a glob (``fnmatch.fnmatchcase``'s syntax, case-sensitive)."""
    exact = "".join(_literal(c) for c in pattern)
    return f"(?s)\\A(?:{exact}|{_glob_body(pattern)})(?!.)"


@lru_cache(maxsize=1024)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(glob_regex(pattern))


def name_matches(pattern: str, name: str) -> bool:
    """Whether a rule's ``pattern`` (exact name or glob) names ``name``: the one test of every rule."""
    return _compiled(pattern).match(name) is not None
