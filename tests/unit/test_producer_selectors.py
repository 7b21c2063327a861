"""Producer-side building blocks, case by case: the MessageQueueSelector implementations, the
ThreadLocalIndex variants, the publish list built from a route, and hand-worked MQFaultStrategy paths
(the golden vectors cover the common paths; these pin the rare ones and explain them).

Expected values marked "Java" were taken from the JVM (``java.lang.String/Long.hashCode``,
``java.util.Random``); the differential tests in ``tests/jvm`` recheck them on generated inputs.
"""

from __future__ import annotations

import pytest

from streaming.domain.errors import IllegalArgument, IndexOutOfBounds, NullPointer
from streaming.domain.faults.tolerance import FaultSemantics, LatencyFaultTolerance
from streaming.domain.javacompat import INT_MAX, INT_MIN, JavaRandom
from streaming.domain.queues import MessageQueue
from streaming.domain.versions import ClientLine
from tests.reference.java_arithmetic import ArithmeticException
from tests.reference.producer import (
    MQFaultStrategy,
    NumberFormat,
    ProducerThreadState,
    QueueData,
    SelectionPath,
    TopicPublishInfo,
)
from tests.reference.queue_selectors import (
    JavaLong,
    MessageQueueSelector,
    SelectMessageQueueByHash,
    SelectMessageQueueByMachineRoom,
    SelectMessageQueueByRandom,
    java_hash_code,
)
from tests.reference.thread_index import IndexVariant, ThreadLocalIndex

T = "TopicTest"


def mqs(*spec: tuple[str, int]) -> list[MessageQueue]:
    return [MessageQueue(T, broker, q) for broker, n in spec for q in range(n)]


# --------------------------------------------------------------------------------------------------
# 1. SelectMessageQueueByHash: (case, arg, Java hashCode, list size, selected index)
# --------------------------------------------------------------------------------------------------

HASH_CASES = [
    (1, "hello", 99162322, 8, 99162322 % 8),  # Java
    (2, "order-123", -392797389, 8, 392797389 % 8),  # negative hash: abs of the remainder
    (3, "order-123", -392797389, 7, 392797389 % 7),
    (4, "Aa", 2112, 5, 2112 % 5),  # the classic collision...
    (5, "BB", 2112, 5, 2112 % 5),  # ...same queue
    (6, "", 0, 3, 0),
    (7, "😀", 1772899, 6, 1772899 % 6),  # Java: hashed over the two UTF-16 surrogates
    (8, 7, 7, 4, 3),  # an Integer hashes to itself
    (9, -7, -7, 4, 3),  # Java: -7 % 4 = -3, abs -> 3
    (10, INT_MIN, INT_MIN, 3, 2),  # Java: MIN_VALUE % 3 = -2 -> 2; Python abs(h) % 3 agrees
    (11, INT_MIN, INT_MIN, 8, 0),  # MIN_VALUE % 8 = 0
    (12, JavaLong(2**40 + 5), 261, 7, 261 % 7),  # Java Long: (int)(v ^ (v >>> 32))
    (13, JavaLong(-1), 0, 7, 0),  # Java
    (14, JavaLong(-(2**63)), INT_MIN, 3, 2),  # Java: Long.MIN_VALUE hashes to Integer.MIN_VALUE
    (15, JavaLong(1234567890123), 1912276436, 9, 1912276436 % 9),  # Java
    (16, True, 1231, 10, 1),  # Boolean.hashCode
]


@pytest.mark.parametrize(("case", "arg", "hash_code", "size", "index"), HASH_CASES)
def test_select_by_hash(case, arg, hash_code, size, index):
    assert java_hash_code(arg) == hash_code, case
    queues = mqs(("broker-a", size))
    assert SelectMessageQueueByHash().select(queues, arg) == queues[index], case


def test_hash_selector_failures_are_the_java_ones():
    with pytest.raises(NullPointer):  # send() wraps it as "select message queue threw exception."
        SelectMessageQueueByHash().select(mqs(("a", 2)), None)
    with pytest.raises(ArithmeticException):
        SelectMessageQueueByHash().select([], "x")
    with pytest.raises(IllegalArgument, match="JavaLong"):
        java_hash_code(2**31)  # a Python int beyond int range must say it is a Long
    with pytest.raises(IllegalArgument):
        java_hash_code(1.5)


