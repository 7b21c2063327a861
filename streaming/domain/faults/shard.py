"""A shard of producers' fault items: the fault replay's state per key and its lifecycle, time passed in.

Each (producer, broker) pair holds a one-item ``FaultWindowTracker`` with its producer's fault table, its
producer group and its own wake-up time. ``FaultShard.apply`` replays a batch's sends per pair, advances the
pairs whose wake-up time the watermark passed, evicts idle ones and reports ``faults.outcomes``; its snapshot
is the ``fault shard`` document of ``state_codec``. Why per pair inside a shard: ``docs/design/fault-tolerance.md``.
``ClusterFaultShards`` keeps a ``FaultShard`` per RocketMQ cluster: the job's state per shard of producers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from types import MappingProxyType
from typing import Any

from streaming.domain.faults.outcomes import FaultOutcome, FaultWindowChanged, PairEvicted, PairStatus, SendsLate
from streaming.domain.faults.settings import FaultSettings
from streaming.domain.faults.tolerance import SendOutcome, SendResult
from streaming.domain.faults.tracker import FaultWindowTracker
from streaming.domain.faults.windows import FaultWindowEpisode
from streaming.domain.state_codec import unwrap_state, wrap_state
from streaming.domain.vocabulary import DEFAULT_CLUSTER

SNAPSHOT_KIND = "fault shard"
SNAPSHOT_SCHEMA_VERSION = 1

Pair = tuple[str, str]  # (producer id, broker)


@dataclass(frozen=True, slots=True)
class PairSend:
    """One reduced send of a pair, as the shard applies it (the caller hands a pair's sends in replay order)."""

    event_time_ms: int
    producer_group: str
    latency_ms: int
    outcome: SendOutcome
    fault_table: str | None  # None: the producer runs without sendLatencyFaultEnable


@dataclass(frozen=True, slots=True)
class StoredPair:
    """A pair as the shard keeps it between batches: only the pairs with work are rebuilt as trackers."""

    wake_ms: int  # handled once the watermark is past it
    group: str
    tracker: Mapping[str, Any]  # FaultWindowTracker.to_dict()


def pairs_from_snapshot(data: Mapping[str, Any]) -> dict[Pair, StoredPair]:
    """The shard's pairs ``pairs_snapshot`` stored; ``StateVersionError`` for another schema version."""
    data = unwrap_state(SNAPSHOT_KIND, SNAPSHOT_SCHEMA_VERSION, data)
    return {(p, b): StoredPair(int(wake), group, tracker) for p, b, wake, group, tracker in data["pairs"]}


def pairs_snapshot(pairs: Mapping[Pair, StoredPair]) -> dict[str, Any]:
    """The shard's state document: every pair with its wake-up time, producer group and tracker, in pair order."""
    payload = {"pairs": [[p, b, s.wake_ms, s.group, s.tracker] for (p, b), s in sorted(pairs.items())]}
    return wrap_state(SNAPSHOT_KIND, SNAPSHOT_SCHEMA_VERSION, payload)


@dataclass(frozen=True)
class FaultShardStep:
    """The shard after a call, and what happened, pair by pair in pair order."""

    shard: FaultShard
    outcomes: tuple[FaultOutcome, ...]


@dataclass(frozen=True)
class FaultShard:
    """The pairs of one shard of producers under ``settings`` (fault tables, TTL, ``startDetectorEnable``)."""

    settings: FaultSettings
    pairs: Mapping[Pair, StoredPair] = field(default_factory=lambda: MappingProxyType({}))
    cluster: str = DEFAULT_CLUSTER  # the RocketMQ cluster of every pair here, named by each outcome

    @classmethod
    def restore(
        cls, snapshot: Mapping[str, Any] | None, settings: FaultSettings, cluster: str = DEFAULT_CLUSTER
    ) -> FaultShard:
        """The shard ``snapshot`` holds (None: an empty one) of the pairs of ``cluster``."""
        pairs = {} if snapshot is None else pairs_from_snapshot(snapshot)
        return cls(settings, MappingProxyType(pairs), cluster)

    def snapshot(self) -> dict[str, Any]:
        return pairs_snapshot(self.pairs)

    def is_empty(self) -> bool:
        return not self.pairs

    def next_wakeup_ms(self) -> int | None:
        """The earliest wake-up time of the shard's pairs: when a call without sends has something to do."""
        return min((stored.wake_ms for stored in self.pairs.values()), default=None)

    def apply(self, sends: Mapping[Pair, Sequence[PairSend]], watermark_ms: int) -> FaultShardStep:
        """The pairs with ``sends`` (each pair's in replay order) and those whose wake-up time is before
        ``watermark_ms``, in pair order; the others are kept as stored."""
        pairs = dict(self.pairs)
        due = [pair for pair, stored in pairs.items() if pair not in sends and stored.wake_ms < watermark_ms]
        outcomes: list[FaultOutcome] = []
        for pair in sorted([*sends, *due]):
            stored = _pair_step(
                pair, sends.get(pair, ()), pairs.get(pair), watermark_ms, self.settings, outcomes, self.cluster
            )
            if stored is None:
                pairs.pop(pair, None)
            else:
                pairs[pair] = stored
        return FaultShardStep(FaultShard(self.settings, MappingProxyType(pairs), self.cluster), tuple(outcomes))


def _tracker_for(
    stored: StoredPair | None, sends: Sequence[PairSend], settings: FaultSettings
) -> tuple[FaultWindowTracker | None, str]:
    """The pair's tracker and producer group for this call: as stored, switched to the table and detector
    setting the sends and settings say (the item kept)."""
    tracker, group = None, ""
    if stored is not None:
        tracker, group = FaultWindowTracker.from_dict(stored.tracker, settings.tables), stored.group
    if not sends:
        return tracker, group
    group = sends[-1].producer_group
    tables = [s.fault_table for s in sends if s.fault_table is not None]
    if tables:
        table_name = tables[-1]
    else:  # no table in use: keep the one the item had, else any (no send of this batch uses it)
        table_name = tracker.fault_table.name if tracker else settings.default_table
    detector = settings.start_detector_enable
    if tracker is None or tracker.fault_table.name != table_name or tracker.detector_enabled != detector:
        tracker = FaultWindowTracker(
            settings.table(table_name),
            detector_enabled=detector,
            clock_ms=None if tracker is None else tracker.clock_ms,
            items=({} if tracker is None else tracker.items),
        )
    return tracker, group


def _pair_step(
    pair: Pair,
    sends: Sequence[PairSend],
    stored: StoredPair | None,
    watermark_ms: int,
    settings: FaultSettings,
    outcomes: list[FaultOutcome],
    cluster: str,
) -> StoredPair | None:
    """One pair's sends of the call (none: its wake-up time passed), its outcomes appended to ``outcomes``;
    its new state, None when it is evicted."""
    producer_id, broker = pair
    tracker, group = _tracker_for(stored, sends, settings)
    assert tracker is not None  # a pair without sends is a stored one that is due
    if sends:
        results = [
            SendResult(
                producer_id, broker, s.event_time_ms, s.latency_ms, s.outcome, fault_enabled=s.fault_table is not None
            )
            for s in sends
        ]
        step = tracker.apply_all(results)
        if step.late:
            outcomes.append(SendsLate(producer_id, broker, len(step.late), cluster))
    else:
        step = tracker.advance(watermark_ms)
    tracker, episodes = step.tracker, step.episodes
    outcomes.extend(FaultWindowChanged(episode, group, cluster) for episode in episodes)
    tracked = tracker.get(producer_id, broker)
    ttl_ms = settings.state_ttl_ms
    if tracked is None or (tracked.window is None and tracked.last_event_ms + ttl_ms <= watermark_ms):
        outcomes.append(PairEvicted(producer_id, broker, watermark_ms, cluster))
        return None
    if sends or episodes:
        outcomes.append(_status(tracker, group, episodes, producer_id, broker, cluster))
    wake_ms = tracked.window.window_end_ms if tracked.window else tracked.last_event_ms + ttl_ms
    return StoredPair(max(int(wake_ms), watermark_ms + 1), group, tracker.to_dict())


def _status(
    tracker: FaultWindowTracker,
    group: str,
    episodes: Sequence[FaultWindowEpisode],
    producer_id: str,
    broker: str,
    cluster: str,
) -> PairStatus:
    """The pair's item as the tracker holds it, as of its last send or its latest episode."""
    tracked = tracker.get(producer_id, broker)
    assert tracked is not None
    enabled = tracked.fault_enabled
    return PairStatus(
        producer_id=producer_id,
        producer_group=group,
        broker=broker,
        fault_table=tracker.fault_table.name if enabled else None,
        unavailable_until_ms=tracked.avoids_at,
        last_latency_ms=tracked.item.current_latency_ms if enabled else None,
        last_send_ms=tracked.last_event_ms,
        reachable=tracked.item.reachable if enabled else None,
        event_time_ms=max([tracked.last_event_ms] + [e.event_time_ms for e in episodes]),
        cluster=cluster,
    )


# -- several RocketMQ clusters ---------------------------------------------------------------------------

# 2: one shard document (``SNAPSHOT_SCHEMA_VERSION``'s shape) per RocketMQ cluster (``clusters``).
CLUSTERS_SCHEMA_VERSION = 2

ClusterPair = tuple[str, str, str]  # (cluster, producer id, broker)


def _in_default_cluster(default_cluster: str, snapshot: Mapping[str, Any]) -> dict[str, Any]:
    """2 keeps each cluster's pairs apart. Version 1 knew one cluster, the job's default one: its pairs (windows,
    items, wake-up times) are that cluster's, unchanged."""
    return {"clusters": {default_cluster: dict(snapshot)}}


def migrations(default_cluster: str) -> Mapping[int, Callable[[Mapping[str, Any]], Mapping[str, Any]]]:
    """The fault shard's chain: version 1's pairs are ``default_cluster``'s."""
    return {1: partial(_in_default_cluster, default_cluster)}


# The chain as ``rebalance-monitor --version`` names it.
MIGRATIONS = migrations(DEFAULT_CLUSTER)


@dataclass(frozen=True)
class ClusterFaultStep:
    """The clusters' shards after a call, and what happened, cluster by cluster."""

    shards: ClusterFaultShards
    outcomes: tuple[FaultOutcome, ...]  # each naming its cluster


@dataclass(frozen=True)
class ClusterFaultShards:
    """A shard of pairs per RocketMQ cluster: the same producer and broker names in two clusters are two pairs
    with their own windows (``docs/design/clusters.md``)."""

    settings: FaultSettings
    shards: Mapping[str, FaultShard] = field(default_factory=lambda: MappingProxyType({}))

    @classmethod
    def restore(cls, snapshot: Mapping[str, Any] | None, settings: FaultSettings) -> ClusterFaultShards:
        """The shards ``snapshot`` holds (None: none); a version 1 document is ``settings.default_cluster``'s."""
        if snapshot is None:
            return cls(settings)
        data = unwrap_state(SNAPSHOT_KIND, CLUSTERS_SCHEMA_VERSION, snapshot, migrations(settings.default_cluster))
        shards = {c: FaultShard.restore(s, settings, c) for c, s in data["clusters"].items()}
        return cls(settings, MappingProxyType(shards))

    def snapshot(self) -> dict[str, Any]:
        clusters = {c: s.snapshot() for c, s in sorted(self.shards.items()) if not s.is_empty()}
        return wrap_state(SNAPSHOT_KIND, CLUSTERS_SCHEMA_VERSION, {"clusters": clusters})

    def is_empty(self) -> bool:
        return all(s.is_empty() for s in self.shards.values())

    def next_wakeup_ms(self) -> int | None:
        return min((t for s in self.shards.values() if (t := s.next_wakeup_ms()) is not None), default=None)

    def apply(self, sends: Mapping[ClusterPair, Sequence[PairSend]], watermark_ms: int) -> ClusterFaultStep:
        """``FaultShard.apply`` per cluster: the sends of its pairs, and every cluster's due pairs."""
        by_cluster: dict[str, dict[Pair, Sequence[PairSend]]] = {}
        for (cluster, producer_id, broker), pair_sends in sends.items():
            by_cluster.setdefault(cluster, {})[(producer_id, broker)] = pair_sends
        shards = dict(self.shards)
        outcomes: list[FaultOutcome] = []
        for cluster in sorted({*shards, *by_cluster}):
            shard = shards.get(cluster) or FaultShard(self.settings, cluster=cluster)
            step = shard.apply(by_cluster.get(cluster, {}), watermark_ms)
            shards[cluster] = step.shard
            outcomes += step.outcomes
        return ClusterFaultStep(ClusterFaultShards(self.settings, MappingProxyType(shards)), tuple(outcomes))
