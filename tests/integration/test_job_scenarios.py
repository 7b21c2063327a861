"""Scripted consumer-side scenarios and bad input, through the real job in two runs (a restart in between).

Run 1 publishes the start of every scenario plus a corpus of bad records on every input topic; run 2
(restarted from the same checkpoints) publishes the rest. Each scenario lives in its own consumer group.
"""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest

from streaming.contract.events import DEFAULT_TOPICS, REASONS
from streaming.contract.validator import Rejection, validate_event
from streaming.domain.fleet import UNKNOWN_GROUP
from tests.support.event_corpus import BAD
from tests.support.events import BASE, hb, report, route
from tests.support.events import channel_event as ev
from tests.support.job import job_config, publish, read, run_available


def alive(group, channel, cid, topics=("T",), broker="broker-a", until=180_000):
    """Heartbeats every 30 s, as a live client sends them."""
    return [hb(t, channel, cid, group, topics, broker) for t in range(0, until + 1, 30_000)]


# Valid events with text after the object, which the job ignores: topic U's route and the ghost's report.
TRAILING = b' {"trailing": true}'


def run1_events():
    events = [route(0, "T"), ("topic_route", json.dumps(route(0, "U")).encode() + TRAILING)]
    # LEAVE: c0 unregisters at 60 s; c2 goes silent after its first heartbeat and expires.
    for t in range(0, 180_001, 30_000):
        events.append(hb(t, "10.2.0.1:1", "c1", "G-leave"))
    events += [
        hb(0, "10.2.0.0:1", "c0", "G-leave"),
        ev("UNREGISTER", 60_000, "10.2.0.0:1", "c0", "G-leave"),
        hb(0, "10.2.0.2:1", "c2", "G-leave"),
    ]
    # Subscription change (run 2 drops U from c2).
    events += alive("G-sub", "10.3.0.1:1", "c1", ("T", "U")) + alive("G-sub", "10.3.0.2:1", "c2", ("T", "U"))
    # Diverging views: broker-b never saw c2.
    events += alive("G-div", "10.4.0.1:1", "c1") + alive("G-div", "10.4.0.2:1", "c2")
    events += alive("G-div", "10.4.0.1:2", "c1", broker="broker-b")
    # A report from a group of which no broker knows a channel: nothing to compare it with.
    ghost = report(90_000, "ghost", [("broker-a", 0), ("broker-a", 1)], "G-ghost")
    events.append(("reported_assignment", json.dumps(ghost).encode() + TRAILING))
    return events


def run2_events():
    return [
        hb(200_000, "10.3.0.2:1", "c2", "G-sub", topics=("T",)),
        hb(200_000, "10.3.0.1:1", "c1", "G-sub", topics=("T", "U")),
        hb(210_000, "10.2.0.1:1", "c1", "G-leave"),
    ]


