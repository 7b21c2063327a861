"""Fault replay in send-ingest: each batch's reduced sends -> RocketMQ fault items per shard -> fault rows.

send-ingest collects a batch's reduced sends (a few per (producer, broker)) to the driver and replays them here
through ``streaming.domain.faults.shard``, so the broker gauges are set in the very batch that read the sends,
before any Delta write. The shards' state follows the query's checkpoint: one file per batch that changed it,
written after that batch's fault outputs commit, so a replayed batch either finds its own file (its outputs
are written: nothing to do) or the state as the batch before left it. Event time follows Spark's rules for
a stateful operator with an event-time timeout. Why and how: ``docs/design/fault-tolerance.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from streaming.domain.faults.outcomes import FaultOutcome
from streaming.domain.faults.shard import ClusterFaultShards, ClusterPair, PairSend
from streaming.domain.faults.tolerance import SendOutcome
from streaming.domain.state_codec import unwrap_state, wrap_state
from streaming.domain.vocabulary import DEFAULT_CLUSTER
from streaming.job.runtime import state_blob
from streaming.job.runtime.checkpoint_layout import CheckpointLayoutError
from streaming.job.runtime.hadoop_files import read_whole, write_whole

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from streaming.domain.faults.settings import FaultSettings
    from streaming.job.delta.outputs import FaultOutputs

STATE_KIND = "fault replay"
STATE_SCHEMA_VERSION = 1
STATE_DIRECTORY = "fault-state"
# State files kept besides the newest: a replay needs only the newest, the others help a person looking back.
KEPT_STATE_FILES = 10


@dataclass(frozen=True, slots=True)
class KeptSend:
    """One reduced send as send-ingest hands it over: its shard of producers, its pair and its replay order."""

    shard: int
    producer_id: str
    broker: str
    kafka_partition: int
    kafka_offset: int
    send: PairSend
    cluster: str = DEFAULT_CLUSTER


@dataclass(frozen=True)
class ShardState:
    """A shard between batches: its pairs (``ClusterFaultShards.snapshot``) and when it wakes without sends, as
    ``GroupState.setTimeoutTimestamp`` would have it (fires once a batch's watermark is past it)."""

    snapshot: Mapping[str, Any]
    timeout_ms: int


@dataclass(frozen=True)
class FaultReplayState:
    """The replay's state after batch ``batch_id`` (-1: no batch has changed it yet).

    ``applied_watermark_ms`` is the watermark that batch applied, the late threshold of the batch right after
    it; ``next_watermark_ms`` the watermark of the batches after it (the newest send so far less the delay);
    ``shard_count`` the ``[producers] state_shards`` the shards were made with (0: not yet known)."""

    batch_id: int = -1
    applied_watermark_ms: int = 0
    next_watermark_ms: int = 0
    shards: Mapping[int, ShardState] = field(default_factory=lambda: MappingProxyType({}))
    shard_count: int = 0

    def late_threshold_ms(self, batch_id: int) -> int:
        """Sends at or before this are late in ``batch_id``: the watermark of the batch before it, which is the
        applied one when that batch changed the state, else the next one (a batch without work keeps it)."""
        return self.applied_watermark_ms if batch_id == self.batch_id + 1 else self.next_watermark_ms

    def to_document(self) -> dict[str, Any]:
        payload = {
            "batch_id": self.batch_id,
            "applied_watermark_ms": self.applied_watermark_ms,
            "next_watermark_ms": self.next_watermark_ms,
            "shard_count": self.shard_count,
            "shards": [[shard, s.timeout_ms, s.snapshot] for shard, s in sorted(self.shards.items())],
        }
        return wrap_state(STATE_KIND, STATE_SCHEMA_VERSION, payload)

    @classmethod
    def from_document(cls, document: Mapping[str, Any]) -> FaultReplayState:
        data = unwrap_state(STATE_KIND, STATE_SCHEMA_VERSION, document)
        shards = {int(shard): ShardState(snapshot, int(timeout)) for shard, timeout, snapshot in data["shards"]}
        return cls(
            int(data["batch_id"]),
            int(data["applied_watermark_ms"]),
            int(data["next_watermark_ms"]),
            MappingProxyType(shards),
            int(data["shard_count"]),
        )


@dataclass(frozen=True)
class ReplayStep:
    """One batch replayed: the state after it (None: unchanged), its shards' outcomes and its late sends."""

    state: FaultReplayState | None
    outcomes: tuple[FaultOutcome, ...]
    late_sends: int
    already_written: bool = False


def replay_batch(
    state: FaultReplayState,
    batch_id: int,
    sends: Iterable[KeptSend],
    settings: FaultSettings,
    watermark_delay_ms: int,
) -> ReplayStep:
    """Batch ``batch_id``'s reduced ``sends`` applied to ``state`` (the state after the batch before).

    As Spark runs a stateful operator with an event-time timeout: the batch applies the watermark the earlier
    batches' sends set (``next_watermark_ms``); a send at or before the previous batch's watermark is late
    (counted, not applied); a shard with sends is called with them, a shard without whose timeout the
    watermark passed is called without; each shard called is stored again with its timeout. A batch the state
    already holds (its outputs were written before the crash that replays it) changes nothing."""
    if batch_id <= state.batch_id:
        return ReplayStep(None, (), 0, already_written=True)
    late_at = None if batch_id == 0 else state.late_threshold_ms(batch_id)  # Spark's first batch drops none
    watermark_ms = state.next_watermark_ms
    newest_ms: int | None = None
    by_shard: dict[int, dict[ClusterPair, list[KeptSend]]] = {}
    late = 0
    for kept in sends:
        t = kept.send.event_time_ms
        newest_ms = t if newest_ms is None else max(newest_ms, t)
        if late_at is not None and t <= late_at:
            late += 1
            continue
        pair = (kept.cluster, kept.producer_id, kept.broker)
        by_shard.setdefault(kept.shard, {}).setdefault(pair, []).append(kept)
    called = set(by_shard) | {s for s, stored in state.shards.items() if watermark_ms > stored.timeout_ms}
    shards = dict(state.shards)
    outcomes: list[FaultOutcome] = []
    for shard in sorted(called):
        stored = state.shards.get(shard)
        pairs = {
            pair: [k.send for k in sorted(items, key=_replay_order)] for pair, items in by_shard.get(shard, {}).items()
        }
        restored = ClusterFaultShards.restore(None if stored is None else stored.snapshot, settings)
        step = restored.apply(pairs, watermark_ms)
        if step.shards.is_empty():
            shards.pop(shard, None)
        else:
            timeout_ms = max(step.shards.next_wakeup_ms() or 0, watermark_ms)
            shards[shard] = ShardState(step.shards.snapshot(), timeout_ms)
        outcomes += step.outcomes
    next_watermark_ms = watermark_ms if newest_ms is None else max(watermark_ms, newest_ms - watermark_delay_ms)
    if not called and next_watermark_ms == state.next_watermark_ms:
        return ReplayStep(None, (), late)
    after = FaultReplayState(batch_id, watermark_ms, next_watermark_ms, MappingProxyType(shards), state.shard_count)
    return ReplayStep(after, tuple(outcomes), late)


def _replay_order(kept: KeptSend) -> tuple[int, int, int]:
    """A pair's sends in replay order: event time, then Kafka partition and offset."""
    return kept.send.event_time_ms, kept.kafka_partition, kept.kafka_offset


def kept_send(row: Mapping[str, Any], default_cluster: str = DEFAULT_CLUSTER) -> KeptSend:
    """A reduced send from its row (``sends.reduce.FAULT_UPDATE_COLUMNS`` and ``shard``). A NULL fault table is a
    producer without sendLatencyFaultEnable; a row without a cluster is ``default_cluster``'s."""
    table = row["fault_table"]
    return KeptSend(
        int(row["shard"]),
        str(row["producer_id"]),
        str(row["broker"]),
        int(row["kafka_partition"]),
        int(row["kafka_offset"]),
        PairSend(
            int(row["event_time_ms"]),
            str(row["producer_group"]),
            int(row["latency_ms"]),
            SendOutcome.parse(str(row["outcome"])),
            table if isinstance(table, str) else None,
        ),
        row.get("cluster") or default_cluster,
    )


def shard_column(shards: int) -> Column:
    """Each kept send's shard of producers: the JVM's xxhash64 of its producer, so a producer keeps its shard
    whatever the Python process."""
    from pyspark.sql import functions as F

    return F.pmod(F.xxhash64("producer_id"), F.lit(shards))


def collect_kept_sends(updates: DataFrame, shards: int, default_cluster: str = DEFAULT_CLUSTER) -> list[KeptSend]:
    """The batch's reduced sends on the driver, each with its shard (``shard_column``) and with its cluster, which
    the reduction resolved (``default_cluster`` only for a row without one)."""
    columns = (
        "cluster",
        "producer_id",
        "producer_group",
        "broker",
        "event_time_ms",
        "latency_ms",
        "outcome",
        "fault_table",
    )
    framed = updates.select(shard_column(shards).alias("shard"), *columns, "kafka_partition", "kafka_offset")
    return [kept_send(row.asDict(), default_cluster) for row in framed.collect()]


def _with_shard_count(state: FaultReplayState, shards: int) -> FaultReplayState:
    """``state`` for ``shards`` shards: a state made with another count is refused (``CheckpointLayoutError``)."""
    if not state.shards:
        return replace(state, shard_count=shards)
    if state.shard_count != shards:
        raise CheckpointLayoutError(
            f"[producers] state_shards is {shards}, but send-ingest's checkpoint holds fault items in "
            f"{state.shard_count} shards: set it back to {state.shard_count}, or start send-ingest on a new "
            "checkpoint (its fault items then rebuild from the next sends)"
        )
    return state


def check_state_shards(session: SparkSession, checkpoint: str, shards: int) -> None:
    """Refuse (``CheckpointLayoutError``) a start whose ``[producers] state_shards`` differs from the count the
    send-ingest checkpoint's fault items were made with, before any query starts."""
    _with_shard_count(FaultStateFiles(session, checkpoint).load(), shards)


class FaultStateFiles:
    """The replay's state files in ``<checkpoint>/fault-state``, through Hadoop's FileSystem (any checkpoint
    URI): ``<batch id>`` each, written to a temporary name and renamed, the newest ``KEPT_STATE_FILES`` + 1 kept."""

    def __init__(self, session: SparkSession, checkpoint: str) -> None:
        jvm = session.sparkContext._jvm
        assert jvm is not None
        self._jvm = jvm
        self._dir = jvm.org.apache.hadoop.fs.Path(checkpoint.rstrip("/") + "/" + STATE_DIRECTORY)
        self._fs = self._dir.getFileSystem(session.sparkContext._jsc.hadoopConfiguration())

    def _batch_ids(self) -> list[int]:
        if not self._fs.exists(self._dir):
            return []
        names = [status.getPath().getName() for status in self._fs.listStatus(self._dir)]
        return sorted(int(name) for name in names if name.isdigit())

    def load(self) -> FaultReplayState:
        """The newest state written, the empty state when there is none."""
        ids = self._batch_ids()
        if not ids:
            return FaultReplayState()
        path = self._jvm.org.apache.hadoop.fs.Path(self._dir, str(ids[-1]))
        return FaultReplayState.from_document(state_blob.decode(read_whole(self._fs, path)))

    def save(self, state: FaultReplayState) -> None:
        """Write ``state`` as its batch's file (visible whole or not at all), then drop the oldest files."""
        Path = self._jvm.org.apache.hadoop.fs.Path  # noqa: N806 (the JVM class)
        self._fs.mkdirs(self._dir)
        write_whole(self._fs, Path(self._dir, str(state.batch_id)), state_blob.compress(state.to_document()))
        for old in self._batch_ids()[: -(KEPT_STATE_FILES + 1)]:
            self._fs.delete(Path(self._dir, str(old)), False)


class FaultReplayer:
    """send-ingest's fault replay across its batches, one per query start: the state as the checkpoint's files
    left it, each batch's outcomes as writes (``outputs.FaultOutputs``, which sets the gauges first), and the state
    file written once those writes have committed (``commit``)."""

    def __init__(
        self,
        files: FaultStateFiles,
        settings: FaultSettings,
        shards: int,
        watermark_delay_ms: int,
        outputs: FaultOutputs,
        on_late: Callable[[int, int], None] | None = None,
    ) -> None:
        self.files, self.settings, self.shards = files, settings, shards
        self.watermark_delay_ms, self.outputs, self.on_late = watermark_delay_ms, outputs, on_late
        self.state: FaultReplayState | None = None  # read at the first batch

    def prepare(
        self, session: SparkSession, sends: Iterable[KeptSend], batch_id: int
    ) -> tuple[list[Callable[[], None]], FaultReplayState | None]:
        """The batch's fault writes and the state to commit after them (None: nothing to commit)."""
        if self.state is None:
            self.state = self._loaded()
        step = replay_batch(self.state, batch_id, sends, self.settings, self.watermark_delay_ms)
        if step.late_sends and self.on_late is not None:
            self.on_late(batch_id, step.late_sends)
        if step.state is None:
            return [], None
        return self.outputs.writes(session, step.outcomes, batch_id), step.state

    def _loaded(self) -> FaultReplayState:
        """The state the checkpoint holds, made with this shard count (a pair's shard follows from it)."""
        return _with_shard_count(self.files.load(), self.shards)

    def commit(self, state: FaultReplayState) -> None:
        self.files.save(state)
        self.state = state
