"""Replays of the golden vectors (``tests/data/conformance/``) through the domain.

Each vector file was produced by running the real RocketMQ Java classes; these functions feed one case to the
Python reproduction exactly as the vector gives it (lists in the given order, seeded fault items, the given
thread-local indexes), so a test can compare the outcome field by field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from streaming.domain.allocation.strategies import strategy_from_name
from streaming.domain.errors import DomainError
from streaming.domain.faults.tolerance import FaultSemantics, LatencyFaultTolerance
from streaming.domain.queues import MessageQueue
from streaming.domain.versions import ClientLine

from .producer import MQFaultStrategy, ProducerThreadState, QueueData, TopicPublishInfo


@dataclass(frozen=True)
class ConformanceOutcome:
    """The share as ``[topic, broker, queueId]`` triples, or the Java exception's simple class name."""

    result: list[list[Any]] | None = None
    exception: str | None = None


_SHORT_NAMES = {
    "AVG": "AVG",
    "CIRCLE": "AVG_BY_CIRCLE",
    "CH": "CONSISTENT_HASH",
    "MR": "MACHINE_ROOM",
    "NEARBY_AVG": "MACHINE_ROOM_NEARBY-AVG",
    "NEARBY_CIRCLE": "MACHINE_ROOM_NEARBY-AVG_BY_CIRCLE",
}


def replay_conformance_case(case: Mapping[str, Any], line: ClientLine) -> ConformanceOutcome:
    """Replay one golden vector exactly as given: lists in the given order, the given current client id.

    ``case`` has ``strategy`` (a vector short name -- AVG, CIRCLE, CH, MR, NEARBY_AVG, NEARBY_CIRCLE -- or a
    RocketMQ name), ``currentCID``, ``cidAll``, ``mqAll`` (``[topic, broker, queueId]``) and ``extra``
    (CH: virtual node count, "" = 10; MR: comma-separated consumer idcs, "" = empty set). NEARBY cases use
    the resolver of the vectors, ``split("-")[0]`` on broker names and client ids.
    """
    name = _SHORT_NAMES.get(case["strategy"], case["strategy"])
    extra = case.get("extra", "") or ""
    mq_all = [MessageQueue(t, b, int(q)) for t, b, q in case["mqAll"]] if case.get("mqAll") is not None else None
    cid_all = case.get("cidAll")
    try:
        if name.endswith("CONSISTENT_HASH"):
            strategy = strategy_from_name(name, virtual_node_count=int(extra) if extra else 10, line=line)
        elif name.endswith("MACHINE_ROOM"):
            strategy = strategy_from_name(name, consumer_idcs=[i for i in extra.split(",") if i], line=line)
        else:
            strategy = strategy_from_name(name, line=line)
        share = strategy.allocate("G", case.get("currentCID"), mq_all, cid_all)
    except DomainError as error:
        return ConformanceOutcome(exception=error.java_exception)
    return ConformanceOutcome(result=None if share is None else [list(mq.as_tuple()) for mq in share])


CONFORMANCE_TOPIC = "TopicTest"
CONFORMANCE_NOW_MS = 1_700_000_000_000
CONFORMANCE_OFFSET_MS = 1_000_000_000


@dataclass(frozen=True)
class ProducerConformanceOutcome:
    selected: list[list[Any]]
    send_which_queue_end: int | None
    which_item_worst_end: int | None


def seeded_faults(faults: Mapping[str, Mapping[str, Any]], line: ClientLine, now_ms: int) -> LatencyFaultTolerance:
    """The fault items the vectors put in before the calls (see the conformance README):
    4.9.8 ``updateFaultItem(name, latency, available ? -1e9 : +1e9)``; develop
    ``updateFaultItem(name, latency, available ? 0 : 1e9, reachable)``."""
    if line is ClientLine.V4_9:
        tolerance = LatencyFaultTolerance(FaultSemantics.OVERWRITE)
        for name, f in faults.items():
            offset = -CONFORMANCE_OFFSET_MS if f["available"] else CONFORMANCE_OFFSET_MS
            tolerance = tolerance.update_fault_item(name, int(f["latency"]), offset, now_ms)
        return tolerance
    tolerance = LatencyFaultTolerance(FaultSemantics.EXTEND_ONLY)
    for name, f in faults.items():
        duration = 0 if f["available"] else CONFORMANCE_OFFSET_MS
        tolerance = tolerance.update_fault_item(name, int(f["latency"]), duration, now_ms, bool(f["reachable"]))
    return tolerance


def replay_producer_conformance_case(case: Mapping[str, Any], line: ClientLine) -> ProducerConformanceOutcome:
    """Replay one ``producer-select-*.jsonl`` vector: ``calls`` selections in a row on one thread."""
    route = [QueueData(b, w, w, p) for b, w, p in case["route"]]
    info = TopicPublishInfo.from_route(CONFORMANCE_TOPIC, route)
    state = ProducerThreadState.start(
        line,
        case["sendWhichQueueStart"],
        case.get("whichItemWorstStart"),
        seeded_faults(case["faults"], line, CONFORMANCE_NOW_MS),
    )
    strategy = MQFaultStrategy(line, bool(case["sendLatencyFaultEnable"]))
    selected = []
    for _ in range(int(case["calls"])):
        selection = strategy.select_one_message_queue(info, state, case["lastBrokerName"], CONFORMANCE_NOW_MS)
        selected.append([selection.queue.broker_name, selection.queue.queue_id])
        state = selection.state
    return ProducerConformanceOutcome(selected, state.send_which_queue.stored, state.which_item_worst.stored)
