"""When the detection-latency benchmark counts an incident as shown in the metrics: a slow broker by its
isolation gauge or by a rise of its isolation-episode counter (the gauge misses an isolation shorter than the
sends one fault-windows batch covers), a membership incident by the group's gauges; and that the fleet sends
a slow spell's slow sends however far behind its publisher is."""

from __future__ import annotations

import json

from bench.bench_detection_latency import MetricsWatch
from bench.latency_fleet import SLOW_LATENCY_MS, Fleet, Incident

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
