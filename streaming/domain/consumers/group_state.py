"""What a shard keeps between batches: each group's state and the queues of each topic's route.

``GroupState`` is a group's membership, generation, last owners, expected and reported assignments, open
episodes and detector windows, with its JSON form inside the shard's snapshot. Routes are kept as the
readable queues of their topic's ``TopicRoute`` (``readable_queues``) and read back as ``RouteQueues``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from streaming.domain.consumers import membership_snapshot
from streaming.domain.consumers.episodes import Episode, Finding, MemberChanges, StormChanges
from streaming.domain.consumers.membership import GroupMembership
from streaming.domain.consumers.polled_views import is_registered
from streaming.domain.queues import MessageQueue
from streaming.domain.vocabulary import DEFAULT_CLUSTER, AnomalyKind, Severity, Trigger


@dataclass(frozen=True, slots=True)
class RouteBroker:
    """One broker of a topic's route: its permission bits and how many queues clients read (``readable_queues``)."""

    broker: str
    read_queue_nums: int = 0
    perm: int = 6


@dataclass(frozen=True, slots=True)
class TopicRoute:
    """A ``topic_route`` event: the name server's route of one topic at ``event_time_ms``."""

    event_time_ms: int
    topic: str
    brokers: tuple[RouteBroker, ...] = ()
    cluster: str = DEFAULT_CLUSTER

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TopicRoute:
        """The event from the JSON of its validated fields (absent optional fields take the client's defaults)."""
        brokers = tuple(
            RouteBroker(str(b["broker"]), int(b.get("read_queue_nums", 0)), int(b.get("perm", 6)))
            for b in data.get("brokers") or ()
        )
        return cls(int(data["event_time"]), str(data["topic"]), brokers, data.get("cluster") or DEFAULT_CLUSTER)


def readable_queues(route: TopicRoute) -> list[MessageQueue]:
    """mqAll from a route event: every readable broker's queues ``0..read_queue_nums-1`` (semantics 1.3)."""
    topic = route.topic
    result = []
    for broker in route.brokers:
        if broker.perm & 4:
            result += [MessageQueue(topic, broker.broker, i) for i in range(broker.read_queue_nums)]
    return result


