"""A group's consume progress kept between samples: per queue a window of samples, judged at every sample.

``consume_progress`` events (one master's ``GET_CONSUME_STATS`` answer for a group at a sample, possibly split
over several events of the same time) become ``QueueSample``s joined, at the sample's time, with what the shard
engine knows of the group then (``ProgressContext``: the holders from the members' latest reports and their
``ProcessQueueInfo``, each queue's expected owner, the allocation mode, the generation changes, the stale broker
views). Each sampled queue is judged with ``progress.verdict.evaluate`` and reported as a ``QueueProgress``; a
group with no member on any broker whose queues have a backlog holds an ``OFFLINE_GROUP_BACKLOG`` episode.
Pure: time is the event's. Why so: ``docs/design/consume-progress.md`` ("The job side").
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import starmap
from typing import Any, NamedTuple

from streaming.domain.consumers.episodes import Episode, Finding, reconcile
from streaming.domain.consumers.outcomes import (
    EpisodeTransition,
    IgnoredEvent,
    LateEvent,
    Outcome,
    ProgressSummary,
    QueueProgress,
    QueueProgressGone,
    RebalanceCost,
    TopicProgress,
)
from streaming.domain.consumers.reported import optional
from streaming.domain.progress.rebalance_cost import (
    MOVED_AGAIN,
    UNTRACKED,
    Handoff,
    advance,
    final_reason,
    open_handoff,
)
from streaming.domain.progress.verdict import (
    DEFAULT_SETTINGS,
    HolderView,
    ProgressSettings,
    QueueSample,
    QueueState,
    StuckCause,
    evaluate,
    time_lag,
)
from streaming.domain.vocabulary import (
    DEFAULT_CLUSTER,
    AllocationMode,
    AnomalyKind,
    EventType,
    IgnoredReason,
    LateReason,
    Severity,
)

EVENT_TYPE = EventType.CONSUME_PROGRESS
INCONSISTENT = IgnoredReason.INCONSISTENT_PROGRESS
STALE_PROGRESS = LateReason.STALE_PROGRESS
OFFLINE = AnomalyKind.OFFLINE_GROUP_BACKLOG
QueueRef = tuple[str, str, int]  # (topic, broker, queue id)


@dataclass(frozen=True)
class ProgressContext:
    """What the engine knows of the group at a sample's time."""

    online: bool  # a member on some broker
    holders: Mapping[QueueRef, tuple[HolderView, ...]] = field(default_factory=dict)
    expected_owners: Mapping[QueueRef, str] = field(default_factory=dict)  # queues with exactly one expected owner
    mode: AllocationMode = AllocationMode.CLIENT
    generation_changes_ms: tuple[int, ...] = ()
    stale_brokers: frozenset[str] = frozenset()  # brokers whose polled view of the group is stale
    generation: int = 0
    # Queues whose expected owner has no counted report of the topic: presumed to hold them (``presumed_holder``).
    presumed: frozenset[QueueRef] = frozenset()
    # Changes of the group not yet in ``generation_changes_ms`` (made in the same call, analysed at its end).
    pending_changes_ms: tuple[int, ...] = ()


# -- the kept state ------------------------------------------------------------------------------------------
@dataclass
class QueueTrack:
    samples: list[QueueSample]  # oldest first, at most the window
    state: QueueState | None = None
    cause: StuckCause | None = None
    since_ms: int = 0
    handoff: Handoff | None = None  # the open cost of the generation change that last moved the queue


@dataclass
class GroupProgress:
    """One group's tracked queues and its offline-backlog episode (``to_json``: its part of the shard snapshot)."""

    queues: dict[QueueRef, QueueTrack] = field(default_factory=dict)
    episodes: dict[tuple[str, str, str], Episode] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "queues": [
                [
                    t,
                    b,
                    q,
                    track.state,
                    track.cause,
                    track.since_ms,
                    [_sample_json(s) for s in track.samples],
                    None if track.handoff is None else track.handoff.to_json(),
                ]
                for (t, b, q), track in sorted(self.queues.items())
            ],
            "episodes": [vars(e) for e in self.episodes.values()],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GroupProgress:
        queues = {
            (t, b, int(q)): QueueTrack(
                [_sample_of(s) for s in samples],
                None if state is None else QueueState(state),
                None if cause is None else StuckCause(cause),
                int(since),
                None if handoff is None else Handoff.from_json(handoff),
            )
            for t, b, q, state, cause, since, samples, handoff in data["queues"]
        }
        episodes = {
            (e["group"], e["topic"], e["anomaly"]): Episode(
                **{**e, "anomaly": AnomalyKind(e["anomaly"]), "severity": Severity(e["severity"])}
            )
            for e in data["episodes"]
        }
        return cls(queues, episodes)


