"""The monitor's per-shard engine: events in, membership kept, groups analysed, rows out.

A *shard* is a set of consumer groups plus the topic routes they need (the Spark job keys its state by
shard; see ``streaming/job/consumer_query.py`` for why). ``ShardEngine`` is pure: it is restored from a
JSON-able snapshot, fed events (already validated, in event-time order; channel events as JSON or already
parsed as ``membership.ChannelEvent``) and the watermark, and returns what it found as typed values
(``outcomes``), a ``GroupSummary`` per analysed group among them. Nothing reads a clock: "now" is an
event's time or the watermark.

Per event:

* ``consumer_channel``: the group's membership runs the expiry scan up to the event's time, then applies
  the event (``membership``); every change is a ``MembershipChange`` and marks the group for
  re-analysis.
* ``consumer_connections``: one broker's poll of the group replaces that broker's view at its time
  (``membership.apply_poll``): changes as for a channel event, plus a ``BrokerViewState`` (the view's
  status, last poll and channels) and, when the status changes, a ``BrokerViewChanged``. A poll older
  than the view's last is a ``LateEvent`` (reason ``stale_poll``); a poll without connections of a
  group the shard does not know changes nothing. A polled view is never scanned for expiry: without a poll
  newer than its ``stale_after_ms`` it turns STALE (``membership.mark_stale``), before any later poll of the
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

At the end of a batch (and when the state's timeout fires) the expiry scan runs up to the watermark.
Each re-analysed group whose membership or routes changed gets a new *generation*: a ``GenerationSnapshot``,
an ``ExpectedAssignment`` per client and topic, an ``AssignmentWithdrawn`` per one gone, episode transitions
(``episodes.reconcile``) and, through ``StormDetector``, rebalance storms. Every join and leave also
counts towards the member's flapping (``FlappingDetector``), and every rebalance-causing change starts a
convergence grace (``[membership] convergence_grace_ms``, plus ``route_poll_interval_ms`` for a route
change) during which a difference between reported and expected assignments opens no episode.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from . import membership as ms
from .allocation import AllocationStrategy, strategy_from_name
from .analysis import CLIENT_SIDE, Analysis, analyze_group, owners_by_topic
from .episodes import (
    Episode,
    Finding,
    FlappingDetector,
    MemberChanges,
    StormDetector,
    close_all,
    hold_in_grace,
    reconcile,
)
from .errors import DomainError
from .outcomes import (
    AssignmentWithdrawn,
    BrokerViewChanged,
    BrokerViewGone,
    BrokerViewState,
    EpisodeTransition,
    ExpectedAssignment,
    GenerationSnapshot,
    GroupGone,
    GroupSummary,
    IgnoredEvent,
    LateEvent,
    Outcome,
    TopicSummary,
)
from .queues import MessageQueue
from .rules import GroupRule, group_rule_for
from .versions import ClientLine
from .vocabulary import (
    AnomalyKind,
    ChangeKind,
    ChannelEventKind,
    IgnoredReason,
    LateReason,
    MemberDirection,
    Severity,
    Trigger,
)

SCHEMA_VERSION = 1
# How long (event time) a group that emptied keeps its generation number for a return.
RETIRED_GENERATION_TTL_MS = 7 * 24 * 3600 * 1000
UNKNOWN_GROUP = IgnoredReason.UNKNOWN_GROUP  # the reason of a report the engine cannot compare with anything
STALE_ROUTE = LateReason.STALE_ROUTE  # the late-event reason of a route older than the applied one
STALE_POLL = LateReason.STALE_POLL  # the late-event reason of a poll older than its view's last poll
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
# Findings that compare what clients report with what they compute: held while clients converge.
CONVERGING_KINDS = (AnomalyKind.ASSIGNMENT_MISMATCH,)
_MEMBER_DIRECTION = {
    ChangeKind.JOIN: MemberDirection.JOIN,
    ChangeKind.LEAVE: MemberDirection.LEAVE,
    ChangeKind.EXPIRED: MemberDirection.LEAVE,
    ChangeKind.VANISHED: MemberDirection.LEAVE,
}


@dataclass(frozen=True)
class EngineSettings:
    """What the consumer engine reads; ``MonitorConfig.engine_settings`` builds it once per configuration."""

    default_strategy: str = "AVG"
    default_client_line: str = "5"
    expiry_ms: int = ms.DEFAULT_EXPIRY_MS
    storm_window_ms: int = 300_000
    storm_threshold: int = 10
    group_rules: tuple[GroupRule, ...] = ()
    storm_coalesce_ms: int = 1_000
    flapping_window_ms: int = 600_000
    flapping_threshold: int = 3
    # After a membership change clients rebalance within this (RocketMQ's 20 s wait; a CHANGE notification
    # is sooner); after a route change they first learn it at their next route poll (30 s).
    convergence_grace_ms: int = 20_000
    route_poll_interval_ms: int = 30_000

    def rule_for(self, group: str) -> GroupRule | None:
        return group_rule_for(self.group_rules, group)

    def strategy_factory(self, group: str):  # type: ignore[no-untyped-def]
        rule = self.rule_for(group)

        def build(reported_name: str | None, client_version: str | None) -> AllocationStrategy:
            # What the clients report is what they run; configuration fills in what is invisible (parameters).
            name = reported_name or (rule.strategy if rule and rule.strategy else None) or self.default_strategy
            line = ClientLine.parse(client_version, ClientLine.parse(self.default_client_line))
            if rule is None:
                return strategy_from_name(name, line=line)
            queues = None
            if rule.config_queues is not None:
                queues = [MessageQueue(t, b, int(q)) for t, b, q in rule.config_queues]
            return strategy_from_name(
                name,
                virtual_node_count=rule.virtual_node_count,
                consumer_idcs=rule.consumer_idcs,
                config_queues=queues,
                resolver=rule.resolver,
                line=line,
            )

        return build


def readable_queues(route: Mapping[str, Any]) -> list[MessageQueue]:
    """mqAll from a route event: every readable broker's queues ``0..read_queue_nums-1`` (semantics 1.3)."""
    topic = route["topic"]
    result = []
    for broker in route.get("brokers") or ():
        if int(broker.get("perm", 6)) & 4:
            result += [MessageQueue(topic, broker["broker"], i) for i in range(int(broker.get("read_queue_nums", 0)))]
    return result


