"""When the detection-latency benchmark counts an incident as shown in the metrics: a slow broker by its
isolation gauge or by a rise of its isolation-episode counter (the gauge misses an isolation shorter than the
sends one fault-windows batch covers), a membership incident by the group's gauges."""

from __future__ import annotations

from bench.bench_detection_latency import MetricsWatch
from bench.latency_fleet import Incident

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
