"""The monitor's configuration: typed, frozen, validated at load time with one line per problem.

Turns ``conf/monitor.toml``-style files and ``RRM__...`` environment variables into one immutable
``MonitorConfig`` that the job, the CLI and the tests share; every problem is collected into one ``ConfigError``
and secret values never appear in messages. Plain Python: it imports only the pure domain and the contract.
Precedence, validation and how settings reach the engines: ``docs/design/configuration.md``.
"""

from streaming.config.builder import RETIRED_OPTIONS
from streaming.config.formats import (
    CLIENT_LINES,
    REDACTED,
    SEMANTICS,
    ConfigError,
    KafkaOptions,
    Options,
    interval_ms,
    is_secret,
)
from streaming.config.loading import ENV_PREFIX, load_config
from streaming.config.sections import (
    PRESET_FAULT_TABLES,
    AllocationConfig,
    AnomaliesConfig,
    CollectorConfig,
    DeltaConfig,
    FaultTableConfig,
    GroupAllocationConfig,
    IngestConfig,
    KafkaConfig,
    KafkaTopics,
    MembershipConfig,
    MetricsConfig,
    MonitorConfig,
    PathsConfig,
    ProducerRuleConfig,
    ProducersConfig,
    ProgressConfig,
    SparkConfig,
    StorageConfig,
    StrategyParams,
    SupervisionConfig,
)

__all__ = [
    "CLIENT_LINES",
    "ENV_PREFIX",
    "PRESET_FAULT_TABLES",
    "REDACTED",
    "RETIRED_OPTIONS",
    "SEMANTICS",
    "AllocationConfig",
    "AnomaliesConfig",
    "CollectorConfig",
    "ConfigError",
    "DeltaConfig",
    "FaultTableConfig",
    "GroupAllocationConfig",
    "IngestConfig",
    "KafkaConfig",
    "KafkaOptions",
    "KafkaTopics",
    "MembershipConfig",
    "MetricsConfig",
    "MonitorConfig",
    "Options",
    "PathsConfig",
    "StorageConfig",
    "ProducerRuleConfig",
    "ProducersConfig",
    "ProgressConfig",
    "SparkConfig",
    "StrategyParams",
    "SupervisionConfig",
    "interval_ms",
    "is_secret",
    "load_config",
]
