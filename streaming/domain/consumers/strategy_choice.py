"""Which strategy a group's clients run: the name they report, completed by the group's configured rule.

Running info shows a client's strategy class, never what it was built with: the inner strategy and resolver
of ``AllocateMachineRoomNearby`` (reported as the bare ``MACHINE_ROOM_NEARBY``), the rooms of ``MACHINE_ROOM``,
the list of ``CONFIG``, what a class of the application's own does. ``choose_strategy`` takes those from the
``[[allocation.groups]]`` rule, says where each part came from, and raises ``StrategyIncomplete`` (naming the
option that completes it) when no rule does. Design: ``docs/design/group-analysis.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from streaming.domain.allocation.group_rules import GroupRule
from streaming.domain.allocation.strategies import AllocationStrategy, strategy_from_name
from streaming.domain.errors import DomainError
from streaming.domain.queues import MessageQueue
from streaming.domain.versions import ClientLine

NEARBY = "MACHINE_ROOM_NEARBY"
NEARBY_PREFIX = NEARBY + "-"
BUILT_IN = frozenset({"AVG", "AVG_BY_CIRCLE", "CONSISTENT_HASH", "CONFIG", "MACHINE_ROOM"})
REPORTED = "reported"
DEFAULT = "default"


class StrategyIncomplete(DomainError):
    """The clients' strategy needs a part the collector cannot see and no configured rule supplies."""

    java_exception = "StrategyIncomplete"

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class StrategyChoice:
    """The strategy a group's clients run, and per part (``strategy``, ``inner``, ``resolver``,
    ``consumer_idcs``, ``config_queues``, ``virtual_node_count``) where it came from: ``reported`` (the
    clients' running info), ``rule '<group pattern>'`` with the option, or ``default``."""

    strategy: AllocationStrategy
    sources: Mapping[str, str] = field(default_factory=dict)


def is_built_in(name: str) -> bool:
    """Whether the monitor can compute ``name`` given its parameters (``MACHINE_ROOM_NEARBY-<built-in>`` too)."""
    while name.startswith(NEARBY_PREFIX):
        name = name[len(NEARBY_PREFIX) :]
    return name in BUILT_IN


def _rule_label(rule: GroupRule) -> str:
    return f"rule {rule.group!r}"


def choose_strategy(
    group: str,
    reported: str | None,
    rule: GroupRule | None,
    default_strategy: str,
    line: ClientLine,
) -> StrategyChoice:
    """The strategy of ``group``'s clients: ``reported`` (what most of them report, None if none does) with the
    parameters of ``rule`` (the group's first matching ``[[allocation.groups]]`` rule, None if none)."""
    configured = rule.strategy if rule is not None else None
    if reported is None:
        name = configured or default_strategy
        sources = {"strategy": _rule_label(rule) if configured and rule else DEFAULT}
    elif reported == NEARBY:
        if not (rule is not None and configured and configured.startswith(NEARBY_PREFIX)):
            raise StrategyIncomplete(
                f"the clients of {group} report {NEARBY}, whose inner strategy and machine-room resolver running "
                f'info does not show: set strategy = "{NEARBY_PREFIX}<inner>" and machine_room_regex (or '
                "machine_room_separator) in an [[allocation.groups]] rule for the group"
            )
        name = configured
        sources = {"strategy": REPORTED, "inner": f"{_rule_label(rule)} strategy {configured!r}"}
    elif is_built_in(reported):
        name = reported
        sources = {"strategy": REPORTED}
    else:
        if not (rule is not None and configured):
            raise StrategyIncomplete(
                f"the clients of {group} report {reported!r}, a strategy of the application's own: set strategy in "
                "an [[allocation.groups]] rule for the group to the built-in strategy it allocates like"
            )
        name = configured
        sources = {"strategy": f"{_rule_label(rule)} (the clients report {reported!r})"}
    sources.update(_parameters(group, name, rule))
    queues = None
    if rule is not None and rule.config_queues is not None:
        queues = [MessageQueue(t, b, int(q)) for t, b, q in rule.config_queues]
    strategy = strategy_from_name(
        name,
        virtual_node_count=rule.virtual_node_count if rule is not None else 10,
        consumer_idcs=rule.consumer_idcs if rule is not None else (),
        config_queues=queues,
        resolver=rule.resolver if rule is not None else None,
        line=line,
    )
    return StrategyChoice(strategy, sources)


def _parameters(group: str, name: str, rule: GroupRule | None) -> dict[str, str]:
    """Where each parameter ``name`` needs comes from; ``StrategyIncomplete`` for one nothing supplies."""
    sources: dict[str, str] = {}
    label = _rule_label(rule) if rule is not None else DEFAULT
    inner = name
    if name.startswith(NEARBY_PREFIX):
        if rule is None:
            sources["resolver"] = f"{DEFAULT}: machine_room_separator '-'"
        elif rule.machine_room_regex is not None:
            sources["resolver"] = f"{label}: machine_room_regex {rule.machine_room_regex!r}"
        else:
            sources["resolver"] = f"{label}: machine_room_separator {rule.machine_room_separator!r}"
        while inner.startswith(NEARBY_PREFIX):
            inner = inner[len(NEARBY_PREFIX) :]
    if inner == "CONFIG":
        if rule is None or rule.config_queues is None:
            raise StrategyIncomplete(
                f"{group} allocates with CONFIG, whose queue list running info does not show: set config_queues in "
                "an [[allocation.groups]] rule for the group (a client without a list takes no queue)"
            )
        sources["config_queues"] = label
    elif inner == "MACHINE_ROOM":
        if rule is None or not rule.consumer_idcs:
            raise StrategyIncomplete(
                f"{group} allocates with MACHINE_ROOM, whose rooms running info does not show: set consumer_idcs in "
                "an [[allocation.groups]] rule for the group (a client without rooms takes no queue)"
            )
        sources["consumer_idcs"] = label
    elif inner == "CONSISTENT_HASH":
        sources["virtual_node_count"] = label
    return sources
