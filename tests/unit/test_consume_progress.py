"""The consume-progress rule table, case by case: every state and every stuck cause, at and around each threshold,
and the time lag's bounds (``streaming.domain.progress.verdict``)."""

from __future__ import annotations

import pytest

from streaming.domain.progress.verdict import (
    RULES,
    HolderView,
    ProgressSettings,
    QueueSample,
    QueueState,
    StuckCause,
    evaluate,
    time_lag,
)
from streaming.domain.vocabulary import AllocationMode, Severity

T0 = 1_700_000_000_000
STEP = 30_000
W = ProgressSettings().window


def holder(cid: str = "c1", **fields) -> HolderView:
    """A healthy holder's ``ProcessQueueInfo`` as of the last sample (``now``)."""
    now = T0 + (W - 1) * STEP
    base = dict(
        commit_offset=0,
        cached_msg_count=0,
        cached_msg_size_mib=0,
        cached_msg_min_offset=0,
        cached_msg_max_offset=0,
        last_pull_ms=now - 1_000,
        last_consume_ms=now - 1_000,
    )
    return HolderView(cid, **{**base, **fields})


def window(broker, consumer, holders=None, n=W, last_timestamp=None, answered=None, **common) -> list[QueueSample]:
    """``n`` samples STEP apart ending at ``now``; each argument a value for all or a list per sample."""

    def at(value, i):
        return value[i] if isinstance(value, list) else value

    samples = []
    for i in range(n):
        b, c = at(broker, i), at(consumer, i)
        lt = at(last_timestamp, i) if last_timestamp is not None else T0 + i * STEP - 5_000
        held = at(holders, i) if holders is not None else (holder(),)
        ok = at(answered, i) if answered is not None else True
        samples.append(QueueSample(T0 + (W - n + i) * STEP, ok, b, c, lt, holders=held, **common))
    return samples


def now() -> int:
    return T0 + (W - 1) * STEP


def rising(start: int, step: int, n: int = W) -> list[int]:
    return [start + step * i for i in range(n)]


def test_the_rule_table_names_each_rule_once_and_every_state_has_a_rule():
    numbers = [number for number, _, _ in RULES]
    assert len(numbers) == len(set(numbers))
    assert {state for _, state, _ in RULES} == set(QueueState)


# -- 0 UNKNOWN, 1 NOT_OWNED_MODEL, 1b NO_OFFSET -------------------------------------------------------------------


def test_0_two_unanswered_samples_in_a_row_are_unknown_never_lag_zero():
    samples = window(1_000, 400, answered=[True] * (W - 2) + [False, False])
    verdict = evaluate(samples, now())
    assert (verdict.state, verdict.severity, verdict.rule) == (QueueState.UNKNOWN, None, "0")


def test_0_one_unanswered_sample_is_judged_on_the_answered_ones():
    samples = window(rising(1_000, 10), rising(1_000, 10), answered=[True] * (W - 1) + [False])
    verdict = evaluate(samples, now())
    assert (verdict.state, verdict.lag) == (QueueState.OK, 0)


def test_0_a_stale_broker_view_is_unknown():
    samples = window(1_000, 400)
    samples[-1] = samples[-1]._replace(view_fresh=False)
    assert evaluate(samples, now()).state is QueueState.UNKNOWN


def test_0_no_sample_at_all_is_unknown():
    verdict = evaluate([], now())
    assert (verdict.state, verdict.lag, verdict.complete) == (QueueState.UNKNOWN, None, 0.0)


@pytest.mark.parametrize("model", [AllocationMode.BROKER, AllocationMode.BROADCAST])
def test_1_broker_side_and_broadcasting_groups_get_lag_but_no_ownership_verdict(model):
    samples = window(1_000, 400, holders=())  # would be an orphan under client-side assignment
    verdict = evaluate(samples, now(), model=model)
    assert (verdict.state, verdict.severity, verdict.lag) == (QueueState.NOT_OWNED_MODEL, None, 600)
    assert evaluate(samples, now()).state is QueueState.ORPHAN_CONFIRMED


