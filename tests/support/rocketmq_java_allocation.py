"""Allocation strategies of the real RocketMQ client (``AllocateMessageQueueStrategy``), built and called via JPype.

Shared by the differential test and the golden-vector check: ``java_strategy`` builds a strategy of one client
line by its short name (the vectors' names, plus ``NEARBY_REGEX`` for the monitor's regex machine rooms), and
``java_allocate`` calls ``allocate("G", ...)`` with the inputs in the order given, answering the share or the
Java exception's simple class name.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import jpype

from streaming.domain.queues import MessageQueue
from tests.support.rocketmq_jvm import rocketmq

PACKAGE = "org.apache.rocketmq.client.consumer.rebalance."
CONSUMER_GROUP = "G"
STRATEGY_CLASSES = {"AVG": "AllocateMessageQueueAveragely", "CIRCLE": "AllocateMessageQueueAveragelyByCircle"}


def java_allocate(line: str, strategy, current: str, cids: Iterable[str], mqs: Iterable[MessageQueue]):
    """``("result", [(topic, broker, queueId), ...])`` or ``("exception", simple class name)``."""
    r = rocketmq(line)
    try:
        result = strategy.allocate(
            CONSUMER_GROUP,
            current,
            r.array_list([r.message_queue(q.topic, q.broker_name, q.queue_id) for q in mqs]),
            r.array_list(cids),
        )
    except jpype.JException as error:
        return ("exception", error.getClass().getSimpleName())
    return ("result", [(str(q.getTopic()), str(q.getBrokerName()), int(q.getQueueId())) for q in result])


def java_strategy(line: str, name: str, param=None):
    """The strategy ``name`` of client line ``line``.

    ``param``: CH the virtual node count (None: the default constructor); MR the consumer IDCs; NEARBY_REGEX
    the machine-room pattern. NEARBY_AVG and NEARBY_CIRCLE use the vectors' resolver, ``split("-")[0]``.
    """
    r = rocketmq(line)
    if name == "CH":
        strategy_class = r.cls(PACKAGE + "AllocateMessageQueueConsistentHash")
        return strategy_class() if param is None else strategy_class(param)
    if name == "MR":
        strategy = r.cls(PACKAGE + "AllocateMessageQueueByMachineRoom")()
        idcs = jpype.JClass("java.util.HashSet")()
        for idc in param:
            idcs.add(idc)
        strategy.setConsumeridcs(idcs)
        return strategy
    if name.startswith("NEARBY"):
        inner = r.cls(PACKAGE + STRATEGY_CLASSES["CIRCLE" if name == "NEARBY_CIRCLE" else "AVG"])()
        resolver = _regex_resolver(line, param) if name == "NEARBY_REGEX" else _split_resolver(line)
        return r.cls(PACKAGE + "AllocateMachineRoomNearby")(inner, resolver)
    return r.cls(PACKAGE + STRATEGY_CLASSES[name])()


def _split_resolver(line: str):
    @jpype.JImplements(rocketmq(line).cls(PACKAGE + "AllocateMachineRoomNearby$MachineRoomResolver"))
    class SplitResolver:  # the vectors' resolver: split("-")[0] on broker names and client ids
        @jpype.JOverride
        def brokerDeployIn(self, mq):  # noqa: N802
            return mq.getBrokerName().split("-")[0]

        @jpype.JOverride
        def consumerDeployIn(self, client_id):  # noqa: N802
            return jpype.JString(client_id).split("-")[0]

    return SplitResolver()


def _regex_resolver(line: str, regex: str):
    pattern = jpype.JClass("java.util.regex.Pattern").compile(regex)

    @jpype.JImplements(rocketmq(line).cls(PACKAGE + "AllocateMachineRoomNearby$MachineRoomResolver"))
    class RegexRoom:  # what [[allocation.groups]] machine_room_regex means, written as a Java user would
        @jpype.JOverride
        def brokerDeployIn(self, mq):  # noqa: N802
            return self.room(mq.getBrokerName())

        @jpype.JOverride
        def consumerDeployIn(self, client_id):  # noqa: N802
            return self.room(client_id)

        def room(self, text):
            matcher = pattern.matcher(text)
            return matcher.group(1) if matcher.find() else None

    return RegexRoom()


def message_queues(triples: Sequence[Sequence[Any]]) -> list[MessageQueue]:
    """``[topic, broker, queueId]`` triples (the vectors' ``mqAll``) as message queues, in the same order."""
    return [MessageQueue(topic, broker, int(queue_id)) for topic, broker, queue_id in triples]
