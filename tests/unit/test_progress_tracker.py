"""Consume progress in the shard engine: samples joined with ownership, judged per queue, offline groups watched.

``progress_tracker.apply_progress`` alone (offline groups, split and failed samples, refusals, the window) and
through ``ShardEngine`` (holders from reports, expected owners, a group whose last member leaves), each at and
around the threshold that decides it.
"""

from __future__ import annotations

import json

import pytest

from streaming.domain.consumers.engine_settings import EngineSettings
from streaming.domain.consumers.outcomes import (
    EpisodeTransition,
    IgnoredEvent,
    LateEvent,
    ProgressSummary,
    QueueProgress,
    QueueProgressGone,
)
from streaming.domain.consumers.progress_tracker import ConsumeProgress, GroupProgress, ProgressContext, apply_progress
from streaming.domain.consumers.reported import ReportedAssignment, held_queues
from streaming.domain.consumers.shard_engine import SCHEMA_VERSION, ShardEngine
from streaming.domain.progress.verdict import ProgressSettings, QueueState, StuckCause
from streaming.domain.vocabulary import AnomalyKind, EpisodeStatus, IgnoredReason, LateReason
from tests.support.engine import settle, typed
from tests.unit.test_fleet import ev, hb, route

T0 = 1_700_000_000_000
EVERY = 30_000  # the collector's cadence
OFFLINE = ProgressContext(online=False)


def progress(t, queues, group="G", broker="broker-a", **extra):
    """A consume_progress event, parsed; ``queues``: (topic, queue id, broker offset, consumer offset[, last
    timestamp])."""
    rows = []
    for topic, queue_id, broker_offset, consumer_offset, *rest in queues:
        row = {"topic": topic, "queue_id": queue_id, "broker_offset": broker_offset, "consumer_offset": consumer_offset}
        if rest:
            row["last_timestamp"] = rest[0]
        rows.append(row)
    return ConsumeProgress.from_json(
        {
            "type": "consume_progress",
            "schema_version": 1,
            "event_time": t,
            "group": group,
            "broker": broker,
            "queues": rows,
            **extra,
        }
    )


def report(t, cid, queues, group="G", topic="T", orderly=None, dropped=(), **fields):
    """A reported_assignment event, parsed; ``dropped``: queues it lists as dropped."""
    event = {
        "type": "reported_assignment",
        "schema_version": 1,
        "event_time": t,
        "group": group,
        "client_id": cid,
        "topic": topic,
        "queues": [{"broker": b, "queue_id": q, "dropped": False, **fields} for b, q in queues]
        + [{"broker": b, "queue_id": q, "dropped": True} for b, q in dropped],
    }
    if orderly is not None:
        event["consume_orderly"] = orderly
    return ReportedAssignment.from_json(event)


def of(outcomes, kind):
    return [o for o in outcomes if type(o) is kind]


def last_state(outcomes, queue_id=0):
    (row,) = [o for o in of(outcomes, QueueProgress) if o.queue_id == queue_id]
    return row


# -- the tracker alone -----------------------------------------------------------------------------------------
def test_an_offline_group_without_backlog_is_not_tracked_and_emits_nothing():
    assert apply_progress(None, progress(T0, [("T", 0, 10, 10)]), OFFLINE) == (None, [])


def test_an_offline_group_with_one_message_waiting_opens_its_backlog_episode_with_the_lag():
    tracked, outcomes = apply_progress(None, progress(T0, [("T", 0, 11, 10), ("T", 1, 5, 5)]), OFFLINE)
    assert tracked is not None
    (opened,) = of(outcomes, EpisodeTransition)
    episode = opened.transition.episode
    assert (opened.transition.status, episode.anomaly, episode.topic) == (
        EpisodeStatus.OPENED,
        AnomalyKind.OFFLINE_GROUP_BACKLOG,
        "",
    )
    details = json.loads(episode.details_json)
    assert details["lag"] == 1 and details["queues"] == [{"topic": "T", "broker": "broker-a", "queue_id": 0, "lag": 1}]
    assert [o.online for o in of(outcomes, QueueProgress)] == [False, False]


