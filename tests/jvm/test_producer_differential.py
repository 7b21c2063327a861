"""Differential tests: our producer selection and fault tolerance vs the real RocketMQ 4.9.8 and 5.3.3 classes.

Hypothesis generates routes (duplicates, read-only and write-only entries, brokers without a master,
ordered-topic configurations, Java-order-sensitive names), fault items, thread-local start values and call
counts. Each case runs through the real ``MQClientInstance.topicRouteData2TopicPublishInfo`` and
``MQFaultStrategy.selectOneMessageQueue`` (5.x: the 3-argument constructor, ``resetIndex=false``) and
through ``tests.reference`` (``producer``, ``thread_index``, ``queue_selectors``); queues, exceptions
and the indexes left behind must be identical.

Making Java deterministic (section 8.3 of the semantics reference): the ThreadLocal values are set by
reflection from the calling thread (the one that then calls the strategy), and fault items are seeded
through ``updateFaultItem`` with durations of about +-1e9 ms so the clock cannot change availability.
Seeded ends are also spread 1e6 ms apart so that ``pickOneAtLeast``'s sort never meets a full tie (Java
would then order by ConcurrentHashMap buckets, and by which millisecond each update happened in).

Fault tolerance over *time* cannot use explicit timestamps in Java, which reads
``System.currentTimeMillis()``. Two ways around it, both exact:

* each Java call is bracketed by two clock reads; when they agree, the millisecond Java used is known
  and is fed to our model as ``now_ms`` (a tick inside the bracket reruns the example);
* to simulate sends spread over minutes, ``LatencyFaultToleranceImpl.updateFaultItem`` is called with
  the duration shifted by ``event_time - java_now`` (so Java stores ``event_time + duration``); for 5.x a
  zero duration is passed as zero, so the ``duration > 0`` test is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

import jpype
import pytest
from hypothesis import HealthCheck, currently_in_test_context, event, given, settings
from hypothesis import strategies as st

from streaming.domain.errors import DomainError
from streaming.domain.faults.tolerance import (
    ROCKETMQ_4,
    ROCKETMQ_5,
    FaultSemantics,
    FaultTable,
    LatencyFaultTolerance,
    SendOutcome,
    SendResult,
    fault_update_for,
)
from streaming.domain.faults.tracker import FaultWindowTracker
from streaming.domain.javacompat import INT_MAX, INT_MIN
from streaming.domain.queues import MessageQueue
from streaming.domain.versions import ClientLine
from tests.reference.producer import MQFaultStrategy, ProducerThreadState, QueueData, TopicPublishInfo
from tests.reference.queue_selectors import JavaLong, SelectMessageQueueByHash, SelectMessageQueueByRandom
from tests.reference.thread_index import ThreadLocalIndex
from tests.reference.vectors import CONFORMANCE_NOW_MS
from tests.support.rocketmq_java_producer import (
    TOPIC,
    JavaProducer,
    get_index,
    java_exception_name,
    java_int,
    java_long,
    set_index,
)

pytestmark = pytest.mark.jvm

LINES = {"4.9": ClientLine.V4_9, "5": ClientLine.V5}
SEED_MS = 1_000_000_000
SPREAD_MS = 1_000_000
# Names whose Java (UTF-16) order differs from naive expectations: case, a supplementary character.
BROKER_POOL = ["broker-a", "broker-b", "broker-c", "broker-d", "Broker-a", "b", "\uffff", "😀x"]
INT_EDGES = [INT_MAX, INT_MAX - 1, INT_MAX - 3, INT_MAX - 9, INT_MIN, INT_MIN + 1, -1, 0, 1]


def now_ms() -> int:
    return int(jpype.JClass("java.lang.System").currentTimeMillis())


@pytest.fixture(scope="module")
def java() -> dict[str, JavaProducer]:
    return {line: JavaProducer(line) for line in LINES}


# --------------------------------------------------------------------------------------------------
# Selection
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fault:
    broker: str
    latency_ms: int
    available: bool
    reachable: bool


@dataclass(frozen=True)
class SelectionCase:
    route: tuple[QueueData, ...]
    masters: dict[str, bool | None]  # broker -> has a master (None: no BrokerData)
    order_conf: str | None
    faults: tuple[Fault, ...]
    enable: bool
    last_broker: str | None
    send_which_queue_start: int
    which_item_worst_start: int
    calls: int


index_values = st.one_of(st.sampled_from(INT_EDGES), st.integers(INT_MIN, INT_MAX), st.integers(0, 1000))


@st.composite
def selection_cases(draw: st.DrawFn) -> SelectionCase:
    pool = draw(st.lists(st.sampled_from(BROKER_POOL), min_size=1, max_size=5, unique=True))
    # Mostly writable entries with a master, so most cases have a publish list; the rest (read-only,
    # zero write queues, no master, no BrokerData) exercise the empty-list and outside-the-list paths.
    route = tuple(
        QueueData(
            name,
            draw(st.integers(0, 8)),
            draw(st.sampled_from([1, 1, 2, 3, 4, 8, 0])),
            draw(st.sampled_from([6, 6, 6, 6, 2, 2, 4, 0])),
        )
        for name in draw(st.lists(st.sampled_from(pool), min_size=1, max_size=5))  # duplicates allowed
    )
    masters = {name: draw(st.sampled_from([True, True, True, True, False, None])) for name in pool}
    order_conf = None
    if draw(st.integers(0, 9)) == 0:
        entries = draw(st.lists(st.tuples(st.sampled_from(pool), st.integers(0, 4)), min_size=1, max_size=3))
        order_conf = ";".join(f"{b}:{n}" for b, n in entries)
    fault_brokers = draw(st.lists(st.sampled_from([*pool, "broker-z"]), max_size=5, unique=True))
    faults = tuple(
        Fault(b, draw(st.sampled_from([5, 100, 100, 700, 3000, 20_000])), draw(st.booleans()), draw(st.booleans()))
        for b in fault_brokers
    )
    return SelectionCase(
        route=route,
        masters=masters,
        order_conf=order_conf,
        faults=faults,
        enable=draw(st.booleans()) or draw(st.booleans()),  # the fault path three times in four
        last_broker=draw(st.one_of(st.none(), st.sampled_from(pool))),
        send_which_queue_start=draw(index_values),
        which_item_worst_start=draw(index_values),
        calls=draw(st.integers(1, 8)),
    )


def seed_java(producer: JavaProducer, case: SelectionCase) -> None:
    for rank, fault in enumerate(case.faults):
        if producer.line == "4.9":
            duration = (-SEED_MS if fault.available else SEED_MS) + rank * SPREAD_MS
        else:
            duration = 0 if fault.available else SEED_MS + rank * SPREAD_MS
        producer.update_fault_item(fault.broker, fault.latency_ms, duration, fault.reachable)


def seed_model(case: SelectionCase, line: ClientLine) -> LatencyFaultTolerance:
    semantics = FaultSemantics.OVERWRITE if line is ClientLine.V4_9 else FaultSemantics.EXTEND_ONLY
    tolerance = LatencyFaultTolerance(semantics)
    for rank, fault in enumerate(case.faults):
        if line is ClientLine.V4_9:
            duration = (-SEED_MS if fault.available else SEED_MS) + rank * SPREAD_MS
            tolerance = tolerance.update_fault_item(fault.broker, fault.latency_ms, duration, CONFORMANCE_NOW_MS)
        else:
            duration = 0 if fault.available else SEED_MS + rank * SPREAD_MS
            tolerance = tolerance.update_fault_item(
                fault.broker, fault.latency_ms, duration, CONFORMANCE_NOW_MS, fault.reachable
            )
    return tolerance


Outcome = tuple[list[object], int | None, int | None, list[str]]


def run_java(producer: JavaProducer, case: SelectionCase) -> tuple[list[tuple[str, int]], Outcome]:
    producer.reset(case.enable)
    seed_java(producer, case)
    info = producer.route(list(case.route), case.masters, case.order_conf)
    publish = [(str(q.getBrokerName()), int(q.getQueueId())) for q in info.getMessageQueueList()]
    send_which_queue = info.getSendWhichQueue()
    which_item_worst = producer.which_item_worst
    set_index(producer.jvm, send_which_queue, case.send_which_queue_start)
    set_index(producer.jvm, which_item_worst, case.which_item_worst_start)
    selected: list[object] = []
    for _ in range(case.calls):
        try:
            mq = producer.select_one_message_queue(info, case.last_broker)
        except jpype.JException as error:
            selected.append(java_exception_name(error))
            break  # our model raises too: compare the exception, not the state it leaves
        selected.append((str(mq.getTopic()), str(mq.getBrokerName()), int(mq.getQueueId())))
    remaining = sorted(str(k) for k in producer.table.keySet())
    outcome = (selected, get_index(producer.jvm, send_which_queue), None, remaining)
    if producer.line == "4.9":
        outcome = (selected, outcome[1], get_index(producer.jvm, which_item_worst), remaining)
    return publish, outcome


def record(branch: str) -> None:
    """Branch coverage of the generated cases (``pytest --hypothesis-show-statistics`` lists it)."""
    if currently_in_test_context():
        event(branch)


def run_model(case: SelectionCase, line: ClientLine) -> tuple[list[tuple[str, int]], Outcome]:
    try:
        info = TopicPublishInfo.from_route(
            TOPIC,
            case.route,
            brokers_with_master={b for b, m in case.masters.items() if m},
            order_topic_conf=case.order_conf,
        )
    except DomainError as error:
        return [], ([error.java_exception], None, None, [])
    publish = [(q.broker_name, q.queue_id) for q in info.queues]
    state = ProducerThreadState.start(
        line, case.send_which_queue_start, case.which_item_worst_start, seed_model(case, line)
    )
    strategy = MQFaultStrategy(line, case.enable)
    selected: list[object] = []
    for _ in range(case.calls):
        try:
            selection = strategy.select_one_message_queue(info, state, case.last_broker, CONFORMANCE_NOW_MS)
        except DomainError as error:
            selected.append(error.java_exception)
            record(f"{line.value} {error.java_exception}")
            break
        selected.append(selection.queue.as_tuple())
        record(f"{line.value} {selection.path.value}")
        state = selection.state
    remaining = sorted(i.name for i in state.faults.items)
    which = state.which_item_worst.stored if line is ClientLine.V4_9 else None
    return publish, (selected, state.send_which_queue.stored, which, remaining)


def _compare_selection(java: dict[str, JavaProducer], line: str, case: SelectionCase) -> None:
    try:
        java_publish, java_outcome = run_java(java[line], case)
    except jpype.JException as error:  # e.g. a malformed orderTopicConf while building the list
        java_publish, java_outcome = [], ([java_exception_name(error)], None, None, [])
    model_publish, model_outcome = run_model(case, LINES[line])
    assert model_publish == java_publish
    if java_outcome[0] and isinstance(java_outcome[0][-1], str):
        # an exception ended the calls: the state it leaves behind is not compared
        assert model_outcome[0] == java_outcome[0]
    else:
        assert model_outcome == java_outcome


SELECTION_SETTINGS = settings(
    max_examples=2000, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)


@SELECTION_SETTINGS
@given(case=selection_cases())
def test_selection_matches_rocketmq_4_9_8(java, case):
    _compare_selection(java, "4.9", case)


@SELECTION_SETTINGS
@given(case=selection_cases())
def test_selection_matches_rocketmq_5(java, case):
    _compare_selection(java, "5", case)


def test_exception_paths_are_exercised(java):
    # An empty publish list with the fault path on: 4.9.8 goes through remove(null) -> NPE -> select() and
    # then divides by zero; 5.x divides by zero in the final select(). Both must be reported identically.
    case = SelectionCase((QueueData("broker-a", 1, 1, 4),), {"broker-a": True}, None, (), True, None, 0, 0, 2)
    for line in LINES:
        assert run_java(java[line], case)[1][0] == ["ArithmeticException"]
        assert run_model(case, LINES[line])[1][0] == ["ArithmeticException"]


# --------------------------------------------------------------------------------------------------
# ThreadLocalIndex (including the first call from Random, and 5.x reset) with a seeded java.util.Random
# --------------------------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    start=st.one_of(st.none(), index_values), seed=st.integers(0, 2**48), calls=st.integers(1, 4), reset=st.booleans()
)
def test_thread_local_index_matches_java(java, start, seed, calls, reset):
    from streaming.domain.javacompat import JavaRandom

    for line, producer in java.items():
        index_java = producer.jvm.cls("org.apache.rocketmq.client.common.ThreadLocalIndex")()
        producer.jvm.set_private(index_java, "random", jpype.JClass("java.util.Random")(jpype.JLong(seed)))
        set_index(producer.jvm, index_java, start)
        model = ThreadLocalIndex.starting_at(LINES[line], start)
        random = JavaRandom(seed)
        if reset and line == "5":
            index_java.reset()
            model = model.reset(random)
        for _ in range(calls):
            value, model = model.increment_and_get(random)
            assert int(index_java.incrementAndGet()) == value
            assert get_index(producer.jvm, index_java) == model.stored


# --------------------------------------------------------------------------------------------------
# computeNotAvailableDuration: default tables and custom ones set through the Java setters
# --------------------------------------------------------------------------------------------------

BOUNDARY_LATENCIES = sorted(
    {v + d for t in (ROCKETMQ_4, ROCKETMQ_5) for v in t.latency_max_ms for d in (-1, 0, 1)} | {0, 2**62}
)


def java_duration(producer: JavaProducer, latency_ms: int) -> int:
    return int(producer.compute.invoke(producer.strategy, jpype.JLong(latency_ms)))


def test_default_tables_match_java_at_every_boundary(java):
    for line, table in (("4.9", ROCKETMQ_4), ("5", ROCKETMQ_5)):
        producer = java[line]
        assert [int(v) for v in producer.strategy.getLatencyMax()] == list(table.latency_max_ms)
        assert [int(v) for v in producer.strategy.getNotAvailableDuration()] == list(table.not_available_duration_ms)
        for latency in BOUNDARY_LATENCIES:
            assert java_duration(producer, latency) == table.compute_not_available_duration_ms(latency), (line, latency)
        # isolation: 4.9.x feeds 30000, 5.x 10000 (the literals inside updateFaultItem)
        assert java_duration(producer, table.isolation_latency_ms) == table.duration_ms(0, isolation=True)


custom_tables = st.lists(st.tuples(st.integers(0, 50_000), st.integers(0, 10**6)), min_size=1, max_size=8).map(
    lambda pairs: sorted({p[0]: p for p in pairs}.values())
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(pairs=custom_tables, latencies=st.lists(st.integers(0, 60_000), min_size=1, max_size=10))
def test_custom_tables_match_java(java, pairs, latencies):
    table = FaultTable("custom", tuple(p[0] for p in pairs), tuple(p[1] for p in pairs), 0, FaultSemantics.OVERWRITE)
    long_array = jpype.JArray(jpype.JLong)
    for producer in java.values():
        producer.strategy.setLatencyMax(long_array(list(table.latency_max_ms)))
        producer.strategy.setNotAvailableDuration(long_array(list(table.not_available_duration_ms)))
        try:
            for latency in [*latencies, *table.latency_max_ms]:
                assert java_duration(producer, latency) == table.compute_not_available_duration_ms(latency)
        finally:
            defaults = ROCKETMQ_4 if producer.line == "4.9" else ROCKETMQ_5
            producer.strategy.setLatencyMax(long_array(list(defaults.latency_max_ms)))
            producer.strategy.setNotAvailableDuration(long_array(list(defaults.not_available_duration_ms)))


# --------------------------------------------------------------------------------------------------
# Fault tolerance over time: the tracker's items vs LatencyFaultToleranceImpl's
# --------------------------------------------------------------------------------------------------

send_sequences = st.lists(
    st.tuples(
        st.integers(0, 700_000),  # gap to the previous send (spans every 4.9.x and 5.x window)
        st.sampled_from(["broker-a", "broker-b"]),
        st.sampled_from([0, 49, 550, 999, 1000, 1800, 2000, 3000, 5000, 15_000, 40_000]),
        st.sampled_from(list(SendOutcome)),
    ),
    min_size=1,
    max_size=25,
)


class ClockTicked(Exception):
    """The JVM clock moved inside a bracket: the millisecond Java used is unknown, rerun the example."""


def bracketed(call, *args):
    """``(millisecond, result)`` of ``call(*args)``, or ClockTicked if the clock moved during the call."""
    before = now_ms()
    result = call(*args)
    if now_ms() != before:
        raise ClockTicked
    return before, result


def replay_time_shifted(producer: JavaProducer, table: FaultTable, raw, detector: bool) -> None:
    """Sends spread over simulated time: Java stores ``event_time + duration`` through a shifted duration."""
    producer.reset(True)
    tracker = FaultWindowTracker(table, detector_enabled=detector)
    event_time = now_ms() + 10_000_000  # in the future of the JVM clock, so shifted durations stay positive
    for gap, broker, latency, outcome in raw:
        event_time += gap
        update = fault_update_for(outcome, table.client_line, detector)
        duration = table.duration_ms(latency, update.isolation)

        def call(broker=broker, latency=latency, update=update, duration=duration, at=event_time) -> None:
            shifted = duration + (at - now_ms()) if (duration > 0 or producer.line == "4.9") else 0
            if producer.line == "4.9":
                producer.tolerance.updateFaultItem(broker, jpype.JLong(latency), jpype.JLong(shifted))
            else:
                producer.tolerance.updateFaultItem(
                    broker, jpype.JLong(latency), jpype.JLong(shifted), jpype.JBoolean(update.reachable)
                )

        bracketed(call)  # now_ms() inside ``call`` is the bracket's millisecond when no tick happened
        tracker = tracker.apply(SendResult("p", broker, event_time, latency, outcome)).tracker
        for name in ("broker-a", "broker-b"):
            tracked = tracker.get("p", name)
            model = (
                None
                if tracked is None
                else (tracked.item.current_latency_ms, tracked.item.start_timestamp_ms, tracked.item.reachable)
            )
            assert producer.item(name) == model, (name, event_time)


def update_java_fault_item(
    producer: JavaProducer, table: FaultTable, broker: str, latency: int, outcome: str, detector: bool
) -> int:
    """One ``MQFaultStrategy.updateFaultItem`` call as the client makes it after a send; the millisecond the
    bracket proves Java used."""
    update = fault_update_for(outcome, table.client_line, detector)
    args = (broker, jpype.JLong(latency), update.isolation)
    if producer.line == "5":
        args = (*args, update.reachable)
    at, _ = bracketed(producer.strategy.updateFaultItem, *args)
    return at


def replay_real_clock(producer: JavaProducer, table: FaultTable, raw, detector: bool) -> None:
    """Back-to-back sends through ``MQFaultStrategy.updateFaultItem`` (Java computes the duration), each at
    the millisecond the bracket proves Java used."""
    producer.reset(True)
    tracker = FaultWindowTracker(table, detector_enabled=detector)
    for _, broker, latency, outcome in raw:
        at = update_java_fault_item(producer, table, broker, latency, outcome, detector)
        step = tracker.apply(SendResult("p", broker, at, latency, outcome))
        tracker = step.tracker
        tracked = tracker.get("p", broker)
        assert tracked is not None
        assert producer.item(broker) == (
            tracked.item.current_latency_ms,
            tracked.item.start_timestamp_ms,
            tracked.item.reachable,
        )
        at, available = bracketed(producer.tolerance.isAvailable, broker)
        assert bool(available) == tracker.is_available("p", broker, at)


def retry_on_tick(run) -> None:
    for _ in range(20):
        try:
            run()
            return
        except ClockTicked:
            continue
    raise AssertionError("the JVM clock ticked inside every bracket of 20 attempts")


@settings(max_examples=200, deadline=None, derandomize=True)
@given(raw=send_sequences, detector=st.booleans())
def test_fault_items_over_time_match_java(java, raw, detector):
    for line, table in (("4.9", ROCKETMQ_4), ("5", ROCKETMQ_5)):
        retry_on_tick(lambda line=line, table=table: replay_time_shifted(java[line], table, raw, detector))


@settings(max_examples=150, deadline=None, derandomize=True)
@given(raw=send_sequences, detector=st.booleans())
def test_fault_items_through_the_real_strategy_match_java(java, raw, detector):
    for line, table in (("4.9", ROCKETMQ_4), ("5", ROCKETMQ_5)):
        retry_on_tick(lambda line=line, table=table: replay_real_clock(java[line], table, raw, detector))


def replay_fault_disabled(producer: JavaProducer, table: FaultTable, raw, detector: bool) -> None:
    """``sendLatencyFaultEnable=false``: the real ``MQFaultStrategy.updateFaultItem`` keeps no item, and the
    tracker, told the producer runs without it, opens no window and never makes a broker unavailable."""
    producer.reset(False)
    tracker = FaultWindowTracker(table, detector_enabled=detector)
    for _, broker, latency, outcome in raw:
        at = update_java_fault_item(producer, table, broker, latency, outcome, detector)
        step = tracker.apply(SendResult("p", broker, at, latency, outcome, fault_enabled=False))
        assert step.episodes == ()
        tracker = step.tracker
        for name in ("broker-a", "broker-b"):
            assert producer.item(name) is None
            at, available = bracketed(producer.tolerance.isAvailable, name)
            assert bool(available) and tracker.is_available("p", name, at)
    assert not tracker.all_brokers_unavailable("p", ["broker-a", "broker-b"], 2**62)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(raw=send_sequences, detector=st.booleans())
def test_without_send_latency_fault_enable_java_keeps_no_item_and_nothing_is_avoided(java, raw, detector):
    for line, table in (("4.9", ROCKETMQ_4), ("5", ROCKETMQ_5)):
        retry_on_tick(lambda line=line, table=table: replay_fault_disabled(java[line], table, raw, detector))


# --------------------------------------------------------------------------------------------------
# MessageQueueSelector implementations
# --------------------------------------------------------------------------------------------------

hash_args = st.one_of(
    st.text(max_size=30),  # includes supplementary characters (two UTF-16 units each)
    st.integers(INT_MIN, INT_MAX).map(lambda v: ("int", v)),
    st.sampled_from(INT_EDGES).map(lambda v: ("int", v)),
    st.integers(-(2**63), 2**63 - 1).map(lambda v: ("long", v)),
)


@settings(max_examples=600, deadline=None, derandomize=True)
@given(arg=hash_args, size=st.integers(1, 17))
def test_select_by_hash_matches_java(java, arg, size):
    queues = [MessageQueue(TOPIC, "broker-a", i) for i in range(size)]
    if isinstance(arg, tuple):
        kind, value = arg
        java_arg = java_int(value) if kind == "int" else java_long(value)
        model_arg: object = value if kind == "int" else JavaLong(value)
    else:
        java_arg = jpype.JString(arg)
        model_arg = arg
    expected = SelectMessageQueueByHash().select(queues, model_arg)
    for producer in java.values():
        selector = producer.jvm.cls("org.apache.rocketmq.client.producer.selector.SelectMessageQueueByHash")()
        java_queues = producer.jvm.array_list([producer.jvm.message_queue(TOPIC, "broker-a", i) for i in range(size)])
        assert int(selector.select(java_queues, None, java_arg).getQueueId()) == expected.queue_id


@settings(max_examples=200, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**62), sizes=st.lists(st.integers(1, 40), min_size=1, max_size=6))
def test_select_by_random_matches_java_with_a_known_seed(java, seed, sizes):
    producer = java["5"]
    selector = producer.jvm.cls("org.apache.rocketmq.client.producer.selector.SelectMessageQueueByRandom")()
    producer.jvm.set_private(selector, "random", jpype.JClass("java.util.Random")(jpype.JLong(seed)))
    model = SelectMessageQueueByRandom(seed)
    for size in sizes:
        queues = [MessageQueue(TOPIC, "b", i) for i in range(size)]
        java_queues = producer.jvm.array_list([producer.jvm.message_queue(TOPIC, "b", i) for i in range(size)])
        assert int(selector.select(java_queues, None, None).getQueueId()) == model.select(queues).queue_id
        model = model.after(queues)


def test_select_by_machine_room_is_null_in_java_too(java):
    for producer in java.values():
        selector = producer.jvm.cls("org.apache.rocketmq.client.producer.selector.SelectMessageQueueByMachineRoom")()
        assert selector.select(producer.jvm.array_list([producer.jvm.message_queue(TOPIC, "b", 0)]), None, "x") is None
