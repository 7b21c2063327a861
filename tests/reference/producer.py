"""Producer-side queue selection, reproduced exactly: the publish list, ``TopicPublishInfo.selectOneMessageQueue``
and ``MQFaultStrategy.selectOneMessageQueue`` (4.9.8 and 5.x develop).

Role: computes which queue a producer thread picks, given the thread's index (``thread_index``) and the
producer's fault items, value for value against the Java client (the conformance and differential tests hold
it to the client). Everything is a frozen value; a selection returns the queue *and* the thread state after
it (indexes advanced, 4.9.x fault items removed by the fallback path). Plain Python only; time comes in as
``now_ms``. The ``MessageQueueSelector`` implementations are in ``queue_selectors``.

Section 6 of ``rocketmq-semantics.md`` describes the rules; the code below follows the Java control flow
closely on purpose, because the number of index increments on each path is observable (the vectors
record the index after the last call).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from streaming.domain.errors import IllegalArgument, IndexOutOfBounds, NullPointer
from streaming.domain.faults.tolerance import FaultSemantics, LatencyFaultTolerance
from streaming.domain.javacompat import INT_MAX, INT_MIN, JavaRandom, int32, java_sort_key, java_split
from streaming.domain.queues import MessageQueue
from streaming.domain.versions import ClientLine

from .java_arithmetic import ArithmeticException, java_abs, java_rem
from .thread_index import ThreadLocalIndex

PERM_READ = 4  # PermName.PERM_READ
PERM_WRITE = 2  # PermName.PERM_WRITE


class NumberFormat(IllegalArgument):
    """Java ``NumberFormatException`` (an ``IllegalArgumentException``), e.g. a bad ``orderTopicConf``."""

    java_exception = "NumberFormatException"


# --------------------------------------------------------------------------------------------------
# Publish list (MQClientInstance.topicRouteData2TopicPublishInfo)
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class QueueData:
    """One broker's entry in a topic route (``QueueData``)."""

    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int

    @property
    def writable(self) -> bool:
        return bool(self.perm & PERM_WRITE)

    @property
    def readable(self) -> bool:
        return bool(self.perm & PERM_READ)


def _parse_java_int(text: str) -> int:
    """``Integer.parseInt``: optional sign, decimal digits only (no spaces, no underscores), int range."""
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not digits or not all(ch.isdecimal() for ch in digits):
        raise NumberFormat(f'For input string: "{text}"')
    value = int(text)
    if not INT_MIN <= value <= INT_MAX:
        raise NumberFormat(f'For input string: "{text}"')
    return value


def order_topic_queues(topic: str, order_topic_conf: str) -> tuple[MessageQueue, ...]:
    """Queues of an ordered topic: ``"brokerA:4;brokerB:8"`` in configuration order."""
    queues: list[MessageQueue] = []
    for broker in java_split(order_topic_conf, ";"):
        item = java_split(broker, ":")
        if len(item) < 2:
            raise IndexOutOfBounds(f"Index 1 out of bounds for length {len(item)}", entry=broker)
        queues.extend(MessageQueue(topic, item[0], i) for i in range(_parse_java_int(item[1])))
    return tuple(queues)