def test_an_offline_group_that_catches_up_closes_its_episode_and_is_forgotten():
    tracked, _ = apply_progress(None, progress(T0, [("T", 0, 11, 10)]), OFFLINE)
    tracked, outcomes = apply_progress(tracked, progress(T0 + EVERY, [("T", 0, 11, 11)]), OFFLINE)
    assert tracked is None
    (closed,) = of(outcomes, EpisodeTransition)
    assert closed.transition.status == EpisodeStatus.CLOSED and closed.transition.closed_at_ms == T0 + EVERY
    assert [(o.topic, o.broker, o.queue_id) for o in of(outcomes, QueueProgressGone)] == [("T", "broker-a", 0)]
    assert last_state(outcomes).sample.lag == 0  # the caught-up sample is still reported


def test_an_offline_groups_episode_is_updated_when_other_queues_wait_not_at_each_sample_of_a_growing_lag():
    tracked, _ = apply_progress(None, progress(T0, [("T", 0, 11, 10), ("T", 1, 5, 5)]), OFFLINE)
    tracked, grown = apply_progress(tracked, progress(T0 + EVERY, [("T", 0, 20, 10), ("T", 1, 5, 5)]), OFFLINE)
    assert not of(grown, EpisodeTransition)  # the same queue waiting, more of it: the history has the lag
    tracked, spread = apply_progress(tracked, progress(2 * EVERY + T0, [("T", 0, 20, 10), ("T", 1, 6, 5)]), OFFLINE)
    (updated,) = of(spread, EpisodeTransition)
    assert updated.transition.status == EpisodeStatus.UPDATED
    details = json.loads(updated.transition.episode.details_json)
    assert details["lag"] == 11 and [q["queue_id"] for q in details["queues"]] == [0, 1]


def test_a_group_coming_online_closes_its_offline_episode():
    tracked, _ = apply_progress(None, progress(T0, [("T", 0, 11, 10)]), OFFLINE)
    tracked, outcomes = apply_progress(tracked, progress(T0 + EVERY, [("T", 0, 12, 10)]), ProgressContext(True))
    assert tracked is not None
    assert [t.transition.status for t in of(outcomes, EpisodeTransition)] == [EpisodeStatus.CLOSED]


@pytest.mark.parametrize(
    ("extra", "detail"),
    [
        ({"error": "timeout"}, "has an error and 1 queues"),
        ({}, "lists T/0 twice"),
    ],
)
def test_an_event_contradicting_itself_is_refused_with_its_reason(extra, detail):
    queues = [("T", 0, 5, 1)] if extra else [("T", 0, 5, 1), ("T", 0, 6, 1)]
    event = progress(T0, queues, **extra)
    tracked, outcomes = apply_progress(None, event, ProgressContext(True))
    (refused,) = outcomes
    assert tracked is None and type(refused) is IgnoredEvent and refused.event is event
    assert refused.reason == IgnoredReason.INCONSISTENT_PROGRESS and detail in refused.detail


def test_a_sample_older_than_the_queues_latest_is_late_and_changes_nothing():
    tracked, _ = apply_progress(None, progress(T0 + EVERY, [("T", 0, 11, 10)]), ProgressContext(True))
    before = tracked.to_json()
    tracked, outcomes = apply_progress(tracked, progress(T0, [("T", 0, 15, 10)]), ProgressContext(True))
    (late,) = outcomes[:1]
    assert type(late) is LateEvent and late.reason == LateReason.STALE_PROGRESS and late.broker == "broker-a"
    assert not of(outcomes, QueueProgress) and tracked.to_json() == before


