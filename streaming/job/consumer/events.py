"""The consumer state function's input: a shard's Arrow rows as Python columns, and its events in apply order.

``consumer.query``'s state function reads the rows of ``shard_input`` column by column (``read_columns``) and
builds the events the engine applies (``shard_events``): typed channel events from their columns, a poll whose
digest the shard noted as it is (``NotedPoll``, parsed only if the engine must apply it), every other event parsed
once into its type from the JSON of its fields (``parsed_event``), its origin kept beside it;
heartbeat runs handed to ``Shard.apply_runs``, late ones counted, the rest ordered by event time, type and
Kafka coordinates; and the newest channel event per Kafka partition (``lane_times``), which lets the engine
expire silent channels before the watermark does.
"""

from __future__ import annotations

import bisect
import json
import operator
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from streaming.contract.events import EventType
from streaming.domain.consumers.group_state import TopicRoute
from streaming.domain.consumers.membership import ChannelEvent
from streaming.domain.consumers.polled_views import ConnectionPoll, NotedPoll, text_digest
from streaming.domain.consumers.progress_tracker import ConsumeProgress
from streaming.domain.consumers.reported import ReportedAssignment
from streaming.domain.consumers.shard import Shard
from streaming.domain.consumers.shard_engine import EngineEvent
from streaming.job.consumer.heartbeat_runs import RUN, unpack_run

if TYPE_CHECKING:
    import pandas as pd

ROUTE_EVENT = EventType.TOPIC_ROUTE
CHANNEL_EVENT = EventType.CONSUMER_CHANNEL
POLL_EVENT = EventType.CONSUMER_CONNECTIONS
PROGRESS_EVENT = EventType.CONSUME_PROGRESS
# The event types the heartbeat path reads, declared once: its Kafka topics and its contracts follow. A poll
# (consumer_connections) rides on the channel events' topic, so the channel type comes first: a record of that
# topic without a readable ``type`` defaults to it.
CONSUMER_EVENTS = (CHANNEL_EVENT, EventType.REPORTED_ASSIGNMENT, ROUTE_EVENT, PROGRESS_EVENT, POLL_EVENT)
# Each event type's parser from the JSON of its fields (``parsed_event``).
_PARSERS: dict[str, Callable[[Mapping[str, Any]], EngineEvent]] = {
    CHANNEL_EVENT: ChannelEvent.from_json,
    EventType.REPORTED_ASSIGNMENT: ReportedAssignment.from_json,
    ROUTE_EVENT: TopicRoute.from_json,
    PROGRESS_EVENT: ConsumeProgress.from_json,
    POLL_EVENT: ConnectionPoll.from_json,
}
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
    "cluster",
)


class Origin(NamedTuple):
    """Where an event that kept its raw value came from: its dead letter's coordinates, should the engine refuse
    it (``IgnoredEvent``)."""

    kafka_topic: str
    kafka_partition: int
    kafka_offset: int
    kafka_timestamp: Any
    raw_value: str


class ShardEvents(NamedTuple):
    """A shard's events in apply order, how many of each type were late, and the origin of each event that kept
    its raw value, by the event's identity (the engine hands a refused event back as the object it was given)."""

    events: list[EngineEvent]
    late: dict[str, int]
    origins: dict[int, Origin]