@dataclass(frozen=True)
class TopicPublishInfo:
    """``TopicPublishInfo``: the publish list plus the route it came from.

    ``route`` is the route's QueueData as the client holds it afterwards: sorted by broker name (the client
    sorts the route's list in place) unless the topic is ordered. ``getQueueIdByBroker`` reads it.
    """

    topic: str
    queues: tuple[MessageQueue, ...]
    route: tuple[QueueData, ...] = ()
    order_topic: bool = False

    @classmethod
    def from_route(
        cls,
        topic: str,
        queue_datas: Sequence[QueueData],
        *,
        brokers_with_master: Collection[str] | None = None,
        order_topic_conf: str | None = None,
    ) -> TopicPublishInfo:
        """``topicRouteData2TopicPublishInfo``.

        With a non-empty ``order_topic_conf`` the list is that configuration. Otherwise QueueData are
        sorted by broker name (stable, String order) and each writable one whose broker has a master adds
        queues ``0..writeQueueNums-1``. ``brokers_with_master`` lists the brokers whose BrokerData has a
        master address (brokerId 0); None means every broker has one (as in the golden vectors).
        """
        if order_topic_conf:
            return cls(topic, order_topic_queues(topic, order_topic_conf), tuple(queue_datas), True)
        ordered = tuple(sorted(queue_datas, key=lambda qd: java_sort_key(qd.broker_name)))
        queues = [
            MessageQueue(topic, qd.broker_name, i)
            for qd in ordered
            if qd.writable and (brokers_with_master is None or qd.broker_name in brokers_with_master)
            for i in range(qd.write_queue_nums)
        ]
        return cls(topic, tuple(queues), ordered, False)

    def ok(self) -> bool:
        return bool(self.queues)

    def get_queue_id_by_broker(self, broker_name: str | None, line: ClientLine = ClientLine.V4_9) -> int:
        """4.9.8 ``getQueueIdByBroker`` (first *writable* QueueData of the broker, ISSUE #7713) or 5.x
        ``getWriteQueueNumsByBroker`` (first QueueData of the broker); -1 if none. A null name matches
        nothing (``brokerName.equals(null)``)."""
        for qd in self.route:
            if (line is ClientLine.V5 or qd.writable) and qd.broker_name == broker_name:
                return qd.write_queue_nums
        return -1

    # The selections below take and return the thread's index; see _Thread for the Java flow.

    def select_v4(
        self, index: ThreadLocalIndex, last_broker_name: str | None = None
    ) -> tuple[MessageQueue, ThreadLocalIndex]:
        """4.9.x ``selectOneMessageQueue()`` / ``selectOneMessageQueue(lastBrokerName)``."""
        thread = _Thread(self, index)
        queue = thread.select_v4(last_broker_name)
        return queue, thread.index_value()

    def select_v5(
        self, index: ThreadLocalIndex, *filters: Callable[[MessageQueue], bool]
    ) -> tuple[MessageQueue | None, ThreadLocalIndex]:
        """5.x ``selectOneMessageQueue(QueueFilter...)``: None if no queue passes every filter."""
        thread = _Thread(self, index)
        queue = thread.select_filtered(filters)
        return queue, thread.index_value()

    def select_v5_avoiding(
        self, index: ThreadLocalIndex, last_broker_name: str | None
    ) -> tuple[MessageQueue, ThreadLocalIndex]:
        """5.x ``selectOneMessageQueue(lastBrokerName)`` (kept in develop, unused by the strategy)."""
        thread = _Thread(self, index)
        queue = thread.select_v5_avoiding(last_broker_name)
        return queue, thread.index_value()


# --------------------------------------------------------------------------------------------------
# One call on a producer thread
# --------------------------------------------------------------------------------------------------


