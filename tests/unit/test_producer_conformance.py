"""Every producer-selection golden vector of the real RocketMQ client is reproduced without a JVM.

The vectors (``tests/data/conformance/producer-select-*.jsonl``, README beside them) call
``MQFaultStrategy.selectOneMessageQueue`` ``calls`` times on one thread with the ThreadLocal indexes set
by reflection and fault items seeded at ``now -/+ 1e9 ms``. The selected queues *and* the indexes stored
after the last call must match: the second proves the number of increments on every path.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from streaming.domain.versions import ClientLine
from tests.reference.producer import (
    MQFaultStrategy,
    ProducerThreadState,
    QueueData,
    SelectionPath,
    TopicPublishInfo,
)
from tests.reference.vectors import CONFORMANCE_NOW_MS, replay_producer_conformance_case, seeded_faults

CONFORMANCE = Path(__file__).parents[1] / "data" / "conformance"
FILES = {"producer-select-rocketmq-all-4.9.8.jsonl": ClientLine.V4_9, "producer-select-develop.jsonl": ClientLine.V5}


def _cases(name: str) -> list[dict]:
    return [json.loads(line) for line in (CONFORMANCE / name).read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("file_name", sorted(FILES))
def test_every_producer_vector_matches_the_java_client(file_name):
    cases = _cases(file_name)
    assert len(cases) == 1000
    mismatches = []
    for number, case in enumerate(cases, start=1):
        outcome = replay_producer_conformance_case(case, FILES[file_name])
        expected = (case["selected"], case["sendWhichQueueEnd"], case.get("whichItemWorstEnd"))
        actual = (outcome.selected, outcome.send_which_queue_end, outcome.which_item_worst_end)
        if actual != expected:
            mismatches.append(f"case {number}: expected {expected}, got {actual}")
    assert not mismatches, f"{len(mismatches)} of {len(cases)} vectors differ:\n" + "\n".join(mismatches[:20])


def _paths(file_name: str) -> Counter[SelectionPath]:
    """Which strategy branches the vectors exercise (replayed call by call)."""
    line = FILES[file_name]
    paths: Counter[SelectionPath] = Counter()
    for case in _cases(file_name):
        info = TopicPublishInfo.from_route("TopicTest", [QueueData(b, w, w, p) for b, w, p in case["route"]])
        state = ProducerThreadState.start(
            line,
            case["sendWhichQueueStart"],
            case.get("whichItemWorstStart"),
            seeded_faults(case["faults"], line, CONFORMANCE_NOW_MS),
        )
        strategy = MQFaultStrategy(line, case["sendLatencyFaultEnable"])
        for _ in range(case["calls"]):
            selection = strategy.select_one_message_queue(info, state, case["lastBrokerName"], CONFORMANCE_NOW_MS)
            paths[selection.path] += 1
            state = selection.state
    return paths


def test_the_4_9_vectors_exercise_every_4_9_branch():
    # The branch counts prove the vectors are a meaningful check: the fallback paths (pickOneAtLeast,
    # remove(null) -> NPE -> select()) are where re-implementations usually go wrong.
    paths = _paths("producer-select-rocketmq-all-4.9.8.jsonl")
    for path in (
        SelectionPath.ROUND_ROBIN,
        SelectionPath.AVOIDED_LAST_BROKER,
        SelectionPath.AVAILABLE,
        SelectionPath.PICK_ONE_AT_LEAST,
        SelectionPath.FALLBACK,
    ):
        assert paths[path] > 0, path


def test_the_develop_vectors_exercise_every_5_x_branch():
    paths = _paths("producer-select-develop.jsonl")
    for path in (
        SelectionPath.ROUND_ROBIN,
        SelectionPath.AVOIDED_LAST_BROKER,
        SelectionPath.AVAILABLE,
        SelectionPath.REACHABLE,
        SelectionPath.FALLBACK,
    ):
        assert paths[path] > 0, path


def test_the_vectors_cover_index_wrap_around():
    # Starts near Integer.MAX_VALUE make the stored index wrap to negative values during the calls.
    for file_name in FILES:
        cases = _cases(file_name)
        assert any(c["sendWhichQueueStart"] > 0 > c["sendWhichQueueEnd"] for c in cases), file_name
        assert any(c["sendWhichQueueStart"] < 0 for c in cases), file_name
