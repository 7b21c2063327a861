"""Scripted consumer-side scenarios and bad input, through the real job in two runs (a restart in between).

Run 1 publishes the start of every scenario plus a corpus of bad records on every input topic; run 2
(restarted from the same checkpoints) publishes the rest. Each scenario lives in its own consumer group;
the consume-progress ones (groups ``G-p*``) sample topic P every 15 s, ten samples: a whole window; in G-pmove a
member leaves under load and its queue's hand-off cost is computed here from the script.
"""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest

from streaming.contract.events import DEFAULT_TOPICS, REASONS
from streaming.contract.validator import Rejection, validate_event
from streaming.domain.consumers.engine_settings import EngineSettings
from streaming.domain.consumers.shard_engine import UNKNOWN_GROUP
from tests.support.event_corpus import BAD
from tests.support.events import BASE
from tests.support.job import job_config, publish, read, run_available
from tests.support.job_scenarios import (
    MOVE_CACHE,
    MOVE_LEAVE_MS,
    MOVE_OFFSETS,
    MOVE_TAKEN_MS,
    ORPHAN_OFFSETS,
    PROGRESS_SAMPLES,
    TRAILING,
    progress_events,
    run1_events,
    run2_events,
)


@pytest.fixture(scope="module")
def outcome(kafka_broker, spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("scenarios")
    config, topics = job_config(kafka_broker.bootstrap_servers, root, "scen")
    bad = [(t, raw.encode()) for t, raw, _ in bad_input()]
    publish(kafka_broker.bootstrap_servers, bad + run1_events() + progress_events(), topics)
    jobs = [run_available(spark, config)]
    publish(kafka_broker.bootstrap_servers, run2_events(), topics)
    jobs.append(run_available(spark, config))  # restarted from the checkpoints
    tables = ("membership_changes", "group_snapshots", "anomaly_episodes", "dead_letters")
    tables += ("consume_progress", "queue_progress_current", "rebalance_cost")
    outcome: dict = {t: read(spark, config, t) for t in tables}
    # rmqmon_dead_letters_total as each run's metrics counted it, summed over both runs
    counted: Counter = Counter()
    for job in jobs:
        for labels, value in job.metrics.counters.get("rmqmon_dead_letters_total", {}).items():
            counted[labels] += value
    outcome["dead_letters_counted"] = counted
    outcome["gauges"] = [job.metrics.gauges for job in jobs]  # run 2's restored from the tables at its start
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
    # U: cidAll stays [c1, c2], but c2 no longer pulls U: its half (4 queues) loses its owner, the inconsistent
    # subscription's queues, not orphaned ones.
    assert (topics["U"]["moved"], topics["U"]["unsubscribed"], topics["U"]["orphaned"]) == (4, 4, 0)
    assert topics["U"]["non_subscribers"] == ["c2"]
    assert topics["T"]["moved"] == 0
    opened = {r["anomaly"] for r in outcome["anomaly_episodes"] if r["group"] == "G-sub" and r["status"] == "OPENED"}
    assert "INCONSISTENT_SUBSCRIPTION" in opened and "ORPHANED_QUEUES" not in opened


def test_brokers_that_disagree_produce_a_diverging_view_anomaly(outcome):
    episode = next(
        r for r in outcome["anomaly_episodes"] if r["group"] == "G-div" and r["anomaly"] == "DIVERGING_BROKER_VIEWS"
    )
    assert json.loads(episode["details"])["views"] == {"broker-a": ["c1", "c2"], "broker-b": ["c1"]}


def test_every_kind_of_bad_input_is_dead_lettered_with_its_reason_and_the_job_goes_on(outcome):
    progress_topic = DEFAULT_TOPICS["consume_progress"]  # its bad events are the progress test's
    letters = [
        r
        for r in outcome["dead_letters"]
        if r["reason"] != UNKNOWN_GROUP and r["kafka_topic"].split(".", 1)[1] != progress_topic
    ]
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


def progress_of(outcome, group, table="queue_progress_current"):
    return {r["queue_id"]: r for r in outcome[table] if r["group"] == group and r["topic"] == "P"}


def test_a_queue_nobody_holds_with_a_flat_backlog_is_a_confirmed_orphan_with_the_events_lag(outcome):
    orphan = progress_of(outcome, "G-porph")[1]
    broker_offset, consumer_offset = ORPHAN_OFFSETS
    assert (orphan["state"], orphan["severity"], orphan["rule"]) == ("ORPHAN_CONFIRMED", "critical", "4")
    assert (orphan["broker_offset"], orphan["consumer_offset"]) == ORPHAN_OFFSETS
    assert orphan["lag"] == broker_offset - consumer_offset
    assert orphan["holders"] == [] and orphan["expected_owner"] == "c1" and orphan["complete"] == 1.0
    assert orphan["holders_reported"]  # c1 reported P without it: not presumed to hold it
    assert orphan["time_lag_upper_s"] == (PROGRESS_SAMPLES[-1] + 60_000) / 1000
    history = sorted(
        (r for r in outcome["consume_progress"] if r["group"] == "G-porph" and r["queue_id"] == 1),
        key=lambda r: r["event_time_ms"],
    )
    assert [r["event_time_ms"] - BASE for r in history] == PROGRESS_SAMPLES  # a row per sample
    # confirmed only once the window is whole: before, the same facts are INCOMPLETE
    assert [r["state"] for r in history[-2:]] == ["INCOMPLETE", "ORPHAN_CONFIRMED"] and history[-1]["state_changed"]
    held = progress_of(outcome, "G-porph")[0]
    assert held["state"] == "OK" and held["holders"] == ["c1"]


def test_a_holder_that_does_not_advance_its_backlog_is_stuck_with_its_cause(outcome):
    stuck, idle = progress_of(outcome, "G-pstuck")[0], progress_of(outcome, "G-pstuck")[1]
    assert (stuck["state"], stuck["cause"], stuck["holders"]) == ("STUCK_HOLDER", "FLOW_CONTROL", ["c1"])
    assert stuck["lag"] == 90 + 9 - 40
    assert idle["state"] == "IDLE" and idle["cause"] is None


def test_an_idle_group_raises_nothing(outcome):
    assert {q: r["state"] for q, r in progress_of(outcome, "G-pidle").items()} == {0: "IDLE", 1: "IDLE"}
    assert not [r for r in outcome["anomaly_episodes"] if r["group"] == "G-pidle"]


def test_an_offline_group_with_a_backlog_is_an_anomaly_until_it_catches_up(outcome):
    episodes = [r for r in outcome["anomaly_episodes"] if r["group"] == "G-poff"]
    assert {r["anomaly"] for r in episodes} == {"OFFLINE_GROUP_BACKLOG"}
    by_status = {r["status"]: r for r in episodes}
    opened = by_status["OPENED"]
    assert opened["opened_at_ms"] == BASE + PROGRESS_SAMPLES[0]
    assert json.loads(opened["details"])["lag"] == 30 - 20  # the first sample's backlog
    assert "UPDATED" not in by_status  # the same queue waited at every sample: the lag is in the history
    assert by_status["CLOSED"]["closed_at_ms"] == BASE + 200_000  # run 2: caught up
    history = [r for r in outcome["consume_progress"] if r["group"] == "G-poff"]
    assert len(history) == 2 * 4 and not any(r["group_online"] for r in history)
    assert not progress_of(outcome, "G-poff")  # no longer tracked


def test_bad_progress_events_are_dead_letters_with_their_reasons(outcome):
    letters = {r["reason"]: r["detail"] for r in outcome["dead_letters"] if r["source"] == "consume_progress"}
    assert letters == {
        "INVALID_VALUE": "$.queues[].queue_id must be minimum 0",
        "INCONSISTENT_PROGRESS": "consume_progress of G-pidle on broker-a has an error and 1 queues",
    }


def test_progress_metrics_are_per_group_and_topic_and_restored_from_the_tables_at_a_restart(outcome):
    first, second = outcome["gauges"]
    for gauges in (first, second):  # run 2 published nothing for these groups: its values are the restored ones
        assert (
            gauges["rmqmon_group_progress_lag"][("DefaultCluster", "G-porph", "P")]
            == ORPHAN_OFFSETS[0] - ORPHAN_OFFSETS[1]
        )
        queues = gauges["rmqmon_group_progress_queues"]
        assert (
            queues[("DefaultCluster", "G-porph", "P", "ORPHAN_CONFIRMED")] == 1
            and queues[("DefaultCluster", "G-pstuck", "P", "STUCK_HOLDER")] == 1
        )
        assert queues[("DefaultCluster", "G-pidle", "P", "IDLE")] == 2
        assert gauges["rmqmon_group_progress_max_time_lag_seconds"][("DefaultCluster", "G-pstuck", "P")] > 0
    offline = ("DefaultCluster", "G-poff", "OFFLINE_GROUP_BACKLOG")
    assert first["rmqmon_group_open_anomalies"][offline] == 1
    assert offline not in second["rmqmon_group_open_anomalies"]  # caught up in run 2: forgotten
    assert ("DefaultCluster", "G-poff", "P") not in second["rmqmon_group_progress_lag"]


def test_a_member_leaving_under_load_costs_its_queue_a_handoff_computed_from_the_script(outcome):
    (cost,) = [r for r in outcome["rebalance_cost"] if r["group"] == "G-pmove"]  # queue 0 stayed with c1
    samples = list(zip(PROGRESS_SAMPLES, MOVE_OFFSETS, strict=True))
    before = [(t, b, c) for t, (b, c) in samples if t < MOVE_LEAVE_MS]
    after = [(t, b, c) for t, (b, c) in samples if t > MOVE_LEAVE_MS]
    # c2's last progress: its last sample whose consumer offset advanced
    start = max(t for (t, _, c), (_, _, prior) in zip(before[1:], before, strict=False) if c > prior)
    # c1's first advance: the first sample after its report of queue 1 with a higher consumer offset
    end = next(t for (t, _, c), (_, _, prior) in zip(after[1:], after, strict=False) if t > MOVE_TAKEN_MS and c > prior)
    lag_at_t0 = before[-1][1] - before[-1][2]
    recovered = next(t for t, b, c in after if t >= end and b - c <= lag_at_t0)
    committed = max(MOVE_CACHE["commit_offset"], max(c for _, _, c in before))
    start_offset = min(c for t, _, c in after if t < end)
    assert (cost["topic"], cost["queue_id"], cost["old_owner"], cost["new_owner"]) == ("P", 1, "c2", "c1")
    assert cost["t0_ms"] - BASE == MOVE_LEAVE_MS and cost["final_reason"] == "RECOVERED"
    assert cost["handoff_gap_ms"] == end - start > 0 and cost["handoff_start_ms"] - BASE == start
    # Until the leave's generation plus the rebalance delay no report counts: c1, queue 1's expected owner, is
    # presumed to hold it. From then, c1's counted report without queue 1 leaves it unheld until its report of it.
    counted_from = MOVE_LEAVE_MS + EngineSettings().client_rebalance_delay_ms
    times = [t for t, _, _ in after]
    unheld = sum(t - p for p, t in zip(times, times[1:], strict=False) if counted_from <= t < MOVE_TAKEN_MS)
    assert cost["orphaned_ms"] == unheld > 0
    assert cost["double_held_ms"] == 0  # never two holders
    assert cost["rewound"] == committed - start_offset == 0  # c1 started at c2's last commit
    assert cost["redelivered_max"] == MOVE_CACHE["cached_msg_max_offset"] + 1 - start_offset  # c2's cache
    assert cost["lag_at_t0"] == lag_at_t0 and cost["peak_lag"] == max(b - c for t, b, c in after if t <= recovered)
    assert cost["recovery_ms"] == recovered - MOVE_LEAVE_MS
    assert cost["samples"] == len([t for t, _, _ in after if t <= recovered])


def test_the_last_rebalance_cost_metrics_are_per_group_and_topic_and_restored_at_a_restart(outcome):
    (cost,) = [r for r in outcome["rebalance_cost"] if r["group"] == "G-pmove"]
    for gauges in outcome["gauges"]:  # run 2's restored from rebalance_cost at its start
        assert (
            gauges["rmqmon_group_last_rebalance_cost_timestamp_seconds"][("DefaultCluster", "G-pmove", "P")]
            == cost["t0_ms"] / 1000
        )
        assert (
            gauges["rmqmon_group_last_rebalance_handoff_seconds"][("DefaultCluster", "G-pmove", "P")]
            == cost["handoff_gap_ms"] / 1000
        )
        assert (
            gauges["rmqmon_group_last_rebalance_redelivered_messages"][("DefaultCluster", "G-pmove", "P")]
            == cost["redelivered_max"]
        )
