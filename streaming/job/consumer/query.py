"""The heartbeat path: consumer channel events, reported assignments, topic routes and consume progress -> group
analysis and queue progress.

The Spark adapter around ``streaming.domain.consumers.shard.Shard`` (a ``ShardEngine`` per RocketMQ cluster): Kafka
records classified in the JVM, keyed by a shard of groups (routes replicated into every shard), heartbeat runs
folded, then ``applyInPandasWithState`` restores each shard's engine, applies its events at the batch's watermark
(``consumer.events``) and emits the outcomes as typed rows (``table_rows``, ``delta.bus``).
Why so: ``docs/design/consumer-query.md``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from streaming.contract.events import EVENT_TYPES, EventType
from streaming.domain.consumers.engine_settings import EngineSettings
from streaming.domain.consumers.membership import ChannelEvent
from streaming.domain.consumers.outcomes import IgnoredEvent, LateEvent
from streaming.domain.consumers.shard import ClusterOutcome, Shard
from streaming.domain.consumers.shard_engine import TEXT_KEYS, EngineEvent
from streaming.domain.vocabulary import LateReason
from streaming.job.consumer import heartbeat_runs
from streaming.job.consumer.events import (
    CHANNEL_EVENT,
    CHANNEL_FIELDS,
    POLL_EVENT,
    PROGRESS_EVENT,
    ROUTE_EVENT,
    Origin,
    lane_times,
    read_columns,
    shard_events,
)
from streaming.job.consumer.heartbeat_runs import RUN, unpack_run
from streaming.job.delta.bus import output_frame, output_schema
from streaming.job.delta.table_rows import DEAD_LETTERS, Row, dead_letter, ignored_letter, rows_of
from streaming.job.ingest.classify import EventContract, IngestSettings, classify, kafka_stream, typed_column
from streaming.job.ingest.poison import PROCESSING_ERROR, isolate, planted, planted_marker, raise_if_planted
from streaming.job.runtime import state_blob
from streaming.job.runtime.python_worker import collector_paused, freeze_imported_heap

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

DEAD_LETTER_SHARD = -1
STATE_SCHEMA = state_blob.SCHEMA


def shard_input(classified: DataFrame, shards: int) -> DataFrame:
    """Rows for the stateful operator: (shard, event_time, kind, channel fields or raw_value, dead-letter columns).

    A valid channel event (almost all the traffic) travels as its typed fields from ingest -- scalar
    columns, its subscriptions as one JSON string -- and without its raw value: Python then neither
    parses each event's JSON nor receives it. Other events (rare) and dead letters keep the raw value and
    the Kafka timestamp, which a dead letter of the engine's (``shard_engine.UNKNOWN_GROUP``) needs.
    """
    from pyspark.sql import functions as F

    valid = F.col("reason").isNull()
    channel = F.col(typed_column(CHANNEL_EVENT))
    # Only the event types this input was classified for have typed columns.
    grouped = [typed_column(t) for t in (CHANNEL_EVENT, EventType.REPORTED_ASSIGNMENT, POLL_EVENT, PROGRESS_EVENT)]
    group = F.coalesce(*[F.col(f"{c}.group") for c in grouped if c in classified.columns])
    shard = (
        F.when(~valid, F.array(F.lit(DEAD_LETTER_SHARD)))
        .when(F.col("event_type") == ROUTE_EVENT, F.sequence(F.lit(0), F.lit(shards - 1)))
        .otherwise(F.array(F.pmod(F.hash(group), F.lit(shards))))
    )
    typed = valid & (F.col("event_type") == CHANNEL_EVENT) & channel.isNotNull()
    # Any other valid event reaches Python as JSON of the fields validation proved (``typed_json``), never as
    # its raw value: that is the dead letter's, should the engine refuse the event. A raw value may hold what
    # Spark's reader ignores and Python's would not (text after the object), or fields no step should read.
    # A poll's JSON leaves its time out (the row's ``event_time_ms`` has it): a broker's unchanged polls of a group
    # are then equal rows but for their time and offset, which ``heartbeat_runs`` folds (``poll_runs``).
    fields_json = F.lit(None).cast("string")
    for event_type in EVENT_TYPES:
        column = typed_column(event_type)
        if column in classified.columns:
            fields = F.col(column).dropFields("event_time") if event_type == POLL_EVENT else F.col(column)
            fields_json = F.when(valid & (F.col("event_type") == event_type), F.to_json(fields)).otherwise(fields_json)
    return classified.select(
        F.explode(shard).alias("shard"),
        F.when(valid, F.timestamp_millis(F.col("event_time_ms"))).alias("event_time"),
        "event_type",
        "event_time_ms",
        F.when(~typed, F.col("raw_value")).alias("raw_value"),
        F.when(~typed, fields_json).alias("typed_json"),
        *[F.when(typed, channel[f]).alias(f"c_{f}") for f in CHANNEL_FIELDS],
        F.when(typed, F.to_json(channel["subscriptions"])).alias("c_subscriptions"),
        "reason",
        "detail",
        "kafka_topic",
        "kafka_partition",
        "kafka_offset",
        F.when(~typed, F.col("kafka_timestamp")).alias("kafka_timestamp"),  # like the raw value
    )


def make_state_function(settings: EngineSettings):  # type: ignore[no-untyped-def]
    """The function given to ``applyInPandasWithState``; ``settings`` is the configuration's
    ``engine_settings`` (frozen, pickled to the workers as is), and the tests' planted marker with it
    (``poison.planted``: applying an event whose client id or fields hold it raises)."""
    marker = planted_marker()

    def process(key: tuple[Any, ...], frames: Iterator[pd.DataFrame], state: Any) -> Iterator[pd.DataFrame]:
        freeze_imported_heap()
        with collector_paused(), planted(marker):
            records = _process_shard(int(key[0]), frames, state, settings)
        yield output_frame(records)

    return process


def _process_shard(shard: int, frames: Iterator[pd.DataFrame], state: Any, settings: EngineSettings) -> list[Row]:
    """One call for a shard: its typed rows ``(kind, row)``. The dead-letter shard's rows pass as they are; any
    other shard's engine is restored from its state, advanced (a timeout) or given the rows, and stored again."""
    if shard == DEAD_LETTER_SHARD:
        return _dead_letters(read_columns(frames, _DEAD_LETTER_COLUMNS))
    columns = read_columns(frames)  # read even when the state timed out (then without rows)
    watermark_ms = max(int(state.getCurrentWatermarkMs()), 0)
    letter_rows: list[Row] = []
    origins: dict[int, Origin] = {}
    if state.hasTimedOut:
        engine = Shard.restore(state_blob.load(state), settings)
        outcomes: list[ClusterOutcome] = engine.advance(watermark_ms)
    else:
        engine, outcomes, letter_rows, origins = _apply_isolating_poison(shard, columns, state, settings, watermark_ms)
    records = _as_job_rows(outcomes, shard, origins) + letter_rows
    _store_engine(state, engine, watermark_ms)
    return records