class _Thread:
    """One call's mutable view of a producer thread: its indexes and its producer's fault items.

    The Java code mutates thread-local and shared state as it goes; mirroring that flow step by step is
    the simplest way to get every increment right. Frozen values go in and come out.
    """

    def __init__(
        self,
        info: TopicPublishInfo,
        index: ThreadLocalIndex,
        which_item_worst: ThreadLocalIndex | None = None,
        faults: LatencyFaultTolerance | None = None,
        random: JavaRandom | None = None,
    ) -> None:
        self.info = info
        self.queues = info.queues
        self._index = index
        self._which_item_worst = which_item_worst
        self.faults = faults
        self.random = random

    def index_value(self) -> ThreadLocalIndex:
        return self._index

    def which_item_worst_value(self) -> ThreadLocalIndex | None:
        return self._which_item_worst

    def inc(self) -> int:
        value, self._index = self._index.increment_and_get(self.random)
        return value

    def inc_which_item_worst(self) -> int:
        assert self._which_item_worst is not None
        value, self._which_item_worst = self._which_item_worst.increment_and_get(self.random)
        return value

    # 4.9.x TopicPublishInfo
    def select_v4(self, last_broker_name: str | None = None) -> MessageQueue:
        return self.select_v4_avoiding(last_broker_name)[0]

    def select_v4_avoiding(self, last_broker_name: str | None) -> tuple[MessageQueue, bool]:
        """``select(lastBrokerName)`` and whether the avoiding loop found a queue (False: plain select)."""
        if last_broker_name is None:
            return self._select_v4_plain(), False
        for _ in range(len(self.queues)):
            pos = java_rem(java_abs(self.inc()), len(self.queues))
            mq = self.queues[max(pos, 0)]  # pos < 0 only for abs(MIN_VALUE) with pre-4.9.4 indexes
            if mq.broker_name != last_broker_name:
                return mq, True
        return self._select_v4_plain(), False

    def _select_v4_plain(self) -> MessageQueue:
        pos = java_rem(java_abs(self.inc()), len(self.queues))
        return self.queues[max(pos, 0)]

    # 5.x TopicPublishInfo
    def select_filtered(self, filters: Sequence[Callable[[MessageQueue], bool]]) -> MessageQueue | None:
        n = len(self.queues)
        if n == 0:
            return None
        if filters:
            for _ in range(n):
                mq = self.queues[abs(java_rem(self.inc(), n))]
                # Java evaluates every filter (filterResult &= ...); ours are pure, so all() is the same.
                if all(f(mq) for f in filters):
                    return mq
            return None
        return self.queues[abs(java_rem(self.inc(), n))]

    def select_v5_plain(self) -> MessageQueue:
        pos = java_rem(self.inc(), len(self.queues))
        if pos < 0:  # only reachable with a pre-5.x index variant; Java would throw here
            raise IndexOutOfBounds(f"Index {pos} out of bounds for length {len(self.queues)}")
        return self.queues[pos]

    def select_v5_avoiding(self, last_broker_name: str | None) -> MessageQueue:
        if last_broker_name is None:
            return self.select_v5_plain()
        for _ in range(len(self.queues)):
            mq = self.select_v5_plain()
            if mq.broker_name != last_broker_name:
                return mq
        return self.select_v5_plain()

    # 4.9.4+ LatencyFaultToleranceImpl.pickOneAtLeast
    def pick_one_at_least(self, now_ms: int) -> str | None:
        assert self.faults is not None
        ordered = self.faults.pick_order(now_ms)
        if not ordered:
            return None
        half = len(ordered) // 2
        if half <= 0:
            return ordered[0].name
        return ordered[self.inc_which_item_worst() % half].name


# --------------------------------------------------------------------------------------------------
# MQFaultStrategy
# --------------------------------------------------------------------------------------------------


class SelectionPath(enum.Enum):
    """Which branch of the strategy produced the queue (for diagnostics and the fallback metrics)."""

    ROUND_ROBIN = "ROUND_ROBIN"  # plain select()
    AVOIDED_LAST_BROKER = "AVOIDED_LAST_BROKER"  # the lastBrokerName loop / BrokerFilter pass found one
    AVAILABLE = "AVAILABLE"  # latency fault path: a queue of an available broker
    PICK_ONE_AT_LEAST = "PICK_ONE_AT_LEAST"  # 4.9.x: no broker available, a queue of pickOneAtLeast's broker
    REACHABLE = "REACHABLE"  # 5.x: no broker available, a queue of a reachable broker
    FALLBACK = "FALLBACK"  # every filtered pass failed (or the 4.9.x fallback threw): plain select()


@dataclass(frozen=True)
class ProducerThreadState:
    """What one producer thread carries between sends: its ``sendWhichQueue`` index of the topic, its
    ``whichItemWorst`` index (4.9.x ``LatencyFaultToleranceImpl``), and its producer's fault items."""

    send_which_queue: ThreadLocalIndex
    which_item_worst: ThreadLocalIndex
    faults: LatencyFaultTolerance

    @classmethod
    def start(
        cls,
        line: ClientLine,
        send_which_queue: int | None,
        which_item_worst: int | None = None,
        faults: LatencyFaultTolerance | None = None,
    ) -> ProducerThreadState:
        semantics = FaultSemantics.OVERWRITE if line is ClientLine.V4_9 else FaultSemantics.EXTEND_ONLY
        return cls(
            ThreadLocalIndex.starting_at(line, send_which_queue),
            ThreadLocalIndex.starting_at(line, which_item_worst),
            faults if faults is not None else LatencyFaultTolerance(semantics),
        )


@dataclass(frozen=True)
class Selection:
    queue: MessageQueue
    state: ProducerThreadState
    path: SelectionPath