def test_the_parts_of_a_split_sample_are_one_sample_per_queue():
    tracked, _ = apply_progress(None, progress(T0, [("T", 0, 11, 10)]), ProgressContext(True))
    tracked, _ = apply_progress(tracked, progress(T0, [("T", 1, 7, 7)]), ProgressContext(True))
    tracked, _ = apply_progress(tracked, progress(T0, [("T", 0, 12, 10)]), ProgressContext(True))  # same queue again
    samples = {ref[2]: track.samples for ref, track in tracked.queues.items()}
    assert [s.broker_offset for s in samples[0]] == [12] and [s.broker_offset for s in samples[1]] == [7]


def test_a_failed_answer_makes_that_brokers_queues_unknown_after_two_samples_never_lag_0():
    ctx = ProgressContext(True)
    tracked, _ = apply_progress(None, progress(T0, [("T", 0, 11, 10)]), ctx)
    tracked, _ = apply_progress(tracked, progress(T0, [("T", 0, 11, 10)], broker="broker-b"), ctx)
    tracked, once = apply_progress(tracked, progress(T0 + EVERY, [], error="timeout"), ctx)
    assert [(o.broker, o.sample.answered) for o in of(once, QueueProgress)] == [("broker-a", False)]
    assert last_state(once).verdict.state != QueueState.UNKNOWN  # one unanswered sample: not yet
    tracked, twice = apply_progress(tracked, progress(T0 + 2 * EVERY, [], error="timeout"), ctx)
    row = last_state(twice)
    assert row.verdict.state == QueueState.UNKNOWN and row.verdict.lag == 1  # the last answer's lag, not 0
    assert [s.answered for s in tracked.queues[("T", "broker-b", 0)].samples] == [True]


def test_the_window_keeps_the_last_window_samples():
    settings = ProgressSettings(window=4)
    tracked = None
    for i in range(6):
        tracked, _ = apply_progress(
            tracked, progress(T0 + i * EVERY, [("T", 0, 10 + i, i)]), ProgressContext(True), settings
        )
    assert [s.consumer_offset for s in tracked.queues[("T", "broker-a", 0)].samples] == [2, 3, 4, 5]


def test_a_queue_without_a_sample_for_a_whole_window_is_forgotten():
    settings = ProgressSettings(window=3)
    ctx = ProgressContext(True)
    tracked, _ = apply_progress(None, progress(T0, [("T", 0, 10, 10), ("T", 1, 10, 10)]), ctx, settings)
    horizon = 3 * settings.sample_interval_ms
    tracked, kept = apply_progress(tracked, progress(T0 + horizon, [("T", 1, 10, 10)]), ctx, settings)
    assert not of(kept, QueueProgressGone)  # exactly a window ago: kept
    tracked, gone = apply_progress(tracked, progress(T0 + horizon + 1, [("T", 1, 10, 10)]), ctx, settings)
    assert [(o.queue_id, o.event_time_ms) for o in of(gone, QueueProgressGone)] == [(0, T0 + horizon + 1)]
    assert list(tracked.queues) == [("T", "broker-a", 1)]


def test_a_verdict_is_emitted_at_every_sample_and_marked_changed_only_when_it_changes():
    tracked, rows = None, []
    for i, consumer in enumerate([10, 10, 10, 12]):  # no holder: an orphan at the third, not confirmed
        tracked, outcomes = apply_progress(
            tracked, progress(T0 + i * EVERY, [("T", 0, 12, consumer)]), ProgressContext(True)
        )
        rows.append(last_state(outcomes))
    assert [(r.verdict.state, r.changed, r.state_since_ms) for r in rows] == [
        (QueueState.OK, True, T0),
        (QueueState.OK, False, T0),
        (QueueState.INCOMPLETE, True, T0 + 2 * EVERY),
        (QueueState.OK, True, T0 + 3 * EVERY),
    ]


def test_the_tracked_progress_round_trips_through_its_json():
    tracked, _ = apply_progress(None, progress(T0, [("T", 0, 11, 10, T0 - 5)]), OFFLINE)
    again = GroupProgress.from_json(json.loads(json.dumps(tracked.to_json())))
    assert again == tracked


