"""Heartbeat runs: a channel's identical heartbeats of one batch, applied as few heartbeats as give the same result.

``steady_runs`` says which runs may be applied as their first heartbeat held until their last; ``plan_runs``
applies to a shard's groups what needs no place among the batch's events and returns, per run, the events that
still apply it. Why the result is exact: ``docs/design/heartbeat-runs.md``.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

from streaming.domain.consumers import membership as ms
from streaming.domain.consumers.group_state import GroupState
from streaming.domain.consumers.polled_views import POLLS, ConnectionPoll, NotedPoll
from streaming.domain.vocabulary import ChannelEventKind


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


def plan_runs(
    groups: Mapping[str, GroupState],
    expiry_ms: int,
    runs: Sequence[HeartbeatRun],
    others: Iterable[ms.ChannelEvent | ConnectionPoll | NotedPoll],
) -> list[RunEvents]:
    """Take the batch's heartbeat runs (``others``: its other channel events and polls) before ``apply``: apply what
    needs no place among the batch's events, and return, per run, the events that still apply it.

    * A steady run (``steady_runs``) whose first heartbeat ``repeats`` what the shard holds for its channel,
      within the expiry of the channel's last update: the channel is last updated at the run's end, now.
      Applied in its place, every heartbeat of the run would have done only that, and nothing of the batch
      before the run's end could tell the difference (no scan finds the channel silent, a route finds it
      subscribed either way).
    * Another steady run: its first heartbeat, held until its last (``ChannelEvent.held_until_ms``).
    * Any other run: every heartbeat.

    Besides, each group's latest heartbeat of a steady run is applied: before it the group's cuts and slides
    reach that time in time order, as they would have at the skipped heartbeats, and it prunes the removals they
    would have pruned.
    """
    if not runs:
        return []  # a batch of a fleet the job keeps up with: a heartbeat per channel, no runs
    steady = steady_runs(groups, expiry_ms, runs, others)
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
        if _refreshes_only(groups, expiry_ms, event):
            refreshes.setdefault((event.group, event.broker), {})[event.channel] = last_ms
            plans.append([])
        else:
            plans.append([(0, event._replace(held_until_ms=last_ms))])
    for (group, broker), last_updates in refreshes.items():
        state = groups[group]
        state.membership = ms.refreshed(state.membership, broker, last_updates)
    for i in latest.values():
        run = runs[i]
        plans[i].append((len(run.times) - 1, run.event._replace(event_time_ms=run.times[-1])))
    return plans


def _refreshes_only(groups: Mapping[str, GroupState], expiry_ms: int, event: ms.ChannelEvent) -> bool:
    """The shard holds the heartbeat's channel, not silent by the heartbeat's time, and it ``repeats`` it."""
    state = groups.get(event.group)
    view = state.membership.views.get(event.broker) if state is not None else None
    existing = view.channels.get(event.channel) if view is not None else None
    if view is None or existing is None or not ms.is_live(existing, event.event_time_ms, expiry_ms):
        return False
    return ms.repeats(view, existing, event)


def steady_runs(
    groups: Mapping[str, GroupState],
    expiry_ms: int,
    runs: Sequence[HeartbeatRun],
    others: Iterable[ms.ChannelEvent | ConnectionPoll | NotedPoll],
) -> list[bool]:
    """For each run of the batch: may it be applied as its first heartbeat held until its last, followed
    (at the latest) by a scan at its last, with exactly the effect of applying every one of its heartbeats?
    ``others`` are the batch's other channel events and its polls.

    Applied one by one, every heartbeat after the first must be a steady refresh (``membership._refresh``)
    whose only effect is the channel's last update, and no scan between two of them may find the channel
    silent. That holds when:

    * no gap between two of the run's heartbeats exceeds the expiry;
    * the first heartbeat is applied: the channel has no removal and no update later than it;
    * nothing else of the batch is about the channel, and every channel event of its broker view in the
      batch is a heartbeat with the same subscriptions, so the view's subscription table keeps its topics;
      no poll of the view is in the batch (a poll replaces the view).

    The skipped heartbeats' scans then find nothing of their own channel, and whatever else of the group is
    due at them (another channel's expiry, a cut, a slide) is judged at its own time, in time order, before the
    group's next event (at the latest its last run's last heartbeat), as at the skipped ones; routes and
    reports read the subscriptions as of their own time, so skipping them changes nothing.
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

    others = list(others)  # read twice
    for run in runs:
        note(run.event)
    for event in others:
        if isinstance(event, POLLS):
            view_subscriptions[(event.group, event.broker)] = _MIXED_VIEW
        else:
            note(event)
    return [_is_steady(groups, expiry_ms, run, events_per_channel, view_subscriptions) for run in runs]


def _is_steady(
    groups: Mapping[str, GroupState],
    expiry_ms: int,
    run: HeartbeatRun,
    events_per_channel: Mapping[tuple[str, str, str], int],
    view_subscriptions: Mapping[tuple[str, str], object],
) -> bool:
    event, times = run.event, run.times
    if len(times) < 2 or events_per_channel[(event.group, event.broker, event.channel)] != 1:
        return False
    if max(map(operator.sub, times[1:], times)) > expiry_ms:
        return False  # the channel expires inside the run: the heartbeat after the gap joins it again
    if view_subscriptions[(event.group, event.broker)] is _MIXED_VIEW:
        return False
    state = groups.get(event.group)
    view = state.membership.views.get(event.broker) if state is not None else None
    if view is None:
        return True
    removed_at = view.removed_at_ms.get(event.channel)
    if removed_at is not None and event.event_time_ms < removed_at:
        return False
    existing = view.channels.get(event.channel)
    return existing is None or event.event_time_ms >= existing.last_update_ms
