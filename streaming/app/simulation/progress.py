"""The simulated fleet's offsets: what its brokers store, what its groups commit, who holds each queue.

Per queue a broker offset that grows at the scenario's per-topic write rate (nothing is stored on a broker whose
sends fail); per group and queue a committed offset that the queue's holders advance at the group's consume rate.
The holders are the members alive at the time whose own allocation (their strategy over cidAll as the first
broker lists it, which keeps a crashed member until its channel expires) gives them the queue: an orphaned
queue's offset stands still, a crashed member's queues wait until the broker expires it, a stuck member holds
its queues without advancing them. From this ground truth: ``consume_progress`` samples, the holders'
``ProcessQueueInfo`` for ``reported_assignment``, and ``ProgressFacts``, what a monitor should conclude.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from streaming.contract.events import EventType
from streaming.domain.allocation.strategies import AllocationStrategy, strategy_from_name
from streaming.domain.progress.verdict import DEFAULT_SETTINGS
from streaming.domain.queues import MessageQueue, sorted_client_ids, sorted_queues

if TYPE_CHECKING:
    from streaming.app.simulation.fleet import Group, Member, Scenario

EXPIRY_MS = 120_000  # the broker's channelExpiredTimeout: a silent channel is removed this long after its last beat
HEARTBEAT_MS = 30_000
PROGRESS_INTERVAL_MS = DEFAULT_SETTINGS.sample_interval_ms  # the collector's progress cadence
DEFAULT_CONSUME_RATE = 50.0  # messages per second and queue a group's holder consumes: ahead of every writer
MESSAGE_KIB = 1  # every simulated message is 1 KiB (cachedMsgSizeInMiB)
QUEUES_PER_EVENT = 200  # a sample's queues per event: far inside the contract's 2,000 items and 64 KiB
LOCK_RENEW_MS = 20_000  # an orderly consumer renews its queues' broker locks this often (REBALANCE_LOCK_INTERVAL)
COLLECTOR = "simulate"

QueueRef = tuple[str, str, int]  # (topic, broker, queue id)


@dataclass(frozen=True)
class Sample:
    """One group's queue at one progress sample, with the members holding it then (their indices)."""

    at_ms: int
    broker_offset: int
    consumer_offset: int
    holders: tuple[int, ...]
    time_lag_s: float = 0.0  # how long the first unconsumed message has waited (0: none waits)

    @property
    def lag(self) -> int:
        return max(0, self.broker_offset - self.consumer_offset)


@dataclass
class _Committed:
    """A group's position in one queue."""

    offset: int
    last_consume_ms: int
    consumed: int = 0  # since the last sample (consume TPS)


@dataclass(frozen=True)
class ProgressFacts:
    """What the simulator's own ground truth says at its last sample (``at_ms``): each (group, queue)'s lag,
    the confirmed orphans (no holder for the orphan samples, a backlog, in a group with a live member), the
    queues whose one holder is stuck with a backlog (-> its client id), and the groups with no live member whose
    queues have a backlog (-> the backlog). An idle queue (nothing written, nothing waiting) is in none of them."""

    at_ms: int | None
    lag: dict[tuple[str, QueueRef], int]
    orphans: frozenset[tuple[str, QueueRef]]
    stuck: dict[tuple[str, QueueRef], str]
    offline: dict[str, int]
    # With running info reported, held through the last window (judged at each of its samples over the window
    # that sample ends): queues messages reach that two or more members list, whatever their lag (double); with a
    # backlog at every sample, queues consumed while no member lists them (hidden) and consumed more slowly than
    # written, the first unconsumed message older than the slow threshold at every sample (slow).
    hidden: frozenset[tuple[str, QueueRef]] = frozenset()
    double: frozenset[tuple[str, QueueRef]] = frozenset()
    slow: frozenset[tuple[str, QueueRef]] = frozenset()
    # queues whose committed offset a member set back (an offset reset), at any time so far
    rewound: frozenset[tuple[str, QueueRef]] = frozenset()


def alive(member: Member, offset_ms: int) -> bool:
    """The member runs at ``offset_ms`` after the start (at tick granularity, as the fleet heartbeats)."""
    if offset_ms < member.joins_ms:
        return False
    if member.leaves_ms is not None and offset_ms >= member.leaves_ms:
        return False
    return member.crashes_ms is None or offset_ms < member.crashes_ms


def stuck(member: Member, offset_ms: int) -> bool:
    return member.stuck_from_ms is not None and offset_ms >= member.stuck_from_ms