def test_1b_a_queue_with_messages_and_no_committed_offset_is_no_offset_not_a_full_backlog():
    samples = window(5_000, 0, holders=(), last_timestamp=0)
    verdict = evaluate(samples, now())
    assert (verdict.state, verdict.severity) == (QueueState.NO_OFFSET, None)
    # once something is committed (a last timestamp), the same offsets are a backlog
    assert evaluate(window(5_000, 0, holders=()), now()).state is QueueState.ORPHAN_CONFIRMED


# -- 2 IDLE / OK ------------------------------------------------------------------------------------------------


def test_2_no_message_and_nothing_behind_is_idle_and_never_alerts_even_without_a_holder():
    verdict = evaluate(window(700, 700, holders=()), now())
    assert (verdict.state, verdict.severity, verdict.rule) == (QueueState.IDLE, None, "2")


def test_2b_caught_up_at_one_sample_of_the_window_is_ok():
    consumer = [1_000] * (W - 1) + [1_090]
    broker = [1_090] * (W - 1) + [1_095]
    broker[3] = 1_000  # lag 0 at the fourth sample
    verdict = evaluate(window(broker, consumer), now())
    assert (verdict.state, verdict.rule) == (QueueState.OK, "2b")


@pytest.mark.parametrize(("lag", "state"), [(5, QueueState.OK), (6, QueueState.STUCK_HOLDER)])
def test_2b_the_allowed_lag_is_inclusive(lag, state):
    settings = ProgressSettings(allowed_lag=5)
    assert evaluate(window(1_000 + lag, 1_000), now(), settings).state is state


# -- 3 REWIND ----------------------------------------------------------------------------------------------------


def rewound(recovered: bool) -> list[QueueSample]:
    consumer = [100, 110, 120, 130, 90, 95, 100, 105, 110, 140 if recovered else 115]
    return window(2_000, consumer)


def test_3_an_offset_that_went_back_and_stayed_behind_is_a_rewind():
    verdict = evaluate(rewound(recovered=False), now())
    assert (verdict.state, verdict.severity, verdict.rule) == (QueueState.REWIND, Severity.CRITICAL, "3")


def test_3_a_rewind_that_recovers_within_the_window_is_not_held_against_the_consumer():
    assert evaluate(rewound(recovered=True), now()).state is not QueueState.REWIND


@pytest.mark.parametrize(("distance_ms", "state"), [(STEP, QueueState.REBALANCE_REWIND), (STEP + 1, QueueState.REWIND)])
def test_3b_a_rewind_within_one_sample_of_a_generation_change_is_the_rebalance_s(distance_ms, state):
    fell_at = T0 + 4 * STEP
    verdict = evaluate(rewound(recovered=False), now(), generation_changes_ms=[fell_at - distance_ms])
    assert verdict.state is state
    assert verdict.severity is (Severity.INFO if state is QueueState.REBALANCE_REWIND else Severity.CRITICAL)


# -- 4 ORPHAN_CONFIRMED, 4b HIDDEN_CONSUMER --------------------------------------------------------------------------


@pytest.mark.parametrize(("unheld", "state"), [(2, QueueState.STUCK_HOLDER), (3, QueueState.ORPHAN_CONFIRMED)])
def test_4_no_holder_for_three_samples_with_the_offset_flat_confirms_an_orphan(unheld, state):
    holders = [(holder(),)] * (W - unheld) + [()] * unheld
    verdict = evaluate(window(1_000, 400, holders=holders), now())
    if state is QueueState.ORPHAN_CONFIRMED:
        assert (verdict.state, verdict.severity, verdict.lag, verdict.holders) == (
            state,
            Severity.CRITICAL,
            600,
            frozenset(),
        )
    else:
        assert verdict.state is not QueueState.ORPHAN_CONFIRMED


