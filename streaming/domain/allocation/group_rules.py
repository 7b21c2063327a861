"""Group rules: the allocation settings configured for the consumer groups a rule names (``rules.name_matches``).

The first matching rule wins; design: ``docs/design/configuration.md``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from streaming.domain.allocation.strategies import MachineRoomResolver, RegexResolver, SplitResolver
from streaming.domain.rules import name_matches


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