def _apply_isolating_poison(
    shard: int,
    columns: dict[str, list[Any]],
    state: Any,
    settings: EngineSettings,
    watermark_ms: int,
) -> tuple[Shard, list[ClusterOutcome], list[Row], dict[int, Origin]]:
    """The shard's rows applied to its engine; the records processing fails on are set apart (``poison.isolate``)
    and returned as dead-letter rows; and the origins of the events that kept their raw value."""

    def attempt(rows: Sequence[int]) -> tuple[Shard, list[ClusterOutcome]]:
        # From the stored state each time: a failed attempt may have changed its engine half-way.
        engine = Shard.restore(state_blob.load(state), settings)
        events, late, found = shard_events(columns, engine, watermark_ms, rows)
        origins.update(found)  # kept with ``events`` alive: the keys are the events' identities
        held.append(events)
        outcomes = engine.apply(_raising_if_planted(events), watermark_ms, lane_times(columns, rows))
        default = settings.default_cluster  # late events are counted, not kept per cluster
        return engine, outcomes + [
            ClusterOutcome(default, LateEvent(LateReason.WATERMARK, t, count=n)) for t, n in late.items()
        ]

    origins: dict[int, Origin] = {}
    held: list[list[Any]] = []
    (engine, outcomes), refused = isolate(range(len(columns.get("event_type", ()))), attempt)
    letter_rows: list[Row] = []
    for culprit in refused:
        letters = _refused_letters(columns, culprit.item, culprit.detail)
        log.error(
            "consumer shard %d: processing fails on %s at %s[%s] offsets %s, dead-lettered as %s: %s",
            shard,
            letters[0]["source"],
            letters[0]["kafka_topic"],
            letters[0]["kafka_partition"],
            [r["kafka_offset"] for r in letters],
            PROCESSING_ERROR,
            culprit.detail,
        )
        letter_rows += [(DEAD_LETTERS, letter) for letter in letters]
    return engine, outcomes, letter_rows, origins


def _store_engine(state: Any, engine: Shard, watermark_ms: int) -> None:
    """Keep the engine in the shard's state (removed when empty), waking the shard at its next expiry."""
    if engine.is_empty():
        state.remove()
    else:
        state_blob.store(state, engine.snapshot(), TEXT_KEYS)
        next_wakeup_ms = engine.next_wakeup_ms()
        if next_wakeup_ms is not None:
            state.setTimeoutTimestamp(max(next_wakeup_ms, watermark_ms + 1))


def _raising_if_planted(events: list[EngineEvent]) -> Iterator[EngineEvent]:
    """``events``, raising at one whose client id (a channel event) or fields hold the tests' planted marker."""
    marker = planted_marker()
    for event in events:
        if marker is not None:
            raise_if_planted(event.client_id if isinstance(event, ChannelEvent) else repr(event), "an event")
        yield event


