"""The heartbeat path: consumer channel events, reported assignments and topic routes -> group analysis.

Design (the README's "How it works" places it among the three queries):

* One Kafka source subscribes the three consumer-side topics (one watermark); brokers' polls
  (``consumer_connections``) share the channel events' topic and reach the engine as their JSON.
  ``ingest.classify`` runs in the JVM; dead letters and valid events continue in the same plan.
* The stateful operator is ``applyInPandasWithState`` keyed by a **shard of groups**
  (``pmod(hash(group), shards)``), not by the group itself: a topic route must reach every group that
  subscribes the topic, and a route event knows its topic, not its groups. Route events are therefore
  replicated into every shard (``explode(sequence(0, shards - 1))``) -- routes change rarely, so this
  costs ``shards`` rows per route change -- and each shard keeps the routes it needs beside the
  membership of its groups. Inside a shard, state and processing are per group.
* ``applyInPandasWithState`` rather than ``transformWithStateInPandas``: one state tuple per key travels
  inside the Arrow batches (no socket round trip per state access, measured ~20% faster in the
  engineering notes), the shard's state is read and written once per batch anyway, and the event-time
  timeout (``GroupStateTimeout.EventTimeTimeout``) is exactly what channel expiry needs: the shard asks to
  be called again at its earliest channel expiry, even when none of its groups sends anything.
* Dead letters ride through the same operator on a reserved key (shard -1) with a NULL event time, so
  the watermark never drops them; the function emits them unchanged.
* Valid channel events (nearly all the traffic: steady heartbeats) reach Python as their typed fields
  from ingest, not as JSON to parse again; the shard's state is one zlib-compressed JSON blob whose
  membership is stored by column (``membership.snapshot``). A steady heartbeat costs the Python side
  about 25 us of CPU, state included (a round of 40,000 in about 1 s over 8 shards; it was 70 us).
* Before the operator, the JVM folds each channel's identical heartbeats of a Spark partition into one row
  with every heartbeat's time and offset (``heartbeat_runs``): a batch of a fleet catching up holds a dozen
  heartbeats per channel, and only one row each crosses to Python. There the engine takes them before the
  batch's events (``fleet.ShardEngine.apply_runs``): a run that only refreshes a channel it knows costs a
  dictionary update, and the answer is exactly that of applying every heartbeat.
* Late input: an event at or before the watermark the operator sees (``GroupState.getCurrentWatermarkMs``,
  the batch's watermark) is counted as a ``late_events`` record (reason ``watermark``) and not applied. The
  check is made here, per heartbeat of a run, rather than by Spark: Spark drops rows older than the
  *previous* batch's watermark, which a state function cannot know, and a run's row stands for heartbeats of
  several times. So the operator's event-time column is NULL on every row (``_without_spark_late_filter``);
  the watermark itself is computed before that, from every row's real time.
* The engine returns typed outcomes; the function emits them as rows ``(table, payload)`` -- payload is JSON
  in the shape of the Delta table, mapped in ``table_rows`` -- and the ``foreachBatch`` sink fans them out into
  the tables, exactly once.

The per-shard logic itself is pure Python in ``streaming.domain.fleet`` (time passed in as the watermark),
so this module is only the Spark adapter: rows in, state (de)serialisation, rows out.
"""

from __future__ import annotations

import bisect
import gc
import json
import logging
import operator
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from streaming.contract.events import EVENT_TYPES
from streaming.domain.engine_settings import EngineSettings
from streaming.domain.fleet import ShardEngine
from streaming.domain.outcomes import IgnoredEvent, LateEvent, Outcome
from streaming.domain.vocabulary import LateReason
from streaming.job import heartbeat_runs, state_blob
from streaming.job.heartbeat_runs import RUN, unpack_run
from streaming.job.ingest import EventContract, IngestSettings, classify, kafka_stream, typed_column
from streaming.job.poison import PROCESSING_ERROR, isolate
from streaming.job.python_worker import freeze_imported_heap
from streaming.job.table_rows import DEAD_LETTERS, dead_letter, ignored_letter, rows_of

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

