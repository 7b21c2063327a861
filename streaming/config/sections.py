"""The configuration tree: one frozen dataclass per section of ``conf/monitor.toml`` and ``MonitorConfig``,
which builds the engines' settings once (``docs/design/configuration.md``)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property
from types import MappingProxyType
from typing import Any

from streaming.config.formats import (
    _BOOTSTRAP,
    _IDENTIFIER,
    _KAFKA_TOPIC,
    _MASTER,
    _MEMORY,
    CLIENT_LINES,
    SEMANTICS,
    Options,
    _check_interval,
    _check_regex,
    _check_strategy,
    _matches,
    _not_blank,
    _opt,
    _sub,
    interval_ms,
)
from streaming.contract.events import (
    DEFAULT_CLUSTER,
    DEFAULT_MAX_EVENT_BYTES,
    DEFAULT_MAX_FUTURE_SKEW_MS,
    DEFAULT_TOPICS,
    EVENT_TYPES,
    TOPIC_OPTIONS,
    EventType,
    cluster_name_problem,
)
from streaming.domain.allocation.group_rules import GroupRule, group_rule_for
from streaming.domain.consumers.engine_settings import EngineSettings
from streaming.domain.faults.settings import FaultSettings, ProducerRule, producer_rule_for
from streaming.domain.faults.tolerance import PRESETS, FaultSemantics, FaultTable
from streaming.domain.progress.verdict import DEFAULT_SETTINGS as DEFAULT_PROGRESS_SETTINGS

# The domain's settings are where the defaults of what they hold are written; the sections below take them from
# there, so conf/monitor.toml, these classes and what the domain receives cannot drift (tests/unit/test_config.py).
_ENGINE = EngineSettings()
_FAULTS = FaultSettings()
_PROGRESS = DEFAULT_PROGRESS_SETTINGS

# -- the configuration tree -------------------------------------------------------------------------------


def _topic(event_type: EventType) -> Any:
    return _opt(DEFAULT_TOPICS[event_type], check=_matches(_KAFKA_TOPIC, "a Kafka topic name"))


@dataclass(frozen=True)
class KafkaTopics:
    """The Kafka topic of each event type (several types may share one: events carry ``type``); one option per
    ``TOPIC_OPTIONS`` value, named after its event type (a poll rides on the channel events' topic)."""

    consumer_channel: str = _topic(EventType.CONSUMER_CHANNEL)
    reported_assignment: str = _topic(EventType.REPORTED_ASSIGNMENT)
    topic_route: str = _topic(EventType.TOPIC_ROUTE)
    send_result: str = _topic(EventType.SEND_RESULT)
    consume_progress: str = _topic(EventType.CONSUME_PROGRESS)

    def of(self, event_type: EventType) -> str:
        """The topic ``event_type`` is read from and published to."""
        topic: str = getattr(self, TOPIC_OPTIONS[event_type])
        return topic

    def by_type(self) -> dict[EventType, str]:
        """Every event type's topic."""
        return {t: self.of(t) for t in EVENT_TYPES}


# Options the Kafka source must not receive: Spark manages them itself (it fails on these) or this file has a
# dedicated option for them.
_KAFKA_FORBIDDEN = {
    "bootstrap.servers": "set [kafka] bootstrap_servers instead",
    "auto.offset.reset": "set [kafka] starting_offsets instead",
    "enable.auto.commit": "Spark tracks offsets in its checkpoint",
    "key.deserializer": "Spark reads keys and values as bytes",
    "value.deserializer": "Spark reads keys and values as bytes",
    "interceptor.classes": "Spark's Kafka source does not support interceptors",
}
_SPARK_DEDICATED = {
    "spark.master": "master",
    "spark.app.name": "app_name",
    "spark.sql.shuffle.partitions": "shuffle_partitions",
    "spark.driver.memory": "driver_memory",
    "spark.ui.enabled": "ui_enabled",
    "spark.sql.streaming.stateStore.rocksdb.maxMemoryUsageMB": "rocksdb_max_memory_mb",
}


@dataclass(frozen=True)
class KafkaConfig:
    bootstrap_servers: str = _opt("127.0.0.1:9092", check=_matches(_BOOTSTRAP, "a comma-separated list of host:port"))
    starting_offsets: str = _opt("earliest", choices=("earliest", "latest"))
    max_offsets_per_trigger: int = _opt(500_000, low=0)
    batch_planning: str = _opt("event_time", choices=("event_time", "records"))
    fail_on_data_loss: bool = _opt(False)
    topics: KafkaTopics = _sub(KafkaTopics)
    options: Options = _opt(factory=Options, parse="kafka_options")


@dataclass(frozen=True)
class SparkConfig:
    master: str = _opt(
        "local[2]", check=_matches(_MASTER, "local[N], local-cluster[N,C,M], spark://, k8s://, mesos:// or yarn")
    )
    app_name: str = _opt("rocketmq-rebalance-monitor", check=_not_blank)
    shuffle_partitions: int = _opt(4, low=1, high=10_000)
    driver_memory: str = _opt("2g", check=_matches(_MEMORY, 'a JVM memory size such as "2g" or "512m"'))
    trigger_interval: str = _opt("2 seconds", check=_check_interval)
    stop_grace_seconds: int = _opt(20, low=0, high=3_600)
    ui_enabled: bool = _opt(False)
    rocksdb_max_memory_mb: int = _opt(256, low=16, high=1_048_576)
    checkpoint_file_manager: str = _opt("auto", choices=("auto", "spark"))
    conf: Options = _opt(factory=Options, parse="spark_conf")

    @property
    def trigger_interval_ms(self) -> int:
        return interval_ms(self.trigger_interval)


@dataclass(frozen=True)
class SupervisionConfig:
    restart_backoff_initial_seconds: int = _opt(1, low=1, high=3_600)
    restart_backoff_max_seconds: int = _opt(60, low=1, high=86_400)
    max_consecutive_failures: int = _opt(10, low=1, high=1_000_000)


@dataclass(frozen=True)
class PathsConfig:
    delta_root: str = _opt(".run/delta", check=_not_blank)
    checkpoint_root: str = _opt(".run/checkpoints", check=_not_blank)


@dataclass(frozen=True)
class StorageConfig:
    """How an object-store ``[paths]`` root (``s3a://bucket/...``) is reached, by Spark and by the JVM-free readers."""

    endpoint: str = _opt("")  # empty: AWS's own endpoint of the region
    region: str = _opt("us-east-1", check=_not_blank)
    path_style_access: bool = _opt(False)
    allow_http: bool = _opt(False)
    access_key: str = field(default="", repr=False)  # secrets: never in a repr; empty: AWS's default chain
    secret_key: str = field(default="", repr=False)


@dataclass(frozen=True)
class IngestConfig:
    max_event_bytes: int = _opt(DEFAULT_MAX_EVENT_BYTES, low=1_024, high=16_777_216)
    max_future_skew_ms: int = _opt(DEFAULT_MAX_FUTURE_SKEW_MS, low=0, high=86_400_000)
    watermark_delay: str = _opt("2 minutes", check=_check_interval)
    default_cluster: str = _opt(DEFAULT_CLUSTER, check=cluster_name_problem)

    @property
    def watermark_delay_ms(self) -> int:
        return interval_ms(self.watermark_delay)


@dataclass(frozen=True)
class MembershipConfig:
    channel_expiry_ms: int = _opt(_ENGINE.expiry_ms, low=1_000, high=86_400_000)
    convergence_grace_ms: int = _opt(_ENGINE.convergence_grace_ms, low=0, high=3_600_000)
    route_poll_interval_ms: int = _opt(_ENGINE.route_poll_interval_ms, low=0, high=3_600_000)
    client_rebalance_delay_ms: int = _opt(_ENGINE.client_rebalance_delay_ms, low=0, high=3_600_000)
    observed_grace_ms: int = _opt(_ENGINE.observed_grace_ms, low=0, high=3_600_000)
    shards: int = _opt(8, low=1, high=4_096)


@dataclass(frozen=True)
class ProgressConfig:
    """The consume-progress rule table's numbers (``ProgressSettings``; docs/design/consume-progress.md)."""

    sample_interval_ms: int = _opt(_PROGRESS.sample_interval_ms, low=1_000, high=3_600_000)
    window: int = _opt(_PROGRESS.window, low=2, high=1_000)
    allowed_lag: int = _opt(_PROGRESS.allowed_lag, low=0, high=1_000_000_000)
    orphan_samples: int = _opt(_PROGRESS.orphan_samples, low=1, high=1_000)
    double_owned_samples: int = _opt(_PROGRESS.double_owned_samples, low=1, high=1_000)
    slow_time_lag_s: int = _opt(int(_PROGRESS.slow_time_lag_s), low=0, high=86_400)


@dataclass(frozen=True)
class AnomaliesConfig:
    storm_window_ms: int = _opt(_ENGINE.storm_window_ms, low=1_000, high=86_400_000)
    storm_threshold: int = _opt(_ENGINE.storm_threshold, low=1, high=1_000_000)
    storm_coalesce_ms: int = _opt(_ENGINE.storm_coalesce_ms, low=0, high=60_000)
    flapping_window_ms: int = _opt(_ENGINE.flapping_window_ms, low=1_000, high=86_400_000)
    flapping_threshold: int = _opt(_ENGINE.flapping_threshold, low=1, high=1_000_000)


@dataclass(frozen=True)
class StrategyParams:
    """A group's strategy parameters: what cannot be seen from outside the client."""

    virtual_node_count: int = 10
    consumer_idcs: tuple[str, ...] = ()
    machine_room_separator: str = "-"
    machine_room_regex: str | None = None
    config_queues: tuple[tuple[str, str, int], ...] | None = None


@dataclass(frozen=True)
class GroupAllocationConfig:
    """Allocation settings for the groups whose name matches ``group`` (exact name or glob)."""

    group: str = _opt(check=_not_blank)
    strategy: str | None = _opt(None, check=_check_strategy)
    virtual_node_count: int = _opt(10, low=0, high=100_000)
    consumer_idcs: tuple[str, ...] = _opt((), item_check=_not_blank)
    machine_room_separator: str = _opt("-", check=lambda v: None if v else "must not be empty")
    machine_room_regex: str | None = _opt(None, check=_check_regex)
    config_queues: tuple[tuple[str, str, int], ...] | None = _opt(None, parse="config_queues")

    @property
    def rule(self) -> GroupRule:
        """This rule as the engine reads it."""
        return GroupRule(
            self.group,
            self.strategy,
            self.virtual_node_count,
            self.consumer_idcs,
            self.machine_room_separator,
            self.config_queues,
            self.machine_room_regex,
        )


@dataclass(frozen=True)
class AllocationConfig:
    default_strategy: str = _opt(_ENGINE.default_strategy, check=_check_strategy)
    default_client_line: str = _opt(_ENGINE.default_client_line, choices=CLIENT_LINES)
    groups: tuple[GroupAllocationConfig, ...] = _opt(())

    @cached_property
    def rules(self) -> tuple[GroupRule, ...]:
        """The ``[[allocation.groups]]`` rules as the engine reads them, built once."""
        return tuple(g.rule for g in self.groups)

    def strategy_for_group(self, group: str) -> tuple[str, StrategyParams]:
        """The strategy the monitor assumes for ``group`` when its clients report none, and its parameters.

        First matching rule wins (``rules.group_rule_for``, the engine's matcher); a rule without ``strategy``
        contributes parameters only. What clients report (``allocate_strategy``) takes precedence over the
        name, since it is what they run; the parameters always come from here.
        """
        rule = group_rule_for(self.rules, group)
        if rule is None:
            return self.default_strategy, StrategyParams()
        params = StrategyParams(
            rule.virtual_node_count,
            rule.consumer_idcs,
            rule.machine_room_separator,
            rule.machine_room_regex,
            rule.config_queues,
        )
        return rule.strategy or self.default_strategy, params


@dataclass(frozen=True)
class ProducerRuleConfig:
    """Which fault table the producers of a group glob (and optionally a client line) use."""

    fault_table: str = _opt(check=_not_blank)
    producer_group: str = _opt("*", check=_not_blank)
    client_line: str | None = _opt(None, choices=CLIENT_LINES)

    @property
    def rule(self) -> ProducerRule:
        """This rule as the send path and the fault engine read it."""
        return ProducerRule(self.fault_table, self.producer_group, self.client_line)


@dataclass(frozen=True)
class FaultTableConfig:
    """``latencyMax`` -> ``notAvailableDuration`` (ms, paired by position), the latency an isolation feeds
    into it, and how updates move a window's end (``overwrite`` = 4.x, ``extend`` = 5.x)."""

    latency_max_ms: tuple[int, ...] = _opt(item_low=0)
    not_available_duration_ms: tuple[int, ...] = _opt(item_low=0)
    isolation_latency_ms: int = _opt(low=0)
    semantics: str = _opt(choices=(*SEMANTICS, "extend-only"))

    def table(self, name: str) -> FaultTable:
        """This table as the engines read it, named ``name``."""
        semantics = FaultSemantics.OVERWRITE if self.semantics == "overwrite" else FaultSemantics.EXTEND_ONLY
        return FaultTable(
            name, self.latency_max_ms, self.not_available_duration_ms, self.isolation_latency_ms, semantics
        )


PRESET_FAULT_TABLES: Mapping[str, FaultTableConfig] = MappingProxyType(
    {
        name: FaultTableConfig(
            t.latency_max_ms,
            t.not_available_duration_ms,
            t.isolation_latency_ms,
            "overwrite" if t.semantics is FaultSemantics.OVERWRITE else "extend",
        )
        for name, t in PRESETS.items()
    }
)


@dataclass(frozen=True)
class ProducersConfig:
    default_fault_table: str = _opt(_FAULTS.default_table, check=_not_blank)
    rules: tuple[ProducerRuleConfig, ...] = _opt(
        tuple(ProducerRuleConfig(r.fault_table, r.producer_group, r.client_line) for r in _FAULTS.rules)
    )
    fault_tables: Mapping[str, FaultTableConfig] = _opt(factory=lambda: MappingProxyType({}))
    state_ttl_ms: int = _opt(_FAULTS.state_ttl_ms, low=1_000, high=30 * 86_400_000)
    state_shards: int = _opt(8, low=1, high=4_096)
    send_latency_fault_enable: bool = _opt(_FAULTS.send_latency_fault_enable)
    start_detector_enable: bool = _opt(_FAULTS.start_detector_enable)


@dataclass(frozen=True)
class MetricsConfig:
    enabled: bool = _opt(True)
    host: str = _opt("127.0.0.1", check=_not_blank)
    port: int = _opt(9464, low=1, high=65_535)
    label_value_cap: int = _opt(10_000, low=1, high=1_000_000)


@dataclass(frozen=True)
class DeltaConfig:
    app_id_prefix: str = _opt("rrm", check=_matches(_IDENTIFIER, "1-64 letters, digits, '.', '_' or '-'"))
    checkpoint_interval: int = _opt(10, low=1, high=1_000)
    append_checkpoint_interval: int = _opt(100, low=1, high=1_000)
    auto_compact: bool = _opt(True)
    deleted_file_retention_hours: int = _opt(168, low=1, high=87_600)
    log_retention_hours: int = _opt(168, low=24, high=87_600)


_NAMESRV = re.compile(r"^\s*[A-Za-z0-9._-]+:[0-9]{1,5}(?:\s*;\s*[A-Za-z0-9._-]+:[0-9]{1,5})*\s*$")


@dataclass(frozen=True)
class CollectorConfig:
    """``rebalance-monitor collect``: the RocketMQ cluster it watches and how often (docs/collector.md)."""

    namesrv_addr: str = _opt("127.0.0.1:9876", check=_matches(_NAMESRV, "host:port[;host:port...]"))
    collector_id: str = _opt("")
    # Empty: the collector names the broker cluster of its cluster info (docs/collector.md, Cluster name).
    cluster: str = _opt("", check=lambda name: cluster_name_problem(name) if name else None)
    poll_interval_ms: int = _opt(10_000, low=500, high=3_600_000)
    stale_after_ms: int = _opt(0, low=0, high=86_400_000)
    running_info_interval_ms: int = _opt(60_000, low=0, high=86_400_000)
    running_info_after_change_ms: int = _opt(22_000, low=0, high=3_600_000)
    running_info_after_change_groups: int = _opt(50, low=1, high=100_000)
    route_republish_interval_ms: int = _opt(300_000, low=0, high=86_400_000)
    admin_timeout_ms: int = _opt(3_000, low=100, high=60_000)
    concurrency: int = _opt(8, low=1, high=256)
    in_flight_per_broker: int = _opt(8, low=1, high=256)
    running_info_per_cycle: int = _opt(2_000, low=1, high=1_000_000)
    include_groups: tuple[str, ...] = _opt(("*",), item_check=_not_blank)
    exclude_groups: tuple[str, ...] = _opt((), item_check=_not_blank)
    shard_index: int = _opt(0, low=0, high=1_023)
    shard_count: int = _opt(1, low=1, high=1_024)
    access_key: str = field(default="", repr=False)  # secrets: never in a repr
    secret_key: str = field(default="", repr=False)
    metrics_host: str = _opt("127.0.0.1", check=_not_blank)
    metrics_port: int = _opt(9465, low=0, high=65_535)
    summary_interval_ms: int = _opt(60_000, low=1_000, high=86_400_000)
    progress_interval_ms: int = _opt(30_000, low=0, high=3_600_000)
    progress_in_flight_per_broker: int = _opt(8, low=1, high=64)
    progress_min_offset_every: int = _opt(10, low=0, high=10_000)
    heap: str = _opt("256m", check=_matches(_MEMORY, 'a JVM memory size such as "256m"'))

    @property
    def effective_stale_after_ms(self) -> int:
        """``stale_after_ms``, or three poll intervals when it is 0."""
        return self.stale_after_ms or 3 * self.poll_interval_ms


@dataclass(frozen=True)
class MonitorConfig:
    kafka: KafkaConfig = _sub(KafkaConfig)
    spark: SparkConfig = _sub(SparkConfig)
    supervision: SupervisionConfig = _sub(SupervisionConfig)
    paths: PathsConfig = _sub(PathsConfig)
    storage: StorageConfig = _sub(StorageConfig)
    ingest: IngestConfig = _sub(IngestConfig)
    membership: MembershipConfig = _sub(MembershipConfig)
    anomalies: AnomaliesConfig = _sub(AnomaliesConfig)
    progress: ProgressConfig = _sub(ProgressConfig)
    allocation: AllocationConfig = _sub(AllocationConfig)
    producers: ProducersConfig = _sub(ProducersConfig)
    metrics: MetricsConfig = _sub(MetricsConfig)
    delta: DeltaConfig = _sub(DeltaConfig)
    collector: CollectorConfig = _sub(CollectorConfig)

    def fault_tables(self) -> dict[str, FaultTableConfig]:
        """Every fault table by name: the presets ``rocketmq-4``/``rocketmq-5`` and the custom ones."""
        return {**PRESET_FAULT_TABLES, **self.producers.fault_tables}

    @cached_property
    def engine_settings(self) -> EngineSettings:
        """What the consumer engine reads, built once: the Spark job pickles this very object to its workers."""
        m, a = self.membership, self.anomalies
        return EngineSettings(
            default_strategy=self.allocation.default_strategy,
            default_client_line=self.allocation.default_client_line,
            expiry_ms=m.channel_expiry_ms,
            storm_window_ms=a.storm_window_ms,
            storm_threshold=a.storm_threshold,
            group_rules=self.allocation.rules,
            storm_coalesce_ms=a.storm_coalesce_ms,
            flapping_window_ms=a.flapping_window_ms,
            flapping_threshold=a.flapping_threshold,
            convergence_grace_ms=m.convergence_grace_ms,
            route_poll_interval_ms=m.route_poll_interval_ms,
            client_rebalance_delay_ms=m.client_rebalance_delay_ms,
            observed_grace_ms=m.observed_grace_ms,
            progress=replace(DEFAULT_PROGRESS_SETTINGS, **asdict(self.progress)),
            default_cluster=self.ingest.default_cluster,
        )

    @cached_property
    def fault_settings(self) -> FaultSettings:
        """What the send path and the fault engine read, built once: the presets as the domain's own objects,
        the custom tables and the producer rules as frozen domain values."""
        p = self.producers
        custom = tuple(table.table(name) for name, table in p.fault_tables.items())
        return FaultSettings(
            tables=(*PRESETS.values(), *custom),
            default_table=p.default_fault_table,
            rules=tuple(r.rule for r in p.rules),
            state_ttl_ms=p.state_ttl_ms,
            start_detector_enable=p.start_detector_enable,
            send_latency_fault_enable=p.send_latency_fault_enable,
            default_cluster=self.ingest.default_cluster,
        )

    def strategy_for_group(self, group: str) -> tuple[str, StrategyParams]:
        """See ``AllocationConfig.strategy_for_group``."""
        return self.allocation.strategy_for_group(group)

    def fault_table_for(self, producer_group: str, client_line: str | None) -> tuple[str, FaultTableConfig]:
        """The fault table (name, table) of a producer: the first ``[[producers.rules]]`` entry whose
        ``producer_group`` glob matches and whose ``client_line`` is unset or equal (``"4.9"``/``"5"``, None
        when the producer reported no version), else ``default_fault_table`` (``rules.producer_rule_for``,
        the send path's matcher)."""
        line = getattr(client_line, "value", client_line)  # a domain ClientLine works too
        rule = producer_rule_for(self.fault_settings.rules, producer_group, line)
        name = self.producers.default_fault_table if rule is None else rule.fault_table
        return name, self.fault_tables()[name]
