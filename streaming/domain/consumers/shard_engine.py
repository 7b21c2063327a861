"""The monitor's per-shard engine: events in, membership kept, groups analysed, rows out.

A *shard* is a set of consumer groups plus the topic routes they need (the Spark job keys its state by
shard; see ``streaming/job/consumer_query.py`` for why). ``ShardEngine`` is pure: it is restored from a
JSON-able snapshot, fed events (already validated and parsed into their types, ``EngineEvent``, in event-time
order) and the watermark, and returns what it found as typed values
(``outcomes``), a ``GroupSummary`` per analysed group among them. Nothing reads a clock: "now" is an
event's time or the watermark.

Per event:

* ``consumer_channel``: the group's membership runs the expiry scan up to the event's time, then applies
  the event (``membership``); every change is a ``MembershipChange`` and marks the group for
  re-analysis.
* ``consumer_connections``: one broker's poll of the group replaces that broker's view at its time
  (``polled_views.apply_poll``): changes as for a channel event, plus a ``BrokerViewState`` (the view's
  status, last poll and channels) and, when the status changes, a ``BrokerViewChanged``. A poll older
  than the view's last is a ``LateEvent`` (reason ``stale_poll``); a poll without connections of a
  group the shard does not know changes nothing. A polled view is never scanned for expiry: without a poll
  newer than its ``stale_after_ms`` it turns STALE (``polled_views.mark_stale``), before any later poll of the
  group and at each watermark, its channels kept; STALE is a status, not a membership change: the group is
  re-analysed (trigger VIEW_STALE, and VIEW_FRESH when polls resume) without a new generation, because the
  analysis leaves stale views out while a fresh one has channels.
* ``topic_route``: the topic's readable queues (``perm & 4``, ids ``0..read_queue_nums-1``) replace the
  previous ones when they differ; every group of the shard that subscribes the topic (through a channel
  still registered at the route's time) is re-analysed.
* ``reported_assignment``: the client's own non-dropped queues are stored; a difference from what was
  stored re-analyses the group (expected-vs-reported comparison), without a new generation. A report for
  a group that no broker of the shard knows has nothing to be compared with: it becomes an
  ``IgnoredEvent`` (reason ``UNKNOWN_GROUP``) that hands the event back as given, so the job can write it
  as a dead letter with whatever it attached to it.
* ``consume_progress``: one master's consume stats for a group at a sample, joined with what the shard knows
  of the group at that time (holders from the members' reports, expected owners, allocation mode, rebalances,
  stale views) and judged per queue (``progress_tracker``): a ``QueueProgress`` per sampled queue, a
  ``ProgressSummary`` per sampled group at the call's end. Kept in ``progress``, apart from ``groups``: a group
  whose last member left, or that never had one, is watched while it has a backlog (OFFLINE_GROUP_BACKLOG). An
  event contradicting itself is an ``IgnoredEvent`` (INCONSISTENT_PROGRESS); a sample older than a queue's
  latest a ``LateEvent`` (``stale_progress``).
* ``HeartbeatRun``: a channel's identical heartbeats of the batch, as the job's JVM stage groups them. The
  caller hands them to ``apply_runs`` before ``apply``: a run that only refreshes a channel the shard knows
  is applied there and then, another steady run becomes its first heartbeat held until its last, and any
  other run every one of its heartbeats; each group's latest steady heartbeat is applied as well, so the
  group's expiry scan reaches that time. The result is exact, not a sample (``steady_runs``).

A route reads the subscriptions as of its own time (channels silent for more than the expiry do not count,
scanned or not), so the groups it re-analyses never depend on where the engine happened to run its lazy
scans. (A report needs no such care: a group is empty only when its last channel is gone, and a channel in the
middle of a run is not.)

Routes older than the topic's applied route are ignored as stale and counted in a ``LateEvent``.

At the end of a batch (and when the state's timeout fires) the expiry scan runs up to the watermark, and a
channel's (not a polled view's) up to the *lane clock* when that is later. A lane is one ordered source of
channel events (the job's: a Kafka partition of a channel topic); the caller passes each lane's newest event time
of the batch, the engine keeps each lane's newest, and the clock is the oldest of them: every lane has shown
events up to it, so a heartbeat that would have kept a channel alive until then has been applied, unless its
lane delivered it behind newer events -- the order a group's own events already need. A lane whose newest event
is more than the expiry behind the watermark no longer holds the clock back (whatever it carried has expired
at the watermark). Why: ``docs/design/membership-rules.md``.
A group's changes are not analysed where a batch ends but by event time: they stay *pending* in its state
until ``storm_coalesce_ms`` passes without another change of the group (``cut_ms``), and are *cut* as the first
event at or after that time is applied (before it), or at the end of a call whose clock (its newest event, or
the watermark) has passed it, once the channels' scan and the views' staleness have been judged that far. The
storm and flapping windows slide, and the convergence grace ends, at their own times in the same order. The end
of a call never waits for later input: what is still pending is cut there as it is and emitted, the state kept
as before that cut; when the changes are cut for good, a cut that finds the same emits nothing, and one that
finds more (a change of the same window came later) withdraws the first (``CutRetracted``, its current rows put
back) and replaces it. So a group's tables are the same however its input was cut into batches
(``docs/design/batch-invariance.md``).
Each cut whose changes include a membership or route change gets a new *generation*: a ``GenerationSnapshot``,
an ``ExpectedAssignment`` per client and topic, an ``AssignmentWithdrawn`` per one gone, episode transitions
(``episodes.reconcile``) and, through ``StormDetector``, rebalance storms. Every join and leave also
counts towards the member's flapping (``FlappingDetector``), and every rebalance-causing change starts a
convergence grace (``[membership] convergence_grace_ms``, plus ``route_poll_interval_ms`` for a route
change) during which a difference between reported and expected assignments opens no episode.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, NamedTuple

from streaming.domain.consumers import membership as ms
from streaming.domain.consumers.analysis import Analysis, allocation_mode, analyze_group, owners_by_topic, primary_view
from streaming.domain.consumers.encoded_states import EncodedStates, encoded_payload
from streaming.domain.consumers.engine_settings import EngineSettings
from streaming.domain.consumers.episodes import (
    BORN,
    ROUTE,
    Finding,
    FlappingDetector,
    StormDetector,
    hold_in_grace,
    reconcile,
)
from streaming.domain.consumers.group_rows import (
    assignment_outcomes,
    generation_snapshot,
    group_gone_outcomes,
    group_summary,
    stale_outcomes,
    without_superseded_views,
)
from streaming.domain.consumers.group_state import (
    GroupState,
    RouteQueues,
    TopicRoute,
    queue_key,
    queue_of_key,
    readable_queues,
    slide_matters,
    subscribed_topics,
)
from streaming.domain.consumers.heartbeat_plan import HeartbeatRun, RunEvents, plan_runs, steady_runs
from streaming.domain.consumers.observed import (
    OBSERVED_KINDS,
    Report,
    TopicObservation,
    counted,
    fully_observed,
    observe_topic,
    observed_candidates,
)
from streaming.domain.consumers.outcomes import (
    AssignmentWithdrawn,
    BrokerViewChanged,
    BrokerViewGone,
    BrokerViewState,
    CutRetracted,
    EpisodeRestored,
    EpisodeRetracted,
    EpisodeTransition,
    ExpectedAssignment,
    GroupSummary,
    IgnoredEvent,
    LateEvent,
    Outcome,
    QueueHolders,
    QueueHoldersGone,
)
from streaming.domain.consumers.poll_runs import PollFacts, PollRun, first_settles, plan_polls, poll_facts
from streaming.domain.consumers.polled_views import (
    ConnectionPoll,
    NotedPoll,
    ViewStatus,
    apply_poll,
    is_registered,
    lists_connections,
    mark_stale,
    next_stale_ms,
    poll_digest,
    polled_at,
    settled_by,
    view_status,
)
from streaming.domain.consumers.progress_tracker import (
    ConsumeProgress,
    GroupProgress,
    ProgressContext,
    apply_progress,
    expire,
    next_expiry_ms,
    summary,
)
from streaming.domain.consumers.reported import ReportedAssignment, held_queues, holder_view, presumed_holder
from streaming.domain.consumers.shard_migrations import MIGRATIONS
from streaming.domain.queues import MessageQueue
from streaming.domain.state_codec import unwrap_state, wrap_state
from streaming.domain.vocabulary import (
    DEFAULT_CLUSTER,
    AllocationMode,
    AnomalyKind,
    ChangeKind,
    EpisodeStatus,
    EventType,
    IgnoredReason,
    LateReason,
    MemberDirection,
    Trigger,
    ViewFreshness,
)

SNAPSHOT_KIND = "shard"
# 3: each group's progress (``progress``) and its holders' ProcessQueueInfo (``holders``); 4: each tracked
# queue's open rebalance cost (``progress`` queue entries gain a ``Handoff``); 5: each group's storm changes
# (``storm_changes``: the storm is judged from who changed, not from a count of rebalances)
# 6: each group's changes not cut yet (``pending``: generations are cut by event time, not per batch); 7: the cut
# of them made where a call ended (``provisional``) and each open episode's current row (``episode_rows``); 8: each
# report's times (``reported_ms``), the latest generation's time, the observed grace's flag and the holders rows;
# 9: each group's state and progress as its own JSON text, with the times it wakes (``group_times``,
# ``progress_times``), so a batch decodes and encodes only the groups it touches (``encoded_states``); 10: each
# polled view's last poll noted apart from the group's text (``group_times``: its time and a digest of what it
# said), so an unchanged poll leaves the group's text as it is (``_touch``); 11: with each such view its channel
# count and collector, so that an unchanged poll writes its status row without being parsed (``NotedPoll``).
# Older versions are migrated on restore (``shard_migrations``).
SCHEMA_VERSION = 11
# The snapshot's maps of a group's JSON text (``encoded_states``), which the job's state blob stores in segments.
TEXT_KEYS = ("groups", "progress")
# How long (event time) a group that emptied keeps its generation number for a return.
RETIRED_GENERATION_TTL_MS = 7 * 24 * 3600 * 1000
UNKNOWN_GROUP = IgnoredReason.UNKNOWN_GROUP  # the reason of a report the engine cannot compare with anything
STALE_ROUTE = LateReason.STALE_ROUTE  # the late-event reason of a route older than the applied one
STALE_POLL = LateReason.STALE_POLL  # the late-event reason of a poll older than its view's last poll
# What ``apply`` takes: every event type of the heartbeat path, parsed by the caller.
EngineEvent = ms.ChannelEvent | ConnectionPoll | NotedPoll | TopicRoute | ReportedAssignment | ConsumeProgress
# Re-analyses that are not rebalances: no generation, no storm count, no convergence grace.
# A polled view turning stale or fresh again changes which views the analysis reads, not the membership.
NOT_REBALANCES = frozenset(
    {
        Trigger.REPORTED_ASSIGNMENT,
        Trigger.STORM_WINDOW,
        Trigger.FLAPPING_WINDOW,
        Trigger.CONVERGENCE_GRACE,
        Trigger.VIEW_STALE,
        Trigger.VIEW_FRESH,
    }
)
# The episodes the storm detector's window holds open: a slide may close them.
STORM_KINDS = (AnomalyKind.REBALANCE_STORM, AnomalyKind.ROLLING_DEPLOY)
# A generation's cause, when the analysis names one (``rebalance_cause``), most telling first.
_CAUSES = (AnomalyKind.REBALANCE_STORM, AnomalyKind.FLAPPING_MEMBERS, AnomalyKind.ROLLING_DEPLOY)
# Findings that compare what clients report with what they compute: held while clients converge.
CONVERGING_KINDS = (AnomalyKind.ASSIGNMENT_MISMATCH,)
# Findings judged from the clients' reports: an open episode no counted report can judge is kept (``_unjudged``).
JUDGED_FROM_REPORTS = (*CONVERGING_KINDS, *OBSERVED_KINDS)
_MEMBER_DIRECTION = {
    ChangeKind.JOIN: MemberDirection.JOIN,
    ChangeKind.LEAVE: MemberDirection.LEAVE,
    ChangeKind.EXPIRED: MemberDirection.LEAVE,
    ChangeKind.VANISHED: MemberDirection.LEAVE,
}


def _channel_deadline_ms(membership: ms.GroupMembership, expiry_ms: int) -> int | None:
    """The earliest time at which a channel of ``membership`` expires (a tombstone's end changes nothing)."""
    times = [
        ch.last_update_ms + expiry_ms + 1
        for v in membership.views.values()
        if v.poll is None
        for ch in v.channels.values()
    ]
    return min(times) if times else None


def _deadline_bound_ms(membership: ms.GroupMembership, expiry_ms: int) -> int | None:
    """The earliest time at which a scan changes ``membership``: a channel or a tombstone expires, or a polled view
    turns stale (``GroupState.expiry_bound_ms``)."""
    times = [t for t in (ms.next_expiry_ms(membership, expiry_ms), next_stale_ms(membership)) if t is not None]
    return min(times) if times else None


def _woken(times: Sequence[Any]) -> tuple[int | None, int | None]:
    """A group's noted ``[wake, quiet, views, fed]`` (``ShardEngine._group_times``) as its wake and quiet times:
    those noted, or a polled view's staleness when earlier."""
    wake, quiet = times[0], times[1]
    stale = [entry[0] + entry[1] + 1 for entry in times[2].values()]
    if stale:
        first = min(stale)
        wake = first if wake is None else min(wake, first)
        quiet = first if quiet is None else min(quiet, first)
    return wake, quiet


def _progress_of(data: Any, _times: Any) -> GroupProgress:
    return GroupProgress.from_json(data)


def _touched(records: Sequence[Outcome]) -> dict[str, list[Any]]:
    """The current-table rows a cut's outcomes write (their keys): shares, open episodes, polled views, holders rows."""
    assign = sorted(
        {(o.topic, o.client_id) for o in records if type(o) is ExpectedAssignment or type(o) is AssignmentWithdrawn}
    )
    episodes = sorted({o.transition.episode.episode_id for o in records if type(o) is EpisodeTransition})
    views = sorted({o.broker for o in records if type(o) is BrokerViewGone})
    holders = sorted(
        {
            (o.observation.topic, queue_key(q.queue))
            for o in records
            if type(o) is QueueHolders
            for q in o.observation.queues
        }
    )
    return {
        "assign": [list(k) for k in assign],
        "episodes": episodes,
        "views": views,
        "holders": [list(k) for k in holders],
    }


def _unjudged(
    state: GroupState,
    analysis: Analysis,
    observations: Sequence[TopicObservation],
    findings: Sequence[Finding],
    evidence_from_ms: int,
) -> list[Finding]:
    """Open episodes judged from reports that no counted report can judge now (after a new generation, before the
    clients report again): kept as they are, neither closed nor updated. A mismatch is judged once a subscriber of
    its topic reports, an observed episode once every subscriber does; a topic no longer analysed closes both."""
    found = {f.key for f in findings}
    observed = {o.topic: o for o in observations}
    kept = []
    for key, episode in sorted(state.episodes.items()):
        if key in found or episode.anomaly not in JUDGED_FROM_REPORTS or episode.topic not in analysis.topics:
            continue
        if episode.anomaly == AnomalyKind.ASSIGNMENT_MISMATCH:
            subscribers = analysis.topics[episode.topic].subscribers
            judged = any(
                (times := state.reported_ms.get(f"{c}\x00{episode.topic}")) is not None and times[1] >= evidence_from_ms
                for c in subscribers
            )
        else:
            observation = observed.get(episode.topic)
            judged = observation is not None and fully_observed(observation)
        if not judged:
            kept.append(
                Finding(
                    episode.group, episode.topic, episode.anomaly, episode.summary, json.loads(episode.details_json)
                )
            )
    return kept


def _storm_open(state: GroupState) -> bool:
    return any(key[2] == AnomalyKind.REBALANCE_STORM for key in state.episodes)


def rebalance_cause(triggers: Iterable[Trigger], findings: Iterable[Finding]) -> AnomalyKind | None:
    """What a new generation is part of, as the group's findings at it say: a generation caused only by the
    broker's subscription table changing while the group's subscriptions are inconsistent is that table
    flipping (INCONSISTENT_SUBSCRIPTION, never a storm's rebalance); otherwise a storm, flapping members or a
    rolling deploy the storm window holds; None when nothing explains it (a single join, leave or route change)."""
    kinds = {f.anomaly for f in findings}
    if (
        set(triggers) - NOT_REBALANCES == {Trigger.SUBSCRIPTION_CHANGED}
        and AnomalyKind.INCONSISTENT_SUBSCRIPTION in kinds
    ):
        return AnomalyKind.INCONSISTENT_SUBSCRIPTION
    return next((k for k in _CAUSES if k in kinds), None)


class _JoinedGroup(NamedTuple):
    """A group's progress context at one time (``key``: group, time, changed; ``ShardEngine._progress_context``) and
    its part for each broker a sample of it read (``of_broker``)."""

    key: tuple[str, int, bool]
    context: ProgressContext
    brokers: dict[str, ProgressContext]

    def of_broker(self, broker: str) -> ProgressContext:
        """The context with the holders, expected owners and presumed holders of ``broker``'s queues only: all a sample
        of that broker reads (``progress_tracker.apply_progress``)."""
        found = self.brokers.get(broker)
        if found is None:
            context = self.context
            found = self.brokers[broker] = replace(
                context,
                holders={ref: views for ref, views in context.holders.items() if ref[1] == broker},
                expected_owners={ref: owner for ref, owner in context.expected_owners.items() if ref[1] == broker},
                presumed=frozenset(ref for ref in context.presumed if ref[1] == broker),
            )
        return found


class ShardEngine:
    """Mutable during one call, then snapshotted; see the module docstring."""

    def __init__(
        self,
        settings: EngineSettings,
        routes: dict[str, dict[str, Any]],
        groups: dict[str, GroupState],
        retired: dict[str, list[Any]] | None = None,
        lanes: dict[str, int] | None = None,
        progress: dict[str, GroupProgress] | None = None,
        cluster: str = DEFAULT_CLUSTER,
    ) -> None:
        self.settings = settings
        self.cluster = cluster  # the RocketMQ cluster whose events it is given (``Shard``)
        # group -> its consume progress: kept apart from ``groups``, as an offline group's backlog is watched too
        self.progress = progress or {}
        self.lanes = lanes or {}  # lane -> its newest channel event's time (see the module docstring)
        # Groups that emptied: their last generation and when, so a returning group continues its numbering.
        self.retired = retired or {}
        self.routes = routes  # topic -> {"event_time_ms": int, "queues": [[broker, qid], ...]}
        self.groups = groups
        self.storms = StormDetector(settings.storm_window_ms, settings.storm_threshold, settings.storm_coalesce_ms)
        self.flapping = FlappingDetector(
            settings.flapping_window_ms, settings.flapping_threshold, settings.storm_coalesce_ms
        )
        # Each topic's mqAll as built from its current route (the route object it was built from, the queues):
        # a group's analysis reads only its topics, and a route rarely changes while analyses are frequent.
        self._queues_of_route: dict[str, tuple[Mapping[str, Any], list[MessageQueue]]] = {}
        # group -> broker -> (digest, view): the view as the poll of that digest (``poll_digest``) left it settled
        # (``settled_by``); noted with the group while the view is still that (``_group_times``).
        self._polled: dict[str, dict[str, tuple[str, ms.BrokerView]]] = {}
        # digest -> (group, broker, stale_after_ms) of each view noted settled as the shard was restored
        # (``noted_poll``), built at the first question
        self._noted: dict[str, tuple[str, str, int]] | None = None

    # -- persistence ---------------------------------------------------------------------------------
    @classmethod
    def restore(
        cls, snapshot: Mapping[str, Any] | None, settings: EngineSettings, cluster: str = DEFAULT_CLUSTER
    ) -> ShardEngine:
        """The engine ``snapshot`` holds (None: an empty one), of ``cluster``'s events."""
        if not snapshot:
            return cls(settings, {}, {}, cluster=cluster)
        snapshot = unwrap_state(SNAPSHOT_KIND, SCHEMA_VERSION, snapshot, MIGRATIONS)
        lanes = {lane: int(t) for lane, t in snapshot["lanes"].items()}
        engine = cls(settings, dict(snapshot["routes"]), {}, dict(snapshot.get("retired", {})), lanes, cluster=cluster)
        # Each group's state is decoded when the call first reads it (``encoded_states``).
        engine.groups = EncodedStates.restored(snapshot["groups"], snapshot["group_times"], engine._decoded_group)  # type: ignore[assignment]
        engine.progress = EncodedStates.restored(snapshot["progress"], snapshot["progress_times"], _progress_of)  # type: ignore[assignment]
        return engine

    def _decoded_group(self, data: Any, times: Any) -> GroupState:
        """A group's state from its text and the times noted with it: each polled view as its last poll left it
        (a view polled again, unchanged, since the text was written: ``polled_at``), and the digest of that poll
        noted for a view it settled."""
        state = GroupState.from_json(data)
        if not times:
            return state
        views, recorded = dict(state.membership.views), {}
        for broker, (at_ms, _, digest, *_) in times[2].items():
            view = views.get(broker)
            if view is None or view.poll is None:
                continue
            if at_ms > view.poll.polled_at_ms:
                view = views[broker] = polled_at(view, at_ms)
            if digest is not None:
                recorded[broker] = (digest, view)
        state.membership = ms.GroupMembership(state.membership.group, views)
        if recorded:
            self._polled[state.membership.group] = recorded
        return state

    def snapshot(self) -> dict[str, Any]:
        groups, group_times = encoded_payload(self.groups, GroupState.to_json, self._group_times)
        progress, progress_times = encoded_payload(self.progress, GroupProgress.to_json, self._progress_times)
        payload = {
            "routes": self.routes,
            "groups": groups,
            "group_times": group_times,
            "retired": dict(sorted(self.retired.items())),
            "lanes": dict(sorted(self.lanes.items())),
            "progress": progress,
            "progress_times": progress_times,
        }
        return wrap_state(SNAPSHOT_KIND, SCHEMA_VERSION, payload)

    def _group_times(self, group: str, state: GroupState) -> list[Any]:
        """What a snapshot notes with a group's text: ``[wake, quiet, views, fed]``. ``views``: each polled view
        that is not stale, ``[its last poll's time, stale_after_ms, the poll's digest, its channels, its collector]``
        (the digest None unless that poll settled the view and nothing changed it since: ``_touch``, which writes
        the view's status row from them); ``fed``: a view with channels is fed
        by heartbeats. With the views' staleness (``_woken``), ``wake`` is its next wakeup (``next_wakeup_ms``'s
        term) and ``quiet`` the time before which the end of a call changes nothing of it (``_advance_all``): the
        earliest channel expiry, staleness, slide or window pruning; 0 while it has pending changes (every call's
        end cuts them)."""
        settings = self.settings
        membership = state.membership
        recorded = self._polled.get(group, {})
        views: dict[str, list[Any]] = {}
        for broker, view in sorted(membership.views.items()):
            if view.poll is None or view.poll.stale:
                continue
            held = recorded.get(broker)
            digest = held[0] if held is not None and (held[1] is view or held[1] == view) else None
            poll = view.poll
            views[broker] = [poll.polled_at_ms, poll.stale_after_ms, digest, len(view.channels), poll.collector]
        fed = any(v.poll is None and v.channels for v in membership.views.values())
        times = [ms.next_expiry_ms(membership, settings.expiry_ms)]
        times += [t + settings.storm_window_ms + 1 for t in state.rebalances_ms[:1]]
        due_ms = self._next_due_ms(state)  # the windows' next slide, the convergence grace's end
        times.append(due_ms)
        if state.pending:
            times.append(self.cut_ms(state.pending))
        known = [t for t in times if t is not None]
        wake = min(known) if known else None
        if state.pending is not None:
            return [wake, 0, views, fed]
        # What ``_advance_group`` steps to at a call's end (a tombstone's end is no step), and the window pruning.
        steps = [_channel_deadline_ms(membership, settings.expiry_ms)]
        steps += [due_ms, *(t + settings.storm_window_ms for t in state.rebalances_ms)]
        quiet = [t for t in steps if t is not None]
        return [wake, min(quiet) if quiet else None, views, fed]

    def _progress_times(self, _group: str, progress: GroupProgress) -> list[int | None]:
        """What a snapshot notes with a group's progress: ``[due]``, when it next expires (``_expire_progress``)."""
        return [next_expiry_ms(progress, self.settings.progress)]

    def _stored_times(self, states: Mapping[str, Any], group: str) -> Any:
        """The times the snapshot noted with a group whose state the call has not read, else None."""
        kept = states.encoded(group) if isinstance(states, EncodedStates) else None
        return kept.times if kept is not None else None

    def noted_poll(self, time_ms: int, digest: str, text: str) -> NotedPoll | None:
        """A poll at ``time_ms`` whose fields but its time are ``text`` (of digest ``digest``), as a ``NotedPoll`` when
        the shard noted that digest with a view the poll settled as the call restored it (``_group_times``), else
        None (it is parsed). The digest tells the poll's group, broker and staleness: the noted poll's."""
        if self._noted is None:
            self._noted = {}
            if isinstance(self.groups, EncodedStates):
                for group, kept in self.groups.encoded_items():
                    if kept.times:
                        for broker, entry in kept.times[2].items():
                            if entry[2] is not None:
                                self._noted[entry[2]] = (group, broker, int(entry[1]))
        found = self._noted.get(digest)
        if found is None:
            return None
        group, broker, stale_after_ms = found
        return NotedPoll(time_ms, self.cluster, group, broker, stale_after_ms, digest, text)

    def is_empty(self) -> bool:
        return not self.groups and not self.routes and not self.retired and not self.progress

    def next_wakeup_ms(self) -> int | None:
        """The earliest time a group's expiry, staleness, slide, pending cut or progress falls due (a group the call
        has not read: as its snapshot noted, ``_group_times``)."""
        times: list[int | None] = []
        for group in self.groups:
            stored = self._stored_times(self.groups, group)
            times.append(_woken(stored if stored is not None else self._group_times(group, self.groups[group]))[0])
        for group in self.progress:
            stored = self._stored_times(self.progress, group)
            times.append((stored if stored is not None else self._progress_times(group, self.progress[group]))[0])
        known = [t for t in times if t is not None]
        return min(known) if known else None

    # -- processing ----------------------------------------------------------------------------------
    def apply_runs(
        self, runs: Sequence[HeartbeatRun], others: Iterable[ms.ChannelEvent | ConnectionPoll | NotedPoll]
    ) -> list[RunEvents]:
        """Take the batch's heartbeat runs (``others``: its other channel events and polls) before ``apply``: apply what
        needs no place among the batch's events, and return, per run, the events that still apply it
        (``heartbeat_plan.plan_runs``)."""
        return plan_runs(self.groups, self.settings.expiry_ms, runs, others)

    def steady_runs(
        self, runs: Sequence[HeartbeatRun], others: Iterable[ms.ChannelEvent | ConnectionPoll | NotedPoll]
    ) -> list[bool]:
        """For each run of the batch: may it be applied as its first heartbeat held until its last, with exactly
        the effect of applying every one of its heartbeats? (``heartbeat_plan.steady_runs``)"""
        return steady_runs(self.groups, self.settings.expiry_ms, runs, others)

    def plan_polls(
        self, runs: Sequence[PollRun], others: Iterable[ms.ChannelEvent | ConnectionPoll | NotedPoll]
    ) -> list[list[int]]:
        """Per poll run of the batch (``others``: its channel events and other polls), the indices of the polls
        still to apply (``poll_runs.plan_polls``)."""
        return plan_polls(self._poll_facts, self._first_settles, runs, others)

    def _poll_facts(self, group: str) -> PollFacts | None:
        """``poll_runs.PollFacts`` of a group: as noted with it when the call has not read it."""
        stored = self._stored_times(self.groups, group)
        if stored is not None:
            return PollFacts(bool(stored[3]), {b: (entry[0], entry[1]) for b, entry in stored[2].items()})
        state = self.groups.get(group)
        return None if state is None else poll_facts(state)

    def _first_settles(self, run: PollRun) -> bool:
        """``poll_runs.first_settles``: of a group the call has not read, known without reading it when the run
        says what the poll that settled its view said (the view is then exactly the run's connections)."""
        event = run.event
        stored = self._stored_times(self.groups, event.group)
        entry = stored[2].get(event.broker) if stored is not None else None
        if entry is not None and entry[2] is not None and entry[2] == poll_digest(event):
            return run.times[0] >= int(entry[0])
        if type(event) is NotedPoll:
            run = run._replace(event=event.parsed())
        return first_settles(self.groups.get(event.group), run)

    def apply(
        self,
        events: Iterable[EngineEvent],
        watermark_ms: int,
        lane_times: Mapping[str, int] | None = None,
    ) -> list[Outcome]:
        """Apply events (``EngineEvent``, parsed by the caller) in the given order;
        ``lane_times``: the newest channel event's time per lane among them (see the module docstring)."""
        records: list[Outcome] = []
        sampled: dict[str, int] = {}  # group -> its latest progress event's time in this call
        clock_ms = watermark_ms  # the newest event applied in this call (the cut clock at its end)
        # The group's progress context as of the last event, when it was a progress sample: the samples of a group's
        # brokers at one time come together, and nothing of the group changes between them.
        joined: _JoinedGroup | None = None
        for event in events:
            if type(event) is not ConsumeProgress:
                joined = None
            if isinstance(event, ms.ChannelEvent):
                clock_ms = max(clock_ms, event.event_time_ms)
                self._advance_group(event.group, event.event_time_ms, records)
                self._apply_channel(event, records)
                continue
            if isinstance(event, ConnectionPoll | NotedPoll):
                clock_ms = max(clock_ms, event.event_time_ms)
                if self._touch(event, records) or self._repolled(event, records):
                    continue
                poll = event.parsed() if isinstance(event, NotedPoll) else event
                self._advance_group(poll.group, poll.event_time_ms, records)
                self._apply_poll(poll, records)
                continue
            clock_ms = max(clock_ms, event.event_time_ms)
            if isinstance(event, TopicRoute):
                self._apply_route(event, records)
            elif isinstance(event, ReportedAssignment):
                self._advance_group(event.group, event.event_time_ms, records)
                self._apply_report(event, records)
            else:
                self._advance_group(event.group, event.event_time_ms, records)
                state = self.groups.get(event.group)
                key = (event.group, event.event_time_ms, state is not None and state.pending is not None)
                if joined is None or joined.key != key:
                    joined = _JoinedGroup(key, self._progress_context(*key), {})
                self._apply_progress(event, records, sampled, joined.of_broker(event.broker))
        for lane, time_ms in (lane_times or {}).items():
            self.lanes[lane] = max(time_ms, self.lanes.get(lane, time_ms))
        records += self._advance_all(watermark_ms, clock_ms)
        self._forget_retired(watermark_ms)
        records += self._expire_progress(watermark_ms, sampled)
        return without_superseded_views(records)

    def lane_clock_ms(self, watermark_ms: int) -> int:
        """The time the channel expiry scan runs to: the oldest lane's newest event, or the watermark when later.
        Lanes more than the expiry behind the watermark are forgotten first."""
        horizon = watermark_ms - self.settings.expiry_ms
        self.lanes = {lane: t for lane, t in self.lanes.items() if t >= horizon}
        return max(watermark_ms, min(self.lanes.values(), default=watermark_ms))

    def _forget_retired(self, now_ms: int) -> None:
        horizon = now_ms - RETIRED_GENERATION_TTL_MS
        self.retired = {g: v for g, v in self.retired.items() if v[1] > horizon}

    def advance(self, watermark_ms: int) -> list[Outcome]:
        """The state's timeout fired: run the expiry scan (and storm window) up to the watermark (channels up to
        the lane clock), and cut what the watermark closes."""
        records = self._advance_all(watermark_ms, watermark_ms)
        self._forget_retired(watermark_ms)
        return without_superseded_views(records + self._expire_progress(watermark_ms, {}))

    def _advance_all(self, watermark_ms: int, clock_ms: int) -> list[Outcome]:
        """The end of a call: every group advanced to the call's clock (its newest event, or the watermark when
        later), channels scanned to the lane clock and polled views judged stale at the watermark; a change
        whose window the clock has not passed stays pending (``docs/design/batch-invariance.md``)."""
        records: list[Outcome] = []
        scan_to = self.lane_clock_ms(watermark_ms)
        until_ms = max(clock_ms, scan_to)
        for group in sorted(self.groups):
            stored = self._stored_times(self.groups, group)
            if stored is not None and ((quiet := _woken(stored)[1]) is None or quiet > until_ms):
                continue  # not read in this call, and nothing of it falls due by then: it stays as stored
            self._advance_group(group, until_ms, records, scan_to, watermark_ms)
            state = self.groups.get(group)
            if state is not None:
                state.rebalances_ms = self.storms.prune(state.rebalances_ms, watermark_ms)
                if state.pending is not None:
                    records += self._provisional_cut(group, state)
        return records

    def _advance_group(
        self,
        group: str,
        until_ms: int,
        records: list[Outcome],
        scan_to_ms: int | None = None,
        stale_to_ms: int | None = None,
    ) -> None:
        """Everything of ``group`` due before ``until_ms``, in event-time order: channels expiring (up to
        ``scan_to_ms``), polled views turning stale (up to ``stale_to_ms``), storm and flapping windows sliding,
        the convergence grace ending, and the pending change cut once ``coalesce_ms`` past its first change.
        Both bounds default to ``until_ms`` (an event of the group, or a route, at that time). A cut
        whose window holds an expiry or a staleness not judged yet waits: the cut must see all of its window."""
        if scan_to_ms is None and (state := self.groups.get(group)) is not None:
            # Before an event: nothing to do unless a cut, a slide, a channel's expiry or a view's staleness is
            # due by then, the common case, checked without a pass over the channels (``expiry_bound_ms``). An
            # expiry is judged here at its own time, not left to the event's own scan: found there, it would join
            # the event's cut, and whether it did would depend on where the previous call ended.
            due_ms = self._next_due_ms(state)
            bound = state.expiry_bound_ms
            if bound is None:
                bound = state.expiry_bound_ms = _deadline_bound_ms(state.membership, self.settings.expiry_ms)
            if (
                (state.pending is None or self.cut_ms(state.pending) > until_ms)
                and (due_ms is None or due_ms > until_ms)
                and (bound is None or bound > until_ms)
            ):
                return
        scan_to_ms = until_ms if scan_to_ms is None else scan_to_ms
        stale_to_ms = until_ms if stale_to_ms is None else stale_to_ms
        while (state := self.groups.get(group)) is not None:
            cut_ms = self.cut_ms(state.pending) if state.pending is not None else None
            expiry_ms = _channel_deadline_ms(state.membership, self.settings.expiry_ms)
            stale_ms = next_stale_ms(state.membership)
            due_ms = self._next_due_ms(state)
            # the earliest thing that happens to the group: (its time, whether it may be judged now, which)
            steps: list[tuple[int, bool, int]] = []
            if expiry_ms is not None:
                steps.append((expiry_ms, expiry_ms <= scan_to_ms, 0))
            if stale_ms is not None:
                steps.append((stale_ms, stale_ms <= stale_to_ms, 1))
            if due_ms is not None:
                steps.append((due_ms, due_ms <= until_ms, 2))
            first = min(steps, default=None)
            if cut_ms is not None and cut_ms <= until_ms and (first is None or first[0] >= cut_ms):
                records += self._cut(group, state)[0]
                continue
            if first is None or not first[1] or (cut_ms is not None and first[0] >= cut_ms):
                return  # nothing due, or the next thing (before the cut) cannot be judged yet
            time_ms, _, step = first
            if step == 0:
                self._expire_channels(group, state, time_ms, records)
            elif step == 1:
                self._mark_stale(group, state, time_ms, records)
            else:
                self._slide(group, state, time_ms)

    def cut_ms(self, pending: Sequence[Any]) -> int:
        """When a group's pending changes are cut: once ``storm_coalesce_ms`` passed without another change of
        the group (changes closer than that are one rebalance), and no later than ``convergence_grace_ms`` after
        the first of them (the period of a client's own rebalance: a group that keeps changing faster still gets
        a generation that often). The first event time at or after it is the next window's."""
        first_ms, last_ms = int(pending[0]), int(pending[1])
        settings = self.settings
        return min(last_ms + max(settings.storm_coalesce_ms, 1), first_ms + max(settings.convergence_grace_ms, 1))

    def _next_due_ms(self, state: GroupState) -> int | None:
        times = []
        if state.storm_changes:
            times.append(self.storms.next_expiry_ms(state.storm_changes))
        if state.member_changes:
            times.append(self.flapping.next_expiry_ms(state.member_changes))
        if state.reported and state.converge_by_ms is not None:
            times.append(state.converge_by_ms)
        known = [t for t in times if t is not None]
        return min(known) if known else None

    def _expire_channels(self, group: str, state: GroupState, time_ms: int, records: list[Outcome]) -> None:
        membership, changes = ms.expire(state.membership, time_ms, self.settings.expiry_ms)
        state.membership = membership
        state.expiry_bound_ms = None
        for change in changes:
            records.append(change)
            self._mark(group, change.event_time_ms, Trigger(change.change))
            self._count_member_change(state, change)

    def _mark_stale(self, group: str, state: GroupState, time_ms: int, records: list[Outcome]) -> None:
        state.membership, statuses = mark_stale(state.membership, time_ms)
        state.expiry_bound_ms = None
        records += [outcome for s in statuses for outcome in stale_outcomes(s)]
        for stale in statuses:
            self._mark(group, stale.event_time_ms, Trigger.VIEW_STALE)

    def _slide(self, group: str, state: GroupState, time_ms: int) -> None:
        """At ``time_ms`` a storm or flapping window slid, or the convergence grace ended: the group is
        re-analysed then when that can change what it finds (``slide_matters``)."""
        if state.storm_changes:
            kept = self.storms.prune_changes(state.storm_changes, time_ms)
            if kept != state.storm_changes:
                state.storm_changes = kept
                found = self.storms.findings(group, kept, time_ms, _storm_open(state))
                if slide_matters(state, STORM_KINDS, found):
                    self._mark(group, time_ms, Trigger.STORM_WINDOW)
        if state.member_changes:
            changes = self.flapping.prune(state.member_changes, time_ms)
            if changes != state.member_changes:
                state.member_changes = changes
                finding = self.flapping.finding(group, changes, time_ms)
                if slide_matters(state, (AnomalyKind.FLAPPING_MEMBERS,), [finding] if finding else []):
                    self._mark(group, time_ms, Trigger.FLAPPING_WINDOW)
        if state.reported and state.converge_by_ms is not None and state.converge_by_ms <= time_ms:
            state.converge_by_ms = None  # the grace is over: the analysis at the cut judges every difference
            self._mark(group, time_ms, Trigger.CONVERGENCE_GRACE)

    def _mark(self, group: str, time_ms: int, trigger: Trigger) -> None:
        """A change of ``group`` at ``time_ms``: part of its pending cut (opened by it when there is none)."""
        state = self.groups[group]
        pending = state.pending
        if pending is None:
            pending = state.pending = [time_ms, time_ms, [], []]
        else:
            pending[0], pending[1] = min(pending[0], time_ms), max(pending[1], time_ms)
        if trigger not in pending[2]:
            pending[2].append(trigger)
        if trigger not in NOT_REBALANCES:
            # Every change makes clients rebalance (a CHANGE notification or their 20 s timer), so storms
            # count changes, not generations: several changes inside one window are several rebalances.
            pending[3].append(time_ms)
            grace = self.settings.convergence_grace_ms
            grace += self.settings.route_poll_interval_ms if trigger == Trigger.ROUTE_CHANGED else 0
            due = time_ms + grace
            state.converge_by_ms = due if state.converge_by_ms is None else max(state.converge_by_ms, due)

    def _apply_channel(self, event: ms.ChannelEvent, records: list[Outcome]) -> None:
        state = self.groups.get(event.group)
        if state is None:
            retired = self.retired.pop(event.group, None)
            state = self._new_group(event.group, retired, event.event_time_ms)
        now_ms, expiry_ms = event.event_time_ms, self.settings.expiry_ms
        # The scan before each event is a no-op until the earliest deadline (a channel's last heartbeat +
        # expiry + 1, a tombstone's time + expiry); skipping it then saves a pass over every channel of the
        # group per event. Applying an event only removes deadlines or adds ones at or after now + expiry,
        # so the bound stays a lower bound.
        bound = state.expiry_bound_ms
        if bound is None or now_ms >= bound:
            membership, expired = ms.expire(state.membership, now_ms, expiry_ms)
            bound = _deadline_bound_ms(membership, expiry_ms)
        else:
            membership, expired = state.membership, []
        membership, changes = ms.apply_event(membership, event, expiry_ms)
        state.membership = membership
        state.expiry_bound_ms = now_ms + expiry_ms if bound is None else min(bound, now_ms + expiry_ms)
        self.groups[event.group] = state
        for change in expired + changes:
            records.append(change)
            self._mark(event.group, change.event_time_ms, Trigger(change.change))
            self._count_member_change(state, change)

    def _touch(self, poll: ConnectionPoll | NotedPoll, records: list[Outcome]) -> bool:
        """A poll of a group the call has not read, applied without reading it when it can change nothing but the
        view's times: it says what the poll that settled the view said (``settled_by``), is not older than the
        view's last poll, and nothing of the group falls due by its time (its wake: no cut, slide, expiry or view
        turning stale). Applied, it would leave the view as ``polled_at`` does and emit its status row, alone:
        noted instead (the view's time with the group's), the text kept. Whether it was: ``docs/design/poll-runs.md``,
        "Polls across batches"."""
        stored = self._stored_times(self.groups, poll.group)
        if stored is None or not lists_connections(poll):
            return False
        entry, time_ms = stored[2].get(poll.broker), poll.event_time_ms
        if entry is None or entry[2] is None or time_ms < entry[0]:
            return False
        wake = _woken(stored)[0]
        if (wake is not None and wake <= time_ms) or poll_digest(poll) != entry[2]:
            return False
        views = {**stored[2], poll.broker: [time_ms, *entry[1:]]}
        self.groups.retimed(poll.group, [stored[0], stored[1], views, stored[3]])  # type: ignore[attr-defined]
        # the poll's channels and collector: the view's, noted with it (the poll that settled it said them)
        status = ViewStatus(
            time_ms, poll.group, poll.broker, ViewFreshness.FRESH, time_ms, poll.stale_after_ms, entry[3], entry[4]
        )
        records.append(BrokerViewState(status))
        return True

    def _repolled(self, poll: ConnectionPoll | NotedPoll, records: list[Outcome]) -> bool:
        """A poll of a group the call has read, applied without parsing it when it says what the poll that settled
        the view said (``_polled``) and the view is still as that poll left it, it is not older than the view's last
        poll, and nothing of the group falls due by its time (no cut, slide, channel expiry or view turning stale):
        as ``_touch`` for a group still stored as text, the view's times move as ``polled_at`` says and its status row
        is written, which is all ``_apply_poll`` would do. Whether it was: ``docs/design/poll-runs.md``."""
        recorded = self._polled.get(poll.group, {}).get(poll.broker)
        if recorded is None or not lists_connections(poll) or poll_digest(poll) != recorded[0]:
            return False
        state = self.groups.get(poll.group)
        view = state.membership.views.get(poll.broker) if state is not None else None
        time_ms = poll.event_time_ms
        if state is None or view is None or view.poll is None or view.poll.stale or time_ms < view.poll.polled_at_ms:
            return False
        if view is not recorded[1] and view != recorded[1]:
            return False
        if state.pending is not None and self.cut_ms(state.pending) <= time_ms:
            return False
        due_ms = self._next_due_ms(state)
        bound = state.expiry_bound_ms
        if bound is None:
            bound = state.expiry_bound_ms = _deadline_bound_ms(state.membership, self.settings.expiry_ms)
        if (due_ms is not None and due_ms <= time_ms) or (bound is not None and bound <= time_ms):
            return False
        membership = ms.with_view(
            state.membership, poll.broker, polled_at(view, time_ms), time_ms, self.settings.expiry_ms
        )
        repolled = membership.views[poll.broker]
        state.membership = membership
        state.expiry_bound_ms = None
        self._polled[poll.group][poll.broker] = (recorded[0], repolled)
        assert repolled.poll is not None
        status = ViewStatus(
            time_ms,
            poll.group,
            poll.broker,
            ViewFreshness.FRESH,
            time_ms,
            repolled.poll.stale_after_ms,
            len(repolled.channels),
            repolled.poll.collector,
        )
        records.append(BrokerViewState(status))
        return True

    def _apply_poll(self, poll: ConnectionPoll, records: list[Outcome]) -> None:
        state = self.groups.get(poll.group)
        if state is None:
            if not poll.connections:
                return  # no broker knows a client of the group: nothing to keep
            state = self._new_group(poll.group, self.retired.pop(poll.group, None), poll.event_time_ms)
        now_ms, expiry_ms = poll.event_time_ms, self.settings.expiry_ms
        membership, statuses = mark_stale(state.membership, now_ms)
        membership, expired = ms.expire(membership, now_ms, expiry_ms)
        previous = membership.views.get(poll.broker)
        membership, changes, status = apply_poll(membership, poll, expiry_ms)
        if status is not None:
            view = membership.views.get(poll.broker)
            if view is not None and settled_by(view, poll):
                self._polled.setdefault(poll.group, {})[poll.broker] = (poll_digest(poll), view)
            else:
                self._polled.get(poll.group, {}).pop(poll.broker, None)
        state.membership = membership
        state.expiry_bound_ms = None
        self.groups[poll.group] = state
        records += [outcome for s in statuses for outcome in stale_outcomes(s)]
        for stale in statuses:
            self._mark(poll.group, stale.event_time_ms, Trigger.VIEW_STALE)
        if status is None:
            records.append(
                LateEvent(STALE_POLL, EventType.CONSUMER_CONNECTIONS, now_ms, group=poll.group, broker=poll.broker)
            )
        else:
            records.append(BrokerViewState(status))
            if previous is None or previous.poll is None or previous.poll.stale:
                records.append(BrokerViewChanged(status))
            if previous is not None and previous.poll is not None and previous.poll.stale:
                self._mark(poll.group, now_ms, Trigger.VIEW_FRESH)
        for change in expired + changes:
            records.append(change)
            self._mark(poll.group, change.event_time_ms, Trigger(change.change))
            self._count_member_change(state, change)

    def _apply_route(self, event: TopicRoute, records: list[Outcome]) -> None:
        topic, time_ms = event.topic, event.event_time_ms
        current = self.routes.get(topic)
        if current is not None and time_ms < current["event_time_ms"]:
            # Older than the route applied: what the name server said then no longer holds. (Every shard of
            # the job receives every route and so finds the same routes stale; the job counts one shard's.)
            records.append(LateEvent(STALE_ROUTE, EventType.TOPIC_ROUTE, time_ms, topic=topic))
            return
        queues = [[mq.broker_name, mq.queue_id] for mq in readable_queues(event)]
        if current is not None and current["queues"] == queues:
            self.routes[topic] = {"event_time_ms": time_ms, "queues": queues}
            return
        # What came before the route is cut without it: every group's, as a cut due before the route reads the
        # topic when a channel subscribed it then, though that channel may be silent by the route's time.
        for group in sorted(self.groups):
            self._advance_group(group, time_ms, records)
        expiry_ms = self.settings.expiry_ms
        readers = [
            g for g, s in sorted(self.groups.items()) if topic in subscribed_topics(s.membership, time_ms, expiry_ms)
        ]
        self.routes[topic] = {"event_time_ms": time_ms, "queues": queues}
        for group in readers:
            if (state := self.groups.get(group)) is not None:
                self._mark(group, time_ms, Trigger.ROUTE_CHANGED)
                state.storm_changes = self.storms.record_change(state.storm_changes, topic, ROUTE, time_ms)

    def _apply_report(self, event: ReportedAssignment, records: list[Outcome]) -> None:
        group = event.group
        state = self.groups.get(group)
        queues = event.held()
        if state is None or state.membership.is_empty:
            # No broker has reported a channel of the group (yet, or any more): there is no membership to
            # compute an expected assignment from. The collector reports again, so a report that merely
            # overtook the group's first heartbeat is followed by one that counts.
            records.append(
                IgnoredEvent(
                    event,
                    EventType.REPORTED_ASSIGNMENT,
                    UNKNOWN_GROUP,
                    f"group {group} is known to no broker at {event.event_time_ms}: the report of "
                    f"{event.client_id} ({len(queues)} queues of {event.topic}) has nothing to compare with",
                )
            )
            return
        key = f"{event.client_id}\x00{event.topic}"
        time_ms, times = event.event_time_ms, state.reported_ms.get(key)
        if times is not None and time_ms < times[1]:
            return  # older than the client's latest report of the topic: what it held then holds no more
        state.holders[key] = held_queues(event)
        bound = self._evidence_from_ms(state)
        changed = state.reported.get(key) != queues
        state.reported[key] = queues
        state.reported_ms[key] = [time_ms if changed or times is None else times[0], time_ms]
        # Re-analysed when what it holds changed, when its report counts for the first time since the generation,
        # and while an observed candidate waits for its grace (each report may show it longer).
        if changed or (times is not None and times[1] < bound <= time_ms) or state.observing:
            self._mark(group, time_ms, Trigger.REPORTED_ASSIGNMENT)

    def _evidence_from_ms(self, state: GroupState) -> int:
        """From when a report of the group counts: its latest generation plus the clients' rebalance delay."""
        if state.generation_ms is None:
            return 0
        return state.generation_ms + self.settings.client_rebalance_delay_ms

    def _reports(self, state: GroupState) -> dict[str, dict[str, Report]]:
        """Every stored report with its times, by topic and client (keys without times are not counted)."""
        reports: dict[str, dict[str, Report]] = {}
        for key, queues in state.reported.items():
            times = state.reported_ms.get(key)
            if times is None:
                continue
            client, topic = key.split("\x00", 1)
            held = frozenset(MessageQueue(topic, b, int(q)) for b, q in queues)
            reports.setdefault(topic, {})[client] = Report(held, times[0], times[1])
        return reports

    @staticmethod
    def _counted_keys(state: GroupState, bound: int) -> set[str]:
        """The keys (client and topic) of the group's reports that count (``observed.counted``), their queues unread."""
        return {
            key
            for key in state.reported
            if (times := state.reported_ms.get(key)) is not None
            and counted(Report(frozenset(), times[0], times[1]), bound)
        }

    def _apply_progress(
        self, event: ConsumeProgress, records: list[Outcome], sampled: dict[str, int], context: ProgressContext
    ) -> None:
        """A ``consume_progress`` event joined with what the shard knows of its group now (``context``, of the event's
        broker: ``progress_tracker``)."""
        group, time_ms = event.group, event.event_time_ms
        progress, outcomes = apply_progress(self.progress.get(group), event, context, self.settings.progress)
        if progress is None:
            self.progress.pop(group, None)
        else:
            self.progress[group] = progress
        if progress is not None or any(type(o) is not IgnoredEvent for o in outcomes):
            sampled[group] = max(time_ms, sampled.get(group, time_ms))
        records += outcomes

    def _expire_progress(self, watermark_ms: int, sampled: dict[str, int]) -> list[Outcome]:
        """Progress of groups whose oldest queue went a whole window without a sample by the watermark (a group
        the collector stopped sampling: deleted, or its broker gone), then a ``ProgressSummary`` of every group
        sampled or expired in the call."""
        records: list[Outcome] = []
        settings = self.settings.progress
        for group in sorted(self.progress):
            stored = self._stored_times(self.progress, group)
            due = stored[0] if stored is not None else next_expiry_ms(self.progress[group], settings)
            if due is None or due > watermark_ms:
                continue
            context = self._progress_context(group, watermark_ms, False)
            progress, outcomes = expire(group, self.progress[group], context, watermark_ms, settings)
            if progress is None:
                del self.progress[group]
            records += outcomes
            sampled[group] = max(watermark_ms, sampled.get(group, watermark_ms))
        return records + [summary(g, self.progress.get(g), t) for g, t in sorted(sampled.items())]

    def _progress_context(self, group: str, time_ms: int, changed: bool) -> ProgressContext:
        """The group at ``time_ms`` as a progress sample is joined with it: members' held queues, expected owners,
        allocation mode, rebalances, stale views; offline when no broker lists a member registered at ``time_ms``
        (``polled_views.is_registered``: a heartbeat within the expiry, or a poll listing it). The expected owners are
        the last analysis's, or, for a group ``changed`` in this call (analysed only at its end), those an
        analysis finds now (nothing of it is kept). A sample of one broker reads its queues' part
        (``_JoinedGroup.of_broker``)."""
        state = self.groups.get(group)
        views = state.membership.views if state is not None else {}
        # Members as of the sample: a channel silent past the expiry counts no more, scanned or not (a dead group's
        # channels are scanned only at the call's end, after every sample of a batch).
        expiry_ms = self.settings.expiry_ms
        members = {
            ch.client_id
            for view in views.values()
            for ch in view.channels.values()
            if is_registered(view, ch, time_ms, expiry_ms)
        }
        if state is None or not members:
            generation = state.generation if state is not None else int(self.retired.get(group, [0])[0])
            return ProgressContext(False, generation=generation)
        # Only counted reports give holders, as for the observed holders (``observed.counted``): an older one says
        # what the client held before it rebalanced.
        bound = self._evidence_from_ms(state)
        evidence = self._counted_keys(state, bound)
        holders: dict[tuple[str, str, int], list[Any]] = {}
        for key, held in sorted(state.holders.items()):
            client, topic = key.split("\x00", 1)
            if client in members and key in evidence:
                for entry in held["queues"]:
                    view = holder_view(client, held["orderly"], entry, time_ms)
                    holders.setdefault((topic, entry[0], int(entry[1])), []).append(view)
        expected = {}
        if changed:
            for topic, owned in owners_by_topic(self._analysis(group, state, time_ms)).items():
                for mq, clients in owned.items():
                    if len(clients) == 1:
                        expected[(topic, mq.broker_name, mq.queue_id)] = clients[0]
        else:
            for topic, owners in state.owners.items():
                for key, names in owners.items():
                    if len(names) == 1:
                        mq = queue_of_key(topic, key)
                        expected[(topic, mq.broker_name, mq.queue_id)] = names[0]
        # An expected owner without a counted report of the topic (no running info, or only one from before the
        # bound) is presumed to hold its queues.
        presumed = {ref for ref, owner in expected.items() if f"{owner}\x00{ref[0]}" not in evidence}
        for ref in sorted(presumed):
            holders.setdefault(ref, []).append(presumed_holder(expected[ref], ref, time_ms))
        _, primary = primary_view(state.membership)
        mode = AllocationMode(allocation_mode(list(primary.channels.values()))) if primary else AllocationMode.CLIENT
        return ProgressContext(
            True,
            {ref: tuple(views_) for ref, views_ in holders.items()},
            expected,
            mode,
            tuple(state.rebalances_ms),
            frozenset(b for b, v in views.items() if v.poll is not None and v.poll.stale),
            state.generation,
            frozenset(presumed),
            tuple(t for t in (state.pending[3] if state.pending else ()) if t <= time_ms),
        )

    def _new_group(self, group: str, retired: list[Any] | None, now_ms: int) -> GroupState:
        """The state of a group the shard does not hold: one that emptied continues its generations and flapping
        (joins and leaves before it emptied: a crash-looping sole member flaps); one never seen is born now."""
        if retired is None:
            return GroupState(ms.GroupMembership(group), storm_changes=[[now_ms, "", BORN]])
        state = GroupState(ms.GroupMembership(group), generation=int(retired[0]))
        if len(retired) > 2:
            state.member_changes = self.flapping.prune(retired[2], now_ms)
        return state

    def _count_member_change(self, state: GroupState, change: ms.MembershipChange) -> None:
        direction = _MEMBER_DIRECTION.get(change.change)
        if direction is not None:
            state.member_changes = self.flapping.record(
                state.member_changes, change.client_id, direction, change.event_time_ms
            )
            state.storm_changes = self.storms.record_change(
                state.storm_changes, change.client_id, direction, change.event_time_ms
            )

    def _provisional_cut(self, group: str, state: GroupState) -> list[Outcome]:
        """The end of a call: the group's pending changes cut as they are, its outcomes emitted now, and the state
        kept as before the cut (``pending`` with it) so that a change of the same window in a later call amends
        the cut (``docs/design/batch-invariance.md``)."""
        # A copy, not the state's own lists and dicts: the cut changes some of them in place (``episode_rows``).
        saved, retired = json.loads(json.dumps(state.to_json())), self.retired.get(group)
        records, mark = self._cut(group, state, provisional=True)
        kept = GroupState.from_json(saved)
        kept.provisional = mark
        self.groups[group] = kept
        if retired is None:
            self.retired.pop(group, None)
        else:
            self.retired[group] = retired
        return records

    def _cut(self, group: str, state: GroupState, provisional: bool = False) -> tuple[list[Outcome], list[Any]]:
        """The group's pending changes cut (``_cut_records``), and what that cut leaves to a later one. A cut whose
        changes were already cut where an earlier call ended (``state.provisional``) emits nothing when it finds
        exactly what that one found; otherwise it withdraws that one's history rows (``CutRetracted``), puts back
        the current rows only that one changed, and emits its own. Returns the outcomes and, for a ``provisional``
        cut, the mark to keep in the restored state."""
        prior = state.provisional
        state.provisional = None
        time_ms = int(state.pending[1]) if state.pending is not None else 0
        episodes = {e.episode_id: e for e in state.episodes.values()}
        rows, views, generation = dict(state.episode_rows), state.membership.views, state.generation
        records = self._cut_records(group, state)
        if prior is None and not provisional:
            return records, []
        touched = _touched(records)
        digest = hashlib.sha256(repr(records).encode()).hexdigest()[:20]
        mark = [time_ms, digest, touched]
        if prior is not None and prior[1] == digest:
            # The tables hold these outcomes already, but a poll of the window applied since may have written a
            # view the group's going deletes: deleted again, as one call holding both would have.
            return [o for o in records if type(o) is BrokerViewGone], mark
        if prior is None:
            return records, mark
        restored: list[Outcome] = [CutRetracted(group, int(prior[0]))]
        for topic, client in sorted({tuple(k) for k in prior[2]["assign"]} - {tuple(k) for k in touched["assign"]}):
            restored.append(AssignmentWithdrawn(group, topic, client, generation, time_ms))
        for episode_id in sorted(set(prior[2]["episodes"]) - set(touched["episodes"])):
            if episode_id in episodes:
                row_ms, row_generation = rows.get(episode_id, [episodes[episode_id].opened_at_ms, generation])
                restored.append(EpisodeRestored(episodes[episode_id], row_ms, row_generation))
            else:
                restored.append(EpisodeRetracted(group, episode_id, time_ms))
        for topic, key in sorted(
            {tuple(k) for k in prior[2].get("holders", ())} - {tuple(k) for k in touched["holders"]}
        ):
            mq = queue_of_key(topic, key)
            restored.append(QueueHoldersGone(group, topic, mq.broker_name, mq.queue_id, time_ms))
        for broker in sorted(set(prior[2]["views"]) - set(touched["views"])):
            view = views.get(broker)
            if view is not None and view.poll is not None:
                restored.append(BrokerViewState(view_status(group, broker, view)))
        return restored + records, mark

    def _cut_records(self, group: str, state: GroupState) -> list[Outcome]:
        """The group's pending changes, as of its last one: a new generation when one of them makes clients
        rebalance, else a re-analysis; a group emptied by them is gone."""
        assert state.pending is not None
        _, time_ms, triggers, change_times = state.pending
        state.pending = None
        if state.membership.is_empty:
            records = group_gone_outcomes(group, state, time_ms)
            del self.groups[group]
            self._polled.pop(group, None)
            self.retired[group] = [state.generation, time_ms]
            if state.member_changes:
                self.retired[group].append(state.member_changes)
            return records
        rebalance = bool(set(triggers) - NOT_REBALANCES)
        return self._analyse_group(group, state, time_ms, sorted(triggers), rebalance, change_times)

    def _mq_all(self) -> RouteQueues:
        return RouteQueues(self.routes, self._queues_of_route)

    def group_metrics(self, now_ms: int) -> list[GroupSummary]:
        """Every group's ``GroupSummary`` as its last analysis emitted it, changing nothing: what a
        restarted job exports before the shard's next batch. Every change of a group's membership, routes,
        reports or episodes re-analysed it, so analysing the state again finds the same values, and no queue
        has moved since (``moved`` is 0)."""
        return [
            group_summary(self._analysis(group, state, now_ms), state) for group, state in sorted(self.groups.items())
        ]

    def _analysis(self, group: str, state: GroupState, time_ms: int) -> Analysis:
        """The group's analysis, compared with the reports that count (``observed.counted``)."""
        previous = {t: {queue_of_key(t, k): tuple(v) for k, v in owners.items()} for t, owners in state.owners.items()}
        bound = self._evidence_from_ms(state)
        reported = {
            (client, topic): report.queues
            for topic, by_client in self._reports(state).items()
            for client, report in by_client.items()
            if counted(report, bound)
        }
        return analyze_group(
            state.membership, self._mq_all(), self.settings.strategy_factory(group), time_ms, previous, reported
        )

    def _analyse_group(
        self,
        group: str,
        state: GroupState,
        time_ms: int,
        triggers: list[Trigger],
        rebalance: bool,
        change_times: Sequence[int] = (),
    ) -> list[Outcome]:
        if rebalance:
            state.generation_ms = time_ms  # every report is older than this generation plus the delay: none counts
        analysis = self._analysis(group, state, time_ms)
        if rebalance:
            state.generation += 1
            for change_ms in sorted(change_times):
                state.rebalances_ms = self.storms.record(state.rebalances_ms, change_ms)
        state.rebalances_ms = self.storms.prune(state.rebalances_ms, time_ms)
        findings = hold_in_grace(analysis.findings, state.episodes, time_ms, state.converge_by_ms, CONVERGING_KINDS)
        observations, observed = self._observe(group, state, analysis)
        findings += observed + _unjudged(state, analysis, observations, findings, self._evidence_from_ms(state))
        if state.converge_by_ms is not None and time_ms >= state.converge_by_ms:
            state.converge_by_ms = None
        findings += self.storms.findings(group, state.storm_changes, time_ms, _storm_open(state))
        flapping = self.flapping.finding(group, state.member_changes, time_ms)
        if flapping is not None:
            findings.append(flapping)
        state.episodes, transitions = reconcile(state.episodes, findings, time_ms)
        for t in transitions:
            if t.status == EpisodeStatus.CLOSED:
                state.episode_rows.pop(t.episode.episode_id, None)
            else:
                state.episode_rows[t.episode.episode_id] = [time_ms, state.generation]
        records: list[Outcome] = [EpisodeTransition(t, state.generation) for t in transitions]
        if rebalance:
            cause = rebalance_cause(triggers, findings)
            records.append(generation_snapshot(analysis, state, time_ms, triggers, cause))
            records += assignment_outcomes(analysis, state, time_ms)
        state.owners = {
            t: {queue_key(mq): list(o) for mq, o in owners.items()} for t, owners in owners_by_topic(analysis).items()
        }
        records += self._holder_rows(group, state, observations, time_ms)
        records.append(group_summary(analysis, state))
        return records

    def _observe(
        self, group: str, state: GroupState, analysis: Analysis
    ) -> tuple[list[TopicObservation], list[Finding]]:
        """Each analysed topic the group reported as observed (``observed.observe_topic``), and the observed
        findings that held for the grace (or whose episode is open); ``state.observing`` says whether one waits."""
        bound, grace = self._evidence_from_ms(state), self.settings.observed_grace_ms
        reports = self._reports(state)
        owners = owners_by_topic(analysis)
        duplicates = analysis.duplicate_client_ids
        observations, findings, waiting = [], [], False
        for topic, result in sorted(analysis.topics.items()):
            if topic not in reports:
                continue
            mine = {c: r for c, r in reports[topic].items() if c in result.subscribers}
            ambiguous = any(c in duplicates for c in result.subscribers)
            observation = observe_topic(
                topic, result.allocation.mq_all, owners.get(topic, {}), result.subscribers, mine, bound, ambiguous
            )
            observations.append(observation)
            for finding, shown_ms in observed_candidates(group, observation, mine):
                if shown_ms >= grace or finding.key in state.episodes:
                    findings.append(finding)
                else:
                    waiting = True
        state.observing = waiting
        return observations, findings

    def _holder_rows(
        self, group: str, state: GroupState, observations: Sequence[TopicObservation], time_ms: int
    ) -> list[Outcome]:
        """The analysed topics' holders rows, and a removal of each row written before that none replaces."""
        records: list[Outcome] = [QueueHolders(group, state.generation, time_ms, o) for o in observations]
        rows = {o.topic: [queue_key(q.queue) for q in o.queues] for o in observations}
        for topic, keys in sorted(state.holder_rows.items()):
            for key in sorted(set(keys) - set(rows.get(topic, ()))):
                mq = queue_of_key(topic, key)
                records.append(QueueHoldersGone(group, topic, mq.broker_name, mq.queue_id, time_ms))
        state.holder_rows = rows
        return records
