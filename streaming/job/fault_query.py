"""The fault-window query: reduced send results -> one fault item per (producer, broker) -> Delta.

Reads the internal ``_send_fault_updates`` table (written by ``send-ingest``, see ``send_query``) as a
Delta stream, keyed by (producer, broker) in ``applyInPandasWithState``. Each key holds a one-item
``FaultWindowTracker`` (``streaming.domain.faults``) with the producer's fault table and semantics. The
key asks to be woken at its window's end (event-time timeout), so an EXPIRED episode is written at the
exact end even when the producer sends nothing more; a pair idle for ``state_ttl_ms`` with no open
window is evicted.

Output rows ``(table, payload)`` go to ``fault_windows`` (history) and ``producer_broker_status_current``
(MERGE); the sink then recomputes ``broker_status_current`` from the latter at the batch's event time.

A send whose ``fault_table`` is NULL comes from a producer without ``sendLatencyFaultEnable`` (the send
result said so, or ``[producers] send_latency_fault_enable`` is false and it said nothing): it updates no
fault item and opens no window, and its pair's status row has no table and no end -- a producer that sends
to the broker and avoids nothing. ``start_detector_enable`` is 5.x ``startDetectorEnable``: remoting errors
then leave the item unreachable (the detector's later probes are not observed: the next send says).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession

OUTPUT_SCHEMA = "table STRING, payload STRING"
STATE_SCHEMA = "tracker STRING, producer_group STRING"


def make_state_function(settings: Mapping[str, Any]):  # type: ignore[no-untyped-def]
    """``settings``: {"fault_tables": {name: mapping}, "default_fault_table": name, "state_ttl_ms": int,
    "start_detector_enable": bool} (plain, picklable)."""

    def process(key: tuple[Any, ...], frames: Iterator[pd.DataFrame], state: Any) -> Iterator[pd.DataFrame]:
        import pandas as pd

        from streaming.domain.faults import FaultWindowTracker, SendOutcome, SendResult, fault_table_from_config

        producer_id, broker = str(key[0]), str(key[1])
        watermark_ms = max(int(state.getCurrentWatermarkMs()), 0)
        rows = _rows(frames)
        tracker, group = None, ""
        if state.exists:
            stored, group = state.get
            tracker = FaultWindowTracker.from_dict(json.loads(stored))
        out: list[tuple[str, dict[str, Any]]] = []
        detector = bool(settings.get("start_detector_enable", False))
        if rows:
            group = str(rows[-1].producer_group)
            # NULL (None or NaN from pandas): the producer runs without sendLatencyFaultEnable.
            tables = [r.fault_table for r in rows if isinstance(r.fault_table, str)]
            if tables:
                table_name = tables[-1]
            else:  # no table in use: keep the one the item had, else any (no send of this batch uses it)
                table_name = tracker.fault_table.name if tracker else str(settings["default_fault_table"])
            if tracker is None or tracker.fault_table.name != table_name or tracker.detector_enabled != detector:
                table = fault_table_from_config({"name": table_name, **settings["fault_tables"][table_name]})
                tracker = FaultWindowTracker(
                    table,
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
            assert tracker is not None  # a timeout only fires for a key with state
            step = tracker.advance(watermark_ms)
            tracker, episodes = step.tracker, list(step.episodes)
        for episode in episodes:
            out.append(("fault_windows", {**episode.as_row(), "producer_group": group}))
        tracked = tracker.get(producer_id, broker)
        ttl_ms = int(settings["state_ttl_ms"])
        idle = tracked is None or (tracked.window is None and tracked.last_event_ms + ttl_ms <= watermark_ms)
        if idle:
            state.remove()
            out.append(
                (
                    "producer_broker_status_current",
                    {"producer_id": producer_id, "broker": broker, "event_time_ms": watermark_ms, "_op": "delete"},
                )
            )
        else:
            state.update((json.dumps(tracker.to_dict(), separators=(",", ":")), group))
            wake = tracked.window.window_end_ms if tracked.window else tracked.last_event_ms + ttl_ms
            state.setTimeoutTimestamp(max(int(wake), watermark_ms + 1))
            enabled = tracked.fault_enabled
            if rows or episodes:
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
        yield pd.DataFrame(
            {"table": [t for t, _ in out], "payload": [json.dumps(p, separators=(",", ":")) for _, p in out]}
        )

    return process


class _Send(NamedTuple):
    """One reduced send as the state function reads it (a few of ``_send_fault_updates``'s columns)."""

    event_time_ms: int
    kafka_partition: int
    kafka_offset: int
    producer_group: Any
    latency_ms: int
    outcome: Any
    fault_table: Any  # a table name, or None/NaN: the producer runs without sendLatencyFaultEnable


def _rows(frames: Iterator[pd.DataFrame]) -> list[_Send]:
    """The key's sends in replay order: event time, then Kafka partition and offset.

    Read column by column (``tolist``): a pandas row dict per send (``to_dict("records")``) cost about 3 ms
    per key, most of the query's time with a few sends per (producer, broker) and batch."""
    columns: list[list[Any]] = [[] for _ in _Send._fields]
    for frame in frames:
        for values, name in zip(columns, _Send._fields, strict=True):
            values.extend(frame[name].tolist())
    rows = [
        _Send(int(t), int(p), int(o), g, int(latency), outcome, table)
        for t, p, o, g, latency, outcome, table in zip(*columns, strict=True)
    ]
    rows.sort(key=lambda r: (r.event_time_ms, r.kafka_partition, r.kafka_offset))
    return rows


def fault_updates_stream(session: SparkSession, updates_path: str) -> DataFrame:
    """``_send_fault_updates`` as the Delta stream the query reads: the rows each commit appends, once. The
    commits of send-ingest's trims (``send_query.FaultUpdatesTrim``) are skipped: they delete rows the stream
    has read, and re-add the rows they kept of the files they touched, which it has read too."""
    return session.readStream.format("delta").option("skipChangeCommits", "true").load(updates_path)


def build_fault_stream(
    session: SparkSession, updates_path: str, watermark_delay: str, settings: Mapping[str, Any]
) -> DataFrame:
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.state import GroupStateTimeout

    updates = (
        fault_updates_stream(session, updates_path)
        .withColumn("event_time", F.timestamp_millis("event_time_ms"))
        .withWatermark("event_time", watermark_delay)
    )
    return updates.groupBy("producer_id", "broker").applyInPandasWithState(
        make_state_function(dict(settings)), OUTPUT_SCHEMA, STATE_SCHEMA, "append", GroupStateTimeout.EventTimeTimeout
    )
