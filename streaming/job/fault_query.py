"""The fault-window query: reduced send results -> one fault item per (producer, broker) -> Delta.

Reads the internal ``_send_fault_updates`` table (written by ``send-ingest``, see ``send_query``) as a
Delta stream into ``applyInPandasWithState``, keyed by a **shard of producers**
(``pmod(xxhash64(producer_id), shards)``, ``[producers] state_shards``), not by (producer, broker): every
live pair has a row or two in every batch (``send_reduce`` keeps each pair's first and last send), and a
state key costs ``applyInPandasWithState`` about 0.8 ms per batch in pandas and Arrow round trips before the
function does anything -- most of the query's time with thousands of pairs. Inside a shard the state and
the processing are per pair, as they were per key:

* each pair holds a one-item ``FaultWindowTracker`` (``streaming.domain.fault_tracker``) with the producer's fault
  table and semantics, and its producer group;
* each pair has its own wake-up time -- its window's end, else its last send + ``state_ttl_ms`` -- and the
  shard asks to be woken at the earliest (event-time timeout). When the watermark passes a pair's wake-up
  time, the pair is advanced to the watermark: an EXPIRED episode is written at the window's exact end even
  when the producer sends nothing more, and a pair idle for ``state_ttl_ms`` with no open window is evicted.
  That is what a per-pair timeout did: Spark times a key out once the watermark is past its timestamp.

The shard's state is one zlib-compressed JSON blob; only the pairs with sends or due are rebuilt as
trackers in a call, the others travel as stored.

Output rows ``(table, payload)`` go to ``fault_windows`` (history) and ``producer_broker_status_current``
(MERGE); the sink then recomputes ``broker_status_current`` from the latter at the batch's event time.

A send whose ``fault_table`` is NULL comes from a producer without ``sendLatencyFaultEnable`` (the send
result said so, or ``[producers] send_latency_fault_enable`` is false and it said nothing): it updates no
fault item and opens no window, and its pair's status row has no table and no end -- a producer that sends
to the broker and avoids nothing. ``start_detector_enable`` is 5.x ``startDetectorEnable``: remoting errors
then leave the item unreachable (the detector's later probes are not observed: the next send says).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from streaming.domain.state_codec import unwrap_state, wrap_state
from streaming.job import state_blob
from streaming.job.python_worker import freeze_imported_heap

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession

    from streaming.domain.rules import FaultSettings

OUTPUT_SCHEMA = "table STRING, payload STRING"
STATE_SCHEMA = state_blob.SCHEMA
SNAPSHOT_KIND = "fault shard"
SNAPSHOT_SCHEMA_VERSION = 1

Pair = tuple[str, str]  # (producer id, broker)


class _Send(NamedTuple):
    """One reduced send as the state function reads it (a few of ``_send_fault_updates``'s columns)."""

    producer_id: str
    broker: str
    event_time_ms: int
    kafka_partition: int
    kafka_offset: int
    producer_group: Any
    latency_ms: int
    outcome: Any
    fault_table: Any  # a table name, or None/NaN: the producer runs without sendLatencyFaultEnable


class _Stored(NamedTuple):
    """A pair's state inside its shard's blob."""

    wake_ms: int  # the event-time timeout it asked for: handled once the watermark is past it
    group: str
    tracker: dict[str, Any]  # FaultWindowTracker.to_dict()


def make_state_function(settings: FaultSettings):  # type: ignore[no-untyped-def]
    """``settings``: the configuration's ``fault_settings`` (frozen, pickled to the workers as is)."""

    def process(key: tuple[Any, ...], frames: Iterator[pd.DataFrame], state: Any) -> Iterator[pd.DataFrame]:
        import pandas as pd

        freeze_imported_heap()
        watermark_ms = max(int(state.getCurrentWatermarkMs()), 0)
        sends = _sends_by_pair(frames)
        pairs = _load_state(state)
        due = [pair for pair, stored in pairs.items() if pair not in sends and stored.wake_ms < watermark_ms]
        out: list[tuple[str, dict[str, Any]]] = []
        for pair in sorted([*sends, *due]):
            stored = _process_pair(pair, sends.get(pair, []), pairs.get(pair), watermark_ms, settings, out)
            if stored is None:
                pairs.pop(pair, None)
            else:
                pairs[pair] = stored
        if pairs:
            _store_state(state, pairs)
            state.setTimeoutTimestamp(max(min(stored.wake_ms for stored in pairs.values()), watermark_ms))
        else:
            state.remove()
        yield pd.DataFrame({"table": [t for t, _ in out], "payload": [state_blob.encode(p) for _, p in out]})

    return process


def _process_pair(
    pair: Pair,
    rows: list[_Send],
    stored: _Stored | None,
    watermark_ms: int,
    settings: FaultSettings,
    out: list[tuple[str, dict[str, Any]]],
) -> _Stored | None:
    """One pair's sends of the batch in replay order (none: its wake-up time passed), appended to ``out``
    as output rows; its new state, None when it is evicted."""
    from streaming.domain.fault_tracker import FaultWindowTracker
    from streaming.domain.faults import SendOutcome, SendResult

    producer_id, broker = pair
    tracker, group = None, ""
    if stored is not None:
        tracker, group = FaultWindowTracker.from_dict(stored.tracker, settings.tables), stored.group
    detector = settings.start_detector_enable
    if rows:
        group = str(rows[-1].producer_group)
        # NULL (None or NaN from pandas): the producer runs without sendLatencyFaultEnable.
        tables = [r.fault_table for r in rows if isinstance(r.fault_table, str)]
        if tables:
            table_name = tables[-1]
        else:  # no table in use: keep the one the item had, else any (no send of this batch uses it)
            table_name = tracker.fault_table.name if tracker else settings.default_table
        if tracker is None or tracker.fault_table.name != table_name or tracker.detector_enabled != detector:
            tracker = FaultWindowTracker(
                settings.table(table_name),
                detector_enabled=detector,
                clock_ms=None if tracker is None else tracker.clock_ms,
                items=({} if tracker is None else tracker.items),
            )
        sends = [
            SendResult(
                producer_id,
                broker,
                r.event_time_ms,
                r.latency_ms,
                SendOutcome.parse(str(r.outcome)),
                fault_enabled=isinstance(r.fault_table, str),
            )
            for r in rows
        ]
        step = tracker.apply_all(sends)
        tracker = step.tracker
        episodes = list(step.episodes)
        if step.late:
            out.append(("late_sends", {"count": len(step.late)}))
    else:
        assert tracker is not None  # only a stored pair is ever due
        step = tracker.advance(watermark_ms)
        tracker, episodes = step.tracker, list(step.episodes)
    for episode in episodes:
        out.append(("fault_windows", {**episode.as_row(), "producer_group": group}))
    tracked = tracker.get(producer_id, broker)
    ttl_ms = settings.state_ttl_ms
    if tracked is None or (tracked.window is None and tracked.last_event_ms + ttl_ms <= watermark_ms):
        out.append(
            (
                "producer_broker_status_current",
                {"producer_id": producer_id, "broker": broker, "event_time_ms": watermark_ms, "_op": "delete"},
            )
        )
        return None
    if rows or episodes:
        enabled = tracked.fault_enabled
        out.append(
            (
                "producer_broker_status_current",
                {
                    "producer_id": producer_id,
                    "producer_group": group,
                    "broker": broker,
                    "fault_table": tracker.fault_table.name if enabled else None,
                    "unavailable_until_ms": tracked.avoids_at,
                    "last_latency_ms": tracked.item.current_latency_ms if enabled else None,
                    "last_send_ms": tracked.last_event_ms,
                    "reachable": tracked.item.reachable if enabled else None,
                    "event_time_ms": max([tracked.last_event_ms] + [e.event_time_ms for e in episodes]),
                    "_op": "upsert",
                },
            )
        )
    wake_ms = tracked.window.window_end_ms if tracked.window else tracked.last_event_ms + ttl_ms
    return _Stored(max(int(wake_ms), watermark_ms + 1), group, tracker.to_dict())


def _sends_by_pair(frames: Iterator[pd.DataFrame]) -> dict[Pair, list[_Send]]:
    """The shard's sends per pair, each pair's in replay order: event time, then Kafka partition and offset.

    Read column by column (``tolist``): a pandas row dict per send (``to_dict("records")``) cost about 3 ms
    per 13 sends."""
    columns: list[list[Any]] = [[] for _ in _Send._fields]
    for frame in frames:
        for values, name in zip(columns, _Send._fields, strict=True):
            values.extend(frame[name].tolist())
    by_pair: dict[Pair, list[_Send]] = {}
    for producer, broker, t, p, o, group, latency, outcome, table in zip(*columns, strict=True):
        send = _Send(str(producer), str(broker), int(t), int(p), int(o), group, int(latency), outcome, table)
        by_pair.setdefault((send.producer_id, send.broker), []).append(send)
    for rows in by_pair.values():
        rows.sort(key=lambda r: (r.event_time_ms, r.kafka_partition, r.kafka_offset))
    return by_pair


def _load_state(state: Any) -> dict[Pair, _Stored]:
    data = state_blob.load(state)
    return {} if data is None else pairs_from_snapshot(data)


def pairs_from_snapshot(data: Mapping[str, Any]) -> dict[Pair, _Stored]:
    """The shard's pairs ``pairs_snapshot`` stored; ``StateVersionError`` for another schema version."""
    data = unwrap_state(SNAPSHOT_KIND, SNAPSHOT_SCHEMA_VERSION, data)
    return {(p, b): _Stored(int(wake), group, tracker) for p, b, wake, group, tracker in data["pairs"]}


def pairs_snapshot(pairs: Mapping[Pair, _Stored]) -> dict[str, Any]:
    """The shard's state document: every pair with its wake-up time, producer group and tracker, in pair order."""
    payload = {"pairs": [[p, b, s.wake_ms, s.group, s.tracker] for (p, b), s in sorted(pairs.items())]}
    return wrap_state(SNAPSHOT_KIND, SNAPSHOT_SCHEMA_VERSION, payload)


def _store_state(state: Any, pairs: Mapping[Pair, _Stored]) -> None:
    state_blob.store(state, pairs_snapshot(pairs))


def fault_updates_stream(session: SparkSession, updates_path: str) -> DataFrame:
    """``_send_fault_updates`` as the Delta stream the query reads: the rows each commit appends, once. The
    commits of send-ingest's trims (``send_query.FaultUpdatesTrim``) are skipped: they delete rows the stream
    has read, and re-add the rows they kept of the files they touched, which it has read too."""
    return session.readStream.format("delta").option("skipChangeCommits", "true").load(updates_path)


def build_fault_stream(
    session: SparkSession,
    updates_path: str,
    watermark_delay: str,
    settings: FaultSettings,
    shards: int,
    state_function: Callable[..., Iterator[pd.DataFrame]] | None = None,
) -> DataFrame:
    """The query's stateful part: the reduced sends, keyed by shard of producers, through the fault items.

    ``state_function`` replaces ``make_state_function``'s; the benchmark passes one that does nothing."""
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.state import GroupStateTimeout

    updates = (
        fault_updates_stream(session, updates_path)
        .withColumn("event_time", F.timestamp_millis("event_time_ms"))
        .withWatermark("event_time", watermark_delay)
        .withColumn("shard", F.pmod(F.xxhash64("producer_id"), F.lit(shards)))
    )
    return updates.groupBy("shard").applyInPandasWithState(
        state_function or make_state_function(settings),
        OUTPUT_SCHEMA,
        STATE_SCHEMA,
        "append",
        GroupStateTimeout.EventTimeTimeout,
    )
