"""Builds the configuration tree from TOML data, collecting every problem instead of stopping at the first."""

from __future__ import annotations

import dataclasses
import difflib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any, get_args, get_origin, get_type_hints

from streaming.config.formats import REDACTED, Options, is_secret
from streaming.config.sections import _KAFKA_FORBIDDEN, _SPARK_DEDICATED

# Options the monitor no longer has: files and environments that set one still load, with a warning.
RETIRED_OPTIONS: Mapping[str, str] = MappingProxyType(
    {
        "membership.heartbeat_interval_ms": "nothing reads it: channels expire after membership.channel_expiry_ms",
        "delta.fault_updates_retention_hours": "send-ingest replays its own sends: nothing to trim",
        "delta.fault_updates_trim_every_batches": "send-ingest replays its own sends: nothing to trim",
    }
)
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