def test_a_report_keeps_only_held_queues_with_their_process_queue_info():
    event = report(T0, "c1", [("broker-a", 0)], cached_msg_count=3, locked=False, dropped=[("broker-a", 1)])
    held = held_queues(event)
    assert held["orderly"] is False
    assert held["queues"] == [["broker-a", 0, None, 3, None, None, None, False, None, None, None]]


# -- through the shard engine ----------------------------------------------------------------------------------
# When a report taken after the member's join counts: its generation plus the clients' rebalance delay.
COUNTED_MS = T0 + 1 + EngineSettings().client_rebalance_delay_ms


def engine_with_member(queues=2, **report_fields):
    """Group G: one member c1 (expected owner of every queue of T on broker-a) reporting queue 0 only, after its
    join's generation plus the rebalance delay (an earlier report does not count)."""
    engine = ShardEngine.restore(None, EngineSettings())
    engine.apply(typed([route(T0, brokers=(("broker-a", queues),)), hb(T0 + 1, "ch1", "c1")]), T0)
    settle(engine)  # the clock passes the window of the member's join: its generation is cut
    engine.apply(typed([report(COUNTED_MS, "c1", [("broker-a", 0)], **report_fields)]), T0)
    settle(engine)
    return engine


def sample_window(engine, rows_at, samples=10, start=COUNTED_MS + 10_000):
    """``samples`` progress samples every 30 s (a heartbeat before each keeps c1); ``rows_at(i, t)`` the queues."""
    outcomes = []
    for i in range(samples):
        t = start + i * EVERY
        outcomes = engine.apply(typed([hb(t - 1, "ch1", "c1"), progress(t, rows_at(i, t))]), T0)
    return outcomes


@pytest.mark.parametrize(("samples", "state"), [(9, QueueState.INCOMPLETE), (10, QueueState.ORPHAN_CONFIRMED)])
def test_a_queue_nobody_holds_is_a_confirmed_orphan_with_the_events_lag_once_the_window_is_complete(samples, state):
    engine = engine_with_member()
    outcomes = sample_window(engine, lambda i, t: [("T", 0, 100 + i, 100 + i, t - 5), ("T", 1, 50, 40, T0)], samples)
    orphan = last_state(outcomes, 1)
    assert orphan.verdict.state == state and orphan.verdict.lag == 50 - 40
    assert orphan.verdict.holders == frozenset() and orphan.sample.expected_owner == "c1"
    held = last_state(outcomes, 0)
    assert held.verdict.holders == frozenset({"c1"}) and held.verdict.state == QueueState.OK


@pytest.mark.parametrize(("cached", "cause"), [(1_000, StuckCause.UNEXPLAINED), (1_001, StuckCause.FLOW_CONTROL)])
def test_a_stuck_holder_has_its_cause_from_its_process_queue_info_at_the_threshold(cached, cause):
    engine = engine_with_member(queues=1, cached_msg_count=cached, cached_msg_min_offset=41, cached_msg_max_offset=90)
    outcomes = sample_window(engine, lambda i, t: [("T", 0, 90 + i, 40, T0)])
    stuck = last_state(outcomes)
    assert (stuck.verdict.state, stuck.verdict.cause) == (QueueState.STUCK_HOLDER, cause)


def test_an_idle_group_raises_nothing():
    engine = engine_with_member(queues=1)
    outcomes = sample_window(engine, lambda i, t: [("T", 0, 100, 100, T0)])
    assert last_state(outcomes).verdict.state == QueueState.IDLE
    assert not of(outcomes, EpisodeTransition)
    (summary,) = of(outcomes, ProgressSummary)
    assert summary.topics["T"].lag == 0 and dict(summary.topics["T"].queues_by_state) == {QueueState.IDLE: 1}