def _sample_json(s: QueueSample) -> list[Any]:
    holders = [
        [
            h.client_id,
            h.commit_offset,
            h.cached_msg_count,
            h.cached_msg_size_mib,
            h.cached_msg_min_offset,
            h.cached_msg_max_offset,
            h.last_pull_ms,
            h.last_consume_ms,
            h.orderly,
            h.locked,
            h.last_lock_ms,
        ]
        for h in s.holders
    ]
    return [
        s.at_ms,
        s.answered,
        s.broker_offset,
        s.consumer_offset,
        s.last_timestamp_ms,
        s.pull_offset,
        s.min_offset,
        holders,
        s.expected_owner,
        s.view_fresh,
    ]


def _sample_of(data: Sequence[Any]) -> QueueSample:
    """``_sample_json``'s list as the sample: its fields in their order, each holder's too (a group's whole window is
    decoded at every call that samples it, so positionally)."""
    at, answered, broker, consumer, last_ts, pull, low, holders, expected, fresh = data
    return QueueSample(
        at, answered, broker, consumer, last_ts, pull, low, tuple(starmap(HolderView, holders)), expected, fresh
    )


# -- one event -----------------------------------------------------------------------------------------------
class ProgressRow(NamedTuple):
    """One queue's offsets in a progress sample (``pull_offset`` below 0, or None: not known). A tuple, as
    ``QueueSample``: every sample's queues are built from the event's JSON."""

    topic: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    last_timestamp: int | None = None
    pull_offset: int | None = None
    min_offset: int | None = None

    @property
    def lag(self) -> int:
        return max(0, self.broker_offset - self.consumer_offset)


@dataclass(frozen=True, slots=True)
class ConsumeProgress:
    """A ``consume_progress`` event: one master's consume stats of a group at a sample (``error``: no answer)."""

    event_time_ms: int
    group: str
    broker: str
    queues: tuple[ProgressRow, ...] = ()
    error: str | None = None
    cluster: str = DEFAULT_CLUSTER

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ConsumeProgress:
        """The event from the JSON of its validated fields."""
        rows = tuple(
            ProgressRow(
                str(q["topic"]),
                int(q["queue_id"]),
                int(q["broker_offset"]),
                int(q["consumer_offset"]),
                *(optional(q.get(f), int) for f in ("last_timestamp", "pull_offset", "min_offset")),
            )
            for q in data.get("queues") or ()
        )
        error = data.get("error")
        cluster = data.get("cluster") or DEFAULT_CLUSTER
        return cls(int(data["event_time"]), str(data["group"]), str(data["broker"]), rows, error, cluster)


def refusal(event: ConsumeProgress) -> str | None:
    """Why a schema-valid progress event cannot be applied (None: it can): an ``error`` with queues says both
    "no answer" and "these offsets"; a queue twice in one answer has two positions at one time."""
    queues = event.queues
    if event.error is not None and queues:
        return f"consume_progress of {event.group} on {event.broker} has an error and {len(queues)} queues"
    seen: set[tuple[str, int]] = set()
    for q in queues:
        ref = (q.topic, q.queue_id)
        if ref in seen:
            return f"consume_progress of {event.group} on {event.broker} lists {ref[0]}/{ref[1]} twice"
        seen.add(ref)
    return None