def last_heartbeat(member: Member, before_ms: int, tick_ms: int) -> int | None:
    """The offset of the member's last heartbeat tick before ``before_ms`` (the fleet's heartbeat rule)."""
    last = None
    for offset in range(0, before_ms, tick_ms):
        if offset >= member.joins_ms and (offset - member.joins_ms) % HEARTBEAT_MS < tick_ms:
            last = offset
    return last


class ProgressModel:
    """The offsets of ``scenario``'s queues and groups from ``start_ms``, advanced tick by tick (``tick``)."""

    def __init__(
        self,
        scenario: Scenario,
        start_ms: int,
        seed: int,
        queues_per_broker: int,
        tick_ms: int,
        interval_ms: int = PROGRESS_INTERVAL_MS,
    ) -> None:
        if interval_ms < 0 or (interval_ms and interval_ms % tick_ms):
            raise ValueError(f"the progress interval must be 0 (none) or a multiple of the {tick_ms} ms tick")
        self.scenario, self.start_ms, self.tick_ms, self.interval_ms = scenario, start_ms, tick_ms, interval_ms
        self.rng = random.Random(f"progress-{seed}")  # its own: the fleet's other events do not move
        self.view_broker = scenario.brokers[0]  # clients take cidAll from one broker; the fleet's first
        self.mq_all = {
            topic: sorted_queues(MessageQueue(topic, b, q) for b in scenario.brokers for q in range(queues_per_broker))
            for topic in scenario.topics
        }
        self.broker_offsets: dict[QueueRef, int] = {}
        self.stored: dict[QueueRef, list[tuple[int, int]]] = {}  # (time, broker offset then), oldest first
        for topic in scenario.topics:
            for mq in self.mq_all[topic]:
                ref = mq.as_tuple()
                self.broker_offsets[ref] = self.rng.randint(1_000, 50_000)
                self.stored[ref] = [(start_ms, self.broker_offsets[ref])]
        self.group_topics = {
            g.name: tuple(t for t in scenario.topics if any(t in m.topics for m in g.members)) for g in scenario.groups
        }
        self.committed: dict[str, dict[QueueRef, _Committed]] = {
            g.name: {
                mq.as_tuple(): _Committed(self.broker_offsets[mq.as_tuple()], start_ms)
                for t in self.group_topics[g.name]
                for mq in self.mq_all[t]
            }
            for g in scenario.groups
        }
        self.last_beats = {
            id(m): last_heartbeat(m, m.crashes_ms, tick_ms)
            for g in scenario.groups
            for m in g.members
            if m.crashes_ms is not None
        }
        self.samples: dict[str, dict[QueueRef, deque[Sample]]] = {
            # two windows less a sample: each of the last window's samples ends a whole window (``facts``)
            g.name: {ref: deque(maxlen=2 * DEFAULT_SETTINGS.window - 1) for ref in self.committed[g.name]}
            for g in scenario.groups
        }
        self._shares: dict[tuple[str, tuple[bool, ...], tuple[bool, ...]], dict[QueueRef, tuple[int, ...]]] = {}
        self.cursor_ms = start_ms
        self.last_sample_ms: int | None = None
        self.rewound: set[tuple[str, QueueRef]] = set()  # queues whose committed offset a member set back

    # -- ground truth ---------------------------------------------------------------------------------

    def registered(self, member: Member, offset_ms: int) -> bool:
        """Listed by the view broker: from its first heartbeat to its UNREGISTER, or to its channel's expiry."""
        if self.view_broker in member.hidden_from or offset_ms < member.joins_ms:
            return False
        if member.leaves_ms is not None and offset_ms >= member.leaves_ms - member.leaves_ms % self.tick_ms:
            return False
        if member.crashes_ms is None or offset_ms < member.crashes_ms:
            return True
        beat = self.last_beats[id(member)]
        return beat is not None and offset_ms <= beat + EXPIRY_MS

    def holders(self, group: Group, offset_ms: int) -> dict[QueueRef, tuple[int, ...]]:
        """Each queue of the group's topics -> the indices of the members holding it at ``offset_ms``."""
        running = tuple(alive(m, offset_ms) for m in group.members)
        listed = tuple(self.registered(m, offset_ms) for m in group.members)
        key = (group.name, running, listed)
        if key not in self._shares:
            cid_all = sorted_client_ids(m.client_id for m, on in zip(group.members, listed, strict=True) if on)
            held: dict[QueueRef, list[int]] = {ref: [] for ref in self.committed[group.name]}
            for index, member in enumerate(group.members):
                if not running[index] or member.client_id not in cid_all:
                    continue
                strategy = _strategy(member)
                for topic in member.topics:
                    for mq in strategy.allocate(group.name, member.client_id, self.mq_all[topic], cid_all) or ():
                        held[mq.as_tuple()].append(index)
            self._shares[key] = {ref: tuple(indices) for ref, indices in held.items()}
        return self._shares[key]

    def store_time(self, ref: QueueRef, offset: int) -> int:
        """When the message at ``offset`` of the queue was stored (the first write position past it)."""
        history = self.stored[ref]
        for at_ms, position in history:
            if position > offset:
                return at_ms
        return history[-1][0]

    # -- one tick -------------------------------------------------------------------------------------

    def tick(self, t: int, reports: bool) -> Iterator[dict[str, Any]]:
        """Advance the offsets to ``t`` and yield the tick's samples (and, when ``reports``, the members'
        reported assignments) on the progress cadence."""
        offset = t - self.start_ms
        seconds = (t - self.cursor_ms) / 1000
        self.cursor_ms = t
        if seconds > 0:
            self._write(t, offset, seconds)
            for group in self.scenario.groups:
                self._consume(group, t, offset, seconds)
            self._forget()
        if self.interval_ms and offset > 0 and offset % self.interval_ms == 0:
            self.last_sample_ms = t
            for group in self.scenario.groups:
                yield from self._sample(group, t, offset)
                if reports:
                    yield from self._reports(group, t, offset)

    def _write(self, t: int, offset: int, seconds: float) -> None:
        for ref in self.broker_offsets:
            rate = self.scenario.write_rates.get(ref[0], 0.0)
            down_from = self.scenario.down_brokers.get(ref[1])
            if rate <= 0 or (down_from is not None and offset >= down_from):
                continue
            written = round(rate * seconds * self.rng.uniform(0.5, 1.5))
            if written:
                self.broker_offsets[ref] += written
                self.stored[ref].append((t, self.broker_offsets[ref]))

    def _consume(self, group: Group, t: int, offset: int, seconds: float) -> None:
        rate = self.scenario.consume_rates.get(group.name, DEFAULT_CONSUME_RATE)
        for ref, indices in self.holders(group, offset).items():
            position = self.committed[group.name][ref]
            for i in indices:
                at = group.members[i].rewinds_at_ms
                if at is not None and offset - seconds * 1000 < at <= offset:  # the reset falls in this tick
                    position.offset -= group.members[i].rewind_by
                    self.rewound.add((group.name, ref))
            if not any(not stuck(group.members[i], offset) for i in indices):
                continue  # nobody holds it, or only stuck holders: the committed offset stands still
            target = min(self.broker_offsets[ref], position.offset + int(rate * seconds))
            if target > position.offset:
                position.consumed += target - position.offset
                position.offset, position.last_consume_ms = target, t

    def _forget(self) -> None:
        """Drop write history no group of the fleet can still need (every committed offset is past it)."""
        for ref, history in self.stored.items():
            needed = min((c[ref].offset for c in self.committed.values() if ref in c), default=self.broker_offsets[ref])
            keep = 0
            while keep + 1 < len(history) and history[keep + 1][1] <= needed - 1:
                keep += 1
            if keep:
                del history[:keep]

    # -- events ---------------------------------------------------------------------------------------

    def _sample(self, group: Group, t: int, offset: int) -> Iterator[dict[str, Any]]:
        held = self.holders(group, offset)
        rows: dict[str, list[dict[str, Any]]] = {b: [] for b in self.scenario.brokers}
        consumed: dict[str, int] = dict.fromkeys(self.scenario.brokers, 0)
        for ref, position in self.committed[group.name].items():
            broker_offset = self.broker_offsets[ref]
            waited = (t - self.store_time(ref, position.offset)) / 1000 if broker_offset > position.offset else 0.0
            self.samples[group.name][ref].append(Sample(t, broker_offset, position.offset, held[ref], waited))
            consumed[ref[1]] += position.consumed
            position.consumed = 0
            pulled = [self._pulled_to(group.members[i], ref, position.offset, offset) for i in held[ref]]
            rows[ref[1]].append(
                {
                    "topic": ref[0],
                    "queue_id": ref[2],
                    "broker_offset": broker_offset,
                    "consumer_offset": position.offset,
                    "pull_offset": max(pulled, default=position.offset),
                    "last_timestamp": self.store_time(ref, position.offset - 1) if position.offset > 0 else 0,
                }
            )
        for broker, queues in rows.items():
            tps = round(consumed[broker] * 1000 / self.interval_ms, 2)
            for first in range(0, max(len(queues), 1), QUEUES_PER_EVENT):
                yield {
                    "type": EventType.CONSUME_PROGRESS,
                    "schema_version": 1,
                    "event_time": t,
                    "group": group.name,
                    "broker": broker,
                    "collector": COLLECTOR,
                    "consume_tps": tps,
                    "queues": queues[first : first + QUEUES_PER_EVENT],
                }

    def _pulled_to(self, member: Member, ref: QueueRef, committed: int, offset: int) -> int:
        """The next offset the holder pulls: everything stored, or for a stuck holder up to the span limit."""
        stored = self.broker_offsets[ref]
        if stuck(member, offset):
            return min(stored, committed + DEFAULT_SETTINGS.consume_concurrently_max_span + 1)
        return stored

    def process_queue_info(self, group: Group, index: int, ref: QueueRef, t: int) -> dict[str, Any]:
        """The member's ``ProcessQueueInfo`` of a queue it holds at ``t``, consistent with the offsets: a healthy
        holder has pulled everything stored and caches what it has not consumed yet; a stuck one caches the
        message at its committed offset (which never completes, while the ones after it do) and what it pulled
        after it, up to the span past which the client stops pulling."""
        member, offset = group.members[index], t - self.start_ms
        committed = self.committed[group.name][ref]
        pulled_to = self._pulled_to(member, ref, committed.offset, offset)
        waiting = pulled_to - committed.offset
        if stuck(member, offset) and waiting > 0:
            count = 1
            last_pull = t if pulled_to == self.broker_offsets[ref] else self.store_time(ref, pulled_to - 1)
            last_consume = max(self.stored[ref][-1][0], self.start_ms + (member.stuck_from_ms or 0))
        else:
            count, last_pull, last_consume = waiting, t, committed.last_consume_ms
        info: dict[str, Any] = {
            "broker": ref[1],
            "queue_id": ref[2],
            "dropped": False,
            "commit_offset": committed.offset,
            "cached_msg_count": count,
            "cached_msg_size_mib": count * MESSAGE_KIB // 1024,
            "cached_msg_min_offset": committed.offset if waiting > 0 else 0,
            "cached_msg_max_offset": pulled_to - 1 if waiting > 0 else 0,
            "locked": group.orderly,
            "last_lock_timestamp": t - offset % LOCK_RENEW_MS if group.orderly else 0,
            "last_pull_timestamp": last_pull,
            "last_consume_timestamp": last_consume,
        }
        return info

    def _reports(self, group: Group, t: int, offset: int) -> Iterator[dict[str, Any]]:
        held = self.holders(group, offset)
        for index, member in enumerate(group.members):
            if not alive(member, offset):
                continue
            for topic in member.topics:
                mine = [ref for ref in self.committed[group.name] if ref[0] == topic and index in held[ref]]
                if not member.lists_queues:
                    mine = []
                yield {
                    "type": EventType.REPORTED_ASSIGNMENT,
                    "schema_version": 1,
                    "event_time": t,
                    "group": group.name,
                    "client_id": member.client_id,
                    "topic": topic,
                    "consume_orderly": group.orderly,
                    "queues": [self.process_queue_info(group, index, ref, t) for ref in mine],
                }

    # -- what a monitor should conclude ---------------------------------------------------------------

    def facts(self) -> ProgressFacts:
        """``ProgressFacts`` at the last sample, from the samples the model took (its own ground truth)."""
        orphan_samples = DEFAULT_SETTINGS.orphan_samples
        lag: dict[tuple[str, QueueRef], int] = {}
        orphans: set[tuple[str, QueueRef]] = set()
        hidden: set[tuple[str, QueueRef]] = set()
        double: set[tuple[str, QueueRef]] = set()
        slow: set[tuple[str, QueueRef]] = set()
        stuck_by: dict[tuple[str, QueueRef], str] = {}
        offline: dict[str, int] = {}
        if self.last_sample_ms is None:
            return ProgressFacts(None, lag, frozenset(), stuck_by, offline)
        at = self.last_sample_ms - self.start_ms
        for group in self.scenario.groups:
            live = any(alive(m, at) for m in group.members)
            for ref, samples in self.samples[group.name].items():
                last = samples[-1]
                lag[(group.name, ref)] = last.lag
                recent = list(samples)[-orphan_samples:]
                if live and last.lag > 0 and len(recent) == orphan_samples and not any(s.holders for s in recent):
                    orphans.add((group.name, ref))
                if last.lag > 0 and len(last.holders) == 1 and stuck(group.members[last.holders[0]], at):
                    stuck_by[(group.name, ref)] = group.members[last.holders[0]].client_id
                if self.scenario.reports and (group.name, ref) not in orphans:
                    # a state that held through the last window: judged at each of its samples, over the window
                    # that sample ends (a moment's verdict is no fact a page waits for)
                    kept, size = list(samples), DEFAULT_SETTINGS.window
                    verdicts = {self._judged(group, kept[end - size : end]) for end in range(size, len(kept) + 1)}
                    judged = verdicts.pop() if len(kept) == 2 * size - 1 and len(verdicts) == 1 else None
                    if judged is not None:
                        {"hidden": hidden, "double": double, "slow": slow}[judged].add((group.name, ref))
            backlog = sum(lag[(group.name, ref)] for ref in self.samples[group.name])
            if not live and backlog > 0:
                offline[group.name] = backlog
        return ProgressFacts(
            self.last_sample_ms,
            lag,
            frozenset(orphans),
            stuck_by,
            offline,
            frozenset(hidden),
            frozenset(double),
            frozenset(slow),
            frozenset(self.rewound),
        )

    @staticmethod
    def _judged(group: Group, window: list[Sample]) -> str | None:
        """double for a queue messages reach that two or more members list at the last samples, whatever its
        lag (both consume every message); hidden or slow for a queue whose backlog lasted the whole window; as
        the members' reports show it (a member whose running info lists no queue holds none of them there); else
        None."""
        settings = DEFAULT_SETTINGS
        if len(window) < settings.window:
            return None
        listed = [tuple(i for i in s.holders if group.members[i].lists_queues) for s in window]
        idle = all(s.lag == 0 for s in window) and len({s.broker_offset for s in window}) == 1
        if not idle and all(len(holders) >= 2 for holders in listed[-settings.double_owned_samples :]):
            return "double"
        if any(s.lag == 0 for s in window):
            return None
        recent = window[-settings.orphan_samples :]
        if all(not holders for holders in listed[-settings.orphan_samples :]):
            return "hidden" if len({s.consumer_offset for s in recent}) > 1 else None
        advanced = window[-1].consumer_offset > window[0].consumer_offset
        rising = all(later.lag >= earlier.lag for earlier, later in zip(window, window[1:], strict=False))
        if advanced and rising and all(s.time_lag_s > settings.slow_time_lag_s for s in window):
            return "slow"
        return None