def test_select_by_random_reproduces_java_random_with_seed_and_call_count():
    queues = mqs(("a", 10))
    # Java: new Random(42).nextInt(10) x5 = 0, 3, 8, 4, 0
    expected = [0, 3, 8, 4, 0]
    selector = SelectMessageQueueByRandom(42)
    for call, index in enumerate(expected):
        assert selector.select(queues) == queues[index], call
        assert SelectMessageQueueByRandom.after_calls(42, call, 10).select(queues) == queues[index], call
        selector = selector.after(queues)
    # Java: new Random(1700000000000).nextInt(7) x5 = 2, 5, 2, 4, 2; nextInt(8) = 0 (power-of-two path)
    seven, eight = mqs(("a", 7)), mqs(("a", 8))
    assert [
        SelectMessageQueueByRandom.after_calls(1_700_000_000_000, k, 7).select(seven).queue_id for k in range(5)
    ] == [2, 5, 2, 4, 2]
    assert SelectMessageQueueByRandom(1_700_000_000_000).select(eight).queue_id == 0
    # the earlier calls' list sizes matter, not only their number
    mixed = SelectMessageQueueByRandom(42, (10, 7))
    random = JavaRandom(42)
    random.next_int(10), random.next_int(7)
    assert mixed.select(queues) == queues[random.next_int(10)]


def test_select_by_machine_room_always_returns_none():
    selectors: list[MessageQueueSelector] = [SelectMessageQueueByMachineRoom(frozenset({"IDC1"}))]
    assert selectors[0].select(mqs(("IDC1@broker-a", 4)), "k") is None


# --------------------------------------------------------------------------------------------------
# 2. ThreadLocalIndex: (case, variant, stored before, value returned, stored after)
# --------------------------------------------------------------------------------------------------

M4, A4, G4, M5 = (
    IndexVariant.MASK_4_9_4,
    IndexVariant.ABS_4_9_0,
    IndexVariant.GET_AND_INCREMENT_4_8,
    IndexVariant.MASK_5,
)
INDEX_CASES = [
    (1, M4, 0, 1, 1),
    (2, M4, INT_MAX, 0, INT_MIN),  # 4.9.4+: after MAX it continues 0, 1, ... (stored wraps negative)
    (3, M4, INT_MIN, 1, INT_MIN + 1),
    (4, M4, -1, 0, 0),
    (5, A4, INT_MAX, INT_MIN, INT_MIN),  # 4.9.0-4.9.3: negative once...
    (6, A4, INT_MIN, INT_MAX, INT_MIN + 1),  # ...then counts down
    (7, A4, INT_MIN + 1, INT_MAX - 1, INT_MIN + 2),
    (8, G4, INT_MAX, INT_MIN, INT_MIN),  # <= 4.8.0: abs(x + 1) is stored, MIN_VALUE once
    (9, G4, INT_MIN, INT_MAX, INT_MAX),
    (10, M5, -5, 2**31 - 4, -4),  # 5.x masks like 4.9.4
    (11, M5, INT_MAX, 0, INT_MIN),
]


@pytest.mark.parametrize(("case", "variant", "stored", "value", "after"), INDEX_CASES)
def test_thread_local_index_variants(case, variant, stored, value, after):
    got, index = ThreadLocalIndex(variant, stored).increment_and_get()
    assert (got, index.stored) == (value, after), case


