"""Rebalance cost: a moved queue's hand-off measured on its progress samples, at and around each boundary.

``rebalance_cost`` alone (when a cost opens and its t0, the old owner's last progress, the hand-off's end, orphaned
and double-held time, re-delivered messages, recovery, the bound) and through ``ShardEngine`` (a member leaves, the
moved queue's row emitted once, a state snapshot with a cost open).
"""

from __future__ import annotations

import json

import pytest

from streaming.contract.tables import column_names
from streaming.domain.consumers.engine_settings import EngineSettings
from streaming.domain.consumers.outcomes import RebalanceCost
from streaming.domain.consumers.shard_engine import ShardEngine
from streaming.domain.progress.rebalance_cost import (
    MOVED_AGAIN,
    RECOVERED,
    SAMPLE_BOUND,
    UNTRACKED,
    Handoff,
    advance,
    final_reason,
    open_handoff,
)
from streaming.domain.progress.verdict import HolderView, QueueSample
from streaming.job.delta.table_rows import REBALANCE_COST, table_rows
from tests.support.engine import typed
from tests.unit.test_fleet import ev, hb, route
from tests.unit.test_progress_tracker import progress, report

S = 1_000  # a second
T0 = 1_700_000_000_000


def holder(cid, commit=0, cached=0, high=0):
    return HolderView(cid, commit, cached, 0, 0, high, 0, 0)


def sample(t_s, b, c, holders=("c0",), owner="c0", pull=None, answered=True):
    views = tuple(h if isinstance(h, HolderView) else holder(h) for h in holders)
    return QueueSample(t_s * S, answered, b, c, 0, pull, None, views, owner)


# c0 consumes up to 30 s (lag 5); the generation change at 40 s moves the queue to c1.
BEFORE = [sample(0, 100, 95), sample(30, 110, 105)]
CHANGE = (40 * S,)


def opened(first=None, before=BEFORE, changes=CHANGE):
    first = first or sample(60, 120, 105, (), "c1")
    handoff = open_handoff(before, first, changes, 3)
    assert handoff is not None
    return handoff


# -- when a cost opens, and its t0 ---------------------------------------------------------------------------------
def test_a_queue_whose_expected_owner_stays_or_was_unknown_opens_no_cost():
    assert open_handoff(BEFORE, sample(60, 120, 110), CHANGE, 3) is None
    assert open_handoff([], sample(60, 120, 110, owner="c1"), CHANGE, 3) is None
    assert open_handoff([sample(30, 110, 105, owner=None)], sample(60, 120, 110, owner="c1"), CHANGE, 3) is None
    assert open_handoff(BEFORE, sample(60, 120, 110, owner=None), CHANGE, 3) is None


@pytest.mark.parametrize(
    ("changes", "t0_s"),
    [((30 * S,), 60), ((30 * S + 1,), 30.001), ((60 * S,), 60), ((60 * S + 1,), 60), ((40 * S, 50 * S), 50), ((), 60)],
)
def test_t0_is_the_latest_change_after_the_last_owned_sample_and_not_after_the_moving_one(changes, t0_s):
    # a change at the earlier sample's time or after the moving sample is not this move's: t0 is then the sample's
    assert opened(changes=changes).t0_ms == int(t0_s * S)


def test_the_cost_names_both_owners_the_generation_and_the_lag_at_t0():
    h = opened()
    assert (h.old_owner, h.new_owner, h.generation, h.lag_at_t0) == ("c0", "c1", 3, 110 - 105)


def test_the_old_owners_last_progress_is_its_last_advance_or_caught_up_sample_before_t0():
    assert (opened().start_ms, opened().start_bounded) == (30 * S, False)
    flat = [sample(0, 100, 95), sample(30, 110, 95)]  # c0 stood still since 0 s: it last advanced before the window
    assert (opened(before=flat).start_ms, opened(before=flat).start_bounded) == (0, True)
    caught_up = [sample(0, 95, 95), sample(30, 110, 95)]  # lag 0 at 0 s: nothing waited then
    assert (opened(before=caught_up).start_ms, opened(before=caught_up).start_bounded) == (0, False)


