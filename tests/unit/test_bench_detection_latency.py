"""When the detection-latency benchmark counts an incident as shown in the metrics: a slow broker by its
isolation gauge or by a rise of its isolation-episode counter (the gauge misses an isolation shorter than the
sends one send-ingest batch covers), a membership incident by the group's gauges; that the fleet sends a
slow spell's slow sends however far behind its publisher is; and that an incident is timed from the moment
its first event is handed to Kafka, not from its own moment, so a publisher behind is not detection time."""

from __future__ import annotations

import json

from bench.bench_detection_latency import MetricsWatch, summarize
from bench.latency_fleet import EXPIRY_MS, SLOW_LATENCY_MS, Fleet, Handed, Incident, Injection, Injector, tick_events

EPISODES = "rmqmon_broker_isolation_episodes_total"


def test_a_slow_broker_shows_by_its_gauge_or_a_new_isolation_episode():
    watch = MetricsWatch("http://127.0.0.1:1/metrics")
    slow = Incident("slow_broker", "fresh", "broker-b")
    assert not watch.shows(slow, 2.0, {(EPISODES, "broker-b"): 2.0, ("rmqmon_broker_isolated", "broker-b"): 0.0})
    assert not watch.shows(slow, 2.0, {(EPISODES, "broker-a"): 3.0})
    assert watch.shows(slow, 2.0, {(EPISODES, "broker-b"): 3.0, ("rmqmon_broker_isolated", "broker-b"): 0.0})
    assert watch.shows(slow, 2.0, {(EPISODES, "broker-b"): 2.0, ("rmqmon_broker_isolated", "broker-b"): 1.0})


def test_membership_incidents_show_by_the_group_s_gauges():
    watch = MetricsWatch("http://127.0.0.1:1/metrics")
    duplicate = Incident("duplicate_client_id", "fresh", "G7", "10.0.0.7@1")
    assert not watch.shows(duplicate, 10.0, {("rmqmon_group_duplicate_client_ids", "G7"): 0.0})
    assert watch.shows(duplicate, 10.0, {("rmqmon_group_duplicate_client_ids", "G7"): 1.0})
    left = Incident("unregister", "fresh", "G7", "10.0.0.7@1")
    assert not watch.shows(left, 10.0, {("rmqmon_group_members", "G7"): 10.0})
    assert watch.shows(left, 10.0, {("rmqmon_group_members", "G7"): 9.0})


def test_a_slow_spell_inside_one_long_publisher_interval_still_gives_slow_sends_in_it():
    """A publisher behind by seconds covers them in one interval: the sends of the slow spell are slow, by their
    own moments, and none outside it."""
    fleet = Fleet(groups=1, members=1, producers=20, sends_per_second=2_000, topics={"send_result": "sends"})
    fleet.slow_until["broker-a"] = 13_000
    sends = [json.loads(value) for _, _, value in fleet.sends(10_000, 20_000)]  # one 10 s interval
    slow = [s for s in sends if s["latency_ms"] == SLOW_LATENCY_MS]
    assert len(sends) == 20_000
    assert slow and all(s["broker"] == "broker-a" and 10_000 <= s["event_time"] < 13_000 for s in slow)
    late_a = [s for s in sends if s["broker"] == "broker-a" and s["event_time"] >= 13_000]
    assert late_a and all(s["latency_ms"] < SLOW_LATENCY_MS for s in late_a)


def _fleet(groups: int = 2, members: int = 2) -> Fleet:
    topics = {"consumer_channel": "channels", "send_result": "sends"}
    return Fleet(groups=groups, members=members, producers=20, sends_per_second=2_000, topics=topics)