def _refused_letters(columns: Mapping[str, list[Any]], row: int, detail: str) -> list[dict[str, Any]]:
    """Dead letters (``PROCESSING_ERROR``) for the records of input row ``row``: one, or a heartbeat run's each.

    The raw value is the record's when the row kept it; a typed channel event's row did not (its raw value
    never leaves the JVM), so its letter holds the event's fields as the job read them."""
    raw = columns["raw_value"][row]
    if raw is None:
        fields = {f: columns[f"c_{f}"][row] for f in CHANNEL_FIELDS}
        text = columns["c_subscriptions"][row]
        fields["subscriptions"] = None if text is None else json.loads(text)
        raw = json.dumps({"type": columns["event_type"][row], "event_time": columns["event_time_ms"][row], **fields})
    packed = columns.get(RUN, [None] * (row + 1))[row]
    offsets = [columns["kafka_offset"][row]] if packed is None else list(unpack_run(packed)[1])
    return [
        dead_letter(
            columns["event_type"][row],
            columns["kafka_topic"][row],
            int(columns["kafka_partition"][row]),
            int(offset),
            _timestamp(columns["kafka_timestamp"][row]),
            raw,
            PROCESSING_ERROR,
            detail,
        )
        for offset in offsets
    ]


def _as_job_rows(outcomes: list[ClusterOutcome], shard: int, origins: Mapping[int, Origin]) -> list[Row]:
    """The engine's outcomes as the sink takes them (``table_rows``), each row with its outcome's ``cluster``: an
    ignored event becomes a dead letter built from the origin ``shard_events`` kept for it, and late routes are
    counted by shard 0 only (every shard receives every route, so every shard finds the same ones stale or late)."""
    rows: list[Row] = []
    for cluster, outcome in outcomes:
        if type(outcome) is IgnoredEvent:
            topic, partition, offset, timestamp, raw_value = origins[id(outcome.event)]
            rows.append(
                ignored_letter(outcome, topic, int(partition), int(offset), _timestamp(timestamp), raw_value, cluster)
            )
        elif type(outcome) is LateEvent and shard != 0 and outcome.event_type == ROUTE_EVENT:
            continue
        else:
            rows += rows_of(outcome, cluster)
    return rows


_DEAD_LETTER_COLUMNS = (
    "event_type",
    "kafka_topic",
    "kafka_partition",
    "kafka_offset",
    "kafka_timestamp",
    "raw_value",
    "reason",
    "detail",
)


def _timestamp(timestamp: Any) -> Any:
    """A Kafka timestamp as pandas hands it over, as the output's TIMESTAMP takes it (None for NULL, which pandas
    hands over as ``NaT`` in a column that has any timestamp)."""
    return None if timestamp is None or timestamp != timestamp else timestamp  # NaT != NaT


def _dead_letters(columns: Mapping[str, list[Any]]) -> list[Row]:
    rows = zip(*(columns.get(c, []) for c in _DEAD_LETTER_COLUMNS), strict=True)
    return [
        (
            DEAD_LETTERS,
            dead_letter(
                event_type or "consumer",
                topic,
                int(partition),
                int(offset),
                _timestamp(timestamp),
                raw_value,
                reason,
                detail,
            ),
        )
        for event_type, topic, partition, offset, timestamp, raw_value, reason, detail in rows
    ]


def _without_spark_late_filter(watermarked: DataFrame) -> DataFrame:
    """The watermarked rows with a NULL event time that still carries the watermark's column metadata.

    An event-time timeout needs such a column in the operator's input, and Spark drops the rows whose value in
    it is older than the previous batch's watermark. NULL is never older, so every row reaches the state
    function, which applies the batch's own watermark per event and per heartbeat of a run (see the module
    docstring). The watermark is computed upstream, by ``withWatermark``, from the real times."""
    from pyspark.sql import functions as F

    metadata = watermarked.schema["event_time"].metadata
    return watermarked.select(
        *[F.col(c) for c in watermarked.columns if c != "event_time"],
        F.lit(None).cast("timestamp").alias("event_time", metadata=metadata),
    )


def build_consumer_stream(
    session: SparkSession,
    ingest: IngestSettings,
    contracts: Mapping[str, EventContract],
    shards: int,
    watermark_delay: str,
    engine_settings: EngineSettings,
    state_function: Callable[..., Iterator[pd.DataFrame]] | None = None,
) -> DataFrame:
    """Kafka -> classify -> shard -> heartbeat runs -> stateful engine -> typed rows (``bus.output_schema``).

    ``state_function`` replaces the engine (``make_state_function``); the benchmark passes one that does
    nothing, to measure what the query costs around the engine."""
    from pyspark.sql.streaming.state import GroupStateTimeout

    classified = classify(kafka_stream(session, ingest), contracts, ingest)
    sharded = heartbeat_runs.compress(shard_input(classified, shards))
    sharded = _without_spark_late_filter(sharded.withWatermark("event_time", watermark_delay))
    return sharded.groupBy("shard").applyInPandasWithState(
        state_function or make_state_function(engine_settings),
        output_schema(),
        STATE_SCHEMA,
        "append",
        GroupStateTimeout.EventTimeTimeout,
    )