# -- the hand-off ------------------------------------------------------------------------------------------------------
def test_the_handoff_ends_when_the_new_owner_holds_and_advances_the_offset():
    h = advance(opened(), sample(60, 120, 105, (), "c1"))
    assert h.handoff_end_ms is None and h.orphaned_ms == 20 * S  # t0 (40 s) to 60 s, no holder
    h = advance(h, sample(90, 130, 105, ("c1",), "c1"))  # c1 holds, offset flat: not yet
    assert h.handoff_end_ms is None and h.orphaned_ms == 20 * S
    h = advance(h, sample(120, 140, 106, ("c1",), "c1"))  # one message further: ended
    assert h.handoff_end_ms == 120 * S and h.handoff_gap_ms == (120 - 30) * S
    h = advance(h, sample(150, 150, 150, (), "c1"))  # after the hand-off nothing is orphaned any more
    assert h.orphaned_ms == 20 * S


def test_the_old_owner_advancing_or_an_unanswered_sample_does_not_end_the_handoff():
    h = advance(opened(), sample(60, 120, 108, ("c0",), "c1"))
    assert h.handoff_end_ms is None and h.orphaned_ms == 0
    h = advance(h, sample(90, 0, 0, ("c1",), "c1", answered=False))
    assert h.handoff_end_ms is None and h.last_offset == 108


def test_a_caught_up_queue_ends_its_handoff_when_the_new_owner_holds_it():
    h = advance(opened(), sample(60, 105, 105, ("c1",), "c1"))
    assert h.handoff_end_ms == 60 * S and h.handoff_gap_ms == 30 * S


def test_time_with_two_holders_is_double_held_and_with_none_orphaned():
    h = advance(opened(), sample(60, 120, 105, ("c0", "c1"), "c1"))
    h = advance(h, sample(90, 130, 105, (), "c1"))
    h = advance(h, sample(120, 140, 110, ("c1",), "c1"))
    assert (h.double_held_ms, h.orphaned_ms, h.handoff_end_ms) == (20 * S, 30 * S, 120 * S)


# -- re-delivered messages ---------------------------------------------------------------------------------------------
def test_a_consumer_offset_gone_back_is_rewound_committed_messages_delivered_again():
    h = advance(opened(), sample(60, 120, 100, ("c1",), "c1"))  # c1 committed 100: back from 105
    h = advance(h, sample(90, 130, 112, ("c1",), "c1"))
    assert (h.committed_before, h.start_offset, h.rewound, h.redelivered_max) == (105, 100, 5, 5)


def test_the_old_owners_cache_and_the_pull_offset_bound_what_it_received():
    pqi = [sample(0, 100, 95), sample(30, 130, 105, (holder("c0", commit=107, cached=12, high=118),))]
    h = advance(opened(before=pqi), sample(60, 140, 105, ("c1",), "c1"))
    h = advance(h, sample(90, 150, 120, ("c1",), "c1"))
    # its own commit (107) is ahead of the broker's (105): 2 committed then rewound; it had received up to 118
    assert (h.committed_before, h.received_before, h.start_offset) == (107, 119, 105)
    assert (h.rewound, h.redelivered_max) == (2, 14)
    pulled = [sample(0, 100, 95), sample(30, 130, 105, pull=125)]  # 5.1+: the broker's pull offset
    assert advance(opened(before=pulled), sample(60, 140, 110, ("c1",), "c1")).redelivered_max == 20
    assert advance(opened(), sample(60, 140, 110, ("c1",), "c1")).redelivered_max == 0  # nothing received beyond


# -- lag spike, recovery, the bound -----------------------------------------------------------------------------------
@pytest.mark.parametrize(("lag", "recovered"), [(5, True), (6, False)])
def test_recovery_is_the_first_sample_after_the_handoff_with_the_lag_back_to_its_level_at_t0(lag, recovered):
    h = advance(opened(), sample(60, 130, 105, (), "c1"))  # lag 25: the peak
    h = advance(h, sample(90, 140, 125, ("c1",), "c1"))  # the hand-off ends, lag 15
    assert h.recovered_ms is None and h.peak_lag == 25 and final_reason(h, 10) is None
    h = advance(h, sample(120, 150, 150 - lag, ("c1",), "c1"))
    assert h.recovered_ms == (120 * S if recovered else None)
    assert final_reason(h, 10) == (RECOVERED if recovered else None)


