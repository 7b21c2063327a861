"""What the send path and the fault-window replay read: the fault tables, and which one a producer uses.

A producer rule names producer groups as every rule does (``rules.name_matches``; the JVM matches the same
``rules.glob_regex``); the first matching rule wins. Design: ``docs/design/configuration.md``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from streaming.domain.errors import ConfigurationError
from streaming.domain.faults.tolerance import ROCKETMQ_4, ROCKETMQ_5, FaultTable
from streaming.domain.rules import glob_regex, name_matches
from streaming.domain.vocabulary import DEFAULT_CLUSTER


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
    # The cluster a state written before clusters were kept apart belongs to (``shard.ClusterFaultShards``).
    default_cluster: str = DEFAULT_CLUSTER

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