def test_a_member_that_left_holds_nothing_any_more():
    engine = ShardEngine.restore(None, EngineSettings())
    engine.apply(
        typed(
            [
                route(T0, brokers=(("broker-a", 1),)),
                hb(T0 + 1, "ch1", "c1"),
                hb(T0 + 1, "ch2", "c2"),
                report(T0 + 2, "c2", [("broker-a", 0)]),
                report(T0 + 2, "c1", []),  # c1 reports T and holds nothing of it
                ev("UNREGISTER", T0 + 3, "ch2", "c2"),
            ]
        ),
        T0,
    )
    outcomes = engine.apply(typed([progress(T0 + 4, [("T", 0, 5, 1)])]), T0)
    row = last_state(outcomes)
    assert row.sample.holders == () and row.sample.expected_owner == "c1" and row.holders_reported


def test_a_group_whose_last_member_leaves_is_watched_while_it_has_a_backlog():
    engine = engine_with_member(queues=1)
    engine.apply(typed([progress(T0 + 10, [("T", 0, 5, 1)])]), T0)
    left = engine.apply(typed([ev("UNREGISTER", T0 + 20, "ch1", "c1")]), T0) + settle(engine)
    assert "G" not in engine.groups and "G" in engine.progress  # the group is gone, its progress is not
    assert not [
        o for o in of(left, EpisodeTransition) if o.transition.episode.anomaly == AnomalyKind.OFFLINE_GROUP_BACKLOG
    ]
    outcomes = engine.apply(typed([progress(T0 + 30, [("T", 0, 6, 1)])]), T0)
    (opened,) = of(outcomes, EpisodeTransition)
    assert opened.transition.episode.anomaly == AnomalyKind.OFFLINE_GROUP_BACKLOG
    assert opened.generation == 1 and json.loads(opened.transition.episode.details_json)["lag"] == 5
    outcomes = engine.apply(typed([progress(T0 + 40, [("T", 0, 6, 6)])]), T0)
    assert [o.transition.status for o in of(outcomes, EpisodeTransition)] == [EpisodeStatus.CLOSED]
    assert "G" not in engine.progress and engine.is_empty() is False  # the route is still kept


def test_a_group_that_never_had_members_counts_when_it_has_a_backlog():
    engine = ShardEngine.restore(None, EngineSettings())
    assert engine.apply(typed([progress(T0, [("T", 0, 3, 3)], group="never")]), T0) == []
    outcomes = engine.apply(typed([progress(T0 + EVERY, [("T", 0, 4, 3)], group="never")]), T0)
    assert [o.transition.episode.group for o in of(outcomes, EpisodeTransition)] == ["never"]


def test_a_stale_broker_view_makes_its_samples_unknown():
    engine = engine_with_member(queues=1)
    poll = {
        "type": "consumer_connections",
        "schema_version": 1,
        "event_time": T0 + 5,
        "group": "G",
        "broker": "broker-b",
        "stale_after_ms": 10,
        "connections": [{"channel": "p1", "client_id": "c1", "subscriptions": []}],
    }
    engine.apply(typed([poll]), T0)
    engine.apply([], T0 + 100)  # the watermark passes its stale time
    outcomes = engine.apply(typed([progress(T0 + 200, [("T", 0, 5, 1)], broker="broker-b")]), T0 + 100)
    row = last_state(outcomes)
    assert row.sample.view_fresh is False and row.verdict.state == QueueState.UNKNOWN


def test_the_engine_snapshot_keeps_progress_and_holders_at_its_version():
    engine = engine_with_member(cached_msg_count=7)
    sample_window(engine, lambda i, t: [("T", 0, 10, 5, T0)], samples=2)
    snapshot = json.loads(json.dumps(engine.snapshot()))
    assert snapshot["schema_version"] == SCHEMA_VERSION == 11
    assert json.loads(snapshot["groups"]["G"])["holders"]["c1\x00T"]["queues"][0][3] == 7
    assert ShardEngine.restore(snapshot, EngineSettings()).snapshot() == snapshot


