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

from streaming.domain.allocation import (
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
