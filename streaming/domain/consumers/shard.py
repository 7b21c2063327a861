"""A shard of the consumer state across RocketMQ clusters: one ``ShardEngine`` per cluster, nothing shared.

Broker, group and topic names are unique within one cluster only, so each cluster's groups, broker views,
routes, retired generations and progress live in their own ``ShardEngine``: two clusters with the same names
never share state, generations, episodes or rows. ``Shard`` hands each event to its cluster's engine (the
event's ``cluster``), advances every cluster's engine to the call's watermark, and returns each outcome with
its cluster (``ClusterOutcome``). Its snapshot holds each cluster's engine snapshot; a snapshot of the single
cluster shape before (version 9 and older) is the default cluster's. Why this shape:
``docs/design/clusters.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple, TypeVar

from streaming.domain.consumers import membership as ms
from streaming.domain.consumers.engine_settings import EngineSettings
from streaming.domain.consumers.heartbeat_plan import HeartbeatRun, RunEvents
from streaming.domain.consumers.outcomes import GroupSummary, Outcome
from streaming.domain.consumers.poll_runs import PollRun
from streaming.domain.consumers.polled_views import ConnectionPoll, NotedPoll
from streaming.domain.consumers.shard_engine import SNAPSHOT_KIND, EngineEvent, ShardEngine
from streaming.domain.consumers.shard_migrations import migrations
from streaming.domain.state_codec import unwrap_state, wrap_state

# 10: one engine snapshot (``shard_engine.SCHEMA_VERSION``'s shape, 9) per cluster (``clusters``); 11: the same,
# its engine snapshots of version 10 (each polled view's last poll noted apart from its group's text); 12: of
# version 11 (with each noted view its channels and collector).
SCHEMA_VERSION = 12

Run = TypeVar("Run", HeartbeatRun, PollRun)
# The events a plan of runs reads besides them: the batch's channel events and polls.
Context = ms.ChannelEvent | ConnectionPoll | NotedPoll
Plan = TypeVar("Plan")


class ClusterOutcome(NamedTuple):
    """An outcome of the cluster ``cluster``'s engine."""

    cluster: str
    outcome: Outcome


class Shard:
    """Mutable during one call, then snapshotted; see the module docstring."""

    def __init__(self, settings: EngineSettings, engines: dict[str, ShardEngine]) -> None:
        self.settings = settings
        self.engines = engines  # cluster -> its engine

    @classmethod
    def restore(cls, snapshot: Mapping[str, Any] | None, settings: EngineSettings) -> Shard:
        """The shard ``snapshot`` holds (None: an empty one); an older single-cluster snapshot becomes the engine
        of ``settings.default_cluster`` (``shard_migrations.migrations``)."""
        if not snapshot:
            return cls(settings, {})
        snapshot = unwrap_state(SNAPSHOT_KIND, SCHEMA_VERSION, snapshot, migrations(settings.default_cluster))
        engines = {c: ShardEngine.restore(s, settings, c) for c, s in snapshot["clusters"].items()}
        return cls(settings, engines)

    def snapshot(self) -> dict[str, Any]:
        clusters = {c: e.snapshot() for c, e in sorted(self.engines.items()) if not e.is_empty()}
        return wrap_state(SNAPSHOT_KIND, SCHEMA_VERSION, {"clusters": clusters})

    def is_empty(self) -> bool:
        return all(e.is_empty() for e in self.engines.values())

    def next_wakeup_ms(self) -> int | None:
        times = [t for e in self.engines.values() if (t := e.next_wakeup_ms()) is not None]
        return min(times, default=None)

    def engine(self, cluster: str) -> ShardEngine:
        """The cluster's engine (a new, empty one for a cluster the shard has not seen)."""
        engine = self.engines.get(cluster)
        if engine is None:
            engine = self.engines[cluster] = ShardEngine.restore(None, self.settings, cluster)
        return engine

    def noted_poll(self, time_ms: int, digest: str, text: str) -> NotedPoll | None:
        """``ShardEngine.noted_poll`` of the engine that noted the digest (a poll's text names its cluster)."""
        for engine in self.engines.values():
            noted = engine.noted_poll(time_ms, digest, text)
            if noted is not None:
                return noted
        return None

    # -- processing ----------------------------------------------------------------------------------
    def apply_runs(self, runs: Sequence[HeartbeatRun], others: Iterable[Context]) -> list[RunEvents]:
        """``ShardEngine.apply_runs`` per cluster (``others`` split by cluster too), in the order of ``runs``."""
        return self._per_cluster(runs, others, lambda engine, rs, os: engine.apply_runs(rs, os))

    def plan_polls(self, runs: Sequence[PollRun], others: Iterable[Context]) -> list[list[int]]:
        """``poll_runs.plan_polls`` per cluster (``others`` split by cluster too), in the order of ``runs``."""
        return self._per_cluster(runs, others, lambda engine, rs, os: engine.plan_polls(rs, os))

    def _per_cluster(
        self,
        runs: Sequence[Run],
        others: Iterable[Context],
        plan: Callable[[ShardEngine, Sequence[Run], Sequence[Context]], list[Plan]],
    ) -> list[Plan]:
        """``plan`` of each cluster's engine, its runs and the events of ``others`` of its cluster; the plans in
        the order of ``runs``."""
        by_cluster: dict[str, list[int]] = {}
        for i, run in enumerate(runs):
            by_cluster.setdefault(run.event.cluster, []).append(i)
        if not by_cluster:
            return []
        context: dict[str, list[Context]] = {}
        for event in others:
            context.setdefault(event.cluster, []).append(event)
        plans: list[Plan | None] = [None] * len(runs)
        for cluster, indices in by_cluster.items():
            planned = plan(self.engine(cluster), [runs[i] for i in indices], context.get(cluster, []))
            for i, one in zip(indices, planned, strict=True):
                plans[i] = one
        return [one for one in plans if one is not None]

    def apply(
        self, events: Iterable[EngineEvent], watermark_ms: int, lane_times: Mapping[str, int] | None = None
    ) -> list[ClusterOutcome]:
        """Each cluster's events (in the given order) applied by its engine, and every engine advanced to the
        watermark (``ShardEngine.apply``; the lanes are the job's Kafka partitions, which every cluster's
        events share, so each engine is given all of them)."""
        by_cluster: dict[str, list[EngineEvent]] = {}
        for event in events:
            by_cluster.setdefault(event.cluster, []).append(event)
        for cluster in by_cluster:
            self.engine(cluster)
        return [
            ClusterOutcome(cluster, outcome)
            for cluster, engine in sorted(self.engines.items())
            for outcome in engine.apply(by_cluster.get(cluster, ()), watermark_ms, lane_times)
        ]

    def advance(self, watermark_ms: int) -> list[ClusterOutcome]:
        """The state's timeout fired: ``ShardEngine.advance`` of every cluster's engine."""
        return [
            ClusterOutcome(cluster, outcome)
            for cluster, engine in sorted(self.engines.items())
            for outcome in engine.advance(watermark_ms)
        ]

    def group_metrics(self, now_ms: int) -> list[tuple[str, GroupSummary]]:
        """``ShardEngine.group_metrics`` of every cluster, each with its cluster."""
        return [(c, s) for c, engine in sorted(self.engines.items()) for s in engine.group_metrics(now_ms)]