# The columns the function reads (the rest, e.g. the event-time timestamp, only serve Spark).
EVENT_COLUMNS = (
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


def read_columns(frames: Iterator[pd.DataFrame], names: tuple[str, ...] = EVENT_COLUMNS) -> dict[str, list[Any]]:
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


def shard_events(
    columns: Mapping[str, list[Any]], engine: Shard, watermark_ms: int, rows: Iterable[int] | None = None
) -> ShardEvents:
    """The shard's events in the order the engine applies them, how many of each type were late, and the origins.

    Order: event time, then event type, then Kafka coordinates. The type orders events of the same millisecond
    (``_SAME_TIME_RANK``) and Kafka coordinates break the remaining ties, so that a replay applies them in the
    same order. Channel events are built from their typed columns (``shard_input``); each distinct subscription
    list is parsed once. A poll whose text's digest the shard noted (``Shard.noted_poll``) is not parsed: a
    ``NotedPoll``. Heartbeat runs (``heartbeat_runs``) go to ``engine.apply_runs`` first; the events it
    leaves to apply stand at the time and offset of a heartbeat each, so they sort exactly where it would.
    An event (or a run's heartbeat) at or before ``watermark_ms`` is late: counted, not applied. ``rows``
    restricts the input to those rows (indices; default all).
    """
    from streaming.domain.consumers.heartbeat_plan import HeartbeatRun
    from streaming.domain.consumers.poll_runs import PollRun

    late: dict[str, int] = {}
    origins: dict[int, Origin] = {}
    if not columns:
        return ShardEvents([], late, origins)
    times, event_types, raw_values = columns["event_time_ms"], columns["event_type"], columns["raw_value"]
    topics, partitions, offsets = columns["kafka_topic"], columns["kafka_partition"], columns["kafka_offset"]
    channel_event_of = _typed_channel_events(columns)
    packed_runs = columns.get(RUN) or [None] * len(times)
    keyed: list[tuple[tuple[Any, ...], Any]] = []
    runs: list[HeartbeatRun] = []
    run_places: list[tuple[str, int, tuple[int, ...]]] = []  # per run: its Kafka topic, partition and offsets
    poll_runs: list[PollRun] = []
    poll_places: list[tuple[str, int, tuple[int, ...]]] = []
    others: list[ChannelEvent | ConnectionPoll | NotedPoll] = []  # channel events and polls outside runs
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
        digest = poll = None
        if event_type == POLL_EVENT and (text := columns["typed_json"][i]) is not None:
            # An unchanged poll of a view the shard noted is not parsed (``NotedPoll``): the engine mostly only
            # notes its time (``ShardEngine._touch``).
            digest = text_digest(text)
            poll = engine.noted_poll(time_ms, digest, text)
            if poll is not None and occurrences is None:
                keyed.append((key, poll))
                others.append(poll)
                continue  # a poll is never handed back (``IgnoredEvent``): it needs no origin
        if occurrences is not None and event_type == POLL_EVENT:  # a run of identical polls (``poll_runs``)
            if poll is None:
                poll = _parsed_event(columns, i, digest)._replace(event_time_ms=time_ms)
            poll_runs.append(PollRun(poll, occurrences))
            poll_places.append((topics[i], partitions[i], run_offsets))
            continue  # a poll is never handed back (``IgnoredEvent``): it needs no origin
        if raw_values[i] is not None:
            event = _parsed_event(columns, i, digest)
            origins[id(event)] = Origin(
                topics[i], partitions[i], offsets[i], columns["kafka_timestamp"][i], raw_values[i]
            )
            keyed.append((key, event))
            if isinstance(event, ChannelEvent | ConnectionPoll):  # the runs' context: a poll replaces its view
                others.append(event)
            continue
        channel_event = channel_event_of(i, time_ms)
        if occurrences is None:
            keyed.append((key, channel_event))
            others.append(channel_event)
        else:
            runs.append(HeartbeatRun(channel_event, occurrences))
            run_places.append((topics[i], partitions[i], run_offsets))
    polls_and_runs = [*others, *(run.event for run in poll_runs)]  # a poll run, too, replaces its view
    context = [*others, *(run.event for run in runs)]
    keyed += _run_events(engine, runs, polls_and_runs, run_places)
    keyed += _poll_run_events(engine, poll_runs, context, poll_places)
    keyed.sort(key=operator.itemgetter(0))
    return ShardEvents([event for _, event in keyed], late, origins)


def lane_times(columns: Mapping[str, list[Any]], rows: Iterable[int] | None = None) -> dict[str, int]:
    """The newest channel event's time per Kafka partition (``topic/partition``) among ``rows`` (default all):
    the lanes of ``ShardEngine.apply``. A partition delivers its events in the order they were published, so a
    channel's heartbeats are never behind a newer event of their own partition (late ones included: they only
    move no clock)."""
    if not columns:
        return {}
    times, event_types = columns["event_time_ms"], columns["event_type"]
    topics, partitions = columns["kafka_topic"], columns["kafka_partition"]
    packed_runs = columns.get(RUN) or [None] * len(times)
    lanes: dict[str, int] = {}
    for i in range(len(event_types)) if rows is None else rows:
        if event_types[i] != CHANNEL_EVENT or times[i] is None:
            continue
        packed = packed_runs[i]
        time_ms = int(times[i] if packed is None else max(unpack_run(packed)[0]))
        lane = f"{topics[i]}/{partitions[i]}"
        if time_ms > lanes.get(lane, time_ms - 1):
            lanes[lane] = time_ms
    return lanes


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
    from streaming.domain.consumers.membership import subscriptions_from_json

    fields = [columns[f"c_{f}"] for f in CHANNEL_FIELDS]
    subscriptions = columns["c_subscriptions"]
    parsed: dict[str | None, Any] = {None: ()}

    def channel_event(i: int, time_ms: int) -> ChannelEvent:
        text = subscriptions[i]
        subs = parsed.get(text)
        if subs is None:
            subs = parsed[text] = subscriptions_from_json(json.loads(text))
        broker, kind, channel, client_id, group, model, consume, version, strategy, cluster = (f[i] for f in fields)
        return ChannelEvent.from_fields(
            time_ms, broker, kind, channel, client_id, group, model, consume, version, subs, strategy, cluster
        )

    return channel_event


def parsed_event(event_type: str, fields: Mapping[str, Any]) -> EngineEvent:
    """An event of ``event_type`` from the JSON object of its fields, as the engine takes it: parsed once, here.
    A value no parser takes raises (the state function then dead-letters the record, ``poison``)."""
    return _PARSERS[event_type](fields)


def _parsed_event(columns: Mapping[str, list[Any]], i: int, digest: str | None = None) -> EngineEvent:
    """Row ``i`` that kept its raw value (any but a typed channel event), from the JSON of its fields (a poll's
    without its time, which ``shard_input`` leaves out so that identical polls fold: the row's time); ``digest``:
    its text's, when known."""
    event_type, text = columns["event_type"][i], columns["typed_json"][i]
    fields = json.loads(text)
    if event_type == POLL_EVENT and "event_time" not in fields:
        # The text is the poll but for its time: its digest tells an unchanged poll (``ConnectionPoll.digest``).
        fields["event_time"] = columns["event_time_ms"][i]
        return ConnectionPoll.from_json(fields, text_digest(text) if digest is None else digest)
    return parsed_event(event_type, fields)


def _run_events(
    engine: Shard,
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


def _poll_run_events(
    engine: Shard,
    runs: list[Any],
    others: list[Any],
    places: list[tuple[str, int, tuple[int, ...]]],
) -> list[tuple[tuple[Any, ...], Any]]:
    """The polls of each poll run that still apply (``Shard.plan_polls``; ``others``: the batch's channel events,
    heartbeat runs' included, and polls outside runs), each keyed at its own time and Kafka offset."""
    rank = _SAME_TIME_RANK[POLL_EVENT]
    keyed: list[tuple[tuple[Any, ...], Any]] = []
    for run, kept, (topic, partition, run_offsets) in zip(runs, engine.plan_polls(runs, others), places, strict=True):
        for index in kept:
            poll = run.event if index == 0 else run.event._replace(event_time_ms=run.times[index])
            keyed.append(((run.times[index], rank, topic, partition, run_offsets[index]), poll))
    return keyed
