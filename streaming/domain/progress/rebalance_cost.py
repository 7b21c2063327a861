"""What a generation change cost each queue it moved: hand-off gap, orphaned and double-held time, messages
re-delivered, the lag spike and the recovery, measured on the queue's progress samples.

A ``Handoff`` opens at the first sample whose expected owner differs from the last known one (the queue moved at
the generation change ``t0``), follows the later samples and is final, once, when the lag is back or after a
bound of samples (``final_reason``). Pure: times are the samples'. Definitions: ``docs/design/consume-progress.md``
("Rebalance cost").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from streaming.domain.progress.verdict import QueueSample

# Why a cost row is final.
RECOVERED = "RECOVERED"  # the new owner advanced the offset and the lag is back to its level at t0
SAMPLE_BOUND = "SAMPLE_BOUND"  # ``bound`` samples after t0 without both
MOVED_AGAIN = "MOVED_AGAIN"  # another generation change moved the queue first
UNTRACKED = "UNTRACKED"  # the queue's progress is no longer tracked (no sample for a window, group offline)


@dataclass(frozen=True)
class Handoff:
    """One moved queue's cost so far. Offsets are the broker's consumer offsets unless named otherwise; every
    ``*_ms`` time is a sample's, t0's or a sum of sample intervals (the resolution is the sample interval)."""

    generation: int  # the generation the change made
    t0_ms: int  # the generation change
    old_owner: str
    new_owner: str
    start_ms: int  # the old holder's last progress: the last sample before t0 where the offset advanced or lag was 0
    start_bounded: bool  # no such sample in the window: start_ms is the window's oldest, the gap a lower bound
    lag_at_t0: int | None  # at the last answered sample before t0
    committed_before: int | None  # the furthest committed offset before t0 (broker's, the old holder's commitOffset)
    received_before: int | None  # the furthest offset the old holder had received (pull offset, cachedMsgMaxOffset + 1)
    last_ms: int  # the latest sample (or t0) accounted
    last_offset: int | None  # the latest answered consumer offset
    start_offset: int | None  # the lowest consumer offset from before t0 to the new owner's first advance
    samples: int = 0  # samples at or after t0
    orphaned_ms: int = 0
    double_held_ms: int = 0
    handoff_end_ms: int | None = None  # the new owner held the queue and advanced its offset (or lag 0)
    peak_lag: int | None = None
    recovered_ms: int | None = None  # lag back to lag_at_t0 + allowed_lag, after the hand-off

    def to_json(self) -> list[Any]:
        return list(vars(self).values())

    @classmethod
    def from_json(cls, data: Sequence[Any]) -> Handoff:
        return cls(*data)

    @property
    def handoff_gap_ms(self) -> int | None:
        return None if self.handoff_end_ms is None else self.handoff_end_ms - self.start_ms

    @property
    def rewound(self) -> int | None:
        """Committed messages delivered again: the committed offset went back below its furthest before t0."""
        if self.committed_before is None or self.start_offset is None:
            return None
        return max(0, self.committed_before - self.start_offset)

    @property
    def redelivered_max(self) -> int | None:
        """At most this many messages the old holder received are delivered again to the new one (committed or
        not): the furthest received before t0 above the new owner's start offset. What the old holder pulled after
        its last report or sample is not seen."""
        if self.received_before is None or self.start_offset is None:
            return None
        return max(0, self.received_before - self.start_offset)


def _owner_sample(before: Sequence[QueueSample]) -> QueueSample | None:
    return next((s for s in reversed(before) if s.expected_owner is not None), None)


def open_handoff(
    before: Sequence[QueueSample], sample: QueueSample, changes_ms: Sequence[int], generation: int
) -> Handoff | None:
    """The cost opened by ``sample`` when its expected owner differs from the last known one in ``before`` (the
    queue's earlier samples, oldest first), else None. ``t0``: the latest generation change in ``changes_ms``
    after that earlier sample and not after ``sample``, or ``sample``'s time if none is known."""
    previous = _owner_sample(before)
    old, new = None if previous is None else previous.expected_owner, sample.expected_owner
    if previous is None or old is None or new is None or new == old:
        return None
    within = [t for t in changes_ms if previous.at_ms < t <= sample.at_ms]
    t0 = max(within) if within else sample.at_ms
    earlier = [s for s in before if s.at_ms < t0]
    answered = [s for s in earlier if s.answered]
    start, bounded = earlier[0].at_ms, True
    for i, s in enumerate(answered):
        if s.lag == 0 or (i > 0 and s.consumer_offset > answered[i - 1].consumer_offset):
            start, bounded = s.at_ms, False
    committed: list[int] = [s.consumer_offset for s in answered]
    received: list[int] = [s.pull_offset for s in answered if s.pull_offset is not None]
    for s in earlier:
        for h in s.holders:
            if h.client_id == old and not h.dropped:
                committed.append(h.commit_offset)
                if h.cached_msg_count > 0:
                    received.append(h.cached_msg_max_offset + 1)
    committed_before = max(committed) if committed else None
    received_before = max(committed + received) if committed or received else None
    last_offset = answered[-1].consumer_offset if answered else None
    return Handoff(
        generation,
        t0,
        old,
        new,
        start,
        bounded,
        answered[-1].lag if answered else None,
        committed_before,
        received_before,
        t0,
        last_offset,
        last_offset,
    )


def advance(handoff: Handoff, sample: QueueSample, allowed_lag: int = 0) -> Handoff:
    """The cost after one more sample (at or after t0): the time since the last one orphaned (no holder) or
    double-held (two or more), the new owner's first advance, the peak lag, the recovery."""
    h = handoff
    elapsed = max(0, sample.at_ms - h.last_ms)
    holders = sample.holder_ids()
    open_gap = h.handoff_end_ms is None
    changes: dict[str, Any] = {"samples": h.samples + 1, "last_ms": max(h.last_ms, sample.at_ms)}
    if open_gap:
        if not holders:
            changes["orphaned_ms"] = h.orphaned_ms + elapsed
        elif len(holders) >= 2:
            changes["double_held_ms"] = h.double_held_ms + elapsed
    if sample.answered:
        c = sample.consumer_offset
        advanced = h.last_offset is not None and c > h.last_offset
        if open_gap:
            if h.new_owner in holders and (advanced or sample.lag == 0):
                changes["handoff_end_ms"] = sample.at_ms
            else:
                changes["start_offset"] = c if h.start_offset is None else min(h.start_offset, c)
        changes["peak_lag"] = sample.lag if h.peak_lag is None else max(h.peak_lag, sample.lag)
        changes["last_offset"] = c
        ended = changes.get("handoff_end_ms", h.handoff_end_ms) is not None
        back = h.lag_at_t0 is None or sample.lag <= h.lag_at_t0 + allowed_lag
        if ended and h.recovered_ms is None and back:
            changes["recovered_ms"] = sample.at_ms
    return replace(h, **changes)


def final_reason(handoff: Handoff, bound: int) -> str | None:
    """Why the cost is final now (``RECOVERED``, ``SAMPLE_BOUND``), or None while it is open."""
    if handoff.recovered_ms is not None:
        return RECOVERED
    if handoff.samples >= bound:
        return SAMPLE_BOUND
    return None


__all__ = [
    "MOVED_AGAIN",
    "RECOVERED",
    "SAMPLE_BOUND",
    "UNTRACKED",
    "Handoff",
    "advance",
    "final_reason",
    "open_handoff",
]
