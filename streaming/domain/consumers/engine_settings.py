"""What the consumer engine reads from the configuration, built once per configuration.

``EngineSettings`` holds the expiry, the storm, flapping and convergence windows, the default strategy and
client line, and the per-group rules; ``strategy_factory`` turns a group's rule and what its clients report
into the strategy each client runs (``strategy_choice``), with where each of its parts came from.
"""

from __future__ import annotations

from dataclasses import dataclass

from streaming.domain.allocation.group_rules import GroupRule, group_rule_for
from streaming.domain.consumers.membership import DEFAULT_EXPIRY_MS
from streaming.domain.consumers.strategy_choice import StrategyChoice, choose_strategy
from streaming.domain.progress.verdict import DEFAULT_SETTINGS as DEFAULT_PROGRESS_SETTINGS
from streaming.domain.progress.verdict import ProgressSettings
from streaming.domain.versions import ClientLine
from streaming.domain.vocabulary import DEFAULT_CLUSTER


@dataclass(frozen=True)
class EngineSettings:
    """What the consumer engine reads; ``MonitorConfig.engine_settings`` builds it once per configuration."""

    default_strategy: str = "AVG"
    default_client_line: str = "5"
    expiry_ms: int = DEFAULT_EXPIRY_MS
    storm_window_ms: int = 300_000
    storm_threshold: int = 10
    group_rules: tuple[GroupRule, ...] = ()
    # The coalescing window: a group's changes closer than this (event time) are one rebalance, one generation
    # (``ShardEngine.cut_ms``) and one storm or flapping change per member and direction.
    storm_coalesce_ms: int = 1_000
    flapping_window_ms: int = 600_000
    flapping_threshold: int = 3
    # After a membership change clients rebalance within this (RocketMQ's 20 s wait; a CHANGE notification
    # is sooner); after a route change they first learn it at their next route poll (30 s).
    convergence_grace_ms: int = 20_000
    route_poll_interval_ms: int = 30_000
    # A client's reported assignment is evidence only if taken at least this long after the group's latest
    # generation (RocketMQ's rebalance waitInterval, 20 s: a client that missed the CHANGE notification rebalances
    # by then); older reports are kept, not compared (``observed``, docs/design/observed-ownership.md).
    client_rebalance_delay_ms: int = 20_000
    # Observed double-holding and unheld queues open an episode only once counted reports have shown them for this
    # long (a handoff seen half before and half after by two reports is not one).
    observed_grace_ms: int = 5_000
    progress: ProgressSettings = DEFAULT_PROGRESS_SETTINGS  # the consume-progress rule table's numbers
    # The cluster a state written before clusters were kept apart belongs to (``shard.Shard.restore``).
    default_cluster: str = DEFAULT_CLUSTER

    def rule_for(self, group: str) -> GroupRule | None:
        return group_rule_for(self.group_rules, group)

    def strategy_factory(self, group: str):  # type: ignore[no-untyped-def]
        rule = self.rule_for(group)
        default_line = ClientLine.parse(self.default_client_line)

        def build(reported_name: str | None, client_version: str | None) -> StrategyChoice:
            # What the clients report is what they run; the group's rule supplies what running info does not show.
            line = ClientLine.parse(client_version, default_line)
            return choose_strategy(group, reported_name, rule, self.default_strategy, line)

        return build