DEAD_LETTER_SHARD = -1
OUTPUT_SCHEMA = "table STRING, payload STRING"
STATE_SCHEMA = state_blob.SCHEMA
ROUTE_EVENT = "topic_route"
CHANNEL_EVENT = "consumer_channel"
POLL_EVENT = "consumer_connections"
# The channel event's fields the engine reads, passed as columns ``c_<field>`` (see ``shard_input``).
CHANNEL_FIELDS = (
    "broker",
    "kind",
    "channel",
    "client_id",
    "group",
    "message_model",
    "consume_type",
    "client_version",
    "allocate_strategy",
)
# The key under which ``_events`` attaches an event's Kafka coordinates and raw value to the event it hands the
# engine, which hands it back untouched when it refuses the event (``IgnoredEvent``): its dead letter's origin.
ORIGIN_KEY = "_origin"


def shard_input(classified: DataFrame, shards: int) -> DataFrame:
    """Rows for the stateful operator: (shard, event_time, kind, channel fields or raw_value, dead-letter columns).

    A valid channel event (almost all the traffic) travels as its typed fields from ingest -- scalar
    columns, its subscriptions as one JSON string -- and without its raw value: Python then neither
    parses each event's JSON nor receives it. Other events (rare) and dead letters keep the raw value and
    the Kafka timestamp, which a dead letter of the engine's (``fleet.UNKNOWN_GROUP``) needs.
    """
    from pyspark.sql import functions as F

    valid = F.col("reason").isNull()
    channel = F.col(typed_column(CHANNEL_EVENT))
    # Only the event types this input was classified for have typed columns.
    grouped = [typed_column(t) for t in (CHANNEL_EVENT, "reported_assignment", POLL_EVENT)]
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
    fields_json = F.lit(None).cast("string")
    for event_type in EVENT_TYPES:
        column = typed_column(event_type)
        if column in classified.columns:
            fields_json = F.when(valid & (F.col("event_type") == event_type), F.to_json(column)).otherwise(fields_json)
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


def make_state_function(settings: EngineSettings, poison_marker: str | None = None):  # type: ignore[no-untyped-def]
    """The function given to ``applyInPandasWithState``; ``settings`` is the configuration's
    ``engine_settings`` (frozen, pickled to the workers as is).

    ``poison_marker`` is for tests only: applying an event whose client id or JSON holds it raises, as an
    event the validator did not foresee might (see ``poison``)."""

    def process(key: tuple[Any, ...], frames: Iterator[pd.DataFrame], state: Any) -> Iterator[pd.DataFrame]:
        import pandas as pd

        freeze_imported_heap()
        with _collector_paused():
            tables, payloads = _process_shard(int(key[0]), frames, state, settings, poison_marker)
        yield pd.DataFrame({"table": tables, "payload": payloads})

    return process


def _process_shard(
    shard: int, frames: Iterator[pd.DataFrame], state: Any, settings: EngineSettings, poison_marker: str | None
) -> tuple[list[str], list[str]]:
    """One call for a shard: its rows' tables and payloads. The dead-letter shard's rows pass as they are; any
    other shard's engine is restored from its state, advanced (a timeout) or given the rows, and stored again."""
    if shard == DEAD_LETTER_SHARD:
        payloads = _dead_letters(_columns(frames, _DEAD_LETTER_COLUMNS))
        return [DEAD_LETTERS] * len(payloads), payloads
    columns = _columns(frames)  # read even when the state timed out (then without rows)
    watermark_ms = max(int(state.getCurrentWatermarkMs()), 0)
    letter_rows: list[tuple[str, dict[str, Any]]] = []
    if state.hasTimedOut:
        engine = ShardEngine.restore(state_blob.load(state), settings)
        outcomes = engine.advance(watermark_ms)
    else:
        engine, outcomes, letter_rows = _apply_isolating_poison(
            shard, columns, state, settings, watermark_ms, poison_marker
        )
    records = _as_job_rows(outcomes, shard) + letter_rows
    _store_engine(state, engine, watermark_ms)
    return [t for t, _ in records], [state_blob.encode(p) for _, p in records]


