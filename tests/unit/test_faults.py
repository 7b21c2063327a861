"""Latency fault tolerance: the two fault tables at every boundary, overwrite vs extend-only updates,
the outcome -> (isolation, reachable) call sites, custom-table validation, and the fault-window tracker's
episodes with exact start and end times.

This file is the "correctness proof" of ``streaming.domain.faults`` and the replay (``fault_tracker``): each
table below is numbered so a failure names the case, and each case says why it is there.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streaming.domain.errors import ConfigurationError, IllegalArgument, NullPointer
from streaming.domain.fault_tracker import FaultWindowTracker
from streaming.domain.fault_windows import WindowStatus
from streaming.domain.faults import (
    PRESETS,
    ROCKETMQ_4,
    ROCKETMQ_5,
    FaultItem,
    FaultSemantics,
    FaultTable,
    FaultUpdate,
    LatencyFaultTolerance,
    SendOutcome,
    SendResult,
    compute_not_available_duration_ms,
    fault_table_for_line,
    fault_table_from_config,
    fault_update_for,
    preset,
    updated_fault_item,
)
from streaming.domain.state_codec import StateVersionError
from streaming.domain.versions import ClientLine

# --------------------------------------------------------------------------------------------------
# 1. The tables at every boundary: (case, latency_ms, isolation, expected level, expected duration_ms)
#    Each threshold is probed at -1 / 0 / +1; level -1 means "below the first threshold".
# --------------------------------------------------------------------------------------------------

ROCKETMQ_4_CASES = [
    (1, 0, False, -1, 0),  # no latency at all
    (2, 49, False, -1, 0),  # just below the first threshold
    (3, 50, False, 0, 0),  # level 0 exists but its duration is 0
    (4, 51, False, 0, 0),
    (5, 99, False, 0, 0),
    (6, 100, False, 1, 0),  # level 1: still 0
    (7, 101, False, 1, 0),
    (8, 549, False, 1, 0),  # the last latency a 4.9 client never penalises
    (9, 550, False, 2, 30_000),  # first positive duration: 30 s
    (10, 551, False, 2, 30_000),
    (11, 999, False, 2, 30_000),
    (12, 1000, False, 3, 60_000),
    (13, 1001, False, 3, 60_000),
    (14, 1999, False, 3, 60_000),
    (15, 2000, False, 4, 120_000),
    (16, 2001, False, 4, 120_000),
    (17, 2999, False, 4, 120_000),
    (18, 3000, False, 5, 180_000),
    (19, 3001, False, 5, 180_000),
    (20, 14_999, False, 5, 180_000),
    (21, 15_000, False, 6, 600_000),  # top level: 10 min
    (22, 15_001, False, 6, 600_000),
    (23, 2**63 - 1, False, 6, 600_000),  # Long.MAX_VALUE still top level
    (24, 0, True, 6, 600_000),  # isolation feeds 30000 ms: a fast failure isolates for 10 min
    (25, 100_000, True, 6, 600_000),  # isolation ignores the real latency
    (26, -1, False, -1, 0),  # a negative latency (clock skew) is below every threshold
]

ROCKETMQ_5_CASES = [
    (1, 0, False, -1, 0),
    (2, 49, False, -1, 0),
    (3, 50, False, 0, 0),
    (4, 51, False, 0, 0),
    (5, 99, False, 0, 0),
    (6, 100, False, 1, 0),
    (7, 101, False, 1, 0),
    (8, 549, False, 1, 0),
    (9, 550, False, 2, 2_000),  # 5.x penalises much more briefly: 2 s
    (10, 551, False, 2, 2_000),
    (11, 1799, False, 2, 2_000),  # 1000..1799 is still level 2 in 5.x (60 s in 4.9.x)
    (12, 1800, False, 3, 5_000),
    (13, 1801, False, 3, 5_000),
    (14, 2999, False, 3, 5_000),
    (15, 3000, False, 4, 6_000),
    (16, 3001, False, 4, 6_000),
    (17, 4999, False, 4, 6_000),
    (18, 5000, False, 5, 10_000),
    (19, 5001, False, 5, 10_000),
    (20, 14_999, False, 5, 10_000),
    (21, 15_000, False, 6, 30_000),
    (22, 15_001, False, 6, 30_000),
    (23, 2**63 - 1, False, 6, 30_000),
    (24, 0, True, 5, 10_000),  # isolation feeds 10000 ms: level 5, 10 s
    (25, 100_000, True, 5, 10_000),  # ... even when the real latency is in the top level
    (26, -1, False, -1, 0),
]


@pytest.mark.parametrize(("case", "latency_ms", "isolation", "level", "duration_ms"), ROCKETMQ_4_CASES)
def test_rocketmq_4_table(case, latency_ms, isolation, level, duration_ms):
    fed = ROCKETMQ_4.effective_latency_ms(latency_ms, isolation)
    assert ROCKETMQ_4.level_of(fed) == level, case
    assert ROCKETMQ_4.duration_ms(latency_ms, isolation) == duration_ms, case
    if not isolation:
        assert compute_not_available_duration_ms(latency_ms) == duration_ms, case


@pytest.mark.parametrize(("case", "latency_ms", "isolation", "level", "duration_ms"), ROCKETMQ_5_CASES)
def test_rocketmq_5_table(case, latency_ms, isolation, level, duration_ms):
    fed = ROCKETMQ_5.effective_latency_ms(latency_ms, isolation)
    assert ROCKETMQ_5.level_of(fed) == level, case
    assert ROCKETMQ_5.duration_ms(latency_ms, isolation) == duration_ms, case


def test_presets_are_the_documented_tables():
    assert preset("rocketmq-4") is ROCKETMQ_4 and preset("rocketmq-5") is ROCKETMQ_5
    assert set(PRESETS) == {"rocketmq-4", "rocketmq-5"}
    assert (ROCKETMQ_4.isolation_latency_ms, ROCKETMQ_4.semantics) == (30_000, FaultSemantics.OVERWRITE)
    assert (ROCKETMQ_5.isolation_latency_ms, ROCKETMQ_5.semantics) == (10_000, FaultSemantics.EXTEND_ONLY)
    assert fault_table_for_line(ClientLine.V4_9) is ROCKETMQ_4 and fault_table_for_line(ClientLine.V5) is ROCKETMQ_5
    # The Spark reducer keeps every send at or above this latency: the first level with a positive duration.
    assert ROCKETMQ_4.latency_floor_ms == 550 and ROCKETMQ_5.latency_floor_ms == 550


# --------------------------------------------------------------------------------------------------
# 2. Custom tables: (case, config, expected error fragment or None)
# --------------------------------------------------------------------------------------------------

GOOD = {
    "latency_max_ms": [10, 100],
    "not_available_duration_ms": [0, 5000],
    "isolation_latency_ms": 100,
    "semantics": "overwrite",
}

CONFIG_CASES = [
    (1, GOOD, None),
    (2, {**GOOD, "semantics": "extend"}, None),  # conf/monitor.toml spells extend-only "extend"
    (3, {**GOOD, "semantics": "extend-only"}, None),
    (4, {"preset": "rocketmq-5"}, None),  # a preset alone
    (5, {"preset": "rocketmq-4", "isolation_latency_ms": 1000}, None),  # a preset with an override
    (6, {**GOOD, "latency_max_ms": [10]}, "same length"),
    (7, {**GOOD, "latency_max_ms": [100, 10]}, "strictly ascending"),
    (8, {**GOOD, "latency_max_ms": [10, 10]}, "strictly ascending"),  # equal is not ascending
    (9, {**GOOD, "not_available_duration_ms": [0, -1]}, "not_available_duration_ms[1]"),
    (10, {**GOOD, "latency_max_ms": [], "not_available_duration_ms": []}, "at least one threshold"),
    (11, {**GOOD, "latency_max_ms": [-5, 10]}, "latency_max_ms[0]"),
    (12, {**GOOD, "latency_max_ms": [10, "100"]}, "must be an integer"),  # strings are not numbers
    (13, {**GOOD, "latency_max_ms": [True, 100]}, "must be an integer"),  # neither are booleans
    (14, {**GOOD, "latency_max_ms": "10,100"}, "must be a list"),
    (15, {**GOOD, "isolation_latency_ms": -1}, "isolation_latency_ms"),
    (16, {**GOOD, "semantics": "sometimes"}, "semantics must be one of"),
    (17, {**GOOD, "latencyMax": [1]}, "unknown fault table keys ['latencyMax']"),  # typos fail loudly
    (18, {"latency_max_ms": [1], "not_available_duration_ms": [1]}, "needs ['isolation_latency_ms', 'semantics']"),
    (19, {"preset": "rocketmq-6"}, "unknown fault table preset 'rocketmq-6'"),
    (20, {**GOOD, "not_available_duration_ms": [0, 2**63]}, "between 0 and"),  # beyond a Java long
]


@pytest.mark.parametrize(("case", "config", "error"), CONFIG_CASES)
def test_custom_table_validation(case, config, error):
    if error is None:
        table = fault_table_from_config(config)
        assert fault_table_from_config(table.to_dict()) == table, case  # round trip
    else:
        with pytest.raises(ConfigurationError, match=None) as raised:
            fault_table_from_config(config)
        assert error in str(raised.value), (case, str(raised.value))


def test_custom_table_names_and_overrides():
    assert fault_table_from_config({"preset": "rocketmq-4"}) == ROCKETMQ_4
    tuned = fault_table_from_config({"preset": "rocketmq-4", "isolation_latency_ms": 1000})
    assert tuned.name == "rocketmq-4-custom" and tuned.duration_ms(0, isolation=True) == 60_000
    named = fault_table_from_config({**GOOD, "name": "slow-network"})
    assert named.name == "slow-network" and named.compute_not_available_duration_ms(100) == 5000
    assert named.latency_floor_ms == 100
    silent = fault_table_from_config({**GOOD, "not_available_duration_ms": [0, 0]})
    assert silent.latency_floor_ms is None  # no level ever isolates


def test_fault_table_direct_construction_is_validated_too():
    with pytest.raises(ConfigurationError, match="strictly ascending"):
        FaultTable("t", (5, 5), (0, 0), 0, FaultSemantics.OVERWRITE)
    with pytest.raises(ConfigurationError, match="name"):
        FaultTable("", (5,), (0,), 0, FaultSemantics.OVERWRITE)


# --------------------------------------------------------------------------------------------------
# 3. Outcomes -> updateFaultItem arguments, per sendDefaultImpl's catch blocks
#    (case, outcome, line, detector_enabled, isolation, reachable)
# --------------------------------------------------------------------------------------------------

V4, V5 = ClientLine.V4_9, ClientLine.V5
Out = SendOutcome
OUTCOME_CASES = [
    (1, Out.OK, V4, False, False, True),  # success: duration from the real latency
    (2, Out.REMOTING_ERROR, V4, False, True, True),  # RemotingException: isolate
    (3, Out.TIMEOUT, V4, False, True, True),  # RemotingTimeoutException is a RemotingException
    (4, Out.CLIENT_ERROR, V4, False, True, True),  # 4.9.x isolates on MQClientException too
    (5, Out.BROKER_ERROR, V4, False, True, True),
    (6, Out.INTERRUPTED, V4, False, False, True),  # InterruptedException: not isolated
    (7, Out.REMOTING_ERROR, V4, True, True, True),  # 4.9.x has no detector: the flag changes nothing
    (8, Out.OK, V5, False, False, True),
    (9, Out.CLIENT_ERROR, V5, False, False, True),  # 5.x no longer isolates on MQClientException
    (10, Out.INTERRUPTED, V5, False, False, True),
    (11, Out.REMOTING_ERROR, V5, False, True, True),  # detector off: isolated but still reachable
    (12, Out.TIMEOUT, V5, False, True, True),
    (13, Out.REMOTING_ERROR, V5, True, True, False),  # detector on: unreachable until it probes OK
    (14, Out.TIMEOUT, V5, True, True, False),
    (15, Out.BROKER_ERROR, V5, False, True, False),  # MQBrokerException: always unreachable
    (16, Out.BROKER_ERROR, V5, True, True, False),
]


@pytest.mark.parametrize(("case", "outcome", "line", "detector", "isolation", "reachable"), OUTCOME_CASES)
def test_outcome_call_sites(case, outcome, line, detector, isolation, reachable):
    assert fault_update_for(outcome, line, detector) == FaultUpdate(isolation, reachable), case


def test_every_outcome_is_covered_for_both_lines():
    covered = {(c[1], c[2]) for c in OUTCOME_CASES}
    assert covered == {(o, line) for o in SendOutcome for line in ClientLine}
    with pytest.raises(IllegalArgument, match="unknown send outcome"):
        SendOutcome.parse("FAILED")


# --------------------------------------------------------------------------------------------------
# 4. Update semantics on one item: (case, semantics, previous start, now, duration, reachable,
#    expected start, expected reachable)
# --------------------------------------------------------------------------------------------------

OW, EX = FaultSemantics.OVERWRITE, FaultSemantics.EXTEND_ONLY
UPDATE_CASES = [
    (1, OW, None, 1000, 0, True, 1000, True),  # new 4.9 item, fast: available from now
    (2, OW, None, 1000, 600_000, True, 601_000, True),  # new 4.9 item, isolated
    (3, OW, 601_000, 2000, 0, True, 2000, True),  # overwrite: a fast success ends the isolation
    (4, OW, 601_000, 2000, 30_000, True, 32_000, True),  # overwrite: a shorter duration shortens
    (5, OW, 601_000, 2000, 600_000, False, 602_000, True),  # 4.9.x has no reachable flag
    (6, EX, None, 1000, 0, True, 0, True),  # new 5.x item keeps Java's default 0
    (7, EX, None, 1000, 0, False, 0, False),  # ... and takes the reachable flag as given
    (8, EX, None, 1000, 10_000, False, 11_000, False),
    (9, EX, 11_000, 2000, 0, True, 11_000, True),  # extend-only: a success never shortens
    (10, EX, 11_000, 2000, 5000, True, 11_000, True),  # 2000 + 5000 < 11000: unchanged
    (11, EX, 11_000, 6000, 5000, True, 11_000, True),  # equal end: unchanged (strictly later only)
    (12, EX, 11_000, 6001, 5000, True, 11_001, True),  # later end: extended
    (13, EX, 0, 2000, 2000, True, 4000, True),  # an item created fast is extended from 0
]


@pytest.mark.parametrize(
    ("case", "semantics", "previous", "now_ms", "duration_ms", "reachable", "start", "reachable_after"), UPDATE_CASES
)
def test_update_semantics(case, semantics, previous, now_ms, duration_ms, reachable, start, reachable_after):
    old = None if previous is None else FaultItem("b", 1, previous, True)
    new = updated_fault_item(old, "b", 77, duration_ms, now_ms, semantics, reachable)
    assert (new.start_timestamp_ms, new.reachable, new.current_latency_ms) == (start, reachable_after, 77), case


def test_is_available_boundary_is_inclusive():
    item = FaultItem("b", 10, start_timestamp_ms=5000)
    assert not item.is_available(4999) and item.is_available(5000) and item.is_available(5001)


def test_overwrite_sequence_on_the_tolerance_value():
    t = LatencyFaultTolerance(FaultSemantics.OVERWRITE)
    t = t.update_fault_item("a", 3000, ROCKETMQ_4.duration_ms(3000, isolation=True), now_ms=1000)
    assert not t.is_available("a", 600_999) and t.is_available("a", 601_000)
    t = t.update_fault_item("a", 12, ROCKETMQ_4.duration_ms(12, isolation=False), now_ms=2000)
    assert t.is_available("a", 2000)  # the isolation is gone at once
    assert t.is_available("unknown", 0) and t.is_reachable("unknown")
    assert t.remove("a").items == ()
    with pytest.raises(NullPointer):
        t.remove(None)


def test_extend_only_sequence_on_the_tolerance_value():
    t = LatencyFaultTolerance(FaultSemantics.EXTEND_ONLY)
    t = t.update_fault_item("a", 40, ROCKETMQ_5.duration_ms(40, isolation=True), now_ms=1000, reachable=False)
    assert not t.is_available("a", 10_999) and t.is_available("a", 11_000) and not t.is_reachable("a")
    t = t.update_fault_item("a", 12, 0, now_ms=2000, reachable=True)
    assert not t.is_available("a", 2000) and t.is_reachable("a")  # success: reachable, still isolated


def test_pick_order_available_first_then_latency_then_end():
    t = LatencyFaultTolerance(FaultSemantics.OVERWRITE)
    t = t.update_fault_item("slow-ok", 900, -1, now_ms=100)  # available
    t = t.update_fault_item("fast-bad", 5, 50, now_ms=100)  # unavailable until 150
    t = t.update_fault_item("fast-ok", 10, -1, now_ms=100)
    t = t.update_fault_item("tie-late", 900, 10, now_ms=100)  # same latency as slow-ok, later end (110)
    assert [i.name for i in t.pick_order(120)] == ["fast-ok", "slow-ok", "tie-late", "fast-bad"]
    assert [i.name for i in t.pick_order(150)] == ["fast-bad", "fast-ok", "slow-ok", "tie-late"]  # re-evaluated
    assert t.pick_candidates(120) == ("fast-ok", "slow-ok")  # the better half


# --------------------------------------------------------------------------------------------------
# 5. The tracker: episodes with exact start and end
# --------------------------------------------------------------------------------------------------


def send(t, latency, outcome="OK", producer="p1", broker="broker-a"):
    return SendResult(producer, broker, t, latency, SendOutcome(outcome))


def rows(episodes):
    return [
        (
            e.status.value,
            e.event_time_ms,
            e.window_start_ms,
            e.window_end_ms,
            e.previous_end_ms,
            e.trigger_latency_ms,
            e.level,
            e.cause,
        )
        for e in episodes
    ]


def test_tracker_4_9_overwrite_episodes():
    tracker = FaultWindowTracker(ROCKETMQ_4)
    steps = [
        # (case, send, expected episode rows)
        (1, send(1000, 3000, "REMOTING_ERROR"), [("OPENED", 1000, 1000, 601_000, None, 3000, 6, "REMOTING_ERROR")]),
        (2, send(2000, 700), [("SHORTENED", 2000, 1000, 32_000, 601_000, 700, 2, "OK")]),  # overwrite: 30 s
        (3, send(3000, 1200), [("EXTENDED", 3000, 1000, 63_000, 32_000, 1200, 3, "OK")]),
        (4, send(4000, 20), [("CLOSED_EARLY", 4000, 1000, 4000, 63_000, 20, -1, "OK")]),  # fast success
        (5, send(4500, 20), []),  # available and stays so: nothing to report
        (6, send(5000, 600), [("OPENED", 5000, 5000, 35_000, None, 600, 2, "OK")]),  # a slow success opens
        (7, send(6000, 600), [("EXTENDED", 6000, 5000, 36_000, 35_000, 600, 2, "OK")]),  # same level, later end
    ]
    for case, event, expected in steps:
        step = tracker.apply(event)
        assert rows(step.episodes) == expected, case
        tracker = step.tracker
    assert tracker.next_expiry_ms() == 36_000
    assert tracker.advance(35_999).episodes == ()
    step = tracker.advance(36_000)  # available at the end instant: expired
    assert rows(step.episodes) == [("EXPIRED", 36_000, 5000, 36_000, None, 600, 2, "OK")]
    assert step.tracker.next_expiry_ms() is None and step.tracker.is_available("p1", "broker-a", 36_000)


def test_tracker_5_x_extend_only_episodes_and_reachability():
    tracker = FaultWindowTracker(ROCKETMQ_5)
    steps = [
        (1, send(1000, 40, "BROKER_ERROR"), [("OPENED", 1000, 1000, 11_000, None, 40, 5, "BROKER_ERROR")], False),
        (2, send(2000, 10), [], True),  # success: reachable again, the window stays
        (3, send(3000, 5000), [("EXTENDED", 3000, 1000, 13_000, 11_000, 5000, 5, "OK")], True),
        (4, send(4000, 7, "TIMEOUT"), [("EXTENDED", 4000, 1000, 14_000, 13_000, 7, 5, "TIMEOUT")], True),
        (5, send(4000, 600), [], True),  # 2 s from now ends before 14 s: unchanged
        (6, send(5000, 9, "CLIENT_ERROR"), [], True),  # 5.x: client errors do not isolate
    ]
    for case, event, expected, reachable in steps:
        step = tracker.apply(event)
        assert rows(step.episodes) == expected, case
        tracker = step.tracker
        assert tracker.is_reachable("p1", "broker-a") is reachable, case
    assert not tracker.is_available("p1", "broker-a", 13_999) and tracker.is_available("p1", "broker-a", 14_000)
    step = tracker.apply(send(14_000, 3))  # expiry is reported before the send at the same instant
    assert rows(step.episodes) == [("EXPIRED", 14_000, 1000, 14_000, None, 7, 5, "TIMEOUT")]


def test_tracker_5_x_detector_makes_remoting_errors_unreachable():
    tracker = FaultWindowTracker(ROCKETMQ_5, detector_enabled=True).apply(send(1000, 5, "REMOTING_ERROR")).tracker
    assert not tracker.is_reachable("p1", "broker-a")
    tracker = FaultWindowTracker(ROCKETMQ_5).apply(send(1000, 5, "REMOTING_ERROR")).tracker
    assert tracker.is_reachable("p1", "broker-a")


def test_tracker_isolated_episode_fields():
    episode = FaultWindowTracker(ROCKETMQ_4).apply(send(0, 12, "BROKER_ERROR")).episodes[0]
    assert (episode.isolation, episode.level, episode.window_end_ms) == (True, 6, 600_000)
    assert episode.fault_table == "rocketmq-4"
    assert episode.as_row()["status"] == "OPENED" and episode.status.closes is False


def test_tracker_refuses_late_sends_and_never_moves_back():
    tracker = FaultWindowTracker(ROCKETMQ_4).apply(send(10_000, 700)).tracker
    step = tracker.apply(send(9_999, 5000, "BROKER_ERROR"))
    assert step.late == (send(9_999, 5000, "BROKER_ERROR"),) and step.tracker is tracker and step.episodes == ()
    assert tracker.advance(5).tracker.clock_ms == 10_000  # advancing to the past is a no-op
    assert tracker.apply(send(10_000, 5)).late == ()  # the same instant is not late


def test_expiries_are_reported_in_end_order_across_producers_and_brokers():
    tracker = FaultWindowTracker(ROCKETMQ_4)
    step = tracker.apply_all(
        [
            send(0, 1000, producer="p2", broker="b"),  # ends 60 000
            send(0, 600, producer="p1", broker="c"),  # ends 30 000
            send(1, 600, producer="p1", broker="a"),  # ends 30 001
        ]
    )
    assert [e.status for e in step.episodes] == [WindowStatus.OPENED] * 3
    expired = step.tracker.advance(100_000).episodes
    assert [(e.producer_id, e.broker, e.event_time_ms) for e in expired] == [
        ("p1", "c", 30_000),
        ("p1", "a", 30_001),
        ("p2", "b", 60_000),
    ]
    # a send at 45 000 expires the first two before its own update
    mid = step.tracker.apply(send(45_000, 5, producer="p3", broker="z")).episodes
    assert [(e.status.value, e.broker) for e in mid] == [("EXPIRED", "c"), ("EXPIRED", "a")]


def test_all_brokers_unavailable_and_fallback_views():
    tracker = (
        FaultWindowTracker(ROCKETMQ_4)
        .apply_all(
            [
                send(0, 700, broker="a"),  # 30 s, latency 700
                send(0, 1500, broker="b"),  # 60 s, latency 1500
                send(0, 5, broker="x"),  # available, but not one of the topic's brokers
            ]
        )
        .tracker
    )
    assert tracker.all_brokers_unavailable("p1", ["a", "b"], 10)
    assert not tracker.all_brokers_unavailable("p1", ["a", "b", "c"], 10)  # c has no item: available
    assert not tracker.all_brokers_unavailable("p1", [], 10)  # no route is not this failure
    assert not tracker.all_brokers_unavailable("p1", ["a", "b"], 30_000)  # a is back
    # pickOneAtLeast: available first (x), then lower latency (a); half of 3 is 1 -> only items[0]
    assert tracker.fallback("p1", ["a", "b"], 10).candidates == ("x",)
    assert tracker.fallback("p1", ["a", "b"], 30_000).all_unavailable is False
    five = (
        FaultWindowTracker(ROCKETMQ_5)
        .apply_all(
            [
                send(0, 5, "BROKER_ERROR", broker="a"),
                send(0, 5, "REMOTING_ERROR", broker="b"),
            ]
        )
        .tracker
    )
    assert five.fallback("p1", ["a", "b"], 10).candidates == ("b",)  # only b is still reachable
    five = five.apply(send(1, 5, "BROKER_ERROR", broker="b")).tracker
    assert five.fallback("p1", ["a", "b"], 10).candidates == ("a", "b")  # none reachable: plain round robin


def test_broker_status_counts_avoiding_producers():
    tracker = (
        FaultWindowTracker(ROCKETMQ_4)
        .apply_all(
            [
                send(0, 700, producer="p1", broker="a"),
                send(0, 2000, producer="p2", broker="a"),
                send(0, 5, producer="p3", broker="a"),
                send(0, 5, producer="p1", broker="b"),
            ]
        )
        .tracker
    )
    status = {s.broker: s for s in tracker.broker_status(10)}
    assert (status["a"].producers_seen, status["a"].producers_avoiding, status["a"].avoided_until_ms) == (3, 2, 120_000)
    assert status["a"].avoiding_ratio == pytest.approx(2 / 3)
    assert (status["b"].producers_avoiding, status["b"].avoided_until_ms, status["b"].avoiding_ratio) == (0, None, 0.0)


def test_fault_tolerance_view_feeds_the_selection_model():
    tracker = FaultWindowTracker(ROCKETMQ_4).apply_all([send(0, 700, broker="a"), send(0, 5, broker="b")]).tracker
    faults = tracker.fault_tolerance("p1")
    assert [i.name for i in faults.items] == ["a", "b"] and faults.semantics is FaultSemantics.OVERWRITE
    assert not faults.is_available("a", 10) and faults.is_available("b", 10)
    assert tracker.fault_tolerance("nobody").items == ()


def test_evict_idle_keeps_open_windows_and_unreachable_items():
    tracker = (
        FaultWindowTracker(ROCKETMQ_5)
        .apply_all(
            [
                send(0, 5, broker="idle"),
                send(0, 5, "BROKER_ERROR", broker="unreachable"),
                send(0, 20_000, broker="open"),
            ]
        )
        .tracker
    )
    kept = tracker.advance(25_000).tracker.evict_idle(now_ms=25_000, idle_ms=20_000)
    assert sorted(b for _, b in kept.items) == ["open", "unreachable"]
    assert tracker.evict_idle(now_ms=10, idle_ms=20_000) is tracker


def disabled(t, latency, outcome="OK", producer="p1", broker="broker-a"):
    return SendResult(producer, broker, t, latency, SendOutcome(outcome), fault_enabled=False)


@pytest.mark.parametrize("table", [ROCKETMQ_4, ROCKETMQ_5], ids=["4.9", "5"])
def test_a_producer_without_send_latency_fault_enable_never_avoids_a_broker(table):
    # sendLatencyFaultEnable=false: updateFaultItem does nothing, the selection never consults the items
    sends = [
        disabled(0, 5, "REMOTING_ERROR"),
        disabled(10, 20_000),
        disabled(20, 5, "BROKER_ERROR"),
        disabled(30, 700, broker="b"),
        send(30, 700, producer="p2", broker="b"),
    ]
    step = FaultWindowTracker(table, detector_enabled=True).apply_all(sends)
    assert [(e.producer_id, e.status.value) for e in step.episodes] == [("p2", "OPENED")]
    tracker = step.tracker
    for t in (30, 1_000, 700_000):
        assert tracker.is_available("p1", "broker-a", t) and tracker.is_available("p1", "b", t)
    assert tracker.is_reachable("p1", "broker-a")
    assert not tracker.all_brokers_unavailable("p1", ["broker-a", "b"], 31)
    assert tracker.fault_tolerance("p1").items == (FaultItem("broker-a", 0, 0), FaultItem("b", 0, 0))  # none
    status = {s.broker: s for s in tracker.broker_status(31)}
    assert (status["b"].producers_seen, status["b"].producers_avoiding) == (2, 1)  # p1 sends there, avoids not
    assert (status["broker-a"].producers_seen, status["broker-a"].producers_avoiding) == (1, 0)
    until = {ROCKETMQ_4.name: 30_030, ROCKETMQ_5.name: 2_030}[table.name]  # 700 ms: 30 s (4.9.x), 2 s (5.x)
    assert tracker.get("p1", "b").avoids_at is None and tracker.get("p2", "b").avoids_at == until


def test_a_producer_that_turns_the_feature_off_stops_avoiding_at_once():
    tracker = FaultWindowTracker(ROCKETMQ_5).apply(send(0, 5, "BROKER_ERROR")).tracker  # avoided until 10 s
    step = tracker.apply(disabled(4_000, 3_000))
    assert rows(step.episodes) == [("CLOSED_EARLY", 4_000, 0, 4_000, 10_000, 3_000, -1, "OK")]
    assert step.tracker.is_available("p1", "broker-a", 4_000) and step.tracker.next_expiry_ms() is None
    assert step.tracker.advance(20_000).episodes == ()  # no EXPIRED for a window that already ended
    # the Java table keeps its item while the feature is off (setSendLatencyFaultEnable(false))
    assert step.tracker.get("p1", "broker-a").item == tracker.get("p1", "broker-a").item
    again = step.tracker.apply(send(5_000, 5))  # on again: the kept item (until 10 s, extend-only) applies
    assert rows(again.episodes) == [("OPENED", 5_000, 5_000, 10_000, None, 5, -1, "OK")]


def test_snapshot_round_trip_through_json_and_schema_version():
    tracker = (
        FaultWindowTracker(ROCKETMQ_5, detector_enabled=True)
        .apply_all(
            [
                send(0, 5, "REMOTING_ERROR", broker="a"),
                send(10, 3000, broker="b"),
                send(20, 3, broker="c"),
                disabled(30, 4000, broker="d"),
            ]
        )
        .tracker
    )
    data = json.loads(json.dumps(tracker.to_dict()))
    assert [i["fault_enabled"] for i in data["items"]] == [True, True, True, False]
    older = {**data, "items": [{k: v for k, v in i.items() if k != "fault_enabled"} for i in data["items"][:3]]}
    assert all(t.fault_enabled for t in FaultWindowTracker.from_dict(older).items.values())  # before the flag
    assert data["schema_version"] == 1
    restored = FaultWindowTracker.from_dict(data)
    assert restored == tracker
    later = send(6010, 5000, broker="b")  # extends b's window in both
    assert restored.apply(later) == tracker.apply(later)
    with pytest.raises(StateVersionError, match="fault tracker snapshot schema_version 2"):
        FaultWindowTracker.from_dict({**data, "schema_version": 2})


def test_tracker_pickles_and_send_results_parse_outcome_strings():
    import pickle

    tracker = FaultWindowTracker(ROCKETMQ_4).apply(send(0, 700)).tracker
    assert pickle.loads(pickle.dumps(tracker)) == tracker  # Spark ships values between processes
    assert SendResult("p", "b", 0, 1, "TIMEOUT").outcome is SendOutcome.TIMEOUT  # type: ignore[arg-type]
    with pytest.raises(IllegalArgument):
        SendResult("p", "b", 0, 1, "timeout")  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------------
# 6. Properties of the replay over random send sequences
# --------------------------------------------------------------------------------------------------

sends_strategy = st.lists(
    st.tuples(
        st.integers(0, 40_000),  # gap to the previous send, ms
        st.sampled_from(["p1", "p2"]),
        st.sampled_from(["a", "b", "c"]),
        st.sampled_from([0, 49, 50, 549, 550, 1000, 1800, 2000, 3000, 5000, 15_000, 20_000]),
        st.sampled_from(list(SendOutcome)),
    ),
    max_size=40,
)


def _timeline(raw):
    t, out = 1_000_000, []
    for gap, producer, broker, latency, outcome in raw:
        t += gap
        out.append(SendResult(producer, broker, t, latency, outcome))
    return out


@settings(max_examples=300, deadline=None, derandomize=True)
@given(raw=sends_strategy, table=st.sampled_from([ROCKETMQ_4, ROCKETMQ_5]), cut=st.integers(0, 40))
def test_replay_properties(raw, table, cut):
    sends = _timeline(raw)
    tracker = FaultWindowTracker(table)
    reference = LatencyFaultTolerance(table.semantics)  # per-producer models, keyed by producer
    models: dict[str, LatencyFaultTolerance] = {}
    episodes = []
    for i, event in enumerate(sends):
        if i == cut:  # a restart from a snapshot in the middle changes nothing
            tracker = FaultWindowTracker.from_dict(json.loads(json.dumps(tracker.to_dict())))
        step = tracker.apply(event)
        assert step.late == ()
        tracker = step.tracker
        episodes.extend(step.episodes)
        update = fault_update_for(event.outcome, table.client_line)
        model = models.get(event.producer_id, reference)
        models[event.producer_id] = model.update_fault_item(
            event.broker,
            event.latency_ms,
            table.duration_ms(event.latency_ms, update.isolation),
            event.event_time_ms,
            update.reachable,
        )
        # the tracker's item is exactly LatencyFaultToleranceImpl's, and a window is open iff unavailable
        for (producer, broker), tracked in tracker.items.items():
            assert tracked.item == models[producer].get(broker)
            assert (tracked.window is not None) == (not tracked.item.is_available(event.event_time_ms))
            if tracked.window is not None:
                assert tracked.window.window_end_ms == tracked.item.start_timestamp_ms
    episodes.extend(tracker.advance(10**13).episodes)
    # per key: OPENED, then moves, then one closing; 5.x never shortens or closes early
    by_key: dict[tuple[str, str], list] = {}
    for e in episodes:
        by_key.setdefault((e.producer_id, e.broker), []).append(e)
        assert e.event_time_ms >= e.window_start_ms
    for history in by_key.values():
        open_ = False
        for e in history:
            if e.status is WindowStatus.OPENED:
                assert not open_
                open_ = True
            else:
                assert open_
                open_ = not e.status.closes
            if table.semantics is FaultSemantics.EXTEND_ONLY:
                assert e.status not in (WindowStatus.SHORTENED, WindowStatus.CLOSED_EARLY)
        assert not open_  # advancing far enough closes everything
    times = [e.event_time_ms for e in episodes]
    assert times == sorted(times)  # episodes come out in event-time order
