"""The fault-window tracker's replay: episodes with exact start and end times for both client lines, expiries in
end order, broker status and fallback views, idle eviction, producers without sendLatencyFaultEnable, snapshots
and the replay's properties. Each case says why it is there.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streaming.domain.errors import IllegalArgument
from streaming.domain.faults.tolerance import (
    ROCKETMQ_4,
    ROCKETMQ_5,
    FaultItem,
    FaultSemantics,
    LatencyFaultTolerance,
    SendOutcome,
    SendResult,
    fault_update_for,
)
from streaming.domain.faults.tracker import FaultWindowTracker
from streaming.domain.faults.windows import WindowStatus
from streaming.domain.state_codec import StateVersionError


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
