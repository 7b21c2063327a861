"""The monitor's configuration: typed, frozen, validated at load time with one line per problem.

Turns ``conf/monitor.toml``-style files and ``RRM__...`` environment variables into one immutable
``MonitorConfig`` that the job, the CLI and the tests share; every problem is collected into one ``ConfigError``
and secret values never appear in messages. Plain Python: it imports only the pure domain and the contract.
Precedence and validation rules: ``docs/design/configuration.md``.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import logging
import os
import re
import tomllib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from types import MappingProxyType
from typing import Any, get_args, get_origin, get_type_hints

from streaming.contract.events import ALLOCATE_STRATEGIES, DEFAULT_TOPICS, MACHINE_ROOM_NEARBY_PREFIX
from streaming.domain.errors import ConfigurationError
from streaming.domain.faults import PRESETS, FaultSemantics, FaultTable
from streaming.domain.fleet import EngineSettings
from streaming.domain.rules import FaultSettings, GroupRule, ProducerRule, group_rule_for, producer_rule_for

ENV_PREFIX = "RRM__"
# Options the monitor no longer has: files and environments that set one still load, with a warning.
RETIRED_OPTIONS: Mapping[str, str] = MappingProxyType(
    {
        "membership.heartbeat_interval_ms": "nothing reads it: channels expire after membership.channel_expiry_ms",
    }
)
CLIENT_LINES = ("4.9", "5")
SEMANTICS = ("overwrite", "extend")
_SECRET_HINTS = ("password", "jaas", "secret", "key", "token", "credential")
REDACTED = "<redacted>"
log = logging.getLogger(__name__)


def is_secret(name: str) -> bool:
    """Whether an option's value must never be printed (judged by its name)."""
    lowered = name.lower()
    return any(hint in lowered for hint in _SECRET_HINTS)


class ConfigError(ConfigurationError):
    """Every problem of a configuration, one line each (``problems``); raised by ``load_config``."""

    def __init__(self, problems: Iterable[str], origin: str = "configuration") -> None:
        self.problems: tuple[str, ...] = tuple(problems)
        count = len(self.problems)
        header = f"invalid {origin}: {count} problem{'s' if count != 1 else ''}"
        super().__init__("\n".join([header, *(f"  - {p}" for p in self.problems)]))


