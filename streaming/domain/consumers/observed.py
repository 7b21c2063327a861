"""What the clients were seen holding, per queue, from the reports that count.

A client's report (its running info through the collector, or the client agent's) counts as evidence only if it
was taken at or after the group's latest generation plus the clients' rebalance delay (``evidence_from_ms``):
before that a client may not have rebalanced yet. Older reports are kept and shown, never compared. From the
counted ones each queue gets its holders; a queue two clients hold, or one nobody holds while every subscriber
reported, is a candidate of OBSERVED_DOUBLE_HOLDING or OBSERVED_UNHELD_QUEUES for as long as the reports have
shown it together (``shown_ms``). Why: ``docs/design/observed-ownership.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from streaming.domain.consumers.episodes import Finding
from streaming.domain.queues import MessageQueue
from streaming.domain.vocabulary import AnomalyKind, ObservedState

# The kinds judged from what clients report (held while unjudged: see ``unjudged_topics``).
OBSERVED_KINDS = (AnomalyKind.OBSERVED_DOUBLE_HOLDING, AnomalyKind.OBSERVED_UNHELD_QUEUES)


@dataclass(frozen=True, slots=True)
class Report:
    """A client's latest report of a topic: its held queues, since when it has reported exactly these, and when it
    reported them last."""

    queues: frozenset[MessageQueue]
    since_ms: int
    taken_ms: int


@dataclass(frozen=True, slots=True)
class QueueHolding:
    """One queue: who should pull it, who the counted reports show holding it, and since when they have shown it so
    (``since_ms``, None while no counted report shows it)."""

    queue: MessageQueue
    expected: tuple[str, ...]
    holders: tuple[str, ...]
    state: ObservedState
    since_ms: int | None
    uncounted_holders: tuple[str, ...]  # clients whose report is older than the evidence bound, holding it then


@dataclass(frozen=True, slots=True)
class TopicObservation:
    """A topic's queues as observed at an analysis; ``not_counted``: subscribers whose latest report is older than
    ``evidence_from_ms`` (kept, not compared), ``unreported``: subscribers without any report."""

    topic: str
    evidence_from_ms: int
    queues: tuple[QueueHolding, ...]
    not_counted: tuple[str, ...]
    unreported: tuple[str, ...]
    ambiguous: bool  # a subscriber's client id is on several channels: its reports cannot be told apart


def counted(report: Report, evidence_from_ms: int) -> bool:
    """Whether ``report`` is evidence: taken at or after the bound."""
    return report.taken_ms >= evidence_from_ms


def _shown(reports: Sequence[Report], evidence_from_ms: int) -> tuple[int, int]:
    """The span over which all of ``reports`` showed what they show now: from the latest of their starts (none
    before the evidence bound) to the earliest of their last reports."""
    return max(max(r.since_ms, evidence_from_ms) for r in reports), min(r.taken_ms for r in reports)


def observe_topic(
    topic: str,
    mq_all: Sequence[MessageQueue],
    expected: Mapping[MessageQueue, tuple[str, ...]],
    subscribers: Sequence[str],
    reports: Mapping[str, Report],
    evidence_from_ms: int,
    ambiguous: bool = False,
) -> TopicObservation:
    """The topic's queues as the subscribers' reports (``reports``: client -> its latest report of the topic) show
    them; only reports taken at or after ``evidence_from_ms`` count."""
    fresh = {c: reports[c] for c in subscribers if c in reports and counted(reports[c], evidence_from_ms)}
    old = {c: reports[c] for c in subscribers if c in reports and c not in fresh}
    complete = len(fresh) == len(subscribers) and not ambiguous
    queues = []
    for mq in mq_all:
        holders = tuple(c for c in subscribers if c in fresh and mq in fresh[c].queues)
        uncounted = tuple(c for c in subscribers if c in old and mq in old[c].queues)
        if len(holders) >= 2 and not ambiguous:
            state, since = ObservedState.DOUBLE_HELD, _shown([fresh[c] for c in holders], evidence_from_ms)[0]
        elif complete and holders:
            state, since = ObservedState.HELD, _shown([fresh[holders[0]]], evidence_from_ms)[0]
        elif complete:
            state, since = ObservedState.UNHELD, _shown(list(fresh.values()), evidence_from_ms)[0]
        else:
            state, since = ObservedState.UNKNOWN, None
        queues.append(QueueHolding(mq, tuple(expected.get(mq, ())), holders, state, since, uncounted))
    return TopicObservation(
        topic,
        evidence_from_ms,
        tuple(queues),
        tuple(sorted(old)),
        tuple(c for c in subscribers if c not in reports),
        ambiguous,
    )


def _ref(holding: QueueHolding) -> dict[str, object]:
    return {
        "broker": holding.queue.broker_name,
        "queue_id": holding.queue.queue_id,
        "holders": list(holding.holders),
        "expected": list(holding.expected),
        "since_ms": holding.since_ms,
    }


def observed_candidates(
    group: str, observation: TopicObservation, reports: Mapping[str, Report]
) -> list[tuple[Finding, int]]:
    """The topic's observed double-holding and unheld queues, each with how long the counted reports have shown all
    of its queues so (the shortest of them): the engine opens an episode once that reaches the grace."""
    found = []
    bound = observation.evidence_from_ms
    for state, kind, words in (
        (ObservedState.DOUBLE_HELD, AnomalyKind.OBSERVED_DOUBLE_HOLDING, "are held by two or more clients"),
        (ObservedState.UNHELD, AnomalyKind.OBSERVED_UNHELD_QUEUES, "are held by no client"),
    ):
        queues = [q for q in observation.queues if q.state == state]
        if not queues:
            continue
        if state == ObservedState.DOUBLE_HELD:
            spans = [_shown([reports[c] for c in q.holders], bound) for q in queues]
        else:
            spans = [_shown([reports[c] for c in reports if counted(reports[c], bound)], bound)] * len(queues)
        shown_ms = min(until - since for since, until in spans)
        finding = Finding(
            group,
            observation.topic,
            kind,
            f"{len(queues)} queues of {observation.topic} {words}, as the clients report them",
            {
                "queues": [_ref(q) for q in queues],
                "evidence_from_ms": bound,
                "not_counted": list(observation.not_counted),
            },
        )
        found.append((finding, shown_ms))
    return found


def fully_observed(observation: TopicObservation) -> bool:
    """Whether every subscriber's report of the topic counts (and can be told apart): only then can an observed
    episode of it be closed, or a queue be observed unheld."""
    return not observation.ambiguous and not observation.not_counted and not observation.unreported
