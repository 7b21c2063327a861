"""The monitor's configuration: typed, frozen, validated at start with one line per problem.

``conf/monitor.toml`` is the annotated reference with every option and its default; the defaults here
equal it (a test compares them). ``load_config`` reads a TOML file over the defaults, then environment
overrides ``RRM__SECTION__KEY=value`` (``RRM__KAFKA__TOPICS__SEND_RESULT=...`` for nested tables), then
validates everything, collecting *all* problems into one ``ConfigError``. Secret Kafka options never
appear in ``repr``/``str``.
"""

from __future__ import annotations

import dataclasses
import difflib
import fnmatch
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args, get_origin, get_type_hints

from streaming.domain.errors import ConfigurationError

ENV_PREFIX = "RRM__"
_SECRET_HINTS = ("password", "jaas", "secret", "token", "key")


class ConfigError(ConfigurationError):
    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("invalid configuration:\n" + "\n".join(f"  - {p}" for p in problems))


class KafkaOptions(dict[str, str]):
    """Passthrough ``kafka.*`` options; secrets are redacted when printed."""

    def __repr__(self) -> str:
        return repr({k: ("***" if any(h in k.lower() for h in _SECRET_HINTS) else v) for k, v in self.items()})

    __str__ = __repr__


@dataclass(frozen=True)
class KafkaTopics:
    consumer_channel: str = "rocketmq.consumer-channels"
    reported_assignment: str = "rocketmq.reported-assignments"
    topic_route: str = "rocketmq.topic-routes"
    send_result: str = "rocketmq.send-results"


@dataclass(frozen=True)
class KafkaConfig:
    bootstrap_servers: str = "127.0.0.1:9092"
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int = 500_000
    fail_on_data_loss: bool = False
    topics: KafkaTopics = field(default_factory=KafkaTopics)
    options: KafkaOptions = field(default_factory=KafkaOptions)


@dataclass(frozen=True)
class SparkConfig:
    master: str = "local[2]"
    app_name: str = "rocketmq-rebalance-monitor"
    shuffle_partitions: int = 4
    driver_memory: str = "2g"
    trigger_interval: str = "10 seconds"
    ui_enabled: bool = False


@dataclass(frozen=True)
class PathsConfig:
    delta_root: str = ".run/delta"
    checkpoint_root: str = ".run/checkpoints"


@dataclass(frozen=True)
class IngestConfig:
    max_event_bytes: int = 65_536
    max_future_skew_ms: int = 300_000
    watermark_delay: str = "2 minutes"


@dataclass(frozen=True)
class MembershipConfig:
    channel_expiry_ms: int = 120_000
    heartbeat_interval_ms: int = 30_000
    shards: int = 8


@dataclass(frozen=True)
class AnomaliesConfig:
    storm_window_ms: int = 300_000
    storm_threshold: int = 10


@dataclass(frozen=True)
class GroupAllocationConfig:
    group: str
    strategy: str | None = None
    virtual_node_count: int = 10
    consumer_idcs: tuple[str, ...] = ()
    machine_room_separator: str = "-"
    config_queues: tuple[tuple[str, str, int], ...] | None = None


@dataclass(frozen=True)
class AllocationConfig:
    default_strategy: str = "AVG"
    default_client_line: str = "5"
    groups: tuple[GroupAllocationConfig, ...] = ()


@dataclass(frozen=True)
class ProducerRule:
    fault_table: str
    producer_group: str = "*"
    client_line: str | None = None


@dataclass(frozen=True)
class FaultTableConfig:
    latency_max_ms: tuple[int, ...]
    not_available_duration_ms: tuple[int, ...]
    isolation_latency_ms: int
    semantics: str = "overwrite"


@dataclass(frozen=True)
class ProducersConfig:
    default_fault_table: str = "rocketmq-4"
    state_ttl_ms: int = 3_600_000
    rules: tuple[ProducerRule, ...] = (ProducerRule("rocketmq-5", "*", "5"),)
    fault_tables: Mapping[str, FaultTableConfig] = field(default_factory=dict)


@dataclass(frozen=True)
class MetricsConfig:
    enabled: bool = True
    host: str = "127.0.0.1"
    port: int = 9464
    label_value_cap: int = 10_000


@dataclass(frozen=True)
class DeltaConfig:
    app_id_prefix: str = "rrm"


PRESET_FAULT_TABLES = {
    "rocketmq-4": FaultTableConfig(
        (50, 100, 550, 1000, 2000, 3000, 15000), (0, 0, 30000, 60000, 120000, 180000, 600000), 30000, "overwrite"
    ),
    "rocketmq-5": FaultTableConfig(
        (50, 100, 550, 1800, 3000, 5000, 15000), (0, 0, 2000, 5000, 6000, 10000, 30000), 10000, "extend"
    ),
}