def apply_progress(
    progress: GroupProgress | None,
    event: ConsumeProgress,
    context: ProgressContext,
    settings: ProgressSettings = DEFAULT_SETTINGS,
) -> tuple[GroupProgress | None, list[Outcome]]:
    """The group's progress after one ``consume_progress`` event, and what it found (see the module docstring).
    None: nothing of the group is tracked (an offline group without backlog)."""
    reason = refusal(event)
    if reason is not None:
        return progress, [IgnoredEvent(event, EVENT_TYPE, INCONSISTENT, reason)]
    group, broker, now_ms = event.group, event.broker, event.event_time_ms
    answered = event.error is None
    rows = {(q.topic, broker, q.queue_id): q for q in event.queues} if answered else {}
    if progress is None:
        if context.online or any(q.lag > 0 for q in rows.values()):
            progress = GroupProgress()
        else:
            return None, []  # an offline group without backlog: nothing to watch
    refs = list(rows) if answered else [r for r in progress.queues if r[1] == broker]
    outcomes: list[Outcome] = []
    late = False
    fresh = broker not in context.stale_brokers
    for ref in sorted(refs):
        track = progress.queues.get(ref)
        if track is not None and track.samples and track.samples[-1].at_ms > now_ms:
            late = True
            continue
        sample = _sample(ref, rows.get(ref), now_ms, context, fresh)
        if track is None:
            track = progress.queues[ref] = QueueTrack([])
        elif track.samples and track.samples[-1].at_ms == now_ms:
            if not answered and track.samples[-1].answered:
                continue  # a part of the same sample answered for it
            track.samples.pop()  # the same sample again (a split answer): the latest part holds
        before = track.samples
        track.samples = [*track.samples, sample][-settings.window :]
        verdict = evaluate(track.samples, now_ms, settings, context.mode, context.generation_changes_ms)
        changed = track.state is None or verdict.state != track.state or verdict.cause != track.cause
        if changed:
            track.state, track.cause, track.since_ms = verdict.state, verdict.cause, now_ms
        reported = ref not in context.presumed
        outcomes.append(QueueProgress(group, *ref, sample, verdict, track.since_ms, changed, context.online, reported))
        outcomes += _rebalance_cost(group, ref, track, before, sample, context, settings)
    if late:
        outcomes.append(LateEvent(STALE_PROGRESS, EVENT_TYPE, now_ms, group=group, broker=broker))
    kept, judged = expire(group, progress, context, now_ms, settings)
    return kept, outcomes + judged


def _rebalance_cost(
    group: str,
    ref: QueueRef,
    track: QueueTrack,
    before: Sequence[QueueSample],
    sample: QueueSample,
    context: ProgressContext,
    settings: ProgressSettings,
) -> list[Outcome]:
    """The queue's hand-off cost after ``sample``: a cost opened when the sample's expected owner moved (the
    previous one final as MOVED_AGAIN), followed, and emitted once final (``rebalance_cost``)."""
    outcomes: list[Outcome] = []
    changes = (*context.generation_changes_ms, *context.pending_changes_ms)
    generation = context.generation + (1 if context.pending_changes_ms else 0)
    opened = open_handoff(before, sample, changes, generation)
    if opened is not None:
        if track.handoff is not None:
            outcomes.append(RebalanceCost(group, *ref, track.handoff, MOVED_AGAIN, sample.at_ms))
        track.handoff = opened
    handoff = track.handoff
    if handoff is None or (handoff.samples > 0 and handoff.last_ms == sample.at_ms):
        return outcomes  # nothing open, or the same sample again (a split answer)
    handoff = advance(handoff, sample, settings.allowed_lag)
    reason = final_reason(handoff, settings.window)
    track.handoff = None if reason else handoff
    if reason:
        outcomes.append(RebalanceCost(group, *ref, handoff, reason, sample.at_ms))
    return outcomes


def _untracked(group: str, ref: QueueRef, track: QueueTrack, now_ms: int) -> list[Outcome]:
    """A queue no longer tracked with a cost open: the cost as it stands, final."""
    return [] if track.handoff is None else [RebalanceCost(group, *ref, track.handoff, UNTRACKED, now_ms)]


def expire(
    group: str,
    progress: GroupProgress,
    context: ProgressContext,
    now_ms: int,
    settings: ProgressSettings = DEFAULT_SETTINGS,
) -> tuple[GroupProgress | None, list[Outcome]]:
    """The group's progress at ``now_ms`` (a sample's time, or the watermark once ``next_expiry_ms`` passed):
    queues without a sample for a whole window forgotten, the offline-backlog episode judged, an offline group
    without backlog no longer tracked. None: nothing of the group is tracked any more."""
    outcomes = _forget_silent(group, progress, now_ms, settings)
    backlog = {} if context.online else _backlog(progress)  # read only for a group without a member
    finding = _offline_finding(group, backlog, progress) if backlog else None
    progress.episodes, transitions = reconcile(progress.episodes, [finding] if finding else [], now_ms)
    outcomes += [EpisodeTransition(t, context.generation) for t in transitions]
    if not context.online and not backlog:  # offline and caught up: stop watching
        for ref in sorted(progress.queues):
            outcomes += _untracked(group, ref, progress.queues[ref], now_ms)
            outcomes.append(QueueProgressGone(group, *ref, now_ms))
        progress.queues = {}
    return (progress if progress.queues or progress.episodes else None), outcomes


def next_expiry_ms(progress: GroupProgress, settings: ProgressSettings = DEFAULT_SETTINGS) -> int | None:
    """When the group's oldest tracked queue will have gone a whole window without a sample (``expire``)."""
    latest = [track.samples[-1].at_ms for track in progress.queues.values() if track.samples]
    return min(latest) + settings.window * settings.sample_interval_ms + 1 if latest else None