@dataclass(frozen=True)
class MQFaultStrategy:
    """``MQFaultStrategy.selectOneMessageQueue`` of RocketMQ 4.9.8 (``ClientLine.V4_9``) or develop/5.1.4+
    (``ClientLine.V5``)."""

    line: ClientLine
    send_latency_fault_enable: bool = False

    def select_one_message_queue(
        self,
        info: TopicPublishInfo,
        state: ProducerThreadState,
        last_broker_name: str | None,
        now_ms: int,
        *,
        reset_index: bool = False,
        random: JavaRandom | None = None,
    ) -> Selection:
        """One call on one thread at ``now_ms``; ``reset_index`` (5.x, true on retries) needs ``random``."""
        thread = _Thread(info, state.send_which_queue, state.which_item_worst, state.faults, random)
        if self.line is ClientLine.V4_9:
            queue, path = self._select_v4(thread, last_broker_name, now_ms)
        else:
            if reset_index and self.send_latency_fault_enable:
                if random is None:
                    raise IllegalArgument("resetIndex draws from the index's Random: pass a JavaRandom")
                thread._index = thread._index.reset(random)
            queue, path = self._select_v5(thread, last_broker_name, now_ms)
        which = thread.which_item_worst_value()
        assert which is not None and thread.faults is not None
        return Selection(queue, ProducerThreadState(thread.index_value(), which, thread.faults), path)

    def _select_v4(self, t: _Thread, last_broker_name: str | None, now_ms: int) -> tuple[MessageQueue, SelectionPath]:
        if not self.send_latency_fault_enable:
            if last_broker_name is None:
                return t.select_v4(None), SelectionPath.ROUND_ROBIN
            mq, avoided = t.select_v4_avoiding(last_broker_name)
            return mq, SelectionPath.AVOIDED_LAST_BROKER if avoided else SelectionPath.FALLBACK
        assert t.faults is not None
        n = len(t.queues)
        try:
            index = t.inc()
            for _ in range(n):  # lastBrokerName is ignored on this path (4.8.0-4.9.8)
                pos = java_rem(java_abs(index), n)
                index = int32(index + 1)  # a local copy: the ThreadLocal moved only once
                mq = t.queues[max(pos, 0)]
                if t.faults.is_available(mq.broker_name, now_ms):
                    return mq, SelectionPath.AVAILABLE
            not_best = t.pick_one_at_least(now_ms)
            write_queue_nums = t.info.get_queue_id_by_broker(not_best, ClientLine.V4_9)
            if write_queue_nums > 0:
                mq = t._select_v4_plain()
                if not_best is not None:
                    queue_id = java_rem(t.inc(), write_queue_nums)
                    return MessageQueue(mq.topic, not_best, queue_id), SelectionPath.PICK_ONE_AT_LEAST
                return mq, SelectionPath.PICK_ONE_AT_LEAST
            t.faults = t.faults.remove(not_best)  # None: NullPointerException, caught below
        except (NullPointer, IndexOutOfBounds, ArithmeticException):
            pass  # "Error occurred when selecting message queue", then select()
        return t._select_v4_plain(), SelectionPath.FALLBACK

    def _select_v5(self, t: _Thread, last_broker_name: str | None, now_ms: int) -> tuple[MessageQueue, SelectionPath]:
        def broker_filter(mq: MessageQueue) -> bool:
            return last_broker_name is None or mq.broker_name != last_broker_name

        if self.send_latency_fault_enable:
            faults = t.faults
            assert faults is not None
            mq = t.select_filtered((lambda q: faults.is_available(q.broker_name, now_ms), broker_filter))
            if mq is not None:
                return mq, SelectionPath.AVAILABLE
            mq = t.select_filtered((lambda q: faults.is_reachable(q.broker_name), broker_filter))
            if mq is not None:
                return mq, SelectionPath.REACHABLE
            return t.select_v5_plain(), SelectionPath.FALLBACK
        mq = t.select_filtered((broker_filter,))
        if mq is not None:
            path = SelectionPath.ROUND_ROBIN if last_broker_name is None else SelectionPath.AVOIDED_LAST_BROKER
            return mq, path
        return t.select_v5_plain(), SelectionPath.FALLBACK