def _apply_isolating_poison(
    shard: int,
    columns: dict[str, list[Any]],
    state: Any,
    settings: EngineSettings,
    watermark_ms: int,
    poison_marker: str | None,
) -> tuple[ShardEngine, list[Outcome], list[tuple[str, dict[str, Any]]]]:
    """The shard's rows applied to its engine; the records processing fails on are set apart (``poison.isolate``)
    and returned as dead-letter rows."""

    def attempt(rows: Sequence[int]) -> tuple[ShardEngine, list[Outcome]]:
        # From the stored state each time: a failed attempt may have changed its engine half-way.
        engine = ShardEngine.restore(state_blob.load(state), settings)
        events, late = _events(columns, engine, watermark_ms, rows)
        outcomes = engine.apply(_raising_on_marker(events, poison_marker), watermark_ms)
        return engine, outcomes + [LateEvent(LateReason.WATERMARK, t, count=n) for t, n in late.items()]

    (engine, outcomes), refused = isolate(range(len(columns.get("event_type", ()))), attempt)
    letter_rows: list[tuple[str, dict[str, Any]]] = []
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
    return engine, outcomes, letter_rows


def _store_engine(state: Any, engine: ShardEngine, watermark_ms: int) -> None:
    """Keep the engine in the shard's state (removed when empty), waking the shard at its next expiry."""
    if engine.is_empty():
        state.remove()
    else:
        state_blob.store(state, engine.snapshot())
        next_wakeup_ms = engine.next_wakeup_ms()
        if next_wakeup_ms is not None:
            state.setTimeoutTimestamp(max(next_wakeup_ms, watermark_ms + 1))


def _raising_on_marker(events: list[Any], marker: str | None) -> Iterator[Any]:
    """``events``, raising when one holds ``marker`` (the tests' stand-in for an event processing cannot take)."""
    from streaming.domain.membership import ChannelEvent

    for event in events:
        if marker is not None:
            text = (
                event.client_id
                if isinstance(event, ChannelEvent)
                else json.dumps({k: v for k, v in event.items() if k != ORIGIN_KEY})
            )
            if marker in text:
                raise ValueError(f"test poison marker {marker!r} in an event")
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
            _timestamp_text(columns["kafka_timestamp"][row]),
            raw,
            PROCESSING_ERROR,
            detail,
        )
        for offset in offsets
    ]


def _as_job_rows(outcomes: list[Outcome], shard: int) -> list[tuple[str, dict[str, Any]]]:
    """The engine's outcomes as the sink takes them (``table_rows``): an ignored event becomes a dead letter
    built from the origin ``_events`` attached to it, and late routes are counted by shard 0 only (every shard
    receives every route, so every shard finds the same ones stale or late)."""
    rows: list[tuple[str, dict[str, Any]]] = []
    for outcome in outcomes:
        if type(outcome) is IgnoredEvent:
            topic, partition, offset, timestamp, raw_value = outcome.event[ORIGIN_KEY]
            rows.append(
                ignored_letter(outcome, topic, int(partition), int(offset), _timestamp_text(timestamp), raw_value)
            )
        elif type(outcome) is LateEvent and shard != 0 and outcome.event_type == ROUTE_EVENT:
            continue
        else:
            rows += rows_of(outcome)
    return rows


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while one shard is processed.

    Restoring a shard allocates tens of thousands of small long-lived objects (channels, views); each
    allocation burst makes the collector traverse them all again, for nothing: the engine builds no
    reference cycles. Measured: about a third of a steady batch's CPU. Reference counting still frees
    everything; the collector runs again once the call is over.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


# The columns the function reads (the rest, e.g. the event-time timestamp, only serve Spark).
_EVENT_COLUMNS = (
    "event_time_ms",
    "event_type",
    "kafka_topic",
    "kafka_partition",
    "kafka_offset",
    "kafka_timestamp",
    "raw_value",
    "typed_json",
    *(f"c_{f}" for f in CHANNEL_FIELDS),
    "c_subscriptions",
)
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


def _columns(frames: Iterator[pd.DataFrame], names: tuple[str, ...] = _EVENT_COLUMNS) -> dict[str, list[Any]]:
    """The key's rows as Python lists per column (iterating lists is far cheaper than row dicts), with the packed
    heartbeat runs (``heartbeat_runs.RUN``) when the input has them (the benchmark's query without runs has
    not)."""
    columns: dict[str, list[Any]] = {}
    for frame in frames:
        for name in (*names, RUN) if RUN in frame else names:
            columns.setdefault(name, []).extend(frame[name].tolist())
    return columns


