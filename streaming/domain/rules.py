"""Configured rules as the engines read them: which group rule and which fault table apply to a name.

A rule names groups by an exact name or a glob (``*``, ``?``, ``[seq]``, ``[!seq]``); the first matching rule
wins. ``glob_regex`` is the one translation of a rule's name: Python matches with it here and the JVM with
the same text in the send path, so both agree on every name. Design: ``docs/design/configuration.md``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache

from streaming.domain.allocation.strategies import MachineRoomResolver, RegexResolver, SplitResolver
from streaming.domain.errors import ConfigurationError
from streaming.domain.faults.tolerance import ROCKETMQ_4, ROCKETMQ_5, FaultTable


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


@dataclass(frozen=True)
class GroupRule:
    """Allocation settings for consumer groups whose name matches ``group`` (exact name or glob)."""

    group: str
    strategy: str | None = None
    virtual_node_count: int = 10
    consumer_idcs: tuple[str, ...] = ()
    machine_room_separator: str = "-"
    config_queues: tuple[tuple[str, str, int], ...] | None = None
    machine_room_regex: str | None = None  # MACHINE_ROOM_NEARBY: wins over machine_room_separator

    @property
    def resolver(self) -> MachineRoomResolver:
        if self.machine_room_regex is not None:
            return RegexResolver(self.machine_room_regex)
        return SplitResolver(self.machine_room_separator)


def group_rule_for(rules: Iterable[GroupRule], group: str) -> GroupRule | None:
    """The first rule naming consumer group ``group``: the one matcher of group rules."""
    return next((rule for rule in rules if name_matches(rule.group, group)), None)


@dataclass(frozen=True)
class ProducerRule:
    """Which fault table the producers of a group (exact name or glob), and optionally of a client line
    (``"4.9"`` or ``"5"``), use."""

    fault_table: str
    producer_group: str = "*"
    client_line: str | None = None

    @property
    def group_regex(self) -> str:
        """``producer_group`` as the regex the JVM matches (``glob_regex``)."""
        return glob_regex(self.producer_group)

    def matches(self, producer_group: str, client_line: str | None) -> bool:
        if not name_matches(self.producer_group, producer_group):
            return False
        return self.client_line is None or self.client_line == client_line


def producer_rule_for(
    rules: Iterable[ProducerRule], producer_group: str, client_line: str | None
) -> ProducerRule | None:
    """The first rule naming a producer of ``producer_group`` on ``client_line`` (None when the producer
    reported no version): the one matcher of producer rules."""
    return next((rule for rule in rules if rule.matches(producer_group, client_line)), None)


@dataclass(frozen=True)
class FaultSettings:
    """What the send path and the fault-window replay read: every fault table by name, the producer rules
    and the default table, and how long an idle pair is kept. Checked on construction."""

    tables: tuple[FaultTable, ...] = (ROCKETMQ_4, ROCKETMQ_5)
    default_table: str = ROCKETMQ_5.name
    rules: tuple[ProducerRule, ...] = (ProducerRule(ROCKETMQ_4.name, "*", "4.9"),)
    state_ttl_ms: int = 3_600_000
    start_detector_enable: bool = False
    send_latency_fault_enable: bool = False  # for producers whose send results do not say

    def __post_init__(self) -> None:
        names = [t.name for t in self.tables]
        if len(set(names)) != len(names):
            raise ConfigurationError(f"fault table names repeat: {names}")
        for name in [self.default_table, *(r.fault_table for r in self.rules)]:
            if name not in names:
                raise ConfigurationError(f"unknown fault table {name!r}; known: {sorted(names)}")

    def table(self, name: str) -> FaultTable:
        for table in self.tables:
            if table.name == name:
                return table
        raise ConfigurationError(f"unknown fault table {name!r}; known: {sorted(t.name for t in self.tables)}")

    def table_for(self, producer_group: str, client_line: str | None) -> FaultTable:
        """The table of a producer: its first matching rule's, else the default."""
        rule = producer_rule_for(self.rules, producer_group, client_line)
        return self.table(self.default_table if rule is None else rule.fault_table)

    @property
    def latency_floors_ms(self) -> Mapping[str, int]:
        """Per table, the smallest latency with a positive duration (2**62 for a table without one)."""
        return {t.name: (2**62 if t.latency_floor_ms is None else t.latency_floor_ms) for t in self.tables}