@dataclass
class GroupState:
    """One group's state in a shard, kept from batch to batch (``to_json`` is its part of the snapshot)."""

    membership: GroupMembership
    generation: int = 0
    owners: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # topic -> "broker/qid" -> owners
    assigned: dict[str, list[str]] = field(default_factory=dict)  # topic -> clients with a current expected share
    episodes: dict[tuple[str, str, str], Episode] = field(default_factory=dict)
    rebalances_ms: tuple[int, ...] = ()
    reported: dict[str, list[list[Any]]] = field(default_factory=dict)  # "client\x00topic" -> [[broker, qid]]
    member_changes: MemberChanges = field(default_factory=dict)  # FlappingDetector's joins and leaves
    converge_by_ms: int | None = None  # reported-vs-expected differences count from then on
    # "client\x00topic" -> the held queues with their ProcessQueueInfo (``progress_tracker.held_queues``)
    holders: dict[str, dict[str, Any]] = field(default_factory=dict)
    storm_changes: StormChanges = field(default_factory=list)  # StormDetector's membership and route changes
    # The changes not cut into a generation (or re-analysis) yet: [first_ms, last_ms, triggers, change times]
    # (``ShardEngine.cut_ms``: cut once the event-time clock is the coalescing window past the last of them).
    pending: list[Any] | None = None
    # The cut of ``pending`` made where the last call ended, already emitted: [its time, digest of its outcomes,
    # what it touched: {"assign": [[topic, client]], "episodes": [id], "views": [broker]}] (``ShardEngine._cut``).
    provisional: list[Any] | None = None
    # Each open episode's current row: [time of its last transition, generation then] (to restore it).
    episode_rows: dict[str, list[int]] = field(default_factory=dict)
    # "client\x00topic" -> [since_ms, taken_ms] of ``reported``: since when the client has reported exactly these
    # queues, and its latest report (a key without times, from a version-7 state: not counted)
    reported_ms: dict[str, list[int]] = field(default_factory=dict)
    generation_ms: int | None = None  # when the latest generation was cut (None: none yet, or not recorded)
    observing: bool = False  # the last analysis saw an observed candidate short of the grace: reports re-analyse
    holder_rows: dict[str, list[str]] = field(default_factory=dict)  # topic -> queue keys of its holders rows
    # Not persisted: a lower bound of every expiry deadline in ``membership`` (None: unknown, scan).
    expiry_bound_ms: int | None = field(default=None, compare=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "membership": membership_snapshot.snapshot(self.membership),
            "generation": self.generation,
            "owners": self.owners,
            "assigned": self.assigned,
            "episodes": [vars(e) for e in self.episodes.values()],
            "rebalances_ms": list(self.rebalances_ms),
            "reported": self.reported,
            "member_changes": self.member_changes,
            "converge_by_ms": self.converge_by_ms,
            "holders": self.holders,
            "storm_changes": self.storm_changes,
            "pending": self.pending,
            "provisional": self.provisional,
            "episode_rows": self.episode_rows,
            "reported_ms": self.reported_ms,
            "generation_ms": self.generation_ms,
            "observing": self.observing,
            "holder_rows": self.holder_rows,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GroupState:
        episodes = {(e["group"], e["topic"], e["anomaly"]): _episode(e) for e in data["episodes"]}
        return cls(
            membership_snapshot.restore(data["membership"]),
            int(data["generation"]),
            data["owners"],
            data["assigned"],
            episodes,
            tuple(data["rebalances_ms"]),
            data["reported"],
            data.get("member_changes") or {},
            data.get("converge_by_ms"),
            data["holders"],
            [list(e) for e in data["storm_changes"]],
            _pending(data["pending"]),
            data["provisional"],
            {k: [int(t), int(g)] for k, (t, g) in data["episode_rows"].items()},
            {k: [int(a), int(b)] for k, (a, b) in data["reported_ms"].items()},
            data["generation_ms"],
            bool(data["observing"]),
            dict(data["holder_rows"]),
        )


def queue_key(mq: MessageQueue) -> str:
    """How ``GroupState.owners`` keys a queue of a topic: ``"broker/queue_id"``."""
    return f"{mq.broker_name}/{mq.queue_id}"


class RouteQueues(Mapping[str, list[MessageQueue]]):
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


def _pending(data: list[Any] | None) -> list[Any] | None:
    """A pending cut as ``GroupState.to_json`` stored it, its triggers typed again."""
    if data is None:
        return None
    first_ms, last_ms, triggers, change_times = data
    return [int(first_ms), int(last_ms), [Trigger(t) for t in triggers], [int(t) for t in change_times]]


def _episode(data: Mapping[str, Any]) -> Episode:
    """An open episode as ``GroupState.to_json`` stored it, its words typed again."""
    return Episode(**{**data, "anomaly": AnomalyKind(data["anomaly"]), "severity": Severity(data["severity"])})


def subscribed_topics(membership: GroupMembership, now_ms: int, expiry_ms: int) -> set[str]:
    """The topics the group's channels registered at ``now_ms`` subscribe (the membership as of then)."""
    return {
        t
        for v in membership.views.values()
        for ch in v.channels.values()
        if is_registered(v, ch, now_ms, expiry_ms)
        for t, _ in ch.topics
    }


def slide_matters(state: GroupState, kinds: tuple[AnomalyKind, ...], findings_now: list[Finding]) -> bool:
    """Whether a storm or flapping window that slid by the watermark can change the group's analysis: only
    when the window still finds the anomaly (its details move) or its episode is open (it may close). Otherwise
    the group is not analysed for the slide: nothing else of it changed since its last analysis (every change
    marks it), so the analysis would find what the last one found and emit no transition, only the group's
    metrics row again (the same values). A fleet with some churn slid every changed group's windows five and
    ten minutes after each change, re-running the allocation of all its members for nothing."""
    return bool(findings_now) or any(key[2] in kinds for key in state.episodes)


def queue_of_key(topic: str, key: str) -> MessageQueue:
    """The queue of ``topic`` that ``queue_key`` gave ``key`` for."""
    broker, _, queue_id = key.rpartition("/")
    return MessageQueue(topic, broker, int(queue_id))
