"""Poll runs: a broker's identical polls of a group in one batch, applied as few polls as give the same result.

``plan_polls`` says, per run, which of its polls are applied: all of them, or, where that is exact, the first,
the last and as few between as keep the view fresh throughout. Why the result is exact:
``docs/design/poll-runs.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import NamedTuple

from streaming.domain.consumers import membership as ms
from streaming.domain.consumers.group_state import GroupState
from streaming.domain.consumers.polled_views import POLLS, ConnectionPoll, NotedPoll, lists_connections


class PollRun(NamedTuple):
    """A broker's identical polls of a group in one batch: ``event`` is the first (parsed or noted), ``times`` every
    one's event time in the order they apply (``times[0]`` is the event's own)."""

    event: ConnectionPoll | NotedPoll
    times: tuple[int, ...]


class PollFacts(NamedTuple):
    """What planning reads of a group the shard holds: whether a view of it with channels is fed by heartbeats, and
    each polled view that is not stale, its last poll's (time, stale_after_ms)."""

    fed: bool
    polled: Mapping[str, tuple[int, int]]


def poll_facts(state: GroupState) -> PollFacts:
    """A decoded group's ``PollFacts``."""
    views = state.membership.views
    fed = any(v.poll is None and v.channels for v in views.values())
    polled = {b: (v.poll.polled_at_ms, v.poll.stale_after_ms) for b, v in views.items() if v.poll and not v.poll.stale}
    return PollFacts(fed, polled)


def plan_polls(
    facts: Callable[[str], PollFacts | None],
    settles: Callable[[PollRun], bool],
    runs: Sequence[PollRun],
    others: Iterable[ms.ChannelEvent | ConnectionPoll | NotedPoll],
) -> list[list[int]]:
    """Per run, the indices into its ``times`` of the polls to apply (in order); ``others`` are the batch's channel
    events (heartbeat runs' included) and its polls outside runs; ``facts``: a group's ``PollFacts`` (None: the
    shard holds no such group); ``settles``: ``first_settles`` of a run.

    A run is thinned (``_thinned``) when every condition below holds, else every poll of it is applied:

    * it has connections, and no other poll of its view is in the batch;
    * its group has no channel event in the batch and no view fed by heartbeats (no channel expiry to find);
    * its view, as the shard holds it, was last polled no later than the first poll, and has no removal of a polled
      channel after the first poll and no other channel updated after it (the first poll leaves the view as every
      later one of the run finds it);
    * no polled view of its group turns stale by the end of the group's last run, given the batch's polls.
    """
    if not runs:
        return []
    excluded = _excluded_groups(facts, runs, others)
    plans: list[list[int]] = []
    for run in runs:
        event = run.event
        if len(run.times) < 3 or not lists_connections(event) or event.group in excluded or not settles(run):
            plans.append(list(range(len(run.times))))
        else:
            plans.append(_thinned(run.times, event.stale_after_ms))
    return plans


def _thinned(times: Sequence[int], stale_after_ms: int) -> list[int]:
    """The first and last poll, and between them the latest poll each time the next would be more than
    ``stale_after_ms`` after the last one kept (the view then never waits longer for a poll than it did)."""
    kept = [0]
    for i in range(1, len(times) - 1):
        if times[i + 1] - times[kept[-1]] > stale_after_ms:
            kept.append(i)
    return [*kept, len(times) - 1]


def first_settles(state: GroupState | None, run: PollRun) -> bool:
    """After the run's first poll the view is exactly its connections: the poll is not older than the view's last
    one, holds out no channel removed after it, and keeps no other channel updated after it (each would change at a
    later poll of the run). The run's poll is parsed (``NotedPoll.parsed``: its connections are read)."""
    event = run.event
    assert isinstance(event, ConnectionPoll), "a noted poll is parsed before its connections are read"
    view = state.membership.views.get(event.broker) if state is not None else None
    if view is None:
        return True
    first = run.times[0]
    if view.poll is not None and first < view.poll.polled_at_ms:
        return False  # older than the view's last poll: ignored (a late poll), unlike a later poll of the run
    listed = {c.channel for c in event.connections}
    if any(view.removed_at_ms.get(name, first) > first for name in listed):
        return False
    return all(name in listed or ch.last_update_ms <= first for name, ch in view.channels.items())


def _excluded_groups(
    facts: Callable[[str], PollFacts | None],
    runs: Sequence[PollRun],
    others: Iterable[ms.ChannelEvent | ConnectionPoll | NotedPoll],
) -> set[str]:
    """Groups whose runs are applied poll by poll: a channel event of the group in the batch, a view of it fed by
    heartbeats, a view polled by more than one run or by a run and another poll, or a polled view that turns
    stale by the end of the group's last run."""
    excluded: set[str] = set()
    polls: dict[tuple[str, str], list[tuple[int, int]]] = {}  # view -> (time, stale_after) of each of its polls
    run_views: dict[tuple[str, str], int] = {}
    ends: dict[str, int] = {}
    for run in runs:
        view = (run.event.group, run.event.broker)
        run_views[view] = run_views.get(view, 0) + 1
        polls.setdefault(view, []).extend((t, run.event.stale_after_ms) for t in run.times)
        ends[run.event.group] = max(run.times[-1], ends.get(run.event.group, run.times[-1]))
    for other in others:
        if isinstance(other, POLLS):
            view = (other.group, other.broker)
            if view in run_views:
                excluded.add(other.group)
            polls.setdefault(view, []).append((other.event_time_ms, other.stale_after_ms))
        elif other.group in ends:
            excluded.add(other.group)
    excluded |= {group for (group, _), count in run_views.items() if count > 1}
    for group, end in ends.items():
        if group in excluded:
            continue
        known = facts(group)
        if known is not None and known.fed:
            excluded.add(group)
            continue
        held = known.polled if known is not None else {}
        # A stale view polled in the batch starts stale (None); one not polled cannot turn stale.
        for broker in {*held, *(b for g, b in polls if g == group)}:
            if _turns_stale_by(held.get(broker), polls.get((group, broker), []), end):
                excluded.add(group)
                break
    return excluded


def _turns_stale_by(last: tuple[int, int] | None, polls: list[tuple[int, int]], end_ms: int) -> bool:
    """Whether a view last polled at ``last`` (time, stale_after; None: stale or never polled) and polled at
    ``polls`` turns stale at or before ``end_ms`` (``PollState.stale_at_ms``: more than stale_after without a poll)."""
    for time_ms, stale_after_ms in sorted(polls):
        if last is not None and time_ms > last[0] + last[1]:
            if last[0] + last[1] + 1 <= end_ms:
                return True
        if last is None or time_ms >= last[0]:
            last = (time_ms, stale_after_ms)
    return last is not None and last[0] + last[1] + 1 <= end_ms