def test_first_call_draws_from_the_given_random():
    # Java: new Random(0).nextInt() = -1155484576
    value, index = ThreadLocalIndex(M4).increment_and_get(JavaRandom(0))
    assert (value, index.stored) == (1155484577, 1155484577)  # 4.9.x starts from abs(nextInt())
    value, index = ThreadLocalIndex(M5).increment_and_get(JavaRandom(0))
    assert (value, index.stored) == ((-1155484575) & INT_MAX, -1155484575)  # 5.x: nextInt() as is
    with pytest.raises(IllegalArgument, match="no JavaRandom"):
        ThreadLocalIndex(M4).increment_and_get()
    assert ThreadLocalIndex(M5, 3).reset(JavaRandom(42)).stored == 1562431130  # abs(nextInt(MAX_VALUE))
    with pytest.raises(IllegalArgument):
        ThreadLocalIndex(M4, 3).reset(JavaRandom(42))
    with pytest.raises(IllegalArgument):
        ThreadLocalIndex(M4, 2**31)


# --------------------------------------------------------------------------------------------------
# 3. Publish list from a route
# --------------------------------------------------------------------------------------------------


def names(info: TopicPublishInfo) -> list[tuple[str, int]]:
    return [(q.broker_name, q.queue_id) for q in info.queues]


def test_publish_list_sorted_writable_with_master():
    route = [QueueData("b", 4, 2, 6), QueueData("a", 2, 1, 2), QueueData("c", 3, 3, 4)]
    info = TopicPublishInfo.from_route(T, route)
    assert names(info) == [("a", 0), ("b", 0), ("b", 1)]  # c is read-only; write queue counts are used
    assert [qd.broker_name for qd in info.route] == ["a", "b", "c"]  # the client sorts the route in place
    assert names(TopicPublishInfo.from_route(T, route, brokers_with_master={"b", "c"})) == [("b", 0), ("b", 1)]
    assert TopicPublishInfo.from_route(T, [QueueData("a", 1, 0, 6)]).ok() is False


def test_publish_list_uses_java_string_order():
    # UTF-16 code units: a surrogate pair (0xD83D...) sorts before U+FFFF, unlike Python's code points
    route = [
        QueueData("\uffff", 1, 1, 6),
        QueueData("😀", 1, 1, 6),
        QueueData("Broker", 1, 1, 6),
        QueueData("broker", 1, 1, 6),
    ]
    assert [b for b, _ in names(TopicPublishInfo.from_route(T, route))] == ["Broker", "broker", "😀", "\uffff"]


ORDER_CONF_CASES = [
    (1, "brokerB:2;brokerA:1", [("brokerB", 0), ("brokerB", 1), ("brokerA", 0)], None),  # configuration order
    (2, "brokerA:2;", [("brokerA", 0), ("brokerA", 1)], None),  # trailing ";" dropped by String.split
    (3, "brokerA:-1;brokerB:1", [("brokerB", 0)], None),  # a negative count adds nothing
    (4, "brokerA:+2", [("brokerA", 0), ("brokerA", 1)], None),  # parseInt accepts a sign
    (5, "brokerA", None, IndexOutOfBounds),  # no ":" -> item[1] out of bounds
    (6, "brokerA:2;;brokerB:1", None, IndexOutOfBounds),  # an empty entry
    (7, "brokerA:x", None, NumberFormat),
    (8, "brokerA: 2", None, NumberFormat),  # parseInt does not trim
    (9, "brokerA:2147483648", None, NumberFormat),  # beyond int
]


@pytest.mark.parametrize(("case", "conf", "expected", "error"), ORDER_CONF_CASES)
def test_order_topic_conf(case, conf, expected, error):
    route = [QueueData("brokerZ", 8, 8, 6)]  # ignored: the configuration wins
    if error is not None:
        with pytest.raises(error):
            TopicPublishInfo.from_route(T, route, order_topic_conf=conf)
        return
    info = TopicPublishInfo.from_route(T, route, order_topic_conf=conf)
    assert names(info) == expected and info.order_topic, case


def test_get_queue_id_by_broker_4_9_8_checks_writable_5_x_does_not():
    info = TopicPublishInfo.from_route(T, [QueueData("a", 4, 4, 4), QueueData("a", 2, 2, 6), QueueData("b", 3, 3, 6)])
    assert info.get_queue_id_by_broker("a", ClientLine.V4_9) == 2  # first *writable* entry (ISSUE #7713)
    assert info.get_queue_id_by_broker("a", ClientLine.V5) == 4  # first entry
    assert info.get_queue_id_by_broker("zzz") == -1 and info.get_queue_id_by_broker(None) == -1


