"""Analysis of one consumer group: what every client computes, and what is wrong with it.

From the group's broker views, the routes' queues and each client's strategy it derives the expected
assignment from the primary view and the findings (orphaned and double-owned queues, inconsistent
subscriptions, diverging views, ...), sorted so a replayed batch yields the same rows. BROADCASTING and POP
groups get no expectation. Which cidAll, who consumes and who allocates: ``docs/design/group-analysis.md``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from streaming.domain.allocation.group import GroupAllocation, allocate_group
from streaming.domain.allocation.strategies import AllocationStrategy
from streaming.domain.consumers.episodes import Finding
from streaming.domain.consumers.membership import BrokerView, Channel, GroupMembership, cid_all
from streaming.domain.consumers.polled_views import fresh_views
from streaming.domain.consumers.strategy_choice import StrategyChoice
from streaming.domain.errors import DomainError
from streaming.domain.javacompat import java_sort_key
from streaming.domain.queues import MessageQueue, sorted_client_ids
from streaming.domain.vocabulary import AllocationMode, AnomalyKind

# How a group's queues are allocated (``allocation_mode``).
CLIENT_SIDE = AllocationMode.CLIENT  # every CLUSTERING client computes its share with the group's strategy
BROADCAST = AllocationMode.BROADCAST  # every client consumes every queue (BROADCASTING)
BROKER_SIDE = AllocationMode.BROKER  # the broker hands out queues (CONSUME_POP: POP-mode push and gRPC clients)
# A group whose strategy the monitor cannot compute (an application's own): reported, nothing expected of it.
UNKNOWN_STRATEGY = AnomalyKind.UNKNOWN_STRATEGY

StrategyFactory = Callable[[str | None, str | None], AllocationStrategy | StrategyChoice]
"""(strategy name reported by clients or None, client version or None) -> strategy (with where its parts came
from, as a ``StrategyChoice``)."""


@dataclass(frozen=True)
class TopicAnalysis:
    topic: str
    strategy: str
    allocation: GroupAllocation
    subscribers: tuple[str, ...]
    non_subscribers: tuple[str, ...]
    owner_counts: tuple[int, ...]  # channels that actually pull each queue (subscribers only)
    idle_members: tuple[str, ...]
    skew_queues: int
    skew_ratio: float
    moved_queues: tuple[MessageQueue, ...]

    @property
    def orphaned(self) -> list[MessageQueue]:
        """Queues nobody pulls that are no non-subscriber's share: no member computes them, or their members
        cannot (duplicate client IDs, a strategy's error)."""
        unsubscribed = set(self.unsubscribed)
        return [
            mq
            for mq, c in zip(self.allocation.mq_all, self.owner_counts, strict=True)
            if c == 0 and mq not in unsubscribed
        ]

    @property
    def unsubscribed(self) -> list[MessageQueue]:
        """Queues nobody pulls because they are the share of a member that does not subscribe the topic: the
        inconsistent subscription's, not orphaned queues (``docs/design/group-analysis.md``)."""
        shares = {mq for c in self.non_subscribers for mq in self.allocation.shares.get(c, ())}
        return [mq for mq, c in zip(self.allocation.mq_all, self.owner_counts, strict=True) if c == 0 and mq in shares]

    @property
    def double_owned(self) -> list[MessageQueue]:
        return [mq for mq, c in zip(self.allocation.mq_all, self.owner_counts, strict=True) if c >= 2]

    def expected_shares(self) -> dict[str, tuple[MessageQueue, ...]]:
        """Shares of the clients that subscribe the topic (the others never pull theirs)."""
        return {cid: self.allocation.shares.get(cid, ()) for cid in self.subscribers}


@dataclass(frozen=True)
class Analysis:
    group: str
    event_time_ms: int
    primary_broker: str | None
    cid_all: tuple[str, ...]
    channels_by_client: Mapping[str, tuple[str, ...]]
    views: Mapping[str, tuple[str, ...]]  # broker -> sorted cidAll
    topics: Mapping[str, TopicAnalysis]
    findings: tuple[Finding, ...] = field(default_factory=tuple)
    allocation: str = CLIENT_SIDE
    stale_views: tuple[str, ...] = ()  # brokers whose polled view is stale (left out while a fresh one has channels)
    subscribed: tuple[str, ...] = ()  # the topics the primary view's clients subscribe, analysed or not
    strategy: str = ""  # what the clients run: the computed strategy's name, or the reported one it cannot compute
    strategy_sources: Mapping[str, str] = field(default_factory=dict)  # part -> where it came from

    @property
    def members(self) -> int:
        return len(self.channels_by_client)

    @property
    def duplicate_client_ids(self) -> dict[str, tuple[str, ...]]:
        return {cid: chans for cid, chans in self.channels_by_client.items() if len(chans) > 1}

    @property
    def views_diverge(self) -> bool:
        return len(set(self.views.values())) > 1


def allocation_mode(channels: Sequence[Channel]) -> str:
    """The group's allocation as most of its channels say (ties: the mode without client-side allocation, so an
    undecided group raises no queue anomaly); a channel without client-side allocation is BROADCASTING or POP."""
    modes = Counter(_channel_mode(ch) for ch in channels)
    if not modes:
        return CLIENT_SIDE
    return min(modes, key=lambda m: (-modes[m], m == CLIENT_SIDE, m))


def _channel_mode(channel: Channel) -> str:
    if channel.message_model == "BROADCASTING":
        return BROADCAST
    return BROKER_SIDE if channel.consume_type == "CONSUME_POP" else CLIENT_SIDE


def primary_view(membership: GroupMembership) -> tuple[str | None, BrokerView | None]:
    views = fresh_views(membership)
    if not views:
        return None, None
    broker = min(views, key=lambda b: (-len(views[b].channels), java_sort_key(b)))
    return broker, views[broker]


def _queue_ref(mq: MessageQueue) -> dict[str, object]:
    return {"broker": mq.broker_name, "queue_id": mq.queue_id}


@dataclass(frozen=True)
class _Census:
    """Who is connected to the primary view, with which topics, and what most channels report."""

    channels_by_client: dict[str, list[str]]
    topics_by_client: dict[str, set[str]]
    reported_strategy: str | None
    version: str | None


def _census(channels: Sequence[Channel]) -> _Census:
    channels_by_client: dict[str, list[str]] = {}
    topics_by_client: dict[str, set[str]] = {}
    versions: Counter[str] = Counter()
    strategies: Counter[str] = Counter()
    for ch in channels:
        channels_by_client.setdefault(ch.client_id, []).append(ch.channel)
        topics_by_client.setdefault(ch.client_id, set()).update(t for t, _ in ch.topics)
        if ch.client_version:
            versions[ch.client_version] += 1
        if ch.allocate_strategy:
            strategies[ch.allocate_strategy] += 1
    # The group's strategy and version: what most channels report (ties: smallest name), else configured.
    reported_strategy = min(strategies, key=lambda s: (-strategies[s], s)) if strategies else None
    version = min(versions, key=lambda s: (-versions[s], s)) if versions else None
    return _Census(channels_by_client, topics_by_client, reported_strategy, version)


def analyze_group(
    membership: GroupMembership,
    mq_all_by_topic: Mapping[str, Sequence[MessageQueue]],
    strategy_for: StrategyFactory,
    now_ms: int,
    previous_owners: Mapping[str, Mapping[MessageQueue, tuple[str, ...]]] | None = None,
    reported: Mapping[tuple[str, str], frozenset[MessageQueue]] | None = None,
) -> Analysis:
    """Analyse the group at event time ``now_ms`` (see the module docstring for the rules)."""
    group = membership.group
    broker, view = primary_view(membership)
    views = {b: tuple(sorted_client_ids(cid_all(v))) for b, v in fresh_views(membership).items()}
    stale = tuple(sorted(b for b, v in membership.views.items() if v.channels and b not in views))
    if view is None:
        return Analysis(group, now_ms, None, (), {}, {}, {}, (), CLIENT_SIDE, stale)
    channels = sorted(view.channels.values(), key=lambda c: c.channel)
    cids = tuple(sorted_client_ids(cid_all(view)))
    census = _census(channels)
    mode = allocation_mode(channels)
    findings: list[Finding] = []

    subscribed_topics = sorted(set().union(*census.topics_by_client.values()) if census.topics_by_client else set())
    subscribed = tuple(subscribed_topics)
    if mode != CLIENT_SIDE:
        subscribed_topics = []  # no client computes a share: nothing to expect, nothing orphaned or doubled
    strategy: AllocationStrategy | None = None
    strategy_name, sources = census.reported_strategy or "", {}
    if any(mq_all_by_topic.get(t) for t in subscribed_topics):
        try:
            chosen = strategy_for(census.reported_strategy, census.version)
            choice = chosen if isinstance(chosen, StrategyChoice) else StrategyChoice(chosen)
            strategy, strategy_name, sources = choice.strategy, choice.strategy.name, dict(choice.sources)
        except DomainError as error:
            # A strategy the monitor cannot compute (the application's own) or complete (no rule supplies what
            # running info does not show): it expects nothing rather than report every queue orphaned.
            findings.append(_unknown_strategy(group, census.reported_strategy, error))
            subscribed_topics = []
    topic_results: dict[str, TopicAnalysis] = {}
    multiplicity = Counter(cids)
    for topic in subscribed_topics:
        mq_all = mq_all_by_topic.get(topic)
        if not mq_all or strategy is None:
            continue  # no route yet: RebalanceImpl keeps the current assignment and computes nothing
        before = previous_owners.get(topic) if previous_owners is not None else None
        result = _analyse_topic(group, topic, strategy, cids, mq_all, census, multiplicity, before)
        topic_results[topic] = result
        findings += _topic_findings(group, result, multiplicity, dict(census.channels_by_client))
        if reported:
            findings += _mismatch_findings(group, result, reported)
    findings += _membership_findings(group, broker, census.channels_by_client, views)
    return Analysis(
        group,
        now_ms,
        broker,
        cids,
        {c: tuple(v) for c, v in census.channels_by_client.items()},
        views,
        topic_results,
        tuple(sorted(findings, key=lambda f: (f.topic, f.anomaly))),
        mode,
        stale,
        subscribed,
        strategy_name,
        sources,
    )


def _analyse_topic(
    group: str,
    topic: str,
    strategy: AllocationStrategy,
    cids: tuple[str, ...],
    mq_all: Sequence[MessageQueue],
    census: _Census,
    multiplicity: Counter[str],
    owners_before: Mapping[MessageQueue, tuple[str, ...]] | None,
) -> TopicAnalysis:
    """The allocation every client computes for ``topic`` and how the subscribers' shares fall out."""
    allocation = allocate_group(strategy, cids, mq_all, consumer_group=group)
    clients = sorted_client_ids(census.channels_by_client)
    subscribers = tuple(c for c in clients if topic in census.topics_by_client[c])
    non_subscribers = tuple(c for c in clients if topic not in census.topics_by_client[c])
    owner_counts = allocation.owner_counts_for({c: multiplicity[c] for c in subscribers})
    sizes = [len(set(allocation.shares.get(c, ()))) for c in subscribers]
    idle = tuple(c for c in subscribers if not allocation.shares.get(c))
    skew = (max(sizes) - min(sizes)) if sizes else 0
    skew_ratio = (max(sizes) / (len(allocation.mq_all) / len(subscribers))) if sizes and allocation.mq_all else 0.0
    moved: tuple[MessageQueue, ...] = ()
    if owners_before is not None:
        now_owners = _owners(allocation, subscribers)
        moved = tuple(mq for mq in allocation.mq_all if owners_before.get(mq, ()) != now_owners.get(mq, ()))
    return TopicAnalysis(
        topic,
        strategy.name,
        allocation,
        subscribers,
        non_subscribers,
        owner_counts,
        idle,
        skew,
        round(skew_ratio, 6),
        moved,
    )


def _membership_findings(
    group: str,
    broker: str | None,
    channels_by_client: Mapping[str, list[str]],
    views: Mapping[str, tuple[str, ...]],
) -> list[Finding]:
    """Duplicate client ids on the primary view, and brokers that disagree about the members."""
    findings: list[Finding] = []
    duplicates = {c: tuple(chs) for c, chs in sorted(channels_by_client.items()) if len(chs) > 1}
    if duplicates:
        findings.append(
            Finding(
                group,
                "",
                AnomalyKind.DUPLICATE_CLIENT_ID,
                f"{len(duplicates)} client id(s) of {group} are used by several channels",
                {"client_ids": {c: list(chs) for c, chs in duplicates.items()}, "broker": broker},
            )
        )
    if len(set(views.values())) > 1:
        findings.append(
            Finding(
                group,
                "",
                AnomalyKind.DIVERGING_BROKER_VIEWS,
                f"brokers disagree about the members of {group}",
                {"views": {b: list(v) for b, v in views.items()}},
            )
        )
    return findings


def _unknown_strategy(group: str, name: str | None, error: DomainError) -> Finding:
    return Finding(
        group,
        "",
        UNKNOWN_STRATEGY,
        f"{group} allocates with strategy {name!r}, which the monitor cannot compute: no expected assignment",
        {"strategy": name, "error": str(error)},
    )


def _owners(allocation: GroupAllocation, subscribers: Sequence[str]) -> dict[MessageQueue, tuple[str, ...]]:
    owners: dict[MessageQueue, list[str]] = {}
    for cid in subscribers:
        for mq in allocation.shares.get(cid, ()):
            owners.setdefault(mq, []).append(cid)
    return {mq: tuple(sorted(set(cs), key=java_sort_key)) for mq, cs in owners.items()}


def owners_by_topic(analysis: Analysis) -> dict[str, dict[MessageQueue, tuple[str, ...]]]:
    """Per topic, who is expected to pull each queue (the ``previous_owners`` of the next analysis)."""
    return {t: _owners(r.allocation, r.subscribers) for t, r in analysis.topics.items()}


def _topic_findings(
    group: str, r: TopicAnalysis, multiplicity: Counter[str], channels_by_client: Mapping[str, list[str]]
) -> list[Finding]:
    """The topic's orphaned queues, double-owned queues and inconsistent subscriptions, in that order."""
    found = (
        _orphaned_finding(group, r, multiplicity),
        _double_owned_finding(group, r, channels_by_client),
        _subscription_finding(group, r),
    )
    return [finding for finding in found if finding is not None]


def _orphaned_finding(group: str, r: TopicAnalysis, multiplicity: Counter[str]) -> Finding | None:
    orphaned = r.orphaned
    if not orphaned:
        return None
    return Finding(
        group,
        r.topic,
        AnomalyKind.ORPHANED_QUEUES,
        f"{len(orphaned)} of {len(r.allocation.mq_all)} queues of {r.topic} have no consumer",
        {
            "queues": [_queue_ref(q) for q in orphaned],
            "causes": _orphan_causes(r, multiplicity),
            "cid_all": list(r.allocation.cid_all),
            "strategy": r.strategy,
        },
    )


def _double_owned_finding(group: str, r: TopicAnalysis, channels_by_client: Mapping[str, list[str]]) -> Finding | None:
    doubled = r.double_owned
    if not doubled:
        return None
    owners = _owners(r.allocation, r.subscribers)
    return Finding(
        group,
        r.topic,
        AnomalyKind.DOUBLE_OWNED_QUEUES,
        f"{len(doubled)} queues of {r.topic} are consumed by several channels",
        {
            "queues": [
                {
                    **_queue_ref(q),
                    "owners": list(owners.get(q, ())),
                    "channels": [ch for c in owners.get(q, ()) for ch in channels_by_client[c]],
                }
                for q in doubled
            ],
            "strategy": r.strategy,
        },
    )


def _subscription_finding(group: str, r: TopicAnalysis) -> Finding | None:
    """Members that do not subscribe a topic their group's other members pull."""
    if not (r.non_subscribers and r.subscribers):
        return None
    return Finding(
        group,
        r.topic,
        AnomalyKind.INCONSISTENT_SUBSCRIPTION,
        f"{len(r.non_subscribers)} member(s) of {group} do not subscribe {r.topic}",
        {
            "non_subscribers": list(r.non_subscribers),
            "subscribers": list(r.subscribers),
            "unpulled_queues": [_queue_ref(q) for c in r.non_subscribers for q in r.allocation.shares.get(c, ())],
        },
    )


def _orphan_causes(r: TopicAnalysis, multiplicity: Counter[str]) -> list[str]:
    """Why queues of the topic have no consumer, as far as the group's own reports tell."""
    causes = []
    if any(multiplicity[c] > 1 for c in r.allocation.shares):
        causes.append("duplicate client id")
    if r.allocation.errors:
        causes.append("strategy error: " + "; ".join(sorted({str(e) for e in r.allocation.errors.values()})))
    if not any(r.allocation.shares.values()) and not r.allocation.errors:
        causes.append(f"{r.strategy} gives no client any queue")
    return causes


def _mismatch_findings(
    group: str, r: TopicAnalysis, reported: Mapping[tuple[str, str], frozenset[MessageQueue]]
) -> list[Finding]:
    differences = {}
    for cid in r.subscribers:
        observed = reported.get((cid, r.topic))
        if observed is None:
            continue
        expected = frozenset(r.allocation.shares.get(cid, ()))
        if observed != expected:
            differences[cid] = {
                "missing": [_queue_ref(q) for q in sorted(expected - observed)],
                "unexpected": [_queue_ref(q) for q in sorted(observed - expected)],
            }
    if not differences:
        return []
    return [
        Finding(
            group,
            r.topic,
            AnomalyKind.ASSIGNMENT_MISMATCH,
            f"{len(differences)} client(s) of {group} report a different assignment of {r.topic}",
            {"clients": differences},
        )
    ]


def strategy_error_kinds(analysis: Analysis) -> dict[str, list[str]]:
    return {
        t: sorted({e.java_exception for e in r.allocation.errors.values()})
        for t, r in analysis.topics.items()
        if r.allocation.errors
    }


__all__ = [
    "Analysis",
    "TopicAnalysis",
    "allocation_mode",
    "analyze_group",
    "owners_by_topic",
    "primary_view",
    "strategy_error_kinds",
    "DomainError",
]