class Options(Mapping[str, str]):
    """An immutable table of passthrough options whose secret-looking values are redacted when printed."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, str] | Iterable[tuple[str, str]] = ()) -> None:
        self._items: dict[str, str] = dict(items)

    def __getitem__(self, key: str) -> str:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        shown = ", ".join(f"{k!r}: {REDACTED if is_secret(k) else repr(v)}" for k, v in self._items.items())
        return f"{type(self).__name__}({{{shown}}})"

    __str__ = __repr__


KafkaOptions = Options  # the name the first version of this module used


def _opt(default: Any = dataclasses.MISSING, *, factory: Callable[[], Any] | None = None, **rules: Any) -> Any:
    """A dataclass field with validation rules in its metadata (``low``, ``high``, ``choices``, ``check``...).

    A ``check`` returns None when the value is fine, else the problem; ``{got}`` in it is replaced by the value
    as written, otherwise ``, got <value>`` is appended.
    """
    if factory is not None:
        return field(default_factory=factory, metadata=rules)
    return field(default=default, metadata=rules)


def _sub(cls: type) -> Any:
    return field(default_factory=cls)


# -- formats ----------------------------------------------------------------------------------------------

_INTERVAL = re.compile(r"^\s*(?:([0-9]+)\s*(milliseconds?|seconds?|minutes?|hours?|days?)\s*)+$")
_INTERVAL_PART = re.compile(r"([0-9]+)\s*(milliseconds?|seconds?|minutes?|hours?|days?)")
_UNIT_MS = {"millisecond": 1, "second": 1_000, "minute": 60_000, "hour": 3_600_000, "day": 86_400_000}
_HOST_PORT = r"(?:[A-Za-z][A-Za-z0-9_]*://)?(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):[0-9]{1,5}"
_BOOTSTRAP = re.compile(rf"^\s*{_HOST_PORT}(?:\s*,\s*{_HOST_PORT})*\s*$")
_KAFKA_TOPIC = re.compile(r"^(?!\.{1,2}$)[A-Za-z0-9._-]{1,249}$")
_MASTER = re.compile(
    r"^(local(\[([0-9]+|\*)(,[0-9]+)?\])?|local-cluster\[[0-9]+,[0-9]+,[0-9]+\]|(spark|k8s|mesos)://\S+|yarn)$"
)
_MEMORY = re.compile(r"^[0-9]+[kmgtpKMGTP]?[bB]?$")
_IDENTIFIER = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


def interval_ms(text: str) -> int:
    """Milliseconds of a Spark interval such as ``"10 seconds"`` or ``"1 minute 30 seconds"``."""
    if not _INTERVAL.match(text):
        raise ValueError(f"not an interval: {text!r}")
    return sum(int(n) * _UNIT_MS[unit.rstrip("s")] for n, unit in _INTERVAL_PART.findall(text))


def _check_interval(value: str) -> str | None:
    return None if _INTERVAL.match(value) else 'must be a Spark interval such as "10 seconds" or "2 minutes"'


def _matches(pattern: re.Pattern[str], what: str) -> Callable[[str], str | None]:
    return lambda value: None if pattern.match(value) else f"must be {what}"


def _not_blank(value: str) -> str | None:
    return None if value.strip() else "must not be empty"


def _check_strategy(name: str) -> str | None:
    inner = name.removeprefix(MACHINE_ROOM_NEARBY_PREFIX)
    if inner in ALLOCATE_STRATEGIES:
        return None
    known = [*ALLOCATE_STRATEGIES, MACHINE_ROOM_NEARBY_PREFIX + "<one of those>"]
    close = difflib.get_close_matches(
        name, [*ALLOCATE_STRATEGIES, *(MACHINE_ROOM_NEARBY_PREFIX + s for s in ALLOCATE_STRATEGIES)], n=1
    )
    hint = f' (did you mean "{close[0]}"?)' if close else ""
    return f"unknown allocation strategy {{got}}{hint}; expected one of {', '.join(known)}"


def _check_regex(value: str) -> str | None:
    try:
        compiled = re.compile(value)
    except re.error as error:
        return f"is not a valid regular expression ({error})"
    return None if compiled.groups >= 1 else "needs a capturing group: the room is the first group's text"


# -- the configuration tree -------------------------------------------------------------------------------


@dataclass(frozen=True)
class KafkaTopics:
    """The Kafka topic of each event type (several types may share one: events carry ``type``)."""

    consumer_channel: str = _opt(DEFAULT_TOPICS["consumer_channel"], check=_matches(_KAFKA_TOPIC, "a Kafka topic name"))
    reported_assignment: str = _opt(
        DEFAULT_TOPICS["reported_assignment"], check=_matches(_KAFKA_TOPIC, "a Kafka topic name")
    )
    topic_route: str = _opt(DEFAULT_TOPICS["topic_route"], check=_matches(_KAFKA_TOPIC, "a Kafka topic name"))
    send_result: str = _opt(DEFAULT_TOPICS["send_result"], check=_matches(_KAFKA_TOPIC, "a Kafka topic name"))


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
    trigger_interval: str = _opt("10 seconds", check=_check_interval)
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
class IngestConfig:
    max_event_bytes: int = _opt(65_536, low=1_024, high=16_777_216)
    max_future_skew_ms: int = _opt(300_000, low=0, high=86_400_000)
    watermark_delay: str = _opt("2 minutes", check=_check_interval)

    @property
    def watermark_delay_ms(self) -> int:
        return interval_ms(self.watermark_delay)


@dataclass(frozen=True)
class MembershipConfig:
    channel_expiry_ms: int = _opt(120_000, low=1_000, high=86_400_000)
    convergence_grace_ms: int = _opt(20_000, low=0, high=3_600_000)
    route_poll_interval_ms: int = _opt(30_000, low=0, high=3_600_000)
    shards: int = _opt(8, low=1, high=4_096)


@dataclass(frozen=True)
class AnomaliesConfig:
    storm_window_ms: int = _opt(300_000, low=1_000, high=86_400_000)
    storm_threshold: int = _opt(10, low=1, high=1_000_000)
    storm_coalesce_ms: int = _opt(1_000, low=0, high=60_000)
    flapping_window_ms: int = _opt(600_000, low=1_000, high=86_400_000)
    flapping_threshold: int = _opt(3, low=1, high=1_000_000)


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
    default_strategy: str = _opt("AVG", check=_check_strategy)
    default_client_line: str = _opt("5", choices=CLIENT_LINES)
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
    default_fault_table: str = _opt("rocketmq-5", check=_not_blank)
    rules: tuple[ProducerRuleConfig, ...] = _opt((ProducerRuleConfig("rocketmq-4", "*", "4.9"),))
    fault_tables: Mapping[str, FaultTableConfig] = _opt(factory=lambda: MappingProxyType({}))
    state_ttl_ms: int = _opt(3_600_000, low=1_000, high=30 * 86_400_000)
    state_shards: int = _opt(8, low=1, high=4_096)
    send_latency_fault_enable: bool = _opt(False)
    start_detector_enable: bool = _opt(False)


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
    fault_updates_retention_hours: int = _opt(24, low=1, high=87_600)
    fault_updates_trim_every_batches: int = _opt(100, low=1, high=1_000_000)


_NAMESRV = re.compile(r"^\s*[A-Za-z0-9._-]+:[0-9]{1,5}(?:\s*;\s*[A-Za-z0-9._-]+:[0-9]{1,5})*\s*$")


@dataclass(frozen=True)
class CollectorConfig:
    """``rebalance-monitor collect``: the RocketMQ cluster it watches and how often (docs/collector.md)."""

    namesrv_addr: str = _opt("127.0.0.1:9876", check=_matches(_NAMESRV, "host:port[;host:port...]"))
    collector_id: str = _opt("")
    poll_interval_ms: int = _opt(10_000, low=500, high=3_600_000)
    stale_after_ms: int = _opt(0, low=0, high=86_400_000)
    running_info_interval_ms: int = _opt(60_000, low=0, high=86_400_000)
    route_republish_interval_ms: int = _opt(300_000, low=0, high=86_400_000)
    admin_timeout_ms: int = _opt(3_000, low=100, high=60_000)
    concurrency: int = _opt(8, low=1, high=256)
    include_groups: tuple[str, ...] = _opt(("*",), item_check=_not_blank)
    exclude_groups: tuple[str, ...] = _opt((), item_check=_not_blank)
    access_key: str = field(default="", repr=False)  # secrets: never in a repr
    secret_key: str = field(default="", repr=False)
    metrics_host: str = _opt("127.0.0.1", check=_not_blank)
    metrics_port: int = _opt(9465, low=0, high=65_535)
    summary_interval_ms: int = _opt(60_000, low=1_000, high=86_400_000)
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
    ingest: IngestConfig = _sub(IngestConfig)
    membership: MembershipConfig = _sub(MembershipConfig)
    anomalies: AnomaliesConfig = _sub(AnomaliesConfig)
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


# -- building the tree from TOML data ------------------------------------------------------------------------

_INVALID: Any = object()
_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def _join(path: str, key: str) -> str:
    shown = key if _BARE_KEY.match(key) else json.dumps(key)
    return f"{path}.{shown}" if path else shown


def _kind(value: object) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    return type(value).__name__


class _Builder:
    """Builds dataclasses from TOML data, collecting problems instead of stopping at the first."""

    def __init__(self, env_paths: Mapping[str, str]) -> None:
        self.problems: list[str] = []
        self.invalid: set[str] = set()
        self.env_paths = env_paths  # option path -> environment variable that set it
        self.retired: list[str] = []  # retired options that were set, one line each

    # reporting
    def problem(self, path: str, message: str) -> None:
        self.invalid.add(path)
        self.problems.append(f"{path}: {message}{self._source(path)}")

    def _source(self, path: str) -> str:
        for prefix, variable in self.env_paths.items():
            if path == prefix or path.startswith((prefix + ".", prefix + "[")):
                return f" (from {variable})"
        return ""

    def show(self, value: object, path: str) -> str:
        if is_secret(path):
            return REDACTED
        text = json.dumps(value, default=str, ensure_ascii=False)
        return (text[:77] + "...") if len(text) > 80 else text

    def wrong_type(self, path: str, expected: str, value: object) -> Any:
        self.problem(path, f"expected {expected}, got {self.show(value, path)} ({_kind(value)})")
        return _INVALID

    def unknown(self, path: str, key: str, known: Iterable[str]) -> None:
        names = sorted(known)
        close = difflib.get_close_matches(key, names, n=1)
        hint = f" (did you mean {close[0]}?)" if close else f"; known keys: {', '.join(names)}"
        self.problem(_join(path, key), f"unknown option{hint}")

    def is_invalid(self, *paths: str) -> bool:
        return any(p in self.invalid or any(i.startswith(p + ".") for i in self.invalid) for p in paths)

    # building
    def dataclass(self, cls: type, data: object, path: str) -> Any:
        if not isinstance(data, Mapping):
            return self.wrong_type(path, "a table", data)
        fields = {f.name: f for f in dataclasses.fields(cls)}
        hints = get_type_hints(cls)
        for key in data:
            if key not in fields:
                where = _join(path, key)
                if where in RETIRED_OPTIONS:
                    self.retired.append(f"{where}: ignored, {RETIRED_OPTIONS[where]}{self._source(where)}")
                else:
                    self.unknown(path, key, fields)
        values: dict[str, Any] = {}
        complete = True
        for name, spec in fields.items():
            required = spec.default is dataclasses.MISSING and spec.default_factory is dataclasses.MISSING
            where = _join(path, name)
            if name not in data:
                if required:
                    self.problem(where, "required")
                    complete = False
                continue
            value = self.value(hints[name], data[name], where, spec.metadata)
            if value is _INVALID:
                complete = complete and not required
            else:
                values[name] = value
        return cls(**values) if complete else _INVALID

    def value(self, hint: Any, raw: object, path: str, rules: Mapping[str, Any]) -> Any:
        parser = rules.get("parse")
        if parser is not None:
            return getattr(self, parser)(raw, path)
        origin, args = get_origin(hint), get_args(hint)
        if dataclasses.is_dataclass(hint):
            return self.dataclass(hint, raw, path)  # type: ignore[arg-type]
        if args and type(None) in args:  # X | None: TOML has no null, so a present value is an X
            inner = next(a for a in args if a is not type(None))
            return self.value(inner, raw, path, rules)
        if origin is tuple:
            return self.array(args[0], raw, path, rules)
        if origin is Mapping:
            return self.table(args[1], raw, path)
        return self.scalar(hint, raw, path, rules)

    def array(self, item_hint: Any, raw: object, path: str, rules: Mapping[str, Any]) -> Any:
        if not isinstance(raw, list):
            return self.wrong_type(path, "an array", raw)
        item_rules = {"low": rules.get("item_low"), "check": rules.get("item_check")}
        items = [self.value(item_hint, item, f"{path}[{i}]", item_rules) for i, item in enumerate(raw)]
        return _INVALID if any(i is _INVALID for i in items) else tuple(items)

    def table(self, value_hint: Any, raw: object, path: str) -> Any:
        if not isinstance(raw, Mapping):
            return self.wrong_type(path, "a table", raw)
        built = {str(k): self.value(value_hint, v, _join(path, str(k)), {}) for k, v in raw.items()}
        return MappingProxyType({k: v for k, v in built.items() if v is not _INVALID})

    def scalar(self, hint: Any, raw: object, path: str, rules: Mapping[str, Any]) -> Any:
        if hint is bool:
            if not isinstance(raw, bool):
                return self.wrong_type(path, "true or false", raw)
            return raw
        if hint is int:
            if isinstance(raw, bool) or not isinstance(raw, int):
                return self.wrong_type(path, "an integer", raw)
            low, high = rules.get("low"), rules.get("high")
            if (low is not None and raw < low) or (high is not None and raw > high):
                bounds = f"between {low} and {high}" if high is not None else f"at least {low}"
                self.problem(path, f"must be {bounds}, got {raw}")
                return _INVALID
            return raw
        if hint is str:
            if not isinstance(raw, str):
                return self.wrong_type(path, "a string", raw)
            choices = rules.get("choices")
            if choices and raw not in choices:
                close = difflib.get_close_matches(raw, choices, n=1)
                hint_text = f" (did you mean {json.dumps(close[0])}?)" if close else ""
                allowed = ", ".join(json.dumps(c) for c in choices)
                self.problem(path, f"must be one of {allowed}, got {self.show(raw, path)}{hint_text}")
                return _INVALID
            check = rules.get("check")
            message = check(raw) if check else None
            if message:
                shown = self.show(raw, path)
                self.problem(path, message.replace("{got}", shown) if "{got}" in message else f"{message}, got {shown}")
                return _INVALID
            return raw
        raise TypeError(f"no builder for {hint!r} at {path}")  # a programming error in this module

    # special tables
    def _options(self, raw: object, path: str, normalize: Callable[[str, str], str | None]) -> Any:
        if not isinstance(raw, Mapping):
            return self.wrong_type(path, "a table of options", raw)
        options: dict[str, str] = {}
        for key, value in raw.items():
            where = _join(path, str(key))
            if isinstance(value, bool):
                text = "true" if value else "false"
            elif isinstance(value, int | float | str):
                text = str(value)
            else:
                self.wrong_type(where, "a string, number or boolean", value)
                continue
            name = str(key)
            refusal = normalize(name, where)
            if refusal is not None:
                self.problem(where, refusal)
                continue
            options[name.removeprefix("kafka.")] = text
        return Options(options)

    def kafka_options(self, raw: object, path: str) -> Any:
        def refuse(key: str, where: str) -> str | None:
            reason = _KAFKA_FORBIDDEN.get(key.removeprefix("kafka."))
            return f"not allowed: {reason}" if reason else None

        return self._options(raw, path, refuse)

    def spark_conf(self, raw: object, path: str) -> Any:
        def refuse(key: str, where: str) -> str | None:
            if not key.startswith("spark."):
                return 'Spark configuration keys start with "spark."'
            if key in _SPARK_DEDICATED:
                return f"not allowed: set [spark] {_SPARK_DEDICATED[key]} instead"
            return None

        return self._options(raw, path, refuse)

    def config_queues(self, raw: object, path: str) -> Any:
        if not isinstance(raw, list):
            return self.wrong_type(path, 'an array of ["topic", "broker", queue_id]', raw)
        queues = []
        for i, item in enumerate(raw):
            where = f"{path}[{i}]"
            if isinstance(item, Mapping) and set(item) == {"topic", "broker", "queue_id"}:
                item = [item["topic"], item["broker"], item["queue_id"]]
            if not (
                isinstance(item, list)
                and len(item) == 3
                and isinstance(item[0], str)
                and item[0]
                and isinstance(item[1], str)
                and item[1]
                and isinstance(item[2], int)
                and not isinstance(item[2], bool)
                and 0 <= item[2] <= 65_535
            ):
                self.problem(
                    where,
                    'must be ["topic", "broker", queue_id] or {topic, broker, queue_id} with a '
                    f"queue id in 0..65535, got {self.show(item, where)}",
                )
                continue
            queues.append((item[0], item[1], item[2]))
        return _INVALID if len(queues) != len(raw) else tuple(queues)


# -- rules across fields -------------------------------------------------------------------------------------


def _needs(strategy: str) -> str | None:
    inner = strategy.removeprefix(MACHINE_ROOM_NEARBY_PREFIX)
    return {"MACHINE_ROOM": "consumer_idcs", "CONFIG": "config_queues"}.get(inner)


def _cross_field_problems(config: MonitorConfig, b: _Builder) -> None:
    delta = config.delta
    if not b.is_invalid("delta.log_retention_hours", "delta.deleted_file_retention_hours"):
        if delta.log_retention_hours < delta.deleted_file_retention_hours:
            b.problem(
                "delta.log_retention_hours",
                f"must be at least delta.deleted_file_retention_hours ({delta.deleted_file_retention_hours}), "
                f"got {delta.log_retention_hours}: Delta refuses to create a table that forgets its commits "
                "before the files they removed",
            )

    allocation = config.allocation
    if not b.is_invalid("allocation.default_strategy") and _needs(allocation.default_strategy):
        b.problem(
            "allocation.default_strategy",
            f"{allocation.default_strategy} needs {_needs(allocation.default_strategy)}, which exist only per "
            "group: set it as the strategy of an [[allocation.groups]] rule",
        )
    seen_groups: dict[str, int] = {}
    for i, rule in enumerate(allocation.groups):
        where = f"allocation.groups[{i}]"
        if rule.strategy and not b.is_invalid(where) and _needs(rule.strategy):
            needed = _needs(rule.strategy)
            if needed == "consumer_idcs" and not rule.consumer_idcs:
                b.problem(f"{where}.consumer_idcs", f"{rule.strategy} needs consumer_idcs (group {rule.group!r})")
            if needed == "config_queues" and not rule.config_queues:
                b.problem(f"{where}.config_queues", f"{rule.strategy} needs config_queues (group {rule.group!r})")
        if rule.group in seen_groups:
            b.problem(
                f"{where}.group",
                f"{json.dumps(rule.group)} repeats allocation.groups[{seen_groups[rule.group]}]"
                ", which matches first: this rule is never used",
            )
        seen_groups.setdefault(rule.group, i)

    collector = config.collector
    if not b.is_invalid("collector.access_key", "collector.secret_key"):
        if bool(collector.access_key) != bool(collector.secret_key):
            missing = "collector.secret_key" if collector.access_key else "collector.access_key"
            b.problem(missing, "access_key and secret_key go together: set both for an ACL cluster, or neither")
    if not b.is_invalid("collector.stale_after_ms", "collector.poll_interval_ms"):
        if 0 < collector.stale_after_ms <= collector.poll_interval_ms:
            b.problem(
                "collector.stale_after_ms",
                f"must exceed collector.poll_interval_ms ({collector.poll_interval_ms}), got "
                f"{collector.stale_after_ms}: every view would go stale between two polls",
            )

    producers = config.producers
    known = config.fault_tables()
    for name, table in producers.fault_tables.items():
        where = _join("producers.fault_tables", name)
        if name in PRESET_FAULT_TABLES:
            b.problem(where, f"{name} is a built-in preset; give a custom table another name")
        if not _IDENTIFIER.match(name):
            b.problem(where, "a table name must be 1-64 letters, digits, '.', '_' or '-'")
        if b.is_invalid(where):
            continue
        latencies, durations = table.latency_max_ms, table.not_available_duration_ms
        if not latencies:
            b.problem(f"{where}.latency_max_ms", "needs at least one threshold")
        if len(latencies) != len(durations):
            b.problem(
                where,
                f"latency_max_ms has {len(latencies)} thresholds but not_available_duration_ms has "
                f"{len(durations)} durations; they pair up by position",
            )
        for j in range(1, len(latencies)):
            if latencies[j] <= latencies[j - 1]:
                b.problem(
                    f"{where}.latency_max_ms",
                    f"must be strictly ascending, but {latencies[j]} follows {latencies[j - 1]}",
                )
                break
    referenced = [("producers.default_fault_table", producers.default_fault_table)]
    referenced += [(f"producers.rules[{i}].fault_table", r.fault_table) for i, r in enumerate(producers.rules)]
    for where, name in referenced:
        if not b.is_invalid(where, _join("producers.fault_tables", name)) and name not in known:
            close = difflib.get_close_matches(name, list(known), n=1)
            hint = f' (did you mean "{close[0]}"?)' if close else ""
            b.problem(where, f"unknown fault table {json.dumps(name)}{hint}; known: {', '.join(sorted(known))}")
    seen_rules: dict[tuple[str, str | None], int] = {}
    for i, producer_rule in enumerate(producers.rules):
        key = (producer_rule.producer_group, producer_rule.client_line)
        if key in seen_rules:
            b.problem(
                f"producers.rules[{i}]",
                f"repeats producers.rules[{seen_rules[key]}], which matches first: this rule is never used",
            )
        seen_rules.setdefault(key, i)
    in_use = {name for _, name in referenced if name in known}
    if in_use and not b.is_invalid("producers.state_ttl_ms", "producers.fault_tables"):
        longest, table_name = max((max(known[n].not_available_duration_ms, default=0), n) for n in sorted(in_use))
        if producers.state_ttl_ms < longest:
            b.problem(
                "producers.state_ttl_ms",
                f"must be at least the longest not-available duration of the fault tables in use ({longest} "
                f"ms in {table_name}), got {producers.state_ttl_ms}: windows would be forgotten before "
                "they end",
            )


# -- loading -------------------------------------------------------------------------------------------------


def _target_hint(path: list[str]) -> Any:
    """The type of the option at ``path`` (segments), or None when the path is not an option."""
    hint: Any = MonitorConfig
    for segment in path:
        if dataclasses.is_dataclass(hint):
            hints = get_type_hints(hint)
            if segment not in hints:
                return None
            hint = hints[segment]
        elif hint is Options:
            return str
        else:
            return None
    return hint


def _env_overrides(env: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    """The ``RRM__`` variables as a nested table, and which variable set which option path."""
    data: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for variable, raw in sorted(env.items()):
        if not variable.startswith(ENV_PREFIX):
            continue
        segments = [s for s in variable[len(ENV_PREFIX) :].split("__") if s]
        if not segments:
            continue
        path = [s.lower() for s in segments]
        if path[:2] == ["kafka", "options"] and len(path) > 2:
            # Kafka keys are lower case with dots: RRM__KAFKA__OPTIONS__SASL_JAAS_CONFIG -> sasl.jaas.config
            path = path[:2] + [".".join(path[2:]).replace("_", ".")]
        elif path[:2] == ["spark", "conf"] and len(path) > 2:
            # Spark keys are camelCase: keep the variable's spelling, "_" for "." only without any dot.
            key = "__".join(segments[2:])
            path = path[:2] + [key if "." in key else key.replace("_", ".")]
        try:
            value: Any = tomllib.loads(f"v = {raw}")["v"]
        except tomllib.TOMLDecodeError:
            value = raw
        if _target_hint(path) in (str, str | None) and not isinstance(value, str):
            value = raw  # a string option takes the text as written
        node = data
        for segment in path[:-1]:
            child = node.setdefault(segment, {})
            if not isinstance(child, dict):  # e.g. RRM__KAFKA=1 and RRM__KAFKA__X=2
                child = node[segment] = {}
            node = child
        node[path[-1]] = value
        where = ""
        for segment in path:
            where = _join(where, segment)
        sources[where] = variable
    return data, sources


def _merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def load_config(path: str | Path | None = None, env: Mapping[str, str] | None = None) -> MonitorConfig:
    """The defaults, overlaid by the TOML file at ``path`` (if any), then by ``RRM__`` variables of ``env``
    (default ``os.environ``); validated. Raises ``ConfigError`` listing every problem."""
    env = os.environ if env is None else env
    data: dict[str, Any] = {}
    origin = "configuration"
    if path is not None:
        origin = f"configuration {path}"
        try:
            data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError([f"{path}: no such file"], origin) from None
        except tomllib.TOMLDecodeError as error:
            raise ConfigError([f"{path}: not valid TOML: {error}"], origin) from None
    overrides, sources = _env_overrides(env)
    builder = _Builder(sources)
    built = builder.dataclass(MonitorConfig, _merge(data, overrides), "")
    config = built if built is not _INVALID else MonitorConfig()
    _cross_field_problems(config, builder)
    if builder.problems:
        raise ConfigError(builder.problems, origin)
    for notice in builder.retired:
        log.warning("%s: %s", origin, notice)
    return config
