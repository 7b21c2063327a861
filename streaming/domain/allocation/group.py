"""The whole group in one pass: what every client of a consumer group computes, without one call per client.

For one group and topic -- cidAll with one entry per channel (duplicates kept) and mqAll -- every distinct
client's share and the number of channels that consume each queue, computed in one pass (contiguous blocks,
strides, one hash ring) for the strategies that allow it, and by calling the strategy per client otherwise.
The result equals the per-client ``allocate`` calls of ``streaming.domain.allocation.strategies``; this is the monitor's
hot path (``bench/bench_allocation.py``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate

from streaming.domain.allocation.strategies import (
    AllocationStrategy,
    Averagely,
    AveragelyByCircle,
    ConsistentHash,
    HashRing,
    averagely_range,
)
from streaming.domain.errors import DomainError
from streaming.domain.javacompat import java_sort_key
from streaming.domain.queues import MessageQueue, sorted_client_ids, sorted_queues


@dataclass(frozen=True)
class GroupAllocation:
    """Every distinct client's share for one group and topic, and each queue's number of consuming channels."""

    strategy: str
    mq_all: tuple[MessageQueue, ...]
    cid_all: tuple[str, ...]
    shares: Mapping[str, tuple[MessageQueue, ...]]
    errors: Mapping[str, DomainError]
    owner_counts: tuple[int, ...]

    def orphaned(self) -> list[MessageQueue]:
        return [mq for mq, count in zip(self.mq_all, self.owner_counts, strict=True) if count == 0]

    def double_owned(self) -> list[MessageQueue]:
        return [mq for mq, count in zip(self.mq_all, self.owner_counts, strict=True) if count >= 2]

    def owners_of(self, mq: MessageQueue) -> list[str]:
        return sorted((cid for cid, share in self.shares.items() if mq in share), key=java_sort_key)

    def owner_counts_for(self, channels_per_client: Mapping[str, int]) -> tuple[int, ...]:
        """Owner counts when only some clients consume (e.g. only the topic's subscribers pull it)."""
        index = {mq: i for i, mq in enumerate(self.mq_all)}
        counts = [0] * len(self.mq_all)
        for cid, share in self.shares.items():
            weight = channels_per_client.get(cid, 0)
            if weight:
                for mq in share:
                    position = index.get(mq)
                    if position is not None:
                        counts[position] += weight
        return tuple(counts)


def allocate_group(
    strategy: AllocationStrategy,
    cid_all: Sequence[str],
    mq_all: Sequence[MessageQueue],
    consumer_group: str = "",
    presorted: bool = False,
) -> GroupAllocation:
    """What every client of the group computes, as ``RebalanceImpl`` calls the strategy (sorted inputs)."""
    mqs = tuple(mq_all) if presorted else tuple(sorted_queues(mq_all))
    cids = tuple(cid_all) if presorted else tuple(sorted_client_ids(cid_all))
    multiplicity = Counter(cids)
    first_index: dict[str, int] = {}
    for i, cid in enumerate(cids):
        first_index.setdefault(cid, i)
    n, m = len(mqs), len(cids)
    try:
        if n and m and isinstance(strategy, Averagely):
            shares, counts = _group_averagely(mqs, first_index, multiplicity, n, m)
            return GroupAllocation(strategy.name, mqs, cids, shares, {}, counts)
        if n and m and isinstance(strategy, AveragelyByCircle):
            shares, counts = _group_by_circle(mqs, cids, first_index, multiplicity, n, m)
            return GroupAllocation(strategy.name, mqs, cids, shares, {}, counts)
        if n and m and isinstance(strategy, ConsistentHash):
            ring = HashRing.build(cids, strategy.virtual_node_count, strategy.charset)
            owners = [ring.route(str(mq), strategy.charset) for mq in mqs]
            by_owner: dict[str, list[MessageQueue]] = {cid: [] for cid in first_index}
            for mq, owner in zip(mqs, owners, strict=True):
                if owner is not None:
                    by_owner[owner].append(mq)
            counts = tuple(multiplicity[o] if o is not None else 0 for o in owners)
            return GroupAllocation(strategy.name, mqs, cids, {c: tuple(q) for c, q in by_owner.items()}, {}, counts)
    except DomainError:
        pass  # fall through: the generic path records the error per client
    return _group_generic(strategy, mqs, cids, multiplicity, consumer_group)


def _counts_from_ranges(n: int, ranges: list[tuple[int, int, int]]) -> tuple[int, ...]:
    diff = [0] * (n + 1)
    for start, end, weight in ranges:
        if end > start:
            diff[start] += weight
            diff[end] -= weight
    return tuple(accumulate(diff[:n]))


def _group_averagely(
    mqs: tuple[MessageQueue, ...], first_index: Mapping[str, int], multiplicity: Counter[str], n: int, m: int
) -> tuple[dict[str, tuple[MessageQueue, ...]], tuple[int, ...]]:
    shares: dict[str, tuple[MessageQueue, ...]] = {}
    ranges = []
    for cid, index in first_index.items():
        start, end = averagely_range(index, n, m)
        shares[cid] = mqs[start:end]
        ranges.append((start, end, multiplicity[cid]))
    return shares, _counts_from_ranges(n, ranges)


def _group_by_circle(
    mqs: tuple[MessageQueue, ...],
    cids: tuple[str, ...],
    first_index: Mapping[str, int],
    multiplicity: Counter[str],
    n: int,
    m: int,
) -> tuple[dict[str, tuple[MessageQueue, ...]], tuple[int, ...]]:
    shares = {cid: mqs[index::m] for cid, index in first_index.items()}
    # Position p of cidAll is served only if it is its client's first occurrence (indexOf).
    per_position = [multiplicity[cid] if first_index[cid] == p else 0 for p, cid in enumerate(cids)]
    counts = tuple((per_position * (n // m + 1))[:n])
    return shares, counts


def _group_generic(
    strategy: AllocationStrategy,
    mqs: tuple[MessageQueue, ...],
    cids: tuple[str, ...],
    multiplicity: Counter[str],
    consumer_group: str,
) -> GroupAllocation:
    shares: dict[str, tuple[MessageQueue, ...]] = {}
    errors: dict[str, DomainError] = {}
    index = {mq: i for i, mq in enumerate(mqs)}
    counts = [0] * len(mqs)
    for cid in multiplicity:
        try:
            share = tuple(strategy.allocate(consumer_group, cid, list(mqs), list(cids)) or ())
        except DomainError as error:
            errors[cid] = error
            share = ()
        shares[cid] = share
        # RebalanceImpl turns the result into a set: a queue listed twice is still consumed once.
        for mq in set(share):
            position = index.get(mq)
            if position is not None:
                counts[position] += multiplicity[cid]
    return GroupAllocation(strategy.name, mqs, cids, shares, errors, tuple(counts))