def _sample(ref: QueueRef, row: ProgressRow | None, now_ms: int, context: ProgressContext, fresh: bool) -> QueueSample:
    holders = context.holders.get(ref, ())
    expected = context.expected_owners.get(ref)
    if row is None:
        return QueueSample(now_ms, False, holders=holders, expected_owner=expected, view_fresh=fresh)
    pull = row.pull_offset
    return QueueSample(
        now_ms,
        True,
        row.broker_offset,
        row.consumer_offset,
        row.last_timestamp or 0,
        None if pull is None or pull < 0 else pull,
        row.min_offset,
        holders,
        expected,
        fresh,
    )


def _forget_silent(group: str, progress: GroupProgress, now_ms: int, settings: ProgressSettings) -> list[Outcome]:
    """Queues without a sample for a whole window (gone from the route or the group's subscriptions)."""
    horizon = now_ms - settings.window * settings.sample_interval_ms
    silent = sorted(ref for ref, track in progress.queues.items() if track.samples[-1].at_ms < horizon)
    outcomes: list[Outcome] = []
    for ref in silent:
        outcomes += _untracked(group, ref, progress.queues.pop(ref), now_ms)
        outcomes.append(QueueProgressGone(group, *ref, now_ms))
    return outcomes


def _latest_answered(track: QueueTrack) -> QueueSample | None:
    """The queue's latest sample the master answered for."""
    return next((s for s in reversed(track.samples) if s.answered), None)


def _backlog(progress: GroupProgress) -> dict[QueueRef, int]:
    """Each tracked queue's lag at its latest answered sample, where it is above 0."""
    lags = {}
    for ref, track in progress.queues.items():
        latest = _latest_answered(track)
        if latest is not None and latest.lag > 0:
            lags[ref] = latest.lag
    return lags


def _offline_finding(group: str, backlog: Mapping[QueueRef, int], progress: GroupProgress) -> Finding:
    """The group's OFFLINE_GROUP_BACKLOG: its backlog when the episode opened, or when the set of queues with a
    backlog last changed (an episode UPDATED at every sample of a growing backlog would repeat the progress
    history; the current lag is in queue_progress_current and the metrics)."""
    episode = progress.episodes.get((group, "", OFFLINE))
    if episode is not None:
        details = json.loads(episode.details_json)
        if {(q["topic"], q["broker"], q["queue_id"]) for q in details["queues"]} == set(backlog):
            return Finding(group, "", OFFLINE, episode.summary, details)
    by_topic: dict[str, int] = {}
    for (topic, _, _), lag in backlog.items():
        by_topic[topic] = by_topic.get(topic, 0) + lag
    total = sum(backlog.values())
    return Finding(
        group,
        "",
        OFFLINE,
        f"{group} has no member on any broker and {total} messages waiting in {len(backlog)} queues",
        {
            "lag": total,
            "lag_by_topic": dict(sorted(by_topic.items())),
            "queues": [{"topic": t, "broker": b, "queue_id": q, "lag": n} for (t, b, q), n in sorted(backlog.items())],
        },
    )


def summary(group: str, progress: GroupProgress | None, now_ms: int) -> ProgressSummary:
    """The group's tracked queues per topic: lag, largest time lag, queues per state, and whether its offline
    backlog episode is open (the metrics)."""
    topics: dict[str, tuple[int, float | None, dict[QueueState, int]]] = {}
    for (topic, _, _), track in sorted((progress.queues if progress else {}).items()):
        lag, worst, states = topics.get(topic, (0, None, {}))
        latest = _latest_answered(track)
        if latest is not None:
            lag += latest.lag
        if track.state is not None:
            states[track.state] = states.get(track.state, 0) + 1
        estimate = _latest_estimate(track)
        if estimate is not None:
            worst = estimate if worst is None else max(worst, estimate)
        topics[topic] = (lag, worst, states)
    offline = progress is not None and any(key[2] == OFFLINE for key in progress.episodes)
    return ProgressSummary(group, now_ms, {t: TopicProgress(*v) for t, v in topics.items()}, offline)


def _latest_estimate(track: QueueTrack) -> float | None:
    """The queue's time-lag estimate at its latest sample, seconds."""
    return time_lag(track.samples, track.samples[-1].at_ms).estimate_s if track.samples else None


__all__ = [
    "ConsumeProgress",
    "GroupProgress",
    "ProgressContext",
    "ProgressRow",
    "QueueTrack",
    "apply_progress",
    "expire",
    "next_expiry_ms",
    "refusal",
    "summary",
]