# Events of the same millisecond apply routes first, then channel events, then reported assignments (and any
# other type): the world a client sees, its members, then what they report. A report about a group must follow
# the group's first channel event to be compared with anything, whatever the configured topics are called.
_SAME_TIME_RANK = {ROUTE_EVENT: 0, CHANNEL_EVENT: 1, POLL_EVENT: 1}
_LAST_RANK = 2


def _events(
    columns: Mapping[str, list[Any]], engine: ShardEngine, watermark_ms: int, rows: Iterable[int] | None = None
) -> tuple[list[Any], dict[str, int]]:
    """The shard's events in the order the engine applies them, and how many of each type were late.

    Order: event time, then event type, then Kafka coordinates. The type orders events of the same millisecond
    (``_SAME_TIME_RANK``) and Kafka coordinates break the remaining ties, so that a replay applies them in the
    same order. Channel events are built from their typed columns (``shard_input``); each distinct subscription
    list is parsed once. Heartbeat runs (``heartbeat_runs``) go to ``engine.apply_runs`` first; the events it
    leaves to apply stand at the time and offset of a heartbeat each, so they sort exactly where it would.
    An event (or a run's heartbeat) at or before ``watermark_ms`` is late: counted, not applied. ``rows``
    restricts the input to those rows (indices; default all).
    """
    from streaming.domain.heartbeat_plan import HeartbeatRun
    from streaming.domain.membership import ChannelEvent

    late: dict[str, int] = {}
    if not columns:
        return [], late
    times, event_types, raw_values = columns["event_time_ms"], columns["event_type"], columns["raw_value"]
    topics, partitions, offsets = columns["kafka_topic"], columns["kafka_partition"], columns["kafka_offset"]
    channel_event_of = _typed_channel_events(columns)
    packed_runs = columns.get(RUN) or [None] * len(times)
    keyed: list[tuple[tuple[Any, ...], Any]] = []
    runs: list[HeartbeatRun] = []
    run_places: list[tuple[str, int, tuple[int, ...]]] = []  # per run: its Kafka topic, partition and offsets
    others: list[ChannelEvent] = []  # channel events outside runs: the runs' context (``apply_runs``)
    for i in range(len(event_types)) if rows is None else rows:
        event_type = event_types[i]
        if (packed := packed_runs[i]) is None:  # one event
            occurrences = None
            time_ms = times[i]
            if time_ms <= watermark_ms:
                late[event_type] = late.get(event_type, 0) + 1
                continue
        else:  # a run: its late heartbeats come first
            late_count, occurrences, run_offsets = _run_in_time(packed, watermark_ms)
            if late_count:
                late[event_type] = late.get(event_type, 0) + late_count
                if not occurrences:
                    continue
            time_ms = occurrences[0]
        key = (time_ms, _SAME_TIME_RANK.get(event_type, _LAST_RANK), topics[i], partitions[i], offsets[i])
        if raw_values[i] is not None:
            event, context = _json_event(columns, i, time_ms)
            keyed.append((key, event))
            others += context
            continue
        channel_event = channel_event_of(i, time_ms)
        if occurrences is None:
            keyed.append((key, channel_event))
            others.append(channel_event)
        else:
            runs.append(HeartbeatRun(channel_event, occurrences))
            run_places.append((topics[i], partitions[i], run_offsets))
    keyed += _run_events(engine, runs, others, run_places)
    keyed.sort(key=operator.itemgetter(0))
    return [event for _, event in keyed], late


def _run_in_time(packed: bytes, watermark_ms: int) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    """A packed heartbeat run (``heartbeat_runs``) split at ``watermark_ms``: how many of its heartbeats are
    late (they come first), and the times and Kafka offsets of the others."""
    occurrences, run_offsets = unpack_run(packed)
    first = bisect.bisect_right(occurrences, watermark_ms)
    if first:
        occurrences, run_offsets = occurrences[first:], run_offsets[first:]
    return first, occurrences, run_offsets