def _strategy(member: Member) -> AllocationStrategy:
    return strategy_from_name(member.strategy or "AVG")


def fact_lines(facts: ProgressFacts, start_ms: int) -> list[str]:
    """The facts as lines for a person comparing them with the monitor's consume progress."""
    if facts.at_ms is None:
        return ["  consume progress: no sample yet"]
    lines = [f"  consume progress at +{(facts.at_ms - start_ms) // 1000} s (the simulator's own offsets):"]
    for group, ref in sorted(facts.orphans):
        lines.append(f"  expect: ORPHAN_CONFIRMED {_where(group, ref)}, lag {facts.lag[(group, ref)]}")
    for (group, ref), client in sorted(facts.stuck.items()):
        lines.append(f"  expect: STUCK_HOLDER {_where(group, ref)} held by {client}, lag {facts.lag[(group, ref)]}")
    kinds = (("HIDDEN_CONSUMER", facts.hidden), ("DOUBLE_OWNED", facts.double), ("SLOW", facts.slow))
    for name, found in (*kinds, ("REWIND (once)", facts.rewound)):
        for group, ref in sorted(found):
            lines.append(f"  expect: {name} {_where(group, ref)}, lag {facts.lag[(group, ref)]}")
    for group, backlog in sorted(facts.offline.items()):
        lines.append(f"  expect: {group} offline (no live member) with a backlog of {backlog}")
    totals: dict[str, int] = {}
    for (group, _), lag in facts.lag.items():
        totals[group] = totals.get(group, 0) + lag
    lines.append("  lag by group: " + ", ".join(f"{g} {n}" for g, n in sorted(totals.items())))
    return lines


def _where(group: str, ref: QueueRef) -> str:
    return f"{group} {ref[0]}@{ref[1]}#{ref[2]}"