# -- the metrics -------------------------------------------------------------------------------------------------
def test_the_progress_metrics_are_per_group_and_topic_with_every_state_and_go_with_the_groups_progress():
    from connectors.metrics import MetricsState
    from streaming.job.delta.metric_rows import apply_consumer_metrics

    metrics = MetricsState(label_value_cap=1)
    engine = engine_with_member()
    outcomes = sample_window(engine, lambda i, t: [("T", 0, 100 + i, 100 + i, t - 5), ("T", 1, 50, 40, T0)])
    other = engine.apply(typed([progress(T0 + 400_000, [("T", 0, 9, 1)], group="other")]), T0)  # over the cap of 1
    apply_consumer_metrics(metrics, [("c", s) for s in of(outcomes, ProgressSummary) + of(other, ProgressSummary)])
    assert metrics.gauges["rmqmon_group_progress_lag"] == {("c", "G", "T"): 10.0}
    queues = metrics.gauges["rmqmon_group_progress_queues"]
    assert queues[("c", "G", "T", "ORPHAN_CONFIRMED")] == 1 and queues[("c", "G", "T", "OK")] == 1
    assert len(queues) == len(QueueState) and sum(queues.values()) == 2
    assert metrics.gauges["rmqmon_group_progress_max_time_lag_seconds"][("c", "G", "T")] > 0
    assert metrics.dropped["rmqmon_group_progress_lag"] == 1  # the second group is past the label cap
    apply_consumer_metrics(metrics, [("c", ProgressSummary("G", T0, {}))])
    assert not metrics.gauges["rmqmon_group_progress_lag"] and not metrics.gauges["rmqmon_group_progress_queues"]


def test_a_sample_in_the_call_that_made_the_group_is_joined_with_the_owners_an_analysis_finds_then():
    engine = ShardEngine.restore(None, EngineSettings())
    outcomes = engine.apply(
        typed(
            [
                route(T0, brokers=(("broker-a", 2),)),
                hb(T0 + 1, "ch1", "c1"),
                report(T0 + 2, "c1", [("broker-a", 0)]),
                progress(T0 + 3, [("T", 0, 5, 5), ("T", 1, 5, 1)]),
            ]
        ),
        T0,
    )
    rows = of(outcomes, QueueProgress)
    assert [(r.queue_id, r.sample.expected_owner, r.sample.holder_ids()) for r in rows] == [
        (0, "c1", frozenset({"c1"})),
        (1, "c1", frozenset()),
    ]
    settle(engine)
    assert engine.groups["G"].generation == 1  # one generation: the call's changes are all within one window


def test_a_group_no_longer_sampled_is_forgotten_a_window_after_its_last_sample_and_its_episode_closes():
    engine = ShardEngine.restore(None, EngineSettings())
    engine.apply(typed([progress(T0, [("T", 0, 9, 1)], group="gone")]), T0)
    horizon = T0 + 10 * EVERY + 1  # a whole window after the last sample
    assert engine.next_wakeup_ms() == horizon
    assert not of(engine.advance(horizon - 1), EpisodeTransition) and "gone" in engine.progress
    outcomes = engine.advance(horizon)
    (closed,) = of(outcomes, EpisodeTransition)
    assert closed.transition.status == EpisodeStatus.CLOSED and closed.transition.closed_at_ms == horizon
    assert [(o.group, o.queue_id) for o in of(outcomes, QueueProgressGone)] == [("gone", 0)]
    assert of(outcomes, ProgressSummary) == [ProgressSummary("gone", horizon, {})]
    assert "gone" not in engine.progress and engine.is_empty()


def test_an_offline_groups_backlog_episode_is_its_open_anomalies_series_until_it_is_forgotten():
    from connectors.metrics import Metrics, MetricsState
    from streaming.job.delta.metric_rows import apply_consumer_metrics

    metrics = MetricsState()
    engine = ShardEngine.restore(None, EngineSettings())
    series = ("c", "never", "OFFLINE_GROUP_BACKLOG")
    for t, consumer, value in ((T0, 1, 1.0), (T0 + EVERY, 9, None)):
        outcomes = engine.apply(typed([progress(t, [("T", 0, 9, consumer)], group="never")]), T0)
        apply_consumer_metrics(metrics, [("c", s) for s in of(outcomes, ProgressSummary)])
        assert metrics.gauges["rmqmon_group_open_anomalies"].get(series) == value
    assert metrics.series_count(Metrics.GROUP_PROGRESS_LAG) == 0