@dataclass(frozen=True)
class MonitorConfig:
    kafka: KafkaConfig = field(default_factory=KafkaConfig)
    spark: SparkConfig = field(default_factory=SparkConfig)
    paths: PathsConfig = field(default_factory=PathsConfig)
    ingest: IngestConfig = field(default_factory=IngestConfig)
    membership: MembershipConfig = field(default_factory=MembershipConfig)
    anomalies: AnomaliesConfig = field(default_factory=AnomaliesConfig)
    allocation: AllocationConfig = field(default_factory=AllocationConfig)
    producers: ProducersConfig = field(default_factory=ProducersConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    delta: DeltaConfig = field(default_factory=DeltaConfig)

    def fault_tables(self) -> dict[str, FaultTableConfig]:
        return {**PRESET_FAULT_TABLES, **self.producers.fault_tables}

    def strategy_for_group(self, group: str) -> GroupAllocationConfig | None:
        for rule in self.allocation.groups:
            if rule.group == group or fnmatch.fnmatchcase(group, rule.group):
                return rule
        return None


# -- building typed values from TOML data ----------------------------------------------------------------


def _build(cls: Any, data: Any, where: str, problems: list[str]) -> Any:
    """``data`` (TOML) as an instance of ``cls``; type problems are appended, defaults kept for them."""
    origin = get_origin(cls)
    if dataclasses.is_dataclass(cls):
        if not isinstance(data, Mapping):
            problems.append(f"{where}: expected a table, got {type(data).__name__}")
            return None
        hints = get_type_hints(cls)
        names = [f.name for f in dataclasses.fields(cls)]
        kwargs = {}
        for key, value in data.items():
            if key not in hints:
                hint = difflib.get_close_matches(key, names, n=1)
                problems.append(f"{where}.{key}: unknown option" + (f" (did you mean '{hint[0]}'?)" if hint else ""))
                continue
            built = _build(hints[key], value, f"{where}.{key}", problems)
            if built is not None or value is None:
                kwargs[key] = built
        required = [
            f.name
            for f in dataclasses.fields(cls)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        ]
        for name in required:
            if name not in kwargs:
                problems.append(f"{where}.{name}: required")
                return None
        return cls(**kwargs)
    if cls is KafkaOptions:
        if not isinstance(data, Mapping):
            problems.append(f"{where}: expected a table of strings")
            return None
        return KafkaOptions({str(k): str(v) for k, v in data.items()})
    if origin is tuple:
        args = get_args(cls)
        if not isinstance(data, list):
            problems.append(f"{where}: expected a list, got {type(data).__name__}")
            return None
        if len(args) == 2 and args[1] is Ellipsis:
            items = [_build(args[0], item, f"{where}[{i}]", problems) for i, item in enumerate(data)]
        else:
            if len(data) != len(args):
                problems.append(f"{where}: expected {len(args)} items")
                return None
            items = [
                _build(a, item, f"{where}[{i}]", problems) for i, (a, item) in enumerate(zip(args, data, strict=True))
            ]
        return tuple(items)
    if origin in (Mapping, dict) or cls is Mapping:
        value_type = get_args(cls)[1]
        if not isinstance(data, Mapping):
            problems.append(f"{where}: expected a table")
            return None
        return {str(k): _build(value_type, v, f"{where}.{k}", problems) for k, v in data.items()}
    args = get_args(cls)
    if args and type(None) in args:  # Optional[X]
        if data is None:
            return None
        inner = [a for a in args if a is not type(None)][0]
        return _build(inner, data, where, problems)
    if cls is bool:
        if not isinstance(data, bool):
            problems.append(f"{where}: expected true or false, got {data!r}")
            return None
        return data
    if cls is int:
        if isinstance(data, bool) or not isinstance(data, int):
            problems.append(f"{where}: expected an integer, got {data!r}")
            return None
        return data
    if cls is str:
        if not isinstance(data, str):
            problems.append(f"{where}: expected a string, got {data!r}")
            return None
        return data
    return data


def _env_overrides(env: Mapping[str, str]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for name, raw in sorted(env.items()):
        if not name.startswith(ENV_PREFIX):
            continue
        path = [p.lower() for p in name[len(ENV_PREFIX) :].split("__") if p]
        try:
            value: Any = tomllib.loads(f"v = {raw}")["v"]
        except tomllib.TOMLDecodeError:
            value = raw
        node = result
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = value
    return result


def _merge(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merge(dict(merged[key]), value)
        else:
            merged[key] = value
    return merged


def _validate(config: MonitorConfig) -> list[str]:
    from streaming.domain.allocation import strategy_from_name
    from streaming.domain.errors import DomainError

    problems = []
    m = config.membership
    if m.channel_expiry_ms <= m.heartbeat_interval_ms:
        problems.append(
            f"membership.channel_expiry_ms ({m.channel_expiry_ms}) must exceed "
            f"membership.heartbeat_interval_ms ({m.heartbeat_interval_ms})"
        )
    for name, value, low in (
        ("membership.shards", m.shards, 1),
        ("spark.shuffle_partitions", config.spark.shuffle_partitions, 1),
        ("ingest.max_event_bytes", config.ingest.max_event_bytes, 256),
        ("anomalies.storm_threshold", config.anomalies.storm_threshold, 1),
        ("metrics.label_value_cap", config.metrics.label_value_cap, 1),
        ("producers.state_ttl_ms", config.producers.state_ttl_ms, 1000),
    ):
        if value < low:
            problems.append(f"{name} must be at least {low}, got {value}")
    if not 0 < config.metrics.port < 65536:
        problems.append(f"metrics.port must be 1-65535, got {config.metrics.port}")
    if config.kafka.starting_offsets not in ("earliest", "latest"):
        problems.append(f"kafka.starting_offsets must be 'earliest' or 'latest', got {config.kafka.starting_offsets!r}")
    if config.allocation.default_client_line not in ("4.9", "5"):
        problems.append(
            f"allocation.default_client_line must be '4.9' or '5', got {config.allocation.default_client_line!r}"
        )
    strategies = [("allocation.default_strategy", config.allocation.default_strategy)]
    strategies += [
        (f"allocation.groups[{i}].strategy", g.strategy) for i, g in enumerate(config.allocation.groups) if g.strategy
    ]
    for where, name in strategies:
        try:
            strategy_from_name(name)
        except DomainError as error:
            problems.append(f"{where}: {error.message}")
    for i, g in enumerate(config.allocation.groups):
        if g.strategy == "MACHINE_ROOM" and not g.consumer_idcs:
            problems.append(f"allocation.groups[{i}] ({g.group}): MACHINE_ROOM needs consumer_idcs")
        if g.virtual_node_count < 0:
            problems.append(f"allocation.groups[{i}] ({g.group}): virtual_node_count must be >= 0")
    tables = config.fault_tables()
    for name, table in config.producers.fault_tables.items():
        where = f"producers.fault_tables.{name}"
        if len(table.latency_max_ms) != len(table.not_available_duration_ms) or not table.latency_max_ms:
            problems.append(
                f"{where}: latency_max_ms and not_available_duration_ms must be non-empty and the same length"
            )
        if list(table.latency_max_ms) != sorted(set(table.latency_max_ms)):
            problems.append(f"{where}: latency_max_ms must be strictly ascending")
        if any(d < 0 for d in table.not_available_duration_ms) or any(x < 0 for x in table.latency_max_ms):
            problems.append(f"{where}: latencies and durations must not be negative")
        if table.semantics not in ("overwrite", "extend"):
            problems.append(f"{where}: semantics must be 'overwrite' or 'extend', got {table.semantics!r}")
    names = [("producers.default_fault_table", config.producers.default_fault_table)]
    names += [(f"producers.rules[{i}].fault_table", r.fault_table) for i, r in enumerate(config.producers.rules)]
    for where, name in names:
        if name not in tables:
            problems.append(f"{where}: unknown fault table {name!r}; known: {', '.join(sorted(tables))}")
    for i, rule in enumerate(config.producers.rules):
        if rule.client_line not in (None, "4.9", "5"):
            problems.append(f"producers.rules[{i}].client_line must be '4.9' or '5', got {rule.client_line!r}")
    return problems


def load_config(path: str | Path | None = None, env: Mapping[str, str] | None = None) -> MonitorConfig:
    """Defaults, overlaid by the file (if any), then by ``RRM__...`` environment variables; validated."""
    env = os.environ if env is None else env
    data: dict[str, Any] = {}
    problems: list[str] = []
    if path is not None:
        try:
            data = tomllib.loads(Path(path).read_text())
        except FileNotFoundError:
            raise ConfigError([f"config file {path} does not exist"]) from None
        except tomllib.TOMLDecodeError as error:
            raise ConfigError([f"{path}: not valid TOML ({error})"]) from None
    data = _merge(data, _env_overrides(env))
    config = _build(MonitorConfig, data, "config", problems)
    if problems:
        raise ConfigError([p.removeprefix("config.") for p in problems])
    problems = _validate(config)
    if problems:
        raise ConfigError(problems)
    return config  # type: ignore[no-any-return]
