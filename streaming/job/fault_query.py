"""The fault-window query: ``_send_fault_updates`` as a Delta stream -> one fault shard per key -> Delta rows.

A thin adapter around ``streaming.domain.fault_shard``: the reduced sends, keyed by a shard of producers
(``pmod(xxhash64(producer_id), shards)``), reach ``applyInPandasWithState``; the state function puts each
pair's sends in replay order, restores the shard from its blob, applies them at the batch's watermark,
stores the shard again (waking it at its earliest pair's wake-up time) and emits the outcomes as rows
``(table, payload)`` mapped in ``fault_table_rows``. Why shards of producers: ``docs/design/fault-tolerance.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from streaming.domain.fault_shard import FaultShard, Pair, PairSend
from streaming.domain.faults import SendOutcome
from streaming.job import state_blob
from streaming.job.fault_table_rows import fault_rows
from streaming.job.python_worker import freeze_imported_heap

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession

    from streaming.domain.rules import FaultSettings

OUTPUT_SCHEMA = "table STRING, payload STRING"
STATE_SCHEMA = state_blob.SCHEMA
# The columns of ``_send_fault_updates`` the state function reads.
_SEND_COLUMNS = (
    "producer_id",
    "broker",
    "event_time_ms",
    "kafka_partition",
    "kafka_offset",
    "producer_group",
    "latency_ms",
    "outcome",
    "fault_table",
)


def make_state_function(settings: FaultSettings):  # type: ignore[no-untyped-def]
    """``settings``: the configuration's ``fault_settings`` (frozen, pickled to the workers as is)."""

    def process(key: tuple[Any, ...], frames: Iterator[pd.DataFrame], state: Any) -> Iterator[pd.DataFrame]:
        import pandas as pd

        freeze_imported_heap()
        watermark_ms = max(int(state.getCurrentWatermarkMs()), 0)
        sends = _sends_by_pair(frames)
        step = FaultShard.restore(state_blob.load(state), settings).apply(sends, watermark_ms)
        shard = step.shard
        if shard.is_empty():
            state.remove()
        else:
            state_blob.store(state, shard.snapshot())
            state.setTimeoutTimestamp(max(shard.next_wakeup_ms() or 0, watermark_ms))
        rows = fault_rows(step.outcomes)
        yield pd.DataFrame({"table": [t for t, _ in rows], "payload": [state_blob.encode(p) for _, p in rows]})

    return process


def _sends_by_pair(frames: Iterator[pd.DataFrame]) -> dict[Pair, list[PairSend]]:
    """The shard's sends per pair, each pair's in replay order: event time, then Kafka partition and offset.

    Read column by column (``tolist``): a pandas row dict per send (``to_dict("records")``) cost about 3 ms
    per 13 sends. A NULL fault table (None, or NaN from pandas) is a producer without sendLatencyFaultEnable."""
    columns: list[list[Any]] = [[] for _ in _SEND_COLUMNS]
    for frame in frames:
        for values, name in zip(columns, _SEND_COLUMNS, strict=True):
            values.extend(frame[name].tolist())
    keyed: dict[Pair, list[tuple[int, int, int, PairSend]]] = {}
    for producer, broker, t, p, o, group, latency, outcome, table in zip(*columns, strict=True):
        send = PairSend(
            int(t), str(group), int(latency), SendOutcome.parse(str(outcome)), table if isinstance(table, str) else None
        )
        keyed.setdefault((str(producer), str(broker)), []).append((int(t), int(p), int(o), send))
    by_pair: dict[Pair, list[PairSend]] = {}
    for pair, sends in keyed.items():
        sends.sort(key=lambda s: s[:3])
        by_pair[pair] = [s[3] for s in sends]
    return by_pair


def fault_updates_stream(session: SparkSession, updates_path: str) -> DataFrame:
    """``_send_fault_updates`` as the Delta stream the query reads: the rows each commit appends, once. The
    commits of send-ingest's trims (``send_trim.FaultUpdatesTrim``) are skipped: they delete rows the stream
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