def test_an_expected_owner_that_reports_nothing_of_the_topic_is_presumed_to_hold_its_queues():
    engine = ShardEngine.restore(None, EngineSettings())
    engine.apply(typed([route(T0, brokers=(("broker-a", 2),)), hb(T0 + 1, "ch1", "c1")]), T0)  # no report at all
    outcomes = sample_window(engine, lambda i, t: [("T", 0, 90 + i, 40, T0), ("T", 1, 50, 40, T0)])
    for queue_id in (0, 1):  # a flat backlog under its presumed holder: stuck, never an orphan
        row = last_state(outcomes, queue_id)
        assert row.sample.holder_ids() == frozenset({"c1"}) and not row.holders_reported
        assert (row.verdict.state, row.verdict.cause) == (QueueState.STUCK_HOLDER, StuckCause.UNEXPLAINED)
    beats = [hb(t, "ch1", "c1") for t in range(T0 + 10_000 + 10 * EVERY, T0 + 400_000, 60_000)]  # c1 stays
    engine.apply(
        typed([*beats, report(T0 + 400_000, "c1", [("broker-a", 0)])]), T0
    )  # now it reports: queue 1 is nobody's
    outcomes = sample_window(engine, lambda i, t: [("T", 1, 50, 40, T0)], start=T0 + 410_000)
    row = last_state(outcomes, 1)
    assert row.holders_reported and row.verdict.state == QueueState.ORPHAN_CONFIRMED


def test_a_report_taken_before_the_generation_plus_the_rebalance_delay_is_no_holder():
    """The member's join-wave report lists queue 0 only: before the bound it is not counted (its computed share,
    both queues, is presumed held, as without a report); its report after the bound counts."""
    engine = ShardEngine.restore(None, EngineSettings())
    engine.apply(typed([route(T0, brokers=(("broker-a", 2),)), hb(T0 + 1, "ch1", "c1")]), T0)
    settle(engine)
    engine.apply(typed([report(COUNTED_MS - 1, "c1", [("broker-a", 0)])]), T0)
    rows = of(engine.apply(typed([progress(COUNTED_MS + 5_000, [("T", 0, 5, 5), ("T", 1, 5, 1)])]), T0), QueueProgress)
    assert [(r.queue_id, r.sample.holder_ids(), r.holders_reported) for r in rows] == [
        (0, frozenset({"c1"}), False),
        (1, frozenset({"c1"}), False),
    ]
    engine.apply(typed([report(COUNTED_MS, "c1", [("broker-a", 0)])]), T0)  # the same queues, now counted
    rows = of(engine.apply(typed([progress(COUNTED_MS + 35_000, [("T", 0, 5, 5), ("T", 1, 5, 1)])]), T0), QueueProgress)
    assert [(r.queue_id, r.sample.holder_ids(), r.holders_reported) for r in rows] == [
        (0, frozenset({"c1"}), True),
        (1, frozenset(), True),
    ]


@pytest.mark.parametrize(("after", "offline"), [(120_000, False), (120_001, True)])
def test_a_group_whose_members_went_silent_is_offline_at_a_sample_past_their_expiry_in_the_same_call(after, offline):
    engine = engine_with_member(queues=1)
    last_beat = T0 + 1
    outcomes = engine.apply(typed([progress(last_beat + after, [("T", 0, 9, 1)])]), T0)  # no scan ran in between
    (row,) = of(outcomes, QueueProgress)
    assert row.online is not offline
    assert [t.transition.episode.anomaly for t in of(outcomes, EpisodeTransition)] == (
        [AnomalyKind.OFFLINE_GROUP_BACKLOG] if offline else []
    )