def test_4b_an_offset_advancing_with_no_visible_holder_is_a_hidden_consumer():
    verdict = evaluate(window(rising(2_000, 50), rising(400, 20), holders=()), now())
    assert (verdict.state, verdict.severity, verdict.rule) == (QueueState.HIDDEN_CONSUMER, Severity.WARNING, "4b")


# -- 5 DOUBLE_OWNED ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("doubled", "state"), [(1, QueueState.OK), (2, QueueState.DOUBLE_OWNED)])
def test_5_two_holders_for_two_samples_is_double_ownership(doubled, state):
    twins = (holder("c1"), holder("c2"))
    holders = [(holder("c1"),)] * (W - doubled) + [twins] * doubled
    verdict = evaluate(window(rising(2_000, 50), rising(400, 20), holders=holders), now())
    assert verdict.state is state


def test_5_a_dropped_process_queue_is_not_a_holder():
    twins = (holder("c1"), holder("c2", dropped=True))
    verdict = evaluate(window(rising(2_000, 50), rising(400, 20), holders=twins), now())
    assert verdict.state is not QueueState.DOUBLE_OWNED and verdict.holders == {"c1"}


def test_5_two_holders_that_keep_up_are_double_owned_not_ok():
    """Both clients pull the queue and consume every message: the lag is small because both consume, so a lag
    within the allowed lag at some sample (rule 2b) says nothing about the double consumption."""
    both = (holder("c1"), holder("c2"))
    broker = rising(1_000, 10)
    consumer = [b - (0 if i % 2 else 4) for i, b in enumerate(broker)]  # caught up at every other sample
    verdict = evaluate(window(broker, consumer, holders=both), now())
    assert (verdict.state, verdict.severity, verdict.rule) == (QueueState.DOUBLE_OWNED, Severity.CRITICAL, "5")
    assert verdict.holders == {"c1", "c2"} and verdict.lag == 0


def test_5_two_holders_committing_over_each_other_are_double_owned_not_a_rewind():
    """The two holders' commits interleave: the broker keeps whichever came last, so the offset falls below its
    high point. That fall is the double ownership's, which names the holders."""
    both = (holder("c1"), holder("c2"))
    consumer = [100, 110, 120, 130, 90, 95, 100, 105, 110, 115]
    verdict = evaluate(window(2_000, consumer, holders=both), now())
    assert (verdict.state, verdict.rule) == (QueueState.DOUBLE_OWNED, "5")


def test_5_an_idle_queue_two_clients_hold_is_idle():
    """No message through the window: nothing is consumed twice (the ownership anomalies still record it)."""
    verdict = evaluate(window(700, 700, holders=(holder("c1"), holder("c2"))), now())
    assert (verdict.state, verdict.rule) == (QueueState.IDLE, "2")


def test_5_a_double_holding_without_a_complete_window_is_incomplete_not_ok():
    both = (holder("c1"), holder("c2"))
    samples = window(rising(1_000, 10), rising(1_000, 10), holders=both, answered=[False] + [True] * (W - 1))
    assert evaluate(samples, now()).state is QueueState.INCOMPLETE


def test_the_rule_table_judges_double_holding_before_the_lag():
    order = [number for number, _, _ in RULES]
    assert order.index("2") < order.index("5") < min(order.index(n) for n in ("2b", "3", "3b", "4", "4b", "6", "7"))


# -- 6 STUCK_HOLDER and its causes -----------------------------------------------------------------------------------


def stuck(view: HolderView, expected: str | None = "c1") -> tuple[QueueState, StuckCause | None]:
    verdict = evaluate(window(1_000, 400, holders=(view,), expected_owner=expected), now())
    return verdict.state, verdict.cause


@pytest.mark.parametrize(
    ("fields", "cause"),
    [
        ({"cached_msg_count": 1_000}, StuckCause.UNEXPLAINED),
        ({"cached_msg_count": 1_001}, StuckCause.FLOW_CONTROL),
        ({"cached_msg_size_mib": 100}, StuckCause.UNEXPLAINED),
        ({"cached_msg_size_mib": 101}, StuckCause.FLOW_CONTROL),
        ({"cached_msg_min_offset": 500, "cached_msg_max_offset": 2_500}, StuckCause.UNEXPLAINED),
        ({"cached_msg_min_offset": 500, "cached_msg_max_offset": 2_501}, StuckCause.FLOW_CONTROL),
    ],
)
def test_6a_flow_control_past_the_client_s_thresholds(fields, cause):
    assert stuck(holder(**fields)) == (QueueState.STUCK_HOLDER, cause)


