"""Latency fault tolerance: the two fault tables at every boundary, overwrite vs extend-only updates,
the outcome -> (isolation, reachable) call sites, custom-table validation and the tolerance's pick order.

This file is the "correctness proof" of ``streaming.domain.faults.tolerance`` (the replay's: ``test_fault_tracker.py``):
each table below is numbered so a failure names the case, and each case says why it is there.
"""

from __future__ import annotations

import pytest

from streaming.domain.errors import ConfigurationError, IllegalArgument, NullPointer
from streaming.domain.faults.tolerance import (
    PRESETS,
    ROCKETMQ_4,
    ROCKETMQ_5,
    FaultItem,
    FaultSemantics,
    FaultTable,
    FaultUpdate,
    LatencyFaultTolerance,
    SendOutcome,
    compute_not_available_duration_ms,
    fault_table_for_line,
    fault_table_from_config,
    fault_update_for,
    preset,
    updated_fault_item,
)
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
