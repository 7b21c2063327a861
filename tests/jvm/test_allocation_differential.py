"""Differential test: our allocation strategies vs the real RocketMQ 4.9.8 and 5.3.3 client classes.

For every strategy, 2,000 Hypothesis-generated cases -- realistic client ids (``IP@PID#nanotime``, old
``IP@PID``, ``172.17.0.1@1`` duplicates, non-ASCII), queues on several brokers (``IDC@broker`` names too),
unsorted inputs as the vectors have them, the current id absent or empty -- are given to the Java ``allocate``
of both client lines (through JPype) and to ours, in the same order; results and exception classes must be
identical.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streaming.domain.allocation.strategies import (
    Averagely,
    AveragelyByCircle,
    ByMachineRoom,
    ConsistentHash,
    MachineRoomNearby,
    RegexResolver,
    SplitResolver,
)
from streaming.domain.errors import DomainError
from streaming.domain.queues import MessageQueue
from tests.support.rocketmq_java_allocation import java_allocate, java_strategy

EXAMPLES = settings(
    max_examples=2000,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

client_id = st.one_of(
    st.builds(lambda a, p, n: f"10.0.{a}.1@{p}#{n}", st.integers(0, 40), st.integers(1, 70000), st.integers(0, 10**15)),
    st.builds(lambda a, p: f"192.168.{a}.7@{p}", st.integers(0, 9), st.integers(1, 99)),
    st.just("172.17.0.1@1"),
    st.sampled_from(["IDC1-c0", "IDC1-c1", "IDC2-c0", "IDC3-x", "c\u00fc-1", "-lead", " "]),
)
broker = st.sampled_from(
    ["broker-a", "broker-b", "IDC1@broker-a", "IDC2@broker-b", "IDC1@", "@b", "a@b@", "IDC1-b", "IDC2-c"]
)
queue = st.builds(MessageQueue, st.sampled_from(["TopicTest", "%RETRY%G"]), broker, st.integers(0, 15))


@st.composite
def cases(draw):
    mqs = draw(st.lists(queue, min_size=0, max_size=24, unique=True))
    cids = draw(st.lists(client_id, min_size=0, max_size=10))
    current = draw(st.one_of(st.sampled_from(cids) if cids else st.just("x"), client_id, st.just("")))
    return current, cids, mqs


def ours(strategy, current, cids, mqs):  # type: ignore[no-untyped-def]
    try:
        return ("result", [q.as_tuple() for q in strategy.allocate("G", current, list(mqs), list(cids))])
    except DomainError as error:
        return ("exception", error.java_exception)


OUR = {
    "AVG": lambda p: Averagely(),
    "CIRCLE": lambda p: AveragelyByCircle(),
    "CH": lambda p: ConsistentHash(p),
    "MR": lambda p: ByMachineRoom(frozenset(p)),
    "NEARBY_AVG": lambda p: MachineRoomNearby(Averagely(), SplitResolver("-")),
    "NEARBY_CIRCLE": lambda p: MachineRoomNearby(AveragelyByCircle(), SplitResolver("-")),
    "NEARBY_REGEX": lambda p: MachineRoomNearby(Averagely(), RegexResolver(p)),
}
PARAMS = {
    "AVG": [None],
    "CIRCLE": [None],
    "CH": [0, 1, 10],
    "MR": [("IDC1",), ("IDC1", "IDC2", "")],
    "NEARBY_AVG": [None],
    "NEARBY_CIRCLE": [None],
    # a room before "-" or "@"; an optional group that may not take part (no room, like null)
    "NEARBY_REGEX": ["^([A-Za-z0-9]+)[-@]", "(?:IDC([0-9]))?-"],
}


LINES = ("4.9", "5")


@pytest.mark.parametrize("name", list(OUR))
def test_allocation_matches_both_java_clients(name):
    """Each generated case goes to both client lines' class (one Hypothesis run per strategy: generating the cases
    costs far more than allocating them)."""
    strategies = [({line: java_strategy(line, name, p) for line in LINES}, OUR[name](p)) for p in PARAMS[name]]
    compared = []

    @EXAMPLES
    @given(cases(), st.integers(0, len(strategies) - 1))
    def check(case, which):
        current, cids, mqs = case
        java, mine = strategies[which]
        expected = ours(mine, current, cids, mqs)
        for line in LINES:
            assert expected == java_allocate(line, java[line], current, cids, mqs), (line, current, cids, mqs)
        compared.append(1)

    check()
    assert len(compared) >= 2000


def test_a_reported_bare_machine_room_nearby_completed_by_its_rule_is_what_the_java_class_gives():
    """The collector's bare ``MACHINE_ROOM_NEARBY`` plus the documented rule (``MACHINE_ROOM_NEARBY-AVG``, a
    machine-room regex), through the pure engine as the job runs it, against the real
    ``AllocateMachineRoomNearby(AVG, resolver)`` given each client's sorted cidAll and mqAll as RebalanceImpl
    gives them, on both client lines: rooms with and without consumers, clients of rooms without queues."""
    import json
    import random

    from streaming.domain.queues import sorted_client_ids, sorted_queues
    from tests.unit.test_fleet import hb, route, rows, run

    regex = "[.#](idc[0-9])$"  # by the default separator "-" every broker would be in room "broker"
    rule = {"group": "G", "strategy": "MACHINE_ROOM_NEARBY-AVG", "machine_room_regex": regex}
    java = {line: java_strategy(line, "NEARBY_REGEX", regex) for line in LINES}
    draw = random.Random(51)
    compared = 0
    for _ in range(60):
        brokers = [(f"broker-{b}.idc{draw.randint(1, 3)}", draw.randint(1, 5)) for b in "abcd"[: draw.randint(1, 4)]]
        brokers = list(dict(brokers).items())
        cids = [f"10.0.{i}.1@{100 + i}#idc{draw.randint(1, 4)}" for i in range(draw.randint(1, 7))]
        events = [route(0, brokers=brokers)]
        events += [hb(0, f"10.0.0.{i}:1", c, allocate_strategy="MACHINE_ROOM_NEARBY") for i, c in enumerate(cids)]
        out, _ = run([(events, 0)], {"group_rules": [rule]})
        shares = {
            r["client_id"]: [("T", q["broker"], q["queue_id"]) for q in r["queues"]]
            for r in rows(out, "expected_assignments")
        }
        (snapshot,) = rows(out, "group_snapshots")
        assert snapshot["strategy"] == "MACHINE_ROOM_NEARBY-AVG", json.loads(snapshot["details"])
        mq_all = sorted_queues([MessageQueue("T", b, q) for b, n in brokers for q in range(n)])
        cid_all = sorted_client_ids(cids)
        for cid in cids:
            for line in LINES:
                kind, share = java_allocate(line, java[line], cid, cid_all, mq_all)
                assert kind == "result" and sorted(shares[cid]) == sorted(share), (line, cid, brokers, cids)
                compared += 1
    assert compared >= 120