@pytest.mark.parametrize(
    ("consumed_ago_ms", "cause"), [(59_999, StuckCause.OFFSET_HOLE), (60_000, StuckCause.UNEXPLAINED)]
)
def test_6b_one_message_pinning_the_offset_while_others_complete_is_an_offset_hole(consumed_ago_ms, cause):
    view = holder(
        cached_msg_count=3,
        cached_msg_min_offset=400,
        cached_msg_max_offset=410,
        last_consume_ms=now() - consumed_ago_ms,
    )
    assert stuck(view) == (QueueState.STUCK_HOLDER, cause)


@pytest.mark.parametrize(
    ("fields", "cause"),
    [
        ({"orderly": True, "locked": False, "last_lock_ms": T0 + (W - 1) * STEP}, StuckCause.NOT_LOCKED),
        ({"orderly": True, "locked": True, "last_lock_ms": T0 + (W - 1) * STEP - 30_000}, StuckCause.UNEXPLAINED),
        ({"orderly": True, "locked": True, "last_lock_ms": T0 + (W - 1) * STEP - 30_001}, StuckCause.NOT_LOCKED),
        ({"orderly": False, "locked": False}, StuckCause.UNEXPLAINED),
    ],
)
def test_6c_an_orderly_holder_without_a_live_lock_is_not_locked(fields, cause):
    assert stuck(holder(**fields)) == (QueueState.STUCK_HOLDER, cause)


@pytest.mark.parametrize(
    ("pulled_ago_ms", "cause"), [(120_000, StuckCause.UNEXPLAINED), (120_001, StuckCause.PULL_DEAD)]
)
def test_6d_no_pull_started_past_the_pull_idle_time_is_a_dead_pull_loop(pulled_ago_ms, cause):
    assert stuck(holder(last_pull_ms=now() - pulled_ago_ms)) == (QueueState.STUCK_HOLDER, cause)


def test_6e_a_healthy_holder_the_assignment_does_not_name_is_the_wrong_holder():
    assert stuck(holder("c9"), expected="c1") == (QueueState.STUCK_HOLDER, StuckCause.WRONG_HOLDER)
    assert stuck(holder("c9"), expected=None) == (QueueState.STUCK_HOLDER, StuckCause.UNEXPLAINED)


def test_6_a_holder_that_advances_the_offset_is_never_stuck():
    verdict = evaluate(window(rising(2_000, 50), rising(400, 1)), now())
    assert verdict.state is not QueueState.STUCK_HOLDER


# -- 7 SLOW ------------------------------------------------------------------------------------------------------