@dataclass
class GroupState:
    membership: ms.GroupMembership
    generation: int = 0
    owners: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # topic -> "broker/qid" -> owners
    assigned: dict[str, list[str]] = field(default_factory=dict)  # topic -> clients with a current expected share
    episodes: dict[tuple[str, str, str], Episode] = field(default_factory=dict)
    rebalances_ms: tuple[int, ...] = ()
    reported: dict[str, list[list[Any]]] = field(default_factory=dict)  # "client\x00topic" -> [[broker, qid]]
    member_changes: MemberChanges = field(default_factory=dict)  # FlappingDetector's joins and leaves
    converge_by_ms: int | None = None  # reported-vs-expected differences count from then on
    # Not persisted: a lower bound of every expiry deadline in ``membership`` (None: unknown, scan).
    expiry_bound_ms: int | None = field(default=None, compare=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "membership": ms.snapshot(self.membership),
            "generation": self.generation,
            "owners": self.owners,
            "assigned": self.assigned,
            "episodes": [vars(e) for e in self.episodes.values()],
            "rebalances_ms": list(self.rebalances_ms),
            "reported": self.reported,
            "member_changes": self.member_changes,
            "converge_by_ms": self.converge_by_ms,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GroupState:
        episodes = {(e["group"], e["topic"], e["anomaly"]): _episode(e) for e in data["episodes"]}
        return cls(
            ms.restore(data["membership"]),
            int(data["generation"]),
            data["owners"],
            data["assigned"],
            episodes,
            tuple(data["rebalances_ms"]),
            data["reported"],
            data.get("member_changes") or {},
            data.get("converge_by_ms"),
        )


class HeartbeatRun(NamedTuple):
    """A channel's identical heartbeats of one batch: ``event`` is the first, ``times`` every one's event time
    in the order they apply (``times[0]`` is the event's own)."""

    event: ms.ChannelEvent
    times: tuple[int, ...]


RunEvents = list[tuple[int, ms.ChannelEvent]]
"""Events that apply (part of) a heartbeat run, each with the index into ``HeartbeatRun.times`` of the heartbeat
it stands at, so the caller can put it where that heartbeat would go."""


def _every_heartbeat(run: HeartbeatRun) -> RunEvents:
    return [(i, run.event if i == 0 else run.event._replace(event_time_ms=t)) for i, t in enumerate(run.times)]


_MIXED_VIEW = object()  # a broker view whose channel events of the batch are not all alike heartbeats


def _queue_key(mq: MessageQueue) -> str:
    return f"{mq.broker_name}/{mq.queue_id}"


class _RouteQueues(Mapping[str, list[MessageQueue]]):
    """mqAll per topic, built on first read from the topic's current route and kept while that route is."""

    def __init__(
        self, routes: Mapping[str, Mapping[str, Any]], built: dict[str, tuple[Mapping[str, Any], list[MessageQueue]]]
    ) -> None:
        self._routes, self._built = routes, built

    def __getitem__(self, topic: str) -> list[MessageQueue]:
        route = self._routes[topic]
        cached = self._built.get(topic)
        if cached is not None and cached[0] is route:
            return cached[1]
        queues = [MessageQueue(topic, b, int(q)) for b, q in route["queues"]]
        self._built[topic] = (route, queues)
        return queues

    def __iter__(self) -> Iterator[str]:
        return iter(self._routes)

    def __len__(self) -> int:
        return len(self._routes)


class ShardEngine:
    """Mutable during one call, then snapshotted; see the module docstring."""

    def __init__(
        self,
        settings: EngineSettings,
        routes: dict[str, dict[str, Any]],
        groups: dict[str, GroupState],
        retired: dict[str, list[Any]] | None = None,
    ) -> None:
        self.settings = settings
        # Groups that emptied: their last generation and when, so a returning group continues its numbering.
        self.retired = retired or {}
        self.routes = routes  # topic -> {"event_time_ms": int, "queues": [[broker, qid], ...]}
        self.groups = groups
        self.storms = StormDetector(settings.storm_window_ms, settings.storm_threshold, settings.storm_coalesce_ms)
        self.flapping = FlappingDetector(
            settings.flapping_window_ms, settings.flapping_threshold, settings.storm_coalesce_ms
        )
        self._change_times: dict[str, list[int]] = {}  # this call's rebalance-causing changes per group
        # Each topic's mqAll as built from its current route (the route object it was built from, the queues):
        # a group's analysis reads only its topics, and a route rarely changes while analyses are frequent.
        self._queues_of_route: dict[str, tuple[Mapping[str, Any], list[MessageQueue]]] = {}

    # -- persistence ---------------------------------------------------------------------------------
    @classmethod
    def restore(cls, snapshot: Mapping[str, Any] | None, settings: EngineSettings) -> ShardEngine:
        if not snapshot:
            return cls(settings, {}, {})
        if snapshot.get("schema_version") != SCHEMA_VERSION:
            raise ValueError(f"unsupported shard snapshot schema_version {snapshot.get('schema_version')!r}")
        groups = {g: GroupState.from_json(d) for g, d in snapshot["groups"].items()}
        return cls(settings, dict(snapshot["routes"]), groups, dict(snapshot.get("retired", {})))

    def snapshot(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "routes": self.routes,
            "groups": {g: s.to_json() for g, s in sorted(self.groups.items())},
            "retired": dict(sorted(self.retired.items())),
        }

    def is_empty(self) -> bool:
        return not self.groups and not self.routes and not self.retired

    def next_wakeup_ms(self) -> int | None:
        times = [ms.next_expiry_ms(s.membership, self.settings.expiry_ms) for s in self.groups.values()]
        times += [ms.next_stale_ms(s.membership) for s in self.groups.values()]
        times += [t + self.settings.storm_window_ms + 1 for s in self.groups.values() for t in s.rebalances_ms[:1]]
        times += [self.flapping.next_expiry_ms(s.member_changes) for s in self.groups.values() if s.member_changes]
        times += [s.converge_by_ms for s in self.groups.values() if s.reported and s.converge_by_ms is not None]
        known = [t for t in times if t is not None]
        return min(known) if known else None

    # -- processing ----------------------------------------------------------------------------------
    def apply_runs(self, runs: Sequence[HeartbeatRun], others: Iterable[ms.ChannelEvent]) -> list[RunEvents]:
        """Take the batch's heartbeat runs (``others``: its other channel events) before ``apply``: apply what
        needs no place among the batch's events, and return, per run, the events that still apply it.

        * A steady run (``steady_runs``) whose first heartbeat ``repeats`` what the shard holds for its channel,
          within the expiry of the channel's last update: the channel is last updated at the run's end, now.
          Applied in its place, every heartbeat of the run would have done only that, and nothing of the batch
          before the run's end could tell the difference (no scan finds the channel silent, a route finds it
          subscribed either way).
        * Another steady run: its first heartbeat, held until its last (``ChannelEvent.held_until_ms``).
        * Any other run: every heartbeat.

        Besides, each group's latest heartbeat of a steady run is applied: the scan before it reports, in time
        order, what the scans before the skipped heartbeats would have (``membership.expire``), and prunes the
        removals they would have pruned.
        """
        if not runs:
            return []  # a batch of a fleet the job keeps up with: a heartbeat per channel, no runs
        steady = self.steady_runs(runs, others)
        plans: list[RunEvents] = []
        refreshes: dict[tuple[str, str], dict[str, int]] = {}
        latest: dict[str, int] = {}  # group -> the steady run ending last
        for i, (run, is_steady) in enumerate(zip(runs, steady, strict=True)):
            if not is_steady:
                plans.append(_every_heartbeat(run))
                continue
            event, last_ms = run.event, run.times[-1]
            if event.group not in latest or last_ms > runs[latest[event.group]].times[-1]:
                latest[event.group] = i
            if self._refreshes_only(event):
                refreshes.setdefault((event.group, event.broker), {})[event.channel] = last_ms
                plans.append([])
            else:
                plans.append([(0, event._replace(held_until_ms=last_ms))])
        for (group, broker), last_updates in refreshes.items():
            state = self.groups[group]
            state.membership = ms.refreshed(state.membership, broker, last_updates)
        for i in latest.values():
            run = runs[i]
            plans[i].append((len(run.times) - 1, run.event._replace(event_time_ms=run.times[-1])))
        return plans

    def _refreshes_only(self, event: ms.ChannelEvent) -> bool:
        """The shard holds the heartbeat's channel, not silent by the heartbeat's time, and it ``repeats`` it."""
        state = self.groups.get(event.group)
        view = state.membership.views.get(event.broker) if state is not None else None
        existing = view.channels.get(event.channel) if view is not None else None
        if view is None or existing is None or not ms.is_live(existing, event.event_time_ms, self.settings.expiry_ms):
            return False
        return ms.repeats(view, existing, event)

    def steady_runs(self, runs: Sequence[HeartbeatRun], others: Iterable[ms.ChannelEvent]) -> list[bool]:
        """For each run of the batch: may it be applied as its first heartbeat held until its last, followed
        (at the latest) by a scan at its last, with exactly the effect of applying every one of its heartbeats?
        ``others`` are the batch's other channel events.

        Applied one by one, every heartbeat after the first must be a steady refresh (``membership._refresh``)
        whose only effect is the channel's last update, and no scan between two of them may find the channel
        silent. That holds when:

        * no gap between two of the run's heartbeats exceeds the expiry;
        * the first heartbeat is applied: the channel has no removal and no update later than it;
        * nothing else of the batch is about the channel, and every channel event of its broker view in the
          batch is a heartbeat with the same subscriptions, so the view's subscription table keeps its topics.

        The expiry scans the skipped heartbeats would have run come with the group's next event (at the latest
        the run's last heartbeat) and report the same changes in the same order (``membership.expire``), and
        routes read the subscriptions as of their own time, so skipping them changes nothing.
        """
        events_per_channel: dict[tuple[str, str, str], int] = {}
        view_subscriptions: dict[tuple[str, str], object] = {}

        def note(event: ms.ChannelEvent) -> None:
            channel = (event.group, event.broker, event.channel)
            events_per_channel[channel] = events_per_channel.get(channel, 0) + 1
            view = (event.group, event.broker)
            subscriptions = event.subscriptions if event.kind == ChannelEventKind.HEARTBEAT else _MIXED_VIEW
            seen = view_subscriptions.setdefault(view, subscriptions)
            if seen is not _MIXED_VIEW and seen != subscriptions:
                view_subscriptions[view] = _MIXED_VIEW

        for run in runs:
            note(run.event)
        for event in others:
            note(event)
        expiry_ms = self.settings.expiry_ms
        return [self._is_steady(run, expiry_ms, events_per_channel, view_subscriptions) for run in runs]

    def _is_steady(
        self,
        run: HeartbeatRun,
        expiry_ms: int,
        events_per_channel: Mapping[tuple[str, str, str], int],
        view_subscriptions: Mapping[tuple[str, str], object],
    ) -> bool:
        event, times = run.event, run.times
        if len(times) < 2 or events_per_channel[(event.group, event.broker, event.channel)] != 1:
            return False
        if view_subscriptions[(event.group, event.broker)] is _MIXED_VIEW:
            return False
        if any(later - earlier > expiry_ms for earlier, later in zip(times, times[1:], strict=False)):
            return False
        state = self.groups.get(event.group)
        view = state.membership.views.get(event.broker) if state is not None else None
        if view is None:
            return True
        removed_at = view.removed_at_ms.get(event.channel)
        if removed_at is not None and event.event_time_ms < removed_at:
            return False
        existing = view.channels.get(event.channel)
        return existing is None or event.event_time_ms >= existing.last_update_ms

    def apply(self, events: Iterable[Mapping[str, Any] | ms.ChannelEvent], watermark_ms: int) -> list[Outcome]:
        """Apply events (JSON objects, or channel events the caller already parsed) in the given order."""
        records: list[Outcome] = []
        dirty: dict[str, tuple[int, set[Trigger]]] = {}  # group -> (trigger time, triggers)
        for event in events:
            if isinstance(event, ms.ChannelEvent):
                self._apply_channel(event, records, dirty)
                continue
            if isinstance(event, ms.ConnectionPoll):
                self._apply_poll(event, records, dirty)
                continue
            kind = event.get("type")
            if kind == "consumer_channel":
                self._apply_channel(ms.ChannelEvent.from_json(event), records, dirty)
            elif kind == "consumer_connections":
                self._apply_poll(ms.ConnectionPoll.from_json(event), records, dirty)
            elif kind == "topic_route":
                self._apply_route(event, records, dirty)
            elif kind == "reported_assignment":
                self._apply_report(event, records, dirty)
        records += self._expire_all(watermark_ms, dirty)
        self._due_windows(watermark_ms, dirty)
        records += self._analyse(dirty)
        self._forget_retired(watermark_ms)
        return _without_superseded_views(records)

    def _forget_retired(self, now_ms: int) -> None:
        horizon = now_ms - RETIRED_GENERATION_TTL_MS
        self.retired = {g: v for g, v in self.retired.items() if v[1] > horizon}

    def advance(self, watermark_ms: int) -> list[Outcome]:
        """The state's timeout fired: run the expiry scan (and storm window) up to the watermark."""
        dirty: dict[str, tuple[int, set[Trigger]]] = {}
        records = self._expire_all(watermark_ms, dirty)
        self._forget_retired(watermark_ms)
        self._due_windows(watermark_ms, dirty)
        return _without_superseded_views(records + self._analyse(dirty))

    def _due_windows(self, watermark_ms: int, dirty: dict[str, tuple[int, set[Trigger]]]) -> None:
        """Re-analyse groups whose storm or flapping window slid, or whose convergence grace ended, by the
        watermark (also in ``apply``: a shard with input every batch never times out)."""

        def due(group: str, trigger: Trigger) -> None:
            time_ms, triggers = dirty.get(group, (watermark_ms, set()))
            dirty[group] = (max(time_ms, watermark_ms), triggers | {trigger})

        for group, state in self.groups.items():
            pruned = self.storms.prune(state.rebalances_ms, watermark_ms)
            if pruned != state.rebalances_ms:
                state.rebalances_ms = pruned
                if _slide_matters(state, AnomalyKind.REBALANCE_STORM, self.storms.finding(group, pruned)):
                    due(group, Trigger.STORM_WINDOW)
            if state.member_changes:
                changes = self.flapping.prune(state.member_changes, watermark_ms)
                if changes != state.member_changes:
                    state.member_changes = changes
                    finding = self.flapping.finding(group, changes, watermark_ms)
                    if _slide_matters(state, AnomalyKind.FLAPPING_MEMBERS, finding):
                        due(group, Trigger.FLAPPING_WINDOW)
            if state.reported and state.converge_by_ms is not None and state.converge_by_ms <= watermark_ms:
                due(group, Trigger.CONVERGENCE_GRACE)

    def _mark(self, dirty: dict[str, tuple[int, set[Trigger]]], group: str, time_ms: int, trigger: Trigger) -> None:
        previous_time, triggers = dirty.get(group, (time_ms, set()))
        triggers.add(trigger)
        if trigger not in NOT_REBALANCES:
            # Every change makes clients rebalance (a CHANGE notification or their 20 s timer), so storms
            # count changes, not generations: several changes inside one micro-batch are several rebalances.
            self._change_times.setdefault(group, []).append(time_ms)
            state = self.groups.get(group)
            if state is not None:
                grace = self.settings.convergence_grace_ms
                grace += self.settings.route_poll_interval_ms if trigger == Trigger.ROUTE_CHANGED else 0
                due = time_ms + grace
                state.converge_by_ms = due if state.converge_by_ms is None else max(state.converge_by_ms, due)
        dirty[group] = (max(previous_time, time_ms), triggers)

    def _apply_channel(
        self, event: ms.ChannelEvent, records: list[Outcome], dirty: dict[str, tuple[int, set[Trigger]]]
    ) -> None:
        state = self.groups.get(event.group)
        if state is None:
            retired = self.retired.pop(event.group, [0, 0])
            state = GroupState(ms.GroupMembership(event.group), generation=int(retired[0]))
            if len(retired) > 2:  # joins and leaves before it emptied: a crash-looping sole member flaps
                state.member_changes = self.flapping.prune(retired[2], event.event_time_ms)
        now_ms, expiry_ms = event.event_time_ms, self.settings.expiry_ms
        # The scan before each event is a no-op until the earliest deadline (a channel's last heartbeat +
        # expiry + 1, a tombstone's time + expiry); skipping it then saves a pass over every channel of the
        # group per event. Applying an event only removes deadlines or adds ones at or after now + expiry,
        # so the bound stays a lower bound.
        bound = state.expiry_bound_ms
        if bound is None or now_ms >= bound:
            membership, expired = ms.expire(state.membership, now_ms, expiry_ms)
            bound = ms.next_expiry_ms(membership, expiry_ms)
        else:
            membership, expired = state.membership, []
        membership, changes = ms.apply_event(membership, event, expiry_ms)
        state.membership = membership
        state.expiry_bound_ms = now_ms + expiry_ms if bound is None else min(bound, now_ms + expiry_ms)
        self.groups[event.group] = state
        for change in expired + changes:
            records.append(change)
            self._mark(dirty, event.group, change.event_time_ms, Trigger(change.change))
            self._count_member_change(state, change)

    def _apply_poll(
        self, poll: ms.ConnectionPoll, records: list[Outcome], dirty: dict[str, tuple[int, set[Trigger]]]
    ) -> None:
        state = self.groups.get(poll.group)
        if state is None:
            if not poll.connections:
                return  # no broker knows a client of the group: nothing to keep
            retired = self.retired.pop(poll.group, [0, 0])
            state = GroupState(ms.GroupMembership(poll.group), generation=int(retired[0]))
            if len(retired) > 2:
                state.member_changes = self.flapping.prune(retired[2], poll.event_time_ms)
        now_ms, expiry_ms = poll.event_time_ms, self.settings.expiry_ms
        membership, statuses = ms.mark_stale(state.membership, now_ms)
        membership, expired = ms.expire(membership, now_ms, expiry_ms)
        previous = membership.views.get(poll.broker)
        membership, changes, status = ms.apply_poll(membership, poll, expiry_ms)
        state.membership = membership
        state.expiry_bound_ms = None
        self.groups[poll.group] = state
        records += [outcome for s in statuses for outcome in _stale_outcomes(s)]
        for stale in statuses:
            self._mark(dirty, poll.group, stale.event_time_ms, Trigger.VIEW_STALE)
        if status is None:
            records.append(LateEvent(STALE_POLL, "consumer_connections", now_ms, group=poll.group, broker=poll.broker))
        else:
            records.append(BrokerViewState(status))
            if previous is None or previous.poll is None or previous.poll.stale:
                records.append(BrokerViewChanged(status))
            if previous is not None and previous.poll is not None and previous.poll.stale:
                self._mark(dirty, poll.group, now_ms, Trigger.VIEW_FRESH)
        for change in expired + changes:
            records.append(change)
            self._mark(dirty, poll.group, change.event_time_ms, Trigger(change.change))
            self._count_member_change(state, change)

    def _apply_route(
        self, event: Mapping[str, Any], records: list[Outcome], dirty: dict[str, tuple[int, set[Trigger]]]
    ) -> None:
        topic, time_ms = event["topic"], int(event["event_time"])
        current = self.routes.get(topic)
        if current is not None and time_ms < current["event_time_ms"]:
            # Older than the route applied: what the name server said then no longer holds. (Every shard of
            # the job receives every route and so finds the same routes stale; the job counts one shard's.)
            records.append(LateEvent(STALE_ROUTE, "topic_route", time_ms, topic=topic))
            return
        queues = [[mq.broker_name, mq.queue_id] for mq in readable_queues(event)]
        self.routes[topic] = {"event_time_ms": time_ms, "queues": queues}
        if current is not None and current["queues"] == queues:
            return
        for group, state in self.groups.items():
            if topic in _subscribed_topics(state.membership, time_ms, self.settings.expiry_ms):
                self._mark(dirty, group, time_ms, Trigger.ROUTE_CHANGED)

    def _apply_report(
        self, event: Mapping[str, Any], records: list[Outcome], dirty: dict[str, tuple[int, set[Trigger]]]
    ) -> None:
        group = event["group"]
        state = self.groups.get(group)
        queues = sorted([q["broker"], int(q["queue_id"])] for q in event.get("queues") or () if not q.get("dropped"))
        if state is None or state.membership.is_empty:
            # No broker has reported a channel of the group (yet, or any more): there is no membership to
            # compute an expected assignment from. The collector reports again, so a report that merely
            # overtook the group's first heartbeat is followed by one that counts.
            records.append(
                IgnoredEvent(
                    event,
                    "reported_assignment",
                    UNKNOWN_GROUP,
                    f"group {group} is known to no broker at {int(event['event_time'])}: the report of "
                    f"{event['client_id']} ({len(queues)} queues of {event['topic']}) has nothing to compare with",
                )
            )
            return
        key = f"{event['client_id']}\x00{event['topic']}"
        if state.reported.get(key) != queues:
            state.reported[key] = queues
            self._mark(dirty, group, int(event["event_time"]), Trigger.REPORTED_ASSIGNMENT)

    def _expire_all(self, now_ms: int, dirty: dict[str, tuple[int, set[Trigger]]]) -> list[Outcome]:
        records: list[Outcome] = []
        for group in sorted(self.groups):
            state = self.groups[group]
            membership, statuses = ms.mark_stale(state.membership, now_ms)
            records += [outcome for s in statuses for outcome in _stale_outcomes(s)]
            for stale in statuses:
                self._mark(dirty, group, stale.event_time_ms, Trigger.VIEW_STALE)
            membership, changes = ms.expire(membership, now_ms, self.settings.expiry_ms)
            state.membership = membership
            state.expiry_bound_ms = None
            for change in changes:
                records.append(change)
                self._mark(dirty, group, change.event_time_ms, Trigger(change.change))
                self._count_member_change(state, change)
        return records

    def _count_member_change(self, state: GroupState, change: ms.MembershipChange) -> None:
        direction = _MEMBER_DIRECTION.get(change.change)
        if direction is not None:
            state.member_changes = self.flapping.record(
                state.member_changes, change.client_id, direction, change.event_time_ms
            )

    def _analyse(self, dirty: Mapping[str, tuple[int, set[Trigger]]]) -> list[Outcome]:
        records: list[Outcome] = []
        for group in sorted(dirty):
            time_ms, triggers = dirty[group]
            state = self.groups[group]
            if state.membership.is_empty:
                records += self._group_gone(group, state, time_ms)
                del self.groups[group]
                self.retired[group] = [state.generation, time_ms]
                if state.member_changes:
                    self.retired[group].append(state.member_changes)
                continue
            rebalance = bool(triggers - NOT_REBALANCES)
            records += self._analyse_group(group, state, time_ms, sorted(triggers), rebalance)
        return records

    def _mq_all(self) -> _RouteQueues:
        return _RouteQueues(self.routes, self._queues_of_route)

    def group_metrics(self, now_ms: int) -> list[GroupSummary]:
        """Every group's ``GroupSummary`` as its last analysis emitted it, changing nothing: what a
        restarted job exports before the shard's next batch. Every change of a group's membership, routes,
        reports or episodes re-analysed it, so analysing the state again finds the same values, and no queue
        has moved since (``moved`` is 0)."""
        return [_summary(self._analysis(group, state, now_ms), state) for group, state in sorted(self.groups.items())]

    def _analysis(self, group: str, state: GroupState, time_ms: int) -> Analysis:
        previous = {t: {_mq(t, k): tuple(v) for k, v in owners.items()} for t, owners in state.owners.items()}
        reported = {}
        for key, queues in state.reported.items():
            client, topic = key.split("\x00", 1)
            reported[(client, topic)] = frozenset(MessageQueue(topic, b, int(q)) for b, q in queues)
        return analyze_group(
            state.membership, self._mq_all(), self.settings.strategy_factory(group), time_ms, previous, reported
        )

    def _analyse_group(
        self, group: str, state: GroupState, time_ms: int, triggers: list[Trigger], rebalance: bool
    ) -> list[Outcome]:
        analysis = self._analysis(group, state, time_ms)
        if rebalance:
            state.generation += 1
            for change_ms in sorted(self._change_times.pop(group, [])):
                state.rebalances_ms = self.storms.record(state.rebalances_ms, change_ms)
        findings = hold_in_grace(analysis.findings, state.episodes, time_ms, state.converge_by_ms, CONVERGING_KINDS)
        if state.converge_by_ms is not None and time_ms >= state.converge_by_ms:
            state.converge_by_ms = None
        storm = self.storms.finding(group, state.rebalances_ms)
        if storm is not None:
            findings.append(storm)
        flapping = self.flapping.finding(group, state.member_changes, time_ms)
        if flapping is not None:
            findings.append(flapping)
        state.episodes, transitions = reconcile(state.episodes, findings, time_ms)
        records: list[Outcome] = [EpisodeTransition(t, state.generation) for t in transitions]
        if rebalance:
            records.append(_snapshot(analysis, state, time_ms, triggers))
            records += self._assignments(analysis, state, time_ms)
        state.owners = {
            t: {_queue_key(mq): list(o) for mq, o in owners.items()} for t, owners in owners_by_topic(analysis).items()
        }
        records.append(_summary(analysis, state))
        return records

    def _assignments(self, analysis: Analysis, state: GroupState, time_ms: int) -> list[Outcome]:
        outcomes: list[Outcome] = []
        assigned: dict[str, list[str]] = {}
        for topic, result in analysis.topics.items():
            for client, share in result.expected_shares().items():
                outcomes.append(
                    ExpectedAssignment(analysis.group, state.generation, topic, client, share, result.strategy, time_ms)
                )
                assigned.setdefault(topic, []).append(client)
        for topic, clients in state.assigned.items():
            for client in clients:
                if client not in assigned.get(topic, ()):
                    outcomes.append(AssignmentWithdrawn(analysis.group, topic, client, state.generation, time_ms))
        state.assigned = assigned
        return outcomes

    def _group_gone(self, group: str, state: GroupState, time_ms: int) -> list[Outcome]:
        records: list[Outcome] = [EpisodeTransition(t, state.generation) for t in close_all(state.episodes, time_ms)]
        for topic, clients in state.assigned.items():
            records += [AssignmentWithdrawn(group, topic, c, state.generation, time_ms) for c in clients]
        for broker, view in sorted(state.membership.views.items()):
            if view.poll is not None:  # the group is gone from every broker: so is its polled view
                records.append(BrokerViewGone(group, broker, time_ms))
        records.append(GroupGone(group, time_ms))
        return records


def _without_superseded_views(outcomes: list[Outcome]) -> list[Outcome]:
    """The outcomes without the ``BrokerViewState`` of groups gone by the end of the call: their
    ``BrokerViewGone`` (at the time of the poll that emptied the group, like that poll's state) is what holds."""
    gone = {o.group for o in outcomes if type(o) is BrokerViewGone}
    if not gone:
        return outcomes
    return [o for o in outcomes if not (type(o) is BrokerViewState and o.view.group in gone)]


def _episode(data: Mapping[str, Any]) -> Episode:
    """An open episode as ``GroupState.to_json`` stored it, its words typed again."""
    return Episode(**{**data, "anomaly": AnomalyKind(data["anomaly"]), "severity": Severity(data["severity"])})


def _subscribed_topics(membership: ms.GroupMembership, now_ms: int, expiry_ms: int) -> set[str]:
    """The topics the group's channels registered at ``now_ms`` subscribe (the membership as of then)."""
    return {
        t
        for v in membership.views.values()
        for ch in v.channels.values()
        if ms.is_registered(v, ch, now_ms, expiry_ms)
        for t, _ in ch.topics
    }


def _slide_matters(state: GroupState, kind: AnomalyKind, finding_now: Finding | None) -> bool:
    """Whether a storm or flapping window that slid by the watermark can change the group's analysis: only
    when the window still finds the anomaly (its details move) or its episode is open (it may close). Otherwise
    the group is not analysed for the slide: nothing else of it changed since its last analysis (every change
    marks it), so the analysis would find what the last one found and emit no transition, only the group's
    metrics row again (the same values). A fleet with some churn slid every changed group's windows five and
    ten minutes after each change, re-running the allocation of all its members for nothing."""
    return finding_now is not None or any(key[2] == kind for key in state.episodes)


def _mq(topic: str, key: str) -> MessageQueue:
    broker, _, queue_id = key.rpartition("/")
    return MessageQueue(topic, broker, int(queue_id))


def _stale_outcomes(status: ms.ViewStatus) -> list[Outcome]:
    return [BrokerViewState(status), BrokerViewChanged(status)]


def _snapshot(analysis: Analysis, state: GroupState, time_ms: int, triggers: list[Trigger]) -> GenerationSnapshot:
    import json

    strategies = sorted({t.strategy for t in analysis.topics.values()})
    details = {
        "views": {b: list(v) for b, v in analysis.views.items()},
        "primary_broker": analysis.primary_broker,
        "topics": {
            t: {
                "queues": len(r.allocation.mq_all),
                "orphaned": len(r.orphaned),
                "double_owned": len(r.double_owned),
                "moved": len(r.moved_queues),
                "subscribers": len(r.subscribers),
                "non_subscribers": list(r.non_subscribers),
                "skew_queues": r.skew_queues,
                "errors": sorted({str(e) for e in r.allocation.errors.values()}),
            }
            for t, r in analysis.topics.items()
        },
        "duplicate_client_ids": {c: list(v) for c, v in analysis.duplicate_client_ids.items()},
        "allocation": analysis.allocation,
        "stale_views": list(analysis.stale_views),
    }
    versions = sorted({ch.client_version or "" for v in state.membership.views.values() for ch in v.channels.values()})
    return GenerationSnapshot(
        analysis.group,
        state.generation,
        time_ms,
        tuple(triggers),
        analysis.members,
        len(analysis.cid_all),
        tuple(sorted(analysis.views)),
        tuple(analysis.cid_all),
        tuple(sorted(analysis.topics)),
        # A group without client-side allocation has no strategy: its allocation mode (BROADCAST, BROKER) says so.
        ",".join(strategies) if analysis.allocation == CLIENT_SIDE else analysis.allocation,
        ",".join(v for v in versions if v),
        analysis.views_diverge,
        tuple(sorted({e.anomaly for e in state.episodes.values()})),
        json.dumps(details, sort_keys=True, separators=(",", ":")),
    )


def _summary(analysis: Analysis, state: GroupState) -> GroupSummary:
    open_by_kind: dict[AnomalyKind, int] = {}
    for episode in state.episodes.values():
        open_by_kind[episode.anomaly] = open_by_kind.get(episode.anomaly, 0) + 1
    topics = {
        t: TopicSummary(
            sum(1 for c in r.owner_counts if c == 1),
            len(r.orphaned),
            len(r.double_owned),
            len(r.idle_members),
            len(r.non_subscribers),
            r.skew_queues,
            len(r.moved_queues),
        )
        for t, r in analysis.topics.items()
    }
    return GroupSummary(
        analysis.group,
        analysis.event_time_ms,
        analysis.members,
        len(analysis.cid_all),
        state.generation,
        len(analysis.duplicate_client_ids),
        analysis.views_diverge,
        state.rebalances_ms[-1] if state.rebalances_ms else None,
        open_by_kind,
        topics,
    )


__all__ = ["EngineSettings", "Finding", "GroupRule", "ShardEngine", "readable_queues", "DomainError"]
