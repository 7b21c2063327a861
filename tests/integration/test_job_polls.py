"""Brokers' polls of their connection lists through the real job (Kafka -> Spark -> Delta), in two runs.

Run 1: group G polled on two brokers every 10 s; c3 vanishes from broker-b's poll at 20 s; broker-b's polls stop
at 30 s while broker-a's go on to 250 s (far past the 120 s channel expiry). A BROADCASTING and a CONSUME_POP
group are polled on both brokers to 250 s, each with a client id on two channels, and a bad poll is published. Run 2 (restarted from
the checkpoints): broker-b answers again.
"""

from __future__ import annotations

import json

import pytest

from tests.support.events import BASE, route
from tests.support.job import job_config, publish, read, run_available

STALE_AFTER = 30_000
C1, C2, C3 = ("10.5.0.1:1", "c1"), ("10.5.0.2:1", "c2"), ("10.5.0.3:1", "c3")
C1_AGAIN = ("10.5.0.9:1", "c1")  # a second client with c1's id


def poll(t, connections, broker, group="G", **extra):
    return {
        "type": "consumer_connections",
        "schema_version": 1,
        "event_time": BASE + t,
        "broker": broker,
        "group": group,
        "stale_after_ms": STALE_AFTER,
        "collector": "test-collector",
        "subscriptions": [{"topic": "T", "expression": "*", "sub_version": 1}],
        "connections": [{"channel": ch, "client_id": cid, "client_version": "479"} for ch, cid in connections],
        **extra,
    }


def run1_events():
    events = [route(0)]
    for t in range(0, 250_001, 10_000):
        events.append(poll(t, [C1, C2, C3], "broker-a"))
        if t <= 30_000:  # broker-b: c3 gone from its list at 20 s, then no answer after 30 s
            events.append(poll(t, [C1, C2, C3] if t < 20_000 else [C1, C2], "broker-b"))
    for group, extra in (("G-bc", {"message_model": "BROADCASTING"}), ("G-pop", {"consume_type": "CONSUME_POP"})):
        events += [
            poll(t, [C1, C1_AGAIN, C2], b, group, **extra)
            for t in range(0, 250_001, 10_000)
            for b in ("broker-a", "broker-b")
        ]
    events.append(dict(poll(5_000, [C1], "broker-a", "G-bad"), stale_after_ms=10))
    return events


def run2_events():
    return [poll(t, [C1, C2, C3], "broker-a") for t in (260_000, 270_000)] + [
        poll(t, [C1, C2], "broker-b") for t in (260_000, 270_000)
    ]


TABLES = (
    "membership_changes",
    "group_snapshots",
    "anomaly_episodes",
    "expected_assignments",
    "broker_views_current",
    "broker_view_changes",
    "dead_letters",
)


@pytest.fixture(scope="module")
def outcome(kafka_broker, spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("polls")
    config, topics = job_config(kafka_broker.bootstrap_servers, root, "polls")
    publish(kafka_broker.bootstrap_servers, run1_events(), topics)
    job1 = run_available(spark, config)
    first = {t: read(spark, config, t) for t in TABLES}
    publish(kafka_broker.bootstrap_servers, run2_events(), topics)
    job2 = run_available(spark, config)
    second = {t: read(spark, config, t) for t in TABLES}
    return first, second, job1.metrics, job2.metrics


def of(rows, group="G"):
    return [r for r in rows if r["group"] == group]


def test_a_client_vanishing_from_one_brokers_poll_is_removed_from_that_view_at_the_polls_time(outcome):
    first, _, _, _ = outcome
    removals = [
        (r["broker"], r["change"], r["client_id"], r["event_time_ms"] - BASE)
        for r in of(first["membership_changes"])
        if r["change"] not in ("JOIN", "SUBSCRIPTION_CHANGED")
    ]
    assert removals == [("broker-b", "VANISHED", "c3", 20_000)]


def test_a_broker_whose_polls_stop_is_stale_without_removal_or_orphaned_queues(outcome):
    first, _, metrics, _ = outcome
    views = {r["broker"]: r for r in of(first["broker_views_current"])}
    assert views["broker-b"]["status"] == "STALE" and views["broker-b"]["channels"] == 2
    assert views["broker-b"]["stale_since_ms"] == BASE + 30_000 + STALE_AFTER + 1
    assert views["broker-b"]["polled_at_ms"] == BASE + 30_000
    assert views["broker-a"]["status"] == "FRESH" and views["broker-a"]["polled_at_ms"] == BASE + 250_000
    changes = sorted((r["broker"], r["status"], r["event_time_ms"] - BASE) for r in of(first["broker_view_changes"]))
    assert changes == [("broker-a", "FRESH", 0), ("broker-b", "FRESH", 0), ("broker-b", "STALE", 60_001)]
    assert not [e for e in of(first["anomaly_episodes"]) if e["anomaly"] == "ORPHANED_QUEUES"]
    stale = metrics.gauges["rmqmon_broker_stale_group_views"]
    assert stale[("DefaultCluster", "broker-b")] == 1 and stale[("DefaultCluster", "broker-a")] == 0
    assert (
        metrics.gauges["rmqmon_broker_last_poll_timestamp_seconds"][("DefaultCluster", "broker-a")]
        == (BASE + 250_000) / 1000
    )


def test_polls_that_resume_make_the_view_fresh_and_change_nobody_it_still_lists(outcome):
    first, second, _, metrics = outcome
    views = {r["broker"]: r for r in of(second["broker_views_current"])}
    assert views["broker-b"]["status"] == "FRESH" and views["broker-b"]["polled_at_ms"] == BASE + 270_000
    new_changes = [r for r in of(second["broker_view_changes"]) if r not in of(first["broker_view_changes"])]
    assert [(r["broker"], r["status"], r["event_time_ms"] - BASE) for r in new_changes] == [
        ("broker-b", "FRESH", 260_000)
    ]
    assert len(of(second["membership_changes"])) == len(of(first["membership_changes"]))
    assert metrics.gauges["rmqmon_broker_stale_group_views"][("DefaultCluster", "broker-b")] == 0


@pytest.mark.parametrize(("group", "mode"), [("G-bc", "BROADCAST"), ("G-pop", "BROKER")])
def test_groups_without_client_side_allocation_have_no_expected_assignment_and_no_queue_anomaly(outcome, group, mode):
    _, second, _, _ = outcome
    snapshots = of(second["group_snapshots"], group)
    assert snapshots and {s["strategy"] for s in snapshots} == {mode}
    assert json.loads(snapshots[-1]["details"])["allocation"] == mode
    assert not of(second["expected_assignments"], group)
    kinds = {e["anomaly"] for e in of(second["anomaly_episodes"], group)}
    assert not kinds & {"ORPHANED_QUEUES", "DOUBLE_OWNED_QUEUES"}


def test_a_bad_poll_is_a_dead_letter_and_counted(outcome):
    first, _, metrics, _ = outcome
    letters = [r for r in first["dead_letters"] if r["source"] == "consumer_connections"]
    assert [(r["reason"], json.loads(r["raw_value"])["group"]) for r in letters] == [("INVALID_VALUE", "G-bad")]
    assert "stale_after_ms" in letters[0]["detail"]
    assert metrics.counters["rmqmon_dead_letters_total"][("consumer", "INVALID_VALUE")] == 1
