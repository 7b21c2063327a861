"""Loading: the defaults, a TOML file and ``RRM__`` variables merged, built and checked across fields."""

from __future__ import annotations

import dataclasses
import difflib
import json
import logging
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, get_type_hints

from streaming.config.builder import _INVALID, _Builder, _join
from streaming.config.formats import _IDENTIFIER, ConfigError, Options
from streaming.config.sections import PRESET_FAULT_TABLES, MonitorConfig
from streaming.contract.events import MACHINE_ROOM_NEARBY_PREFIX
from streaming.domain.faults.tolerance import shape_problems

ENV_PREFIX = "RRM__"

log = logging.getLogger(__name__)

# -- rules across fields -------------------------------------------------------------------------------------


def _needs(strategy: str) -> str | None:
    inner = strategy.removeprefix(MACHINE_ROOM_NEARBY_PREFIX)
    return {"MACHINE_ROOM": "consumer_idcs", "CONFIG": "config_queues"}.get(inner)


def _cross_field_problems(config: MonitorConfig, b: _Builder) -> None:
    """The problems of options that are fine alone but not together, in the order of the sections."""
    _delta_problems(config, b)
    _allocation_problems(config, b)
    _collector_problems(config, b)
    _fault_table_problems(config, b)
    _producer_rule_problems(config, b)


def _delta_problems(config: MonitorConfig, b: _Builder) -> None:
    delta = config.delta
    if not b.is_invalid("delta.log_retention_hours", "delta.deleted_file_retention_hours"):
        if delta.log_retention_hours < delta.deleted_file_retention_hours:
            b.problem(
                "delta.log_retention_hours",
                f"must be at least delta.deleted_file_retention_hours ({delta.deleted_file_retention_hours}), "
                f"got {delta.log_retention_hours}: Delta refuses to create a table that forgets its commits "
                "before the files they removed",
            )


def _allocation_problems(config: MonitorConfig, b: _Builder) -> None:
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


def _collector_problems(config: MonitorConfig, b: _Builder) -> None:
    collector = config.collector
    if not b.is_invalid("collector.access_key", "collector.secret_key"):
        if bool(collector.access_key) != bool(collector.secret_key):
            missing = "collector.secret_key" if collector.access_key else "collector.access_key"
            b.problem(missing, "access_key and secret_key go together: set both for an ACL cluster, or neither")
    if not b.is_invalid("collector.shard_index", "collector.shard_count"):
        if collector.shard_index >= collector.shard_count:
            b.problem(
                "collector.shard_index",
                f"must be below collector.shard_count ({collector.shard_count}), got {collector.shard_index}: "
                "the shards of n collectors are 0 to n-1",
            )
    if not b.is_invalid("collector.stale_after_ms", "collector.poll_interval_ms"):
        if 0 < collector.stale_after_ms <= collector.poll_interval_ms:
            b.problem(
                "collector.stale_after_ms",
                f"must exceed collector.poll_interval_ms ({collector.poll_interval_ms}), got "
                f"{collector.stale_after_ms}: every view would go stale between two polls",
            )


def _fault_table_problems(config: MonitorConfig, b: _Builder) -> None:
    for name, table in config.producers.fault_tables.items():
        where = _join("producers.fault_tables", name)
        if name in PRESET_FAULT_TABLES:
            b.problem(where, f"{name} is a built-in preset; give a custom table another name")
        if not _IDENTIFIER.match(name):
            b.problem(where, "a table name must be 1-64 letters, digits, '.', '_' or '-'")
        if b.is_invalid(where):
            continue
        for field, problem in shape_problems(table.latency_max_ms, table.not_available_duration_ms):
            b.problem(_join(where, field) if field else where, problem)


def _producer_rule_problems(config: MonitorConfig, b: _Builder) -> None:
    producers = config.producers
    known = config.fault_tables()
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