def test_a_low_lag_before_the_handoff_ended_is_no_recovery():
    h = advance(opened(), sample(60, 105, 105, ("c0",), "c1"))  # the old owner still consumes: lag 0
    assert h.handoff_end_ms is None and h.recovered_ms is None


@pytest.mark.parametrize(("samples", "reason"), [(9, None), (10, SAMPLE_BOUND)])
def test_a_cost_that_does_not_recover_is_final_after_the_bound(samples, reason):
    h = opened()
    for i in range(samples):
        h = advance(h, sample(60 + 30 * i, 120 + i, 105, (), "c1"))
    assert h.samples == samples and final_reason(h, 10) == reason
    assert h.handoff_gap_ms is None and h.peak_lag == 120 + samples - 1 - 105


# -- through the engine ------------------------------------------------------------------------------------------------
def two_members():
    """Group G on T (2 queues of broker-a): c1 holds queue 0, c2 queue 1 (AVG), both reporting after their join's
    generation plus the rebalance delay (an earlier report gives no holder)."""
    engine = ShardEngine.restore(None, EngineSettings())
    engine.apply(typed([route(T0, brokers=(("broker-a", 2),)), hb(T0 + 1, "ch1", "c1"), hb(T0 + 1, "ch2", "c2")]), T0)
    reported = T0 + 1 + EngineSettings().client_rebalance_delay_ms
    engine.apply(
        typed(
            [
                report(reported, "c1", [("broker-a", 0)]),
                report(
                    reported, "c2", [("broker-a", 1)], commit_offset=50, cached_msg_count=4, cached_msg_max_offset=53
                ),
            ]
        ),
        T0,
    )
    return engine


def step(engine, t, rows, *extra):
    return engine.apply(typed([*extra, hb(t - 1, "ch1", "c1"), progress(t, rows)]), T0)


def costs(outcomes):
    return [o for o in outcomes if type(o) is RebalanceCost]


def test_a_member_leaving_costs_each_queue_it_held_one_row_once_final():
    engine = two_members()
    assert not costs(step(engine, T0 + 30 * S, [("T", 0, 10, 10), ("T", 1, 55, 50)]))
    leave = ev("UNREGISTER", T0 + 40 * S, "ch2", "c2")
    # c1's report once the leave's generation plus the rebalance delay has passed: it has not taken queue 1 yet
    still = report(T0 + 40 * S + EngineSettings().client_rebalance_delay_ms, "c1", [("broker-a", 0)])
    found = costs(step(engine, T0 + 60 * S, [("T", 0, 11, 11), ("T", 1, 60, 50)], leave, still))
    assert not found  # queue 1 moved to c1, which has not taken it yet; queue 0 did not move
    taken = report(T0 + 70 * S, "c1", [("broker-a", 0), ("broker-a", 1)])
    assert not costs(step(engine, T0 + 90 * S, [("T", 0, 12, 12), ("T", 1, 65, 58)], taken))  # lag 7 > 5
    (row,) = costs(step(engine, T0 + 120 * S, [("T", 0, 13, 13), ("T", 1, 70, 66)]))
    h = row.handoff
    assert (row.queue_id, row.reason, h.old_owner, h.new_owner, h.t0_ms) == (1, RECOVERED, "c2", "c1", T0 + 40 * S)
    assert h.handoff_end_ms == T0 + 90 * S and h.handoff_gap_ms == 60 * S  # from c2's last progress at 30 s
    assert (h.orphaned_ms, h.double_held_ms) == (20 * S, 0)  # 40 s -> 60 s nobody, from 90 s c1
    assert (h.lag_at_t0, h.peak_lag, h.recovered_ms) == (5, 10, T0 + 120 * S)
    assert (h.rewound, h.redelivered_max) == (0, 54 - 50)  # c2 had received up to 53, committed 50
    assert not costs(step(engine, T0 + 150 * S, [("T", 0, 14, 14), ("T", 1, 70, 70)]))  # emitted once
    (table, columns) = table_rows([row])[0]
    assert table == REBALANCE_COST and set(columns) | {"batch_id", "event_time"} == set(column_names(table))
    assert (columns["handoff_gap_ms"], columns["lag_spike"], columns["recovery_ms"]) == (60 * S, 10 - 5, 80 * S)