def test_a_tick_hands_an_incident_s_own_event_first_and_marks_a_slow_broker_s_first_slow_send():
    fleet = _fleet()
    injector = Injector(fleet)
    injector.scheduled = [
        Injection(1, "duplicate_client_id", 1_000, group=0, member=0, client_id="10.0.0.9@1009#9"),
        Injection(2, "slow_broker", 1_000, broker="broker-a"),
    ]
    first = tick_events(fleet, injector, 900, 1_000)
    (topic, _, value), handed = first[0]
    assert topic == "channels" and json.loads(value)["client_id"] == "10.0.0.9@1009#9" and handed == [(1, 1_000)]
    assert [h for _, h in first[1:] if h] == []  # the spell starts at the tick's end: no slow send in it yet
    assert all(json.loads(v).get("latency_ms") != SLOW_LATENCY_MS for (_, _, v), _ in first)

    second = tick_events(fleet, injector, 1_000, 1_100)
    marked = [(json.loads(value), handed) for (_, _, value), handed in second if handed]
    assert len(marked) == 1
    send, handed = marked[0]
    assert handed == [(2, 1_000)] and send["broker"] == "broker-a" and send["latency_ms"] == SLOW_LATENCY_MS
    slow = [n for n, ((_, _, v), _) in enumerate(second) if json.loads(v).get("latency_ms") == SLOW_LATENCY_MS]
    assert second[slow[0]][1] == [(2, 1_000)]  # the mark is on the first slow send of the tick


def test_a_member_unregistered_in_a_tick_sends_no_heartbeat_after_its_unregister():
    fleet = _fleet(groups=1, members=2)
    injector = Injector(fleet)
    injector.scheduled = [Injection(4, "unregister", 100, group=0, member=0)]
    events = [(json.loads(value), handed) for (_, _, value), handed in tick_events(fleet, injector, 0, 100)]
    gone = fleet.client_id(0, 0)
    assert [e["kind"] for e, _ in events[:2]] == ["UNREGISTER", "UNREGISTER"] and events[0][1] == [(4, 100)]
    assert not [e for e, _ in events[2:] if e.get("client_id") == gone]  # its heartbeat of this tick is not sent
    other = _fleet(groups=1, members=2)
    alone = tick_events(other, Injector(other), 0, 100)  # left alone, the member heartbeats in this tick
    assert [v for (_, _, v), _ in alone if json.loads(v).get("client_id") == gone]


def test_a_silent_member_is_handed_with_the_first_tick_past_its_expiry():
    fleet = _fleet(groups=1, members=2)
    injector = Injector(fleet)
    tick_events(fleet, injector, 0, 100)  # member 0 of group 0 heartbeats in the round's first tick
    assert fleet.last_heartbeat[(0, 0)] == 100
    injector.scheduled = [Injection(3, "silent_member", 200, group=0, member=0)]
    tick_events(fleet, injector, 100, 200)
    silenced = fleet.client_id(0, 0)
    later = tick_events(fleet, injector, 30_000, 30_100)  # its next heartbeat's tick: none is sent
    assert not any(json.loads(v).get("client_id") == silenced for (_, _, v), _ in later)
    assert not any(handed for _, handed in tick_events(fleet, injector, 100_000, 100 + EXPIRY_MS - 1))
    past = tick_events(fleet, injector, 100 + EXPIRY_MS - 1, 100 + EXPIRY_MS + 99)
    assert past[0][1] == [(3, 100 + EXPIRY_MS)] and not any(handed for _, handed in past[1:])


def test_the_watch_times_an_incident_from_its_handing_and_reports_the_lag_apart():
    watch = MetricsWatch("http://127.0.0.1:1/metrics", members=10)
    left = Incident("unregister", "fresh", "G7", "10.0.0.7@1")
    slow = Incident("slow_broker", "fresh", "broker-b")
    never = Incident("duplicate_client_id", "fresh", "G8", "10.0.0.8@1")
    indexes = [watch.expect(incident) for incident in (left, slow, never)]
    assert len(set(indexes)) == 3
    watch.values = {(EPISODES, "broker-b"): 3.0}
    watch.handed_over(Handed(indexes[0], 1_000, 4_000))
    watch.handed_over(Handed(indexes[1], 2_000, 2_500))
    assert (left.moment_ms, left.at_ms, left.latency(6_000)) == (1_000, 4_000, 2.0)
    assert watch.pending == [(left, 10.0), (slow, 3.0)]
    never.metric_ms = 9_000  # never handed: it has no latency at all
    assert never.latency(never.metric_ms) is None
    left.metric_ms, slow.metric_ms = 6_000, 3_500
    overall = summarize([left, slow, never])["overall"]
    assert overall["to_metric_s"]["max"] == 2.0 and overall["to_metric_s"]["n"] == 2
    assert overall["handing_lag_s"]["max"] == 3.0 and overall["never_handed"] == 1
