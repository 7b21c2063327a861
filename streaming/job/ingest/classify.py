"""Ingest: Kafka records in, validated events or dead letters out (JVM only).

One Kafka source per path subscribes that path's topics, so each streaming query has exactly one event-time
watermark. Every record is classified, in this order (the first failing check names the reason):

1. ``OVERSIZED``       the raw value is larger than ``max_event_bytes``;
2. ``NOT_JSON``        it does not parse as JSON (``try_parse_json`` is NULL);
3. ``NOT_AN_OBJECT``   it is JSON but not an object;
4. ``UNKNOWN_TYPE``    its ``type`` (or, without one, its Kafka topic's default type) is not an event type of
                       the contract;
5. ``UNKNOWN_SCHEMA_VERSION`` its ``schema_version`` is not one this job knows for that type;
6. the contract's JSON Schema rules, compiled by ``validation`` (MISSING_FIELD, WRONG_TYPE, INVALID_VALUE,
   NEGATIVE_LATENCY, OVERSIZED for too many items, ...), then the contract's cross-field rules (a HEARTBEAT
   must carry its subscriptions);
7. ``FUTURE_TIMESTAMP`` ``event_time`` is more than ``max_future_skew_ms`` after the Kafka record timestamp.

The last check compares with the record's Kafka timestamp rather than the wall clock, so a replayed batch
classifies every record exactly as the first run did.

Walking that list for every record is what made ingest ten times slower than parsing, so valid records
take a fast path first: one strict parse in the JVM into the contract's typed fields, with the contract's
value checks on them (``StrictEvents``, registered by ``register_strict_events``, its checks described by
``validation.fast_path``). Only the rest are parsed into a variant and walk the rules, and only rejects
build a detail. Valid records leave with their typed fields in ``e_<event type>`` (``typed_column``), so no
later step extracts them again.

The walk itself is one JVM function call in the plan (``RuleVerdict``, registered by
``register_rule_verdict``), made only for records off the fast path: inline, its SQL kept the whole ingest
projection out of whole-stage codegen, and every task generated that code again (on the heartbeat topic,
classifying cost three to four times parsing; with the function, about twice).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from streaming.contract import envelope
from streaming.contract.events import CLUSTER_FIELD, CLUSTER_SINCE_VERSION, DEFAULT_CLUSTER
from streaming.job.ingest.validation import (
    FastPath,
    compile_versioned_rules,
    cross_field_rules,
    fast_path,
    first_violation_sql,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True)
class EventContract:
    """What the job accepts for one event type."""

    event_type: str
    schema: Mapping[str, Any]
    versions: tuple[int, ...] = (1,)
    reason_overrides: Mapping[str, str] = field(default_factory=dict)
    # Each version's own schema when they differ: the rules of a record's version decide its reason, while
    # ``schema`` (the newest, accepting every version) shapes the typed struct and the fast path.
    version_schemas: Mapping[int, Mapping[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class IngestSettings:
    bootstrap_servers: str
    topics: Mapping[str, str]  # Kafka topic -> default event type of its records
    max_event_bytes: int = 65_536
    max_future_skew_ms: int = 300_000
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int | None = None
    batch_planning: str = "records"  # ``[kafka] batch_planning``: where a capped batch ends
    fail_on_data_loss: bool = False
    kafka_options: Mapping[str, str] = field(default_factory=dict)
    default_cluster: str = DEFAULT_CLUSTER  # the cluster of events that name none (``events.event_cluster``)


# The source that plans capped batches by event time (``docs/design/batch-invariance.md``): Kafka's reader with
# its own end offsets, in the project's JVM classes, named by class (they carry no service registration).
EVENT_TIME_SOURCE = "io.github.rrm.source.EventTimeKafkaSource"


def kafka_stream(session: SparkSession, settings: IngestSettings) -> DataFrame:
    by_time = settings.batch_planning == "event_time"
    reader = (
        session.readStream.format(EVENT_TIME_SOURCE if by_time else "kafka")
        .option("kafka.bootstrap.servers", settings.bootstrap_servers)
        .option("subscribe", ",".join(sorted(settings.topics)))
        .option("startingOffsets", settings.starting_offsets)
        .option("failOnDataLoss", str(settings.fail_on_data_loss).lower())
        .option("includeHeaders", "false")
    )
    if settings.max_offsets_per_trigger:
        limit = str(settings.max_offsets_per_trigger)
        if by_time:
            reader = reader.option("eventTimeMaxOffsetsPerTrigger", limit)
            reader = reader.option("eventTimeMaxFutureSkewMs", str(settings.max_future_skew_ms))
        else:
            reader = reader.option("maxOffsetsPerTrigger", limit)
    for key, value in settings.kafka_options.items():
        reader = reader.option(key if key.startswith("kafka.") else f"kafka.{key}", value)
    return reader.load()


def _sql_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def strict_events_spec(contracts: Mapping[str, EventContract]) -> tuple[str, str] | None:
    """What ``StrictEvents`` is built from for ``contracts``: its return type's DDL and its value checks as JSON
    (None when no type has a fast path). ``sends.reduce.reduce_kafka_batch`` builds its own reader from them."""
    paths = {t: fast for t, contract in contracts.items() if (fast := fast_path(contract.schema, t)) is not None}
    if not paths:
        return None
    ddl = "event_type STRING, " + ", ".join(f"`{typed_column(t)}` {fast.struct_ddl}" for t, fast in paths.items())
    return ddl, json.dumps({t: fast.checks for t, fast in paths.items()}, sort_keys=True)


def register_strict_events(session: SparkSession, contracts: Mapping[str, EventContract]) -> str | None:
    """Register the JVM fast path (``StrictEvents``) for ``contracts``; its SQL function name, or None.

    The function takes ``(the record's value bytes, topic default type)`` and returns ``(event_type, e_<type>...)``
    typed by ``validation.fast_path``, or NULL when the record is not plainly a valid event of its type
    (its value checks included). The name carries a hash of the types and checks, so sessions with
    different contracts never share one.
    """
    spec = strict_events_spec(contracts)
    if spec is None:
        return None
    ddl, checks = spec
    name = "rrm_strict_events_" + hashlib.sha256(f"{ddl}\0{checks}".encode()).hexdigest()[:12]
    jvm = session.sparkContext._jvm
    assert jvm is not None
    jvm.io.github.rrm.ingest.StrictEvents.register(session._jsparkSession, name, ddl, checks)
    return name


def classify(records: DataFrame, contracts: Mapping[str, EventContract], settings: IngestSettings) -> DataFrame:
    """Kafka records -> one row each with ``event_type``, ``event_time_ms``, ``e_<type>`` (typed fields of a
    valid event) and ``reason``/``detail`` (NULL if valid); ``v`` is the variant of records off the fast path."""
    from pyspark.sql import functions as F

    topic_default = (
        "CASE kafka_topic "
        + " ".join(
            f"WHEN {_sql_string(topic)} THEN {_sql_string(event_type)}" for topic, event_type in settings.topics.items()
        )
        + " END"
    )
    max_bytes = int(settings.max_event_bytes)
    base = records.select(
        F.col("topic").alias("kafka_topic"),
        F.col("partition").alias("kafka_partition"),
        F.col("offset").alias("kafka_offset"),
        F.col("timestamp").alias("kafka_timestamp"),
        F.col("value").cast("string").alias("raw_value"),
        F.octet_length("value").alias("raw_bytes"),
        F.col("value").alias("_value"),  # the bytes, for the fast path (StrictEvents reads UTF-8 itself)
    )
    fast_paths = {t: fast_path(contract.schema, t) for t, contract in contracts.items()}
    base, fast_time = _with_fast_path(base, contracts, fast_paths, topic_default, settings)
    base = base.withColumn(
        "v", F.expr(f"CASE WHEN NOT _fast AND raw_bytes <= {max_bytes} THEN try_parse_json(raw_value) END")
    )
    base = base.withColumn(
        "event_type",
        F.expr(
            f"CASE WHEN _fast THEN _strict.event_type "
            f"ELSE coalesce(try_variant_get(v, '$.type', 'string'), {topic_default}) END"
        ),
    ).withColumn(
        "event_time_ms",
        F.expr(f"CASE WHEN _fast THEN {fast_time} ELSE try_variant_get(v, '$.event_time', 'bigint') END"),
    )
    base = _with_typed_columns(base, fast_paths)
    # The walk runs in the JVM function, and only for records off the fast path (see register_rule_verdict).
    verdict = register_rule_verdict(records.sparkSession, *_verdict_sql(contracts, settings))
    inputs = ", ".join(f"'{name}', {name}" for name, _ in _VERDICT_INPUTS)
    judged = (
        base.withColumn("_verdict", F.expr(f"CASE WHEN _fast THEN NULL ELSE {verdict}(named_struct({inputs})) END"))
        .withColumn("reason", F.col("_verdict.reason"))
        .withColumn("detail", F.col("_verdict.detail"))
    )
    # Every later step reads a record's typed fields, never its raw value again, and only what validation
    # proved: a rejected record's fields (a queue id of 2^40, say) stay NULL, so no cast downstream meets them.
    for event_type in contracts:
        typed = typed_column(event_type)
        value = F.col(typed)
        if fast_paths[event_type] is not None and CLUSTER_FIELD in contracts[event_type].schema.get("properties", {}):
            value = value.withField(CLUSTER_FIELD, F.expr(cluster_sql(typed, settings.default_cluster)))
        judged = judged.withColumn(typed, F.when(F.col("reason").isNull(), value))
    return judged.drop("_value", "_strict", "_fast", "_verdict")


def cluster_sql(typed: str, default_cluster: str) -> str:
    """SQL of the cluster a valid event's typed struct ``typed`` belongs to (``events.event_cluster``)."""
    declared = f"`{typed}`.`{CLUSTER_FIELD}`"
    return (
        f"CASE WHEN `{typed}`.schema_version >= {CLUSTER_SINCE_VERSION} AND {declared} IS NOT NULL "
        f"THEN {declared} ELSE {_sql_string(default_cluster)} END"
    )


def _with_typed_columns(base: DataFrame, fast_paths: Mapping[str, Any]) -> DataFrame:
    """``base`` with each event type's typed column ``e_<type>``: the fast path's fields, else (off the fast
    path, a valid event with say an unknown field) the fields read from the record's variant."""
    from pyspark.sql import functions as F

    for event_type, fast in fast_paths.items():
        typed = typed_column(event_type)
        if fast is None:
            base = base.withColumn(typed, F.lit(None))
            continue
        base = base.withColumn(
            typed,
            F.expr(
                f"CASE WHEN _fast THEN _strict.`{typed}` WHEN event_type = {_sql_string(event_type)} "
                f"THEN try_variant_get(v, '$', {_sql_string(fast.struct_ddl)}) END"
            ),
        )
    return base


def _with_fast_path(
    base: DataFrame,
    contracts: Mapping[str, EventContract],
    fast_paths: Mapping[str, FastPath | None],
    topic_default: str,
    settings: IngestSettings,
) -> tuple[DataFrame, str]:
    """``base`` with ``_strict`` (the fast path's typed parse, see validation.fast_path) and ``_fast`` (whether it
    takes the record); and the SQL of a taken record's event time. Only records it does not take are parsed into
    a variant and walk the rules; only rejects compute a detail."""
    from pyspark.sql import functions as F

    max_bytes, skew = int(settings.max_event_bytes), int(settings.max_future_skew_ms)
    strict = register_strict_events(base.sparkSession, contracts)
    fast_accepts, fast_times = [], []
    for event_type in contracts:
        if strict is None or fast_paths[event_type] is None:
            continue
        typed = f"_strict.`{typed_column(event_type)}`"
        fast_accepts.append(f"(_strict.event_type = {_sql_string(event_type)} AND {typed} IS NOT NULL)")
        fast_times.append(f"{typed}.event_time")
    if not fast_accepts:
        return base.withColumn("_strict", F.lit(None)).withColumn("_fast", F.lit(False)), "NULL"
    base = base.withColumn(
        "_strict", F.expr(f"CASE WHEN raw_bytes <= {max_bytes} THEN {strict}(_value, {topic_default}) END")
    )
    fast_time = f"coalesce({', '.join(fast_times)})"
    fast_valid = (
        f"_strict IS NOT NULL AND NOT ({fast_time} > unix_millis(kafka_timestamp) + {skew}) "
        f"AND ({' OR '.join(fast_accepts)})"
    )
    return base.withColumn("_fast", F.expr(f"coalesce({fast_valid}, FALSE)")), fast_time


def _verdict_sql(contracts: Mapping[str, EventContract], settings: IngestSettings) -> tuple[str, str]:
    """The SQL of a record's dead-letter reason and detail: the checks in ``docs/design/event-validation.md``'s
    order, the first failure naming the reason."""
    limits: dict[str, Any] = {
        "max_event_bytes": int(settings.max_event_bytes),
        "max_future_skew_ms": int(settings.max_future_skew_ms),
        "event_types": tuple(contracts),
    }
    reason_cases = [_envelope_case(check, limits) for check in envelope.BEFORE_RULES]
    per_type_reason, per_type_detail = [], []
    for event_type, contract in contracts.items():
        type_limits = {**limits, "versions": tuple(str(v) for v in contract.versions)}
        version_check, _, version_detail = _envelope_case(envelope.VERSION, type_limits, event_type)
        schemas = contract.version_schemas or {max(contract.versions): contract.schema}
        rules = compile_versioned_rules(schemas, "v", contract.reason_overrides, _FACT_SQL["schema_version"])
        rules += cross_field_rules(event_type, "v")
        reason_sql, detail_sql = first_violation_sql(rules)
        per_type_reason.append(
            f"WHEN event_type = {_sql_string(event_type)} THEN "
            f"CASE WHEN {version_check} THEN {_sql_string(envelope.VERSION.reason)} ELSE {reason_sql} END"
        )
        per_type_detail.append(
            f"WHEN event_type = {_sql_string(event_type)} THEN CASE WHEN {version_check} THEN {version_detail} "
            f"ELSE {detail_sql} END"
        )
    after = [_envelope_case(check, limits) for check in envelope.AFTER_RULES]
    reason_expr = (
        "CASE "
        + " ".join(f"WHEN {c} THEN {r}" for c, r, _ in reason_cases)
        + " ELSE coalesce(CASE "
        + " ".join(per_type_reason)
        + " END, CASE "
        + " ".join(f"WHEN {c} THEN {r}" for c, r, _ in after)
        + " END) END"
    )
    detail_expr = (
        "CASE WHEN reason IS NULL THEN NULL "
        + " ".join(f"WHEN {c} THEN {d}" for c, _, d in reason_cases)
        + " ELSE coalesce(CASE "
        + " ".join(per_type_detail)
        + " END, CASE "
        + " ".join(f"WHEN {c} THEN {d}" for c, _, d in after)
        + " END) END"
    )
    return reason_expr, detail_expr


# Each envelope fact as the rule walk reads it (``_VERDICT_INPUTS``); the limits are the settings, inlined.
_FACT_SQL = {
    "raw_bytes": "raw_bytes",
    "json": "v",
    "json_kind": (
        "CASE WHEN schema_of_variant(v) LIKE 'OBJECT%' THEN 'object' WHEN schema_of_variant(v) LIKE 'ARRAY%' "
        "THEN 'array' WHEN schema_of_variant(v) = 'STRING' THEN 'string' WHEN schema_of_variant(v) = 'BOOLEAN' "
        "THEN 'boolean' WHEN schema_of_variant(v) = 'VOID' THEN 'null' ELSE 'number' END"
    ),
    "event_type": "event_type",
    "schema_version": "try_variant_get(v, '$.schema_version', 'string')",
    "event_time_ms": "event_time_ms",
}
_LIMIT_SQL = {"kafka_timestamp_ms": "unix_millis(kafka_timestamp)"}


def _limit_sql(name: str, limits: Mapping[str, Any]) -> str:
    if name in _LIMIT_SQL:
        return _LIMIT_SQL[name]
    value = limits[name]
    return str(int(value)) if isinstance(value, int) else _sql_string(str(value))


def _envelope_case(
    check: envelope.EnvelopeCheck, limits: Mapping[str, Any], event_type: str | None = None
) -> tuple[str, str, str]:
    """An envelope check compiled to SQL: (condition, reason, detail), with ``event_type`` (the per-type checks)
    inlined in the detail."""
    fact = _FACT_SQL[check.fact]
    if check.test == "missing":
        condition = f"{fact} IS NULL"
    elif check.test == "above":
        condition = f"{fact} > " + " + ".join(_limit_sql(term, limits) for term in check.limit)
    elif check.test == "not_in":
        values = ", ".join(_sql_string(str(v)) for v in limits[check.limit[0]])
        condition = (
            f"{fact} IS NULL OR {fact} NOT IN ({values})" if check.absent_fails else f"NOT ({fact} IN ({values}))"
        )
    elif check.test == "is_not":
        condition = f"{fact} <> {_sql_string(check.limit[0])}"
    else:
        raise ValueError(f"unknown envelope test {check.test!r}")
    parts = []
    for text, name in re.findall(r"([^{]*)(?:\{(\w+)\})?", check.detail):
        if text:
            parts.append(_sql_string(text))
        if name == "event_type" and event_type is not None:
            parts.append(_sql_string(event_type))
        elif name in _FACT_SQL:
            parts.append(f"coalesce(CAST({_FACT_SQL[name]} AS STRING), {_sql_string(envelope.NONE)})")
        elif name:
            value = limits[name]
            shown = ", ".join(map(str, value)) if isinstance(value, tuple) else str(value)
            parts.append(_sql_string(shown))
    detail = parts[0] if len(parts) == 1 else f"concat({', '.join(parts)})"
    return condition, _sql_string(check.reason), detail


# What the rule walk reads of a record, with their types in ``classify``.
_VERDICT_INPUTS = (
    ("v", "VARIANT"),
    ("raw_bytes", "INT"),
    ("event_type", "STRING"),
    ("event_time_ms", "BIGINT"),
    ("kafka_timestamp", "TIMESTAMP"),
)
_VERDICT_OUTPUTS = ("reason", "detail")


def register_rule_verdict(session: SparkSession, reason_sql: str, detail_sql: str) -> str:
    """Register the rule walk as a JVM function (``RuleVerdict``); its SQL function name.

    The function takes ``named_struct`` of ``_VERDICT_INPUTS`` and returns ``(reason, detail)``; ``detail_sql``
    may read ``reason``. Written inline, the walk's SQL (hundreds of terms, with lambdas) kept the ingest
    projection out of whole-stage codegen, and every task generated its code again; inside the function it
    is analyzed once and evaluated only for the records that need it. The name carries a hash of the SQL.
    """
    input_ddl = ", ".join(f"{name} {sql_type}" for name, sql_type in _VERDICT_INPUTS)
    text = "\0".join((input_ddl, reason_sql, detail_sql))
    name = "rrm_rule_verdict_" + hashlib.sha256(text.encode()).hexdigest()[:12]
    jvm, gateway = session.sparkContext._jvm, session.sparkContext._gateway
    assert jvm is not None and gateway is not None
    names, sqls = gateway.new_array(jvm.String, 2), gateway.new_array(jvm.String, 2)
    for i, (output, sql) in enumerate(zip(_VERDICT_OUTPUTS, (reason_sql, detail_sql), strict=True)):
        names[i], sqls[i] = output, sql
    jvm.io.github.rrm.ingest.RuleVerdict.register(session._jsparkSession, name, input_ddl, names, sqls)
    return name


def typed_column(event_type: str) -> str:
    """The column holding an event's typed fields (a struct shaped by the contract; NULL for other types)."""
    return f"e_{event_type}"


def dead_letter_columns(classified: DataFrame, batch_id: int | None = None) -> DataFrame:
    """The ``dead_letters`` table's columns for rejected rows."""
    from pyspark.sql import functions as F

    return classified.where(F.col("reason").isNotNull()).select(
        F.col("event_type").alias("source"),
        "kafka_topic",
        "kafka_partition",
        "kafka_offset",
        "kafka_timestamp",
        F.substring("raw_value", 1, 65_536).alias("raw_value"),
        "reason",
        "detail",
        F.lit(batch_id).cast("bigint").alias("batch_id"),
        F.lit(None).cast("string").alias("cluster"),  # a rejected record's cluster is not known
    )


def contracts_for(event_types: tuple[str, ...] | None = None) -> dict[str, EventContract]:
    """The contract's schemas as the job accepts them (all known versions of each type)."""
    from streaming.contract import events

    chosen = event_types or events.EVENT_TYPES
    return {
        t: EventContract(
            t,
            _accepting_every_version(events.schema(t), events.SUPPORTED_VERSIONS[t]),
            events.SUPPORTED_VERSIONS[t],
            events.REASON_OVERRIDES,
            {v: events.schema(t, v) for v in events.SUPPORTED_VERSIONS[t]},
        )
        for t in chosen
    }


def _accepting_every_version(newest: Mapping[str, Any], versions: tuple[int, ...]) -> dict[str, Any]:
    """The newest schema with every supported version in its ``schema_version`` enum: each version adds only
    optional fields, so this shapes a struct that holds every version, and its fast path takes an older
    version's event unless a newer field it may carry (ignored by its own rules) breaks the newer rules."""
    widened = dict(newest)
    properties = dict(widened["properties"])
    properties["schema_version"] = {**properties["schema_version"], "enum": list(versions)}
    widened["properties"] = properties
    return widened
