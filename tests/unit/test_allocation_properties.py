"""Properties of the allocation strategies and of the whole-group form (Hypothesis), plus worked examples."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from streaming.domain.allocation.group import allocate_group
from streaming.domain.allocation.strategies import (
    Averagely,
    AveragelyByCircle,
    ByConfig,
    ByMachineRoom,
    ConsistentHash,
    MachineRoomNearby,
    md5_hash,
)
from streaming.domain.queues import MessageQueue, sorted_client_ids, sorted_queues

client_ids = st.one_of(
    st.builds(
        lambda a, p, n: f"10.0.{a}.1@{p}#{n}", st.integers(0, 255), st.integers(1, 99999), st.integers(0, 10**15)
    ),
    st.builds(lambda p: f"172.17.0.1@{p}", st.integers(1, 5)),
    st.sampled_from(["IDC1-c0", "IDC1-c1", "IDC2-c0", "c\u00fc1", "x"]),
)
queues = st.lists(
    st.builds(
        MessageQueue,
        st.sampled_from(["T", "%RETRY%G"]),
        st.sampled_from(["broker-a", "broker-b", "IDC1@b", "IDC2-b"]),
        st.integers(0, 15),
    ),
    min_size=1,
    max_size=40,
    unique=True,
)
STRATEGIES = [
    Averagely(),
    AveragelyByCircle(),
    ConsistentHash(3),
    ConsistentHash(0),
    MachineRoomNearby(Averagely()),
    ByMachineRoom(frozenset({"IDC1"})),
]


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(client_ids, min_size=1, max_size=12), queues, st.sampled_from(STRATEGIES))
def test_whole_group_equals_one_allocate_call_per_client(cids, mqs, strategy):
    group = allocate_group(strategy, cids, mqs)
    sorted_mqs, sorted_cids = sorted_queues(mqs), sorted_client_ids(cids)
    expected_counts = Counter()
    for cid in set(cids):
        share = strategy.allocate("G", cid, sorted_mqs, sorted_cids)
        assert list(group.shares[cid]) == share
        for mq in set(share):
            expected_counts[mq] += cids.count(cid)
    assert group.owner_counts == tuple(expected_counts[mq] for mq in group.mq_all)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    st.lists(client_ids, min_size=1, max_size=12, unique=True),
    queues,
    st.sampled_from([Averagely(), AveragelyByCircle(), ConsistentHash(5), MachineRoomNearby(AveragelyByCircle())]),
)
def test_unique_ids_give_disjoint_shares_covering_every_queue(cids, mqs, strategy):
    group = allocate_group(strategy, cids, mqs)
    assert group.owner_counts == (1,) * len(mqs)
    assert sum(len(share) for share in group.shares.values()) == len(mqs)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.lists(client_ids, min_size=1, max_size=12, unique=True), queues)
def test_averagely_is_balanced_within_one_queue(cids, mqs):
    sizes = [len(s) for s in allocate_group(Averagely(), cids, mqs).shares.values()]
    assert max(sizes) - min(sizes) <= 1


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.lists(client_ids, min_size=1, max_size=12, unique=True), queues)
def test_machine_room_consumes_exactly_the_qualifying_queues_once(cids, mqs):
    group = allocate_group(ByMachineRoom(frozenset({"IDC1"})), cids, mqs)
    for mq, count in zip(group.mq_all, group.owner_counts, strict=True):
        assert count == (1 if mq.broker_name == "IDC1@b" else 0)


def test_duplicate_ids_with_circle_orphan_and_double_own_exactly_as_the_java_client():
    # 8 queues, cidAll [c0, c2, c2] after sorting: indexOf gives both "c2" channels index 1, so both
    # compute queues {1, 4, 7} and nobody computes index 2's {2, 5}.
    mqs = [MessageQueue("T", "broker-a", i) for i in range(8)]
    group = allocate_group(AveragelyByCircle(), ["10.0.0.2@1", "10.0.0.0@1", "10.0.0.2@1"], mqs)
    assert [mq.queue_id for mq in group.orphaned()] == [2, 5]
    assert [mq.queue_id for mq in group.double_owned()] == [1, 4, 7]


def test_duplicate_ids_with_averagely():
    # 8 queues over 3 channels: sizes 3, 3, 2. The duplicated id takes block 1 (queues 3-5) twice;
    # block 2 (queues 6, 7) is orphaned.
    mqs = [MessageQueue("T", "broker-a", i) for i in range(8)]
    group = allocate_group(Averagely(), ["172.17.0.1@1", "10.0.0.5@7", "172.17.0.1@1"], mqs)
    assert [mq.queue_id for mq in group.orphaned()] == [6, 7]
    assert [mq.queue_id for mq in group.double_owned()] == [3, 4, 5]


def test_consistent_hash_with_zero_virtual_nodes_gives_everyone_nothing():
    group = allocate_group(ConsistentHash(0), ["a", "b"], [MessageQueue("T", "b", i) for i in range(4)])
    assert all(share == () for share in group.shares.values()) and group.owner_counts == (0, 0, 0, 0)


def test_one_duplicated_id_owns_every_queue_with_consistent_hash():
    group = allocate_group(ConsistentHash(10), ["x@1", "x@1"], [MessageQueue("T", "b", i) for i in range(5)])
    assert group.owner_counts == (2,) * 5


def test_reference_examples():
    q = [MessageQueue("T", "broker-a", i) for i in range(10)]
    cids = ["c0", "c1", "c2", "c3"]
    # 1. semantics 2.2: 10 queues over 4 -> 3, 3, 2, 2 contiguous
    avg = allocate_group(Averagely(), cids, q)
    assert [[m.queue_id for m in avg.shares[c]] for c in cids] == [[0, 1, 2], [3, 4, 5], [6, 7], [8, 9]]
    # 2. semantics 2.3: by circle -> {0,4,8} {1,5,9} {2,6} {3,7}
    circle = allocate_group(AveragelyByCircle(), cids, q)
    assert [[m.queue_id for m in circle.shares[c]] for c in cids] == [[0, 4, 8], [1, 5, 9], [2, 6], [3, 7]]
    # 3. semantics 2.4 golden hashes
    assert md5_hash("MessageQueue [topic=TopicTest, brokerName=broker-a, queueId=0]") == 1987926524
    assert md5_hash("10.0.0.1@1001#1-0") == 1737336764 and md5_hash("c0-0") == 2316876094
    # 4. semantics 2.6: broker-c is never consumed
    mr = [MessageQueue("T", b, i) for b in ("IDC1@broker-a", "IDC2@broker-b", "broker-c") for i in range(3)]
    rooms = allocate_group(ByMachineRoom(frozenset({"IDC1", "IDC2"})), ["c0", "c1"], mr)
    assert [m.broker_name for m in rooms.shares["c0"]] == ["IDC1@broker-a"] * 3
    assert [m.broker_name for m in rooms.shares["c1"]] == ["IDC2@broker-b"] * 3
    # 5. semantics 2.7: nearby over AVG, IDC3 has no consumers and is shared by everyone
    near = [MessageQueue("T", f"{room}-b", i) for room in ("IDC1", "IDC2", "IDC3") for i in range(3)]
    nearby = allocate_group(MachineRoomNearby(Averagely()), ["IDC1-c0", "IDC1-c1", "IDC2-c0"], near)
    as_ids = {c: [(m.broker_name[:4], m.queue_id) for m in s] for c, s in nearby.shares.items()}
    assert as_ids == {
        "IDC1-c0": [("IDC1", 0), ("IDC1", 1), ("IDC3", 0)],
        "IDC1-c1": [("IDC1", 2), ("IDC3", 1)],
        "IDC2-c0": [("IDC2", 0), ("IDC2", 1), ("IDC2", 2), ("IDC3", 2)],
    }
    # 6. CONFIG: the configured list for everyone, even a client not in cidAll
    configured = (q[0], q[1])
    assert ByConfig(configured).allocate("G", "nobody", q, cids) == list(configured)
