"""The rows the shard engine emits for a group, built from its analysis and its kept state.

A new generation's ``GenerationSnapshot`` and expected assignments (with the withdrawn ones), the
``GroupSummary`` of every analysis, the outcomes of a group that is gone and of a polled view turning
stale. Pure functions of their inputs; ``fleet.ShardEngine`` decides when each applies.
"""

from __future__ import annotations

import json

from streaming.domain.consumers.analysis import CLIENT_SIDE, Analysis
from streaming.domain.consumers.episodes import close_all
from streaming.domain.consumers.group_state import GroupState
from streaming.domain.consumers.outcomes import (
    AssignmentWithdrawn,
    BrokerViewChanged,
    BrokerViewGone,
    BrokerViewState,
    EpisodeTransition,
    ExpectedAssignment,
    GenerationSnapshot,
    GroupGone,
    GroupSummary,
    Outcome,
    QueueHoldersGone,
    TopicSummary,
)
from streaming.domain.consumers.polled_views import ViewStatus
from streaming.domain.versions import ClientLine
from streaming.domain.vocabulary import AnomalyKind, Trigger


def without_superseded_views(outcomes: list[Outcome]) -> list[Outcome]:
    """The outcomes without the ``BrokerViewState`` the current table would not keep: of groups gone after it in
    the call (their ``BrokerViewGone``, at the time of the poll that emptied the group like that poll's state, is
    what holds), and of views with a state of the same or a later time after it in the call (the table keeps a
    view's latest state, of the same time the last). A state after the group's last going (the group came back)
    is kept: one call holds the same as the calls it could be cut into. A view polled at every poll cycle would
    otherwise give the table a row per poll."""
    gone: set[str] = set()  # groups gone later in the call
    latest: dict[tuple[str, str], int] = {}  # a view's latest state's time, from the call's end
    kept: list[Outcome] = []
    for o in reversed(outcomes):
        if type(o) is BrokerViewGone:
            gone.add(o.group)
        elif type(o) is BrokerViewState:
            view = (o.view.group, o.view.broker)
            if o.view.group in gone or latest.get(view, -1) >= o.view.event_time_ms:
                continue
            latest[view] = o.view.event_time_ms
        kept.append(o)
    kept.reverse()
    return kept


def stale_outcomes(status: ViewStatus) -> list[Outcome]:
    """A polled view turned stale: its state and its change of status."""
    return [BrokerViewState(status), BrokerViewChanged(status)]


def generation_snapshot(
    analysis: Analysis, state: GroupState, time_ms: int, triggers: list[Trigger], cause: AnomalyKind | None = None
) -> GenerationSnapshot:
    """The ``GenerationSnapshot`` of a new generation: who is in the group, what each topic looks like, and the
    anomaly it is part of (``cause``: a rolling deploy, a storm, a flipping subscription table; None: none)."""
    versions = sorted({ch.client_version or "" for v in state.membership.views.values() for ch in v.channels.values()})
    details = {
        "views": {b: list(v) for b, v in analysis.views.items()},
        "primary_broker": analysis.primary_broker,
        "topics": {
            t: {
                "queues": len(r.allocation.mq_all),
                "orphaned": len(r.orphaned),
                "unsubscribed": len(r.unsubscribed),
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
        "strategy_sources": dict(analysis.strategy_sources),
        "client_versions": [v for v in versions if v],
        "cause": cause,
    }
    read = {ClientLine.read(v) for v in versions}
    lines = [line.value for line in (ClientLine.V4_9, ClientLine.V5) if line in read]
    return GenerationSnapshot(
        analysis.group,
        state.generation,
        time_ms,
        tuple(triggers),
        analysis.members,
        len(analysis.cid_all),
        tuple(sorted(analysis.views)),
        tuple(analysis.cid_all),
        analysis.subscribed,
        # A group without client-side allocation has no strategy: its allocation mode (BROADCAST, BROKER) says so.
        analysis.strategy if analysis.allocation == CLIENT_SIDE else analysis.allocation,
        ",".join(lines),
        analysis.views_diverge,
        tuple(sorted({e.anomaly for e in state.episodes.values()})),
        json.dumps(details, sort_keys=True, separators=(",", ":")),
    )


def group_summary(analysis: Analysis, state: GroupState) -> GroupSummary:
    """The group's ``GroupSummary`` after an analysis (its metrics and status row)."""
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


def assignment_outcomes(analysis: Analysis, state: GroupState, time_ms: int) -> list[Outcome]:
    """A new generation's expected assignment per client and topic, and one withdrawal per share gone since
    the last generation; ``state.assigned`` becomes the new shares' clients."""
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


def group_gone_outcomes(group: str, state: GroupState, time_ms: int) -> list[Outcome]:
    """A group whose last channel left: its episodes closed, its shares withdrawn, its polled views gone."""
    records: list[Outcome] = [EpisodeTransition(t, state.generation) for t in close_all(state.episodes, time_ms)]
    for topic, clients in state.assigned.items():
        records += [AssignmentWithdrawn(group, topic, c, state.generation, time_ms) for c in clients]
    for topic, keys in sorted(state.holder_rows.items()):
        for key in keys:
            broker, _, queue_id = key.rpartition("/")
            records.append(QueueHoldersGone(group, topic, broker, int(queue_id), time_ms))
    for broker, view in sorted(state.membership.views.items()):
        if view.poll is not None:  # the group is gone from every broker: so is its polled view
            records.append(BrokerViewGone(group, broker, time_ms))
    records.append(GroupGone(group, time_ms))
    return records