def test_topic_publish_info_selects():
    info = TopicPublishInfo.from_route(T, [QueueData("a", 2, 2, 6), QueueData("b", 1, 1, 6)])  # a0 a1 b0
    queue, index = info.select_v4(ThreadLocalIndex(M4, 0), last_broker_name="a")  # 1 -> a1 (skipped), 2 -> b0
    assert (queue.broker_name, queue.queue_id, index.stored) == ("b", 0, 2)
    queue, index = info.select_v4(ThreadLocalIndex(M4, 0))  # no last broker: plain select, 1 -> a1
    assert (queue.broker_name, queue.queue_id, index.stored) == ("a", 1, 1)
    queue, index = info.select_v4(ThreadLocalIndex(A4, INT_MAX))  # abs(MIN_VALUE) % 3 < 0 -> pos 0
    assert (queue.broker_name, queue.queue_id) == ("a", 0)
    queue, index = info.select_v5(ThreadLocalIndex(M5, 0), lambda q: q.broker_name == "zzz")
    assert queue is None and index.stored == 3  # n tries, then null
    queue, index = info.select_v5(ThreadLocalIndex(M5, 0))
    assert (queue.queue_id, index.stored) == (1, 1)
    queue, index = info.select_v5_avoiding(ThreadLocalIndex(M5, 2), "b")  # 3 -> a0
    assert (queue.broker_name, index.stored) == ("a", 3)


# --------------------------------------------------------------------------------------------------
# 4. MQFaultStrategy paths worked by hand
# --------------------------------------------------------------------------------------------------

NOW = 1_000_000


def faults_49(*items: tuple[str, int, bool]) -> LatencyFaultTolerance:
    t = LatencyFaultTolerance(FaultSemantics.OVERWRITE)
    for name, latency, available in items:
        t = t.update_fault_item(name, latency, -1000 if available else 1000, NOW)
    return t


def test_4_9_pick_one_at_least_builds_a_new_queue_on_the_not_best_broker():
    info = TopicPublishInfo.from_route(T, [QueueData("a", 2, 2, 6), QueueData("b", 1, 1, 6)])  # a0 a1 b0
    state = ProducerThreadState.start(ClientLine.V4_9, 10, 7, faults_49(("a", 100, False), ("b", 50, False)))
    selection = MQFaultStrategy(ClientLine.V4_9, True).select_one_message_queue(info, state, None, NOW)
    # inc -> 11: positions 2, 0, 1 all unavailable (a local copy advances, the ThreadLocal once);
    # pickOneAtLeast: b (lower latency); half = 1 -> whichItemWorst 8 % 1 = 0 -> b;
    # getQueueIdByBroker(b) = 1 > 0 -> select() (inc -> 12, a0: only its topic is used), then inc -> 13 % 1
    assert (selection.queue, selection.path) == (MessageQueue(T, "b", 0), SelectionPath.PICK_ONE_AT_LEAST)
    assert (selection.state.send_which_queue.stored, selection.state.which_item_worst.stored) == (13, 8)


def test_4_9_not_best_broker_outside_the_route_is_removed_then_select():
    info = TopicPublishInfo.from_route(T, [QueueData("a", 1, 1, 6)])
    state = ProducerThreadState.start(ClientLine.V4_9, 0, 0, faults_49(("a", 100, False), ("z", 1, True)))
    strategy = MQFaultStrategy(ClientLine.V4_9, True)
    first = strategy.select_one_message_queue(info, state, None, NOW)
    # z is available and sorts first; getQueueIdByBroker(z) = -1 -> remove(z) -> select()
    assert (first.queue, first.path) == (MessageQueue(T, "a", 0), SelectionPath.FALLBACK)
    assert [i.name for i in first.state.faults.items] == ["a"] and first.state.send_which_queue.stored == 2
    second = strategy.select_one_message_queue(info, first.state, None, NOW)
    # only a left: half = 0 -> items[0] without touching whichItemWorst
    assert (second.queue, second.path) == (MessageQueue(T, "a", 0), SelectionPath.PICK_ONE_AT_LEAST)
    assert (second.state.send_which_queue.stored, second.state.which_item_worst.stored) == (5, 1)