@pytest.fixture(scope="module")
def outcome(kafka_broker, spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("scenarios")
    config, topics = job_config(kafka_broker.bootstrap_servers, root, "scen")
    publish(kafka_broker.bootstrap_servers, [(t, raw.encode()) for t, raw, _ in bad_input()] + run1_events(), topics)
    jobs = [run_available(spark, config)]
    publish(kafka_broker.bootstrap_servers, run2_events(), topics)
    jobs.append(run_available(spark, config))  # restarted from the checkpoints
    tables = ("membership_changes", "group_snapshots", "anomaly_episodes", "dead_letters")
    outcome: dict = {t: read(spark, config, t) for t in tables}
    # rmqmon_dead_letters_total as each run's metrics counted it, summed over both runs
    counted: Counter = Counter()
    for job in jobs:
        for labels, value in job.metrics.counters.get("rmqmon_dead_letters_total", {}).items():
            counted[labels] += value
    outcome["dead_letters_counted"] = counted
    return outcome


def bad_input():
    """(topic's event type, raw value, reason the contract's validator gives) for every kind of bad input."""
    now = int(time.time() * 1000)
    records = []
    for raw, _, _ in BAD:
        try:
            event_type = json.loads(raw).get("type")
        except (ValueError, AttributeError):
            event_type = None
        value = raw
        if '"event_time": 1700003600000' in raw:  # the future one: relative to the Kafka timestamp stamped now
            value = json.dumps(dict(json.loads(raw), event_time=now + 24 * 3600 * 1000))
        known = ("consumer_channel", "consumer_connections", "send_result", "topic_route", "reported_assignment")
        for topic_type in [event_type] if event_type in known else ["consumer_channel", "send_result"]:
            expected = validate_event(value, now, default_type=topic_type)
            assert isinstance(expected, Rejection), value[:100]
            records.append((topic_type, value, expected.reason))
    return records


def test_unregister_and_expiry_are_membership_changes_at_their_event_times(outcome):
    changes = {
        (r["change"], r["reason"], r["client_id"], r["event_time_ms"] - BASE)
        for r in outcome["membership_changes"]
        if r["group"] == "G-leave"
    }
    assert ("LEAVE", "UNREGISTER", "c0", 60_000) in changes
    assert ("EXPIRED", "SCAN", "c2", 120_001) in changes
    assert not any(c[0] in ("LEAVE", "EXPIRED") and c[2] == "c1" for c in changes)
    expired = next(r for r in outcome["membership_changes"] if r["change"] == "EXPIRED")
    assert expired["notifies_clients"] is False  # the broker's scan sends no CHANGE


def test_subscription_change_is_a_rebalance_with_the_moved_queues(outcome):
    snapshots = sorted((r for r in outcome["group_snapshots"] if r["group"] == "G-sub"), key=lambda r: r["generation"])
    last = snapshots[-1]
    assert "SUBSCRIPTION_CHANGED" in last["triggers"] and last["generation"] == snapshots[-2]["generation"] + 1
    topics = json.loads(last["details"])["topics"]
    # U's route (published with trailing text) took effect.
    # U: cidAll stays [c1, c2], but c2 no longer pulls U: its half (4 queues) loses its owner.
    assert topics["U"]["moved"] == 4 and topics["U"]["orphaned"] == 4 and topics["U"]["non_subscribers"] == ["c2"]
    assert topics["T"]["moved"] == 0
    opened = {r["anomaly"] for r in outcome["anomaly_episodes"] if r["group"] == "G-sub" and r["status"] == "OPENED"}
    assert {"INCONSISTENT_SUBSCRIPTION", "ORPHANED_QUEUES"} <= opened


def test_brokers_that_disagree_produce_a_diverging_view_anomaly(outcome):
    episode = next(
        r for r in outcome["anomaly_episodes"] if r["group"] == "G-div" and r["anomaly"] == "DIVERGING_BROKER_VIEWS"
    )
    assert json.loads(episode["details"])["views"] == {"broker-a": ["c1", "c2"], "broker-b": ["c1"]}


def test_every_kind_of_bad_input_is_dead_lettered_with_its_reason_and_the_job_goes_on(outcome):
    letters = [r for r in outcome["dead_letters"] if r["reason"] != UNKNOWN_GROUP]
    got = sorted((r["kafka_topic"].split(".", 1)[1], r["reason"]) for r in letters)
    want = sorted((DEFAULT_TOPICS[t], reason) for t, _, reason in bad_input())
    assert got == want
    assert {reason for _, reason in got} == set(REASONS)
    assert all(r["raw_value"] is not None and r["kafka_offset"] >= 0 and r["detail"] for r in letters)
    # valid events published after the bad ones were processed
    assert any(r["group"] == "G-div" for r in outcome["group_snapshots"])


def test_every_dead_letter_is_counted_under_the_query_that_wrote_it_and_its_reason(outcome):
    # The send-result topic is send-ingest's (its JVM pass, then the rules for what the pass left); every other
    # topic is the consumer query's.
    def query(letter: dict) -> str:
        return "send-ingest" if letter["kafka_topic"].split(".", 1)[1] == DEFAULT_TOPICS["send_result"] else "consumer"

    want = Counter((query(r), r["reason"]) for r in outcome["dead_letters"])
    assert {q for q, _ in want} == {"send-ingest", "consumer"}
    assert outcome["dead_letters_counted"] == want


def test_a_report_for_a_group_no_broker_knows_is_a_dead_letter_with_its_kafka_coordinates(outcome):
    ghosts = [r for r in outcome["dead_letters"] if r["reason"] == UNKNOWN_GROUP]
    assert len(ghosts) == 1
    ghost = ghosts[0]
    assert ghost["source"] == "reported_assignment"
    assert ghost["kafka_topic"].endswith("." + DEFAULT_TOPICS["reported_assignment"]) and ghost["kafka_offset"] >= 0
    assert ghost["kafka_timestamp"] is not None
    assert ghost["raw_value"].endswith(TRAILING.decode())  # the record as published, trailing text and all
    assert json.JSONDecoder().raw_decode(ghost["raw_value"])[0]["group"] == "G-ghost"
    assert "G-ghost" in ghost["detail"] and "ghost" in ghost["detail"] and "2 queues" in ghost["detail"]
    assert not any(r["group"] == "G-ghost" for r in outcome["group_snapshots"])