def _typed_channel_events(columns: Mapping[str, list[Any]]) -> Callable[[int, int], Any]:
    """A function building the channel event of a typed row (``shard_input``'s ``c_`` columns) at a time; it
    parses each distinct subscription list once."""
    from streaming.domain.membership import ChannelEvent, subscriptions_from_json

    fields = [columns[f"c_{f}"] for f in CHANNEL_FIELDS]
    subscriptions = columns["c_subscriptions"]
    parsed: dict[str | None, Any] = {None: ()}

    def channel_event(i: int, time_ms: int) -> ChannelEvent:
        text = subscriptions[i]
        subs = parsed.get(text)
        if subs is None:
            subs = parsed[text] = subscriptions_from_json(json.loads(text))
        broker, kind, channel, client_id, group, model, consume, version, strategy = (f[i] for f in fields)
        return ChannelEvent.from_fields(
            time_ms, broker, kind, channel, client_id, group, model, consume, version, subs, strategy
        )

    return channel_event


def _json_event(columns: Mapping[str, list[Any]], i: int, time_ms: int) -> tuple[dict[str, Any], list[Any]]:
    """Row ``i`` that kept its raw value (any but a typed channel event) as the JSON of its fields, its origin
    attached (``ORIGIN_KEY``), and the channel events it puts in the runs' context (one or none)."""
    from streaming.domain.membership import ChannelEvent

    event = json.loads(columns["typed_json"][i])
    event[ORIGIN_KEY] = (
        columns["kafka_topic"][i],
        columns["kafka_partition"][i],
        columns["kafka_offset"][i],
        columns["kafka_timestamp"][i],
        columns["raw_value"][i],
    )
    event_type = columns["event_type"][i]
    if event_type == CHANNEL_EVENT:
        return event, [ChannelEvent.from_json(event)]
    if event_type == POLL_EVENT:
        # A poll replaces its broker's view: no heartbeat run of that view may skip its place.
        return event, [ChannelEvent(time_ms, str(event["broker"]), "POLL", "", "", str(event["group"]))]
    return event, []


def _run_events(
    engine: ShardEngine,
    runs: list[Any],
    others: list[Any],
    run_places: list[tuple[str, int, tuple[int, ...]]],
) -> list[tuple[tuple[Any, ...], Any]]:
    """The events ``engine.apply_runs`` leaves to apply of the heartbeat ``runs`` (``others``: the channel
    events outside runs), each keyed at the time and Kafka offset of its heartbeat."""
    channel_rank = _SAME_TIME_RANK[CHANNEL_EVENT]
    return [
        ((run.times[index], channel_rank, topic, partition, run_offset[index]), event)
        for run, plan, (topic, partition, run_offset) in zip(
            runs, engine.apply_runs(runs, others), run_places, strict=True
        )
        for index, event in plan
    ]


def _timestamp_text(timestamp: Any) -> str | None:
    """A Kafka timestamp as pandas hands it over, as text the sink parses (None for NULL, which pandas
    hands over as ``NaT`` in a column that has any timestamp)."""
    return None if timestamp is None or timestamp != timestamp else str(timestamp)  # NaT != NaT


def _dead_letters(columns: Mapping[str, list[Any]]) -> list[str]:
    rows = zip(*(columns.get(c, []) for c in _DEAD_LETTER_COLUMNS), strict=True)
    return [
        state_blob.encode(
            dead_letter(
                event_type or "consumer",
                topic,
                int(partition),
                int(offset),
                _timestamp_text(timestamp),
                raw_value,
                reason,
                detail,
            )
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
    poison_marker: str | None = None,
) -> DataFrame:
    """Kafka -> classify -> shard -> heartbeat runs -> stateful engine -> (table, payload) rows.

    ``state_function`` replaces the engine (``make_state_function``); the benchmark passes one that does
    nothing, to measure what the query costs around the engine. ``poison_marker``: tests only (see
    ``make_state_function``)."""
    from pyspark.sql.streaming.state import GroupStateTimeout

    classified = classify(kafka_stream(session, ingest), contracts, ingest)
    sharded = heartbeat_runs.compress(shard_input(classified, shards))
    sharded = _without_spark_late_filter(sharded.withWatermark("event_time", watermark_delay))
    return sharded.groupBy("shard").applyInPandasWithState(
        state_function or make_state_function(engine_settings, poison_marker),
        OUTPUT_SCHEMA,
        STATE_SCHEMA,
        "append",
        GroupStateTimeout.EventTimeTimeout,
    )