def test_4_9_writable_entry_of_a_broker_without_master_still_receives_the_queue():
    # getQueueIdByBroker reads the route, not the publish list: b has no master, so no queue of b is in the
    # list, yet the fallback can return a (new) MessageQueue on b.
    route = [QueueData("a", 1, 1, 6), QueueData("b", 4, 4, 6)]
    info = TopicPublishInfo.from_route(T, route, brokers_with_master={"a"})
    state = ProducerThreadState.start(ClientLine.V4_9, 0, 0, faults_49(("a", 100, False), ("b", 5, False)))
    selection = MQFaultStrategy(ClientLine.V4_9, True).select_one_message_queue(info, state, None, NOW)
    assert selection.queue == MessageQueue(T, "b", 3)  # inc: 1 (loop), 2 (select), 3 % 4


def test_4_9_empty_list_remove_null_then_select_throws():
    # No queue and no fault item: pickOneAtLeast() is null, remove(null) throws NPE (caught), and the final
    # select() divides by zero, which the producer reports; two increments happened before.
    info = TopicPublishInfo.from_route(T, [QueueData("a", 1, 1, 4)])
    state = ProducerThreadState.start(ClientLine.V4_9, 0, 0)
    with pytest.raises(ArithmeticException):
        MQFaultStrategy(ClientLine.V4_9, True).select_one_message_queue(info, state, None, NOW)


def test_4_9_without_fault_tolerance_avoids_the_last_broker_or_falls_back():
    info = TopicPublishInfo.from_route(T, [QueueData("a", 2, 2, 6)])
    strategy = MQFaultStrategy(ClientLine.V4_9, False)
    selection = strategy.select_one_message_queue(info, ProducerThreadState.start(ClientLine.V4_9, 0), "a", NOW)
    # two misses (1, 2) and then a plain select (3 % 2 = 1)
    assert (selection.queue.queue_id, selection.path, selection.state.send_which_queue.stored) == (
        1,
        SelectionPath.FALLBACK,
        3,
    )


def test_5_x_reachable_pass_after_the_available_pass_fails():
    info = TopicPublishInfo.from_route(T, [QueueData("a", 2, 2, 6), QueueData("b", 2, 2, 6)])  # a0 a1 b0 b1
    faults = LatencyFaultTolerance(FaultSemantics.EXTEND_ONLY).update_fault_item("b", 9, 5000, NOW, reachable=True)
    state = ProducerThreadState.start(ClientLine.V5, 0, faults=faults)
    selection = MQFaultStrategy(ClientLine.V5, True).select_one_message_queue(info, state, "a", NOW)
    # available pass: 1 a1 (last broker), 2 b0, 3 b1 (unavailable), 4 a0 -> null; reachable pass: 5 a1, 6 b0
    assert (selection.queue, selection.path) == (MessageQueue(T, "b", 0), SelectionPath.REACHABLE)
    assert selection.state.send_which_queue.stored == 6
    # once b's window has passed (now >= end), the available pass finds it
    later = MQFaultStrategy(ClientLine.V5, True).select_one_message_queue(info, state, "a", NOW + 5000)
    assert (later.queue, later.path) == (MessageQueue(T, "b", 0), SelectionPath.AVAILABLE)


def test_5_x_reset_index_needs_the_random():
    info = TopicPublishInfo.from_route(T, [QueueData("a", 4, 4, 6)])
    state = ProducerThreadState.start(ClientLine.V5, 0)
    strategy = MQFaultStrategy(ClientLine.V5, True)
    with pytest.raises(IllegalArgument, match="JavaRandom"):
        strategy.select_one_message_queue(info, state, None, NOW, reset_index=True)
    selection = strategy.select_one_message_queue(info, state, None, NOW, reset_index=True, random=JavaRandom(42))
    assert selection.state.send_which_queue.stored == 1562431130 + 1  # reset, then one increment