def test_an_open_cost_survives_a_snapshot_and_a_moved_again_or_untracked_queue_ends_it():
    engine = two_members()
    step(engine, T0 + 30 * S, [("T", 1, 55, 50)])
    step(engine, T0 + 60 * S, [("T", 1, 60, 50)], ev("UNREGISTER", T0 + 40 * S, "ch2", "c2"))
    snapshot = json.loads(json.dumps(engine.snapshot()))
    engine = ShardEngine.restore(snapshot, EngineSettings())
    assert engine.snapshot() == snapshot
    back = [hb(T0 + 80 * S, "ch2", "c2")]  # c2 joins again: queue 1 moves back before c1 advanced it
    (row,) = costs(step(engine, T0 + 90 * S, [("T", 1, 65, 50)], *back))
    assert (row.reason, row.handoff.new_owner, row.handoff.handoff_end_ms) == (MOVED_AGAIN, "c1", None)
    (row,) = costs(engine.apply([], T0 + 90 * S + 10 * 30 * S + 1))  # no sample for a whole window
    assert (row.reason, row.handoff.old_owner, row.handoff.new_owner) == (UNTRACKED, "c1", "c2")


def test_a_handoff_round_trips_as_its_snapshot_list():
    h = opened()
    assert Handoff.from_json(json.loads(json.dumps(h.to_json()))) == h


# -- the metrics -------------------------------------------------------------------------------------------------------
def test_the_last_change_s_cost_is_per_group_and_topic_longest_handoff_and_summed_redelivery():
    from connectors.metrics import Metrics, MetricsState
    from streaming.job.delta.metric_rows import FinalCost, apply_consumer_metrics, metric_values

    COST_T0, COST_HANDOFF, COST_REDELIVERED = (
        m.name
        for m in (
            Metrics.GROUP_LAST_REBALANCE_COST_TIMESTAMP_SECONDS,
            Metrics.GROUP_LAST_REBALANCE_HANDOFF_SECONDS,
            Metrics.GROUP_LAST_REBALANCE_REDELIVERED_MESSAGES,
        )
    )
    state = MetricsState()
    rows = [
        {"cluster": "c", "group": "G", "topic": "T", "t0_ms": 40 * S, "handoff_gap_ms": 30 * S, "redelivered_max": 5},
        {"cluster": "c", "group": "G", "topic": "T", "t0_ms": 40 * S, "handoff_gap_ms": 45 * S, "redelivered_max": 2},
        {"cluster": "c", "group": "G", "topic": "T", "t0_ms": 40 * S, "handoff_gap_ms": None, "redelivered_max": None},
        {
            "cluster": "c",
            "group": "G",
            "topic": "T",
            "t0_ms": 10 * S,
            "handoff_gap_ms": 90 * S,
            "redelivered_max": 50,
        },  # older
    ]
    apply_consumer_metrics(state, metric_values((REBALANCE_COST, r) for r in rows))
    gauges = {name: state.gauges[name][("c", "G", "T")] for name in (COST_T0, COST_HANDOFF, COST_REDELIVERED)}
    assert gauges == {COST_T0: 40.0, COST_HANDOFF: 45.0, COST_REDELIVERED: 7.0}
    apply_consumer_metrics(state, [("c", FinalCost("G", "T", 100 * S, None, 3))])  # a newer change replaces them
    assert ("c", "G", "T") not in state.gauges[COST_HANDOFF] and state.gauges[COST_REDELIVERED][("c", "G", "T")] == 3.0