def written(offsets: list[int]) -> list[int]:
    """The store time of the message before each offset, for a queue written 100 messages per sample, message
    10,000 at ``T0``."""
    return [T0 + (c - 1 - 10_000) * STEP // 100 for c in offsets]


def test_7_advancing_but_ever_further_behind_by_minutes_is_slow():
    broker, consumer = rising(10_000, 100), rising(1_000, 10)  # reads 10 of every 100 written, 45 min behind
    verdict = evaluate(window(broker, consumer, last_timestamp=written(consumer)), now())
    assert (verdict.state, verdict.severity, verdict.rule) == (QueueState.SLOW, Severity.WARNING, "7")
    assert verdict.time_lag.estimate_s > 180


def test_7_a_lag_that_falls_once_is_not_slow():
    broker, consumer = rising(10_000, 100), rising(1_000, 10)
    broker[5] = broker[4] + 1  # a quiet sample: the consumer gains on the broker
    assert evaluate(window(broker, consumer, last_timestamp=written(consumer)), now()).state is QueueState.OK


@pytest.mark.parametrize(("behind", "state"), [(590, QueueState.OK), (610, QueueState.SLOW)])
def test_7_the_time_lag_must_pass_the_threshold_at_every_sample(behind, state):
    # 100 messages per 30 s: 600 messages behind is 180 s behind; the lag grows by one message per sample.
    broker = rising(10_000, 100)
    consumer = [b - behind - i for i, b in enumerate(broker)]
    assert evaluate(window(broker, consumer, last_timestamp=written(consumer)), now()).state is state


# -- 8 INCOMPLETE and the expired flag ---------------------------------------------------------------------------


@pytest.mark.parametrize(("answered", "state"), [(W, QueueState.ORPHAN_CONFIRMED), (W - 1, QueueState.INCOMPLETE)])
def test_8_an_error_state_needs_every_sample_of_the_window(answered, state):
    samples = window(1_000, 400, holders=(), answered=[False] * (W - answered) + [True] * answered)
    verdict = evaluate(samples, now())
    assert verdict.state is state
    assert verdict.complete == answered / W


@pytest.mark.parametrize(
    ("answered", "state"), [(W // 2, QueueState.HIDDEN_CONSUMER), (W // 2 - 1, QueueState.INCOMPLETE)]
)
def test_8_a_warning_needs_half_of_the_window(answered, state):
    samples = window(
        rising(2_000, 50), rising(400, 20), holders=(), answered=[False] * (W - answered) + [True] * answered
    )
    assert evaluate(samples, now()).state is state


@pytest.mark.parametrize(("min_offset", "expired"), [(400, False), (401, True), (None, False)])
def test_a_consumer_offset_below_the_queue_s_min_offset_is_flagged_expired(min_offset, expired):
    verdict = evaluate(window(1_000, 400, min_offset=min_offset), now())
    assert verdict.expired_unconsumed is expired


# -- time lag -------------------------------------------------------------------------------------------------------


def test_time_lag_is_zero_when_caught_up_and_unknown_without_samples():
    assert time_lag(window(700, 700), now()).estimate_s == 0.0
    assert time_lag([], now()).estimate_s is None


def test_the_upper_bound_is_the_age_of_the_last_consumed_message():
    samples = window(1_000, 400, last_timestamp=now() - 42_000)
    assert time_lag(samples, now()).upper_s == 42.0
    assert time_lag(window(1_000, 400, last_timestamp=0), now()).upper_s is None


def test_the_estimate_interpolates_between_the_write_positions_it_saw():
    # The broker's write position went 0, 100, ..., 900 at the samples; the consumer sits at 449: message 449
    # was stored when the position passed 450, half-way between the samples at 400 and 500.
    samples = window(rising(0, 100), 449, last_timestamp=0)
    lag = time_lag(samples, now())
    assert lag.estimate_s == pytest.approx((now() - (T0 + 4.5 * STEP)) / 1000)
    assert not lag.bounded


def test_the_estimate_is_never_extrapolated_only_bounded_below():
    samples = window(rising(5_000, 100), 10, last_timestamp=0)  # older than every point of the window
    lag = time_lag(samples, now())
    assert lag.bounded and lag.estimate_s == (now() - T0) / 1000


def test_the_store_time_of_the_last_consumed_message_is_an_exact_point():
    # The broker points are far above the consumer; the broker's last timestamp says message 449 was stored 100 s
    # before the first sample, so message 450 was stored just after that: the estimate is just under the bound.
    samples = window(rising(1_000, 100), 450, last_timestamp=T0 - 100_000)
    lag = time_lag(samples, now())
    assert not lag.bounded and lag.upper_s - 1 < lag.estimate_s <= lag.upper_s


def test_the_estimate_never_exceeds_the_upper_bound():
    samples = window(rising(1_000, 100), 450, last_timestamp=T0 + 1_000)  # a write position older than its message
    lag = time_lag(samples, now())
    assert lag.estimate_s == lag.upper_s
