"""Send results at every boundary of the fault tables become fault windows with exact starts and ends.

Three of the tests read one job run (``shared``) in two parts, a restart in between: the 4.x and 5.x producers
and those with and without ``sendLatencyFaultEnable`` (on a broker of their own) send alike, so each part's
sends share their event times and the restart splits every producer's sends at the same send. A second
RocketMQ cluster's P4 sends to its own broker-a in that run (contract version 2): its windows are its own.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from streaming.domain.faults.tolerance import ROCKETMQ_4, ROCKETMQ_5
from streaming.domain.vocabulary import DEFAULT_CLUSTER
from tests.support.job import job_config, publish, read, run_available

BASE = 1_700_000_000_000
GAP = 1_000_000  # far apart: every window ends before the next send
# Each latency threshold -1 / 0 of the 4.x table, one isolating error, then a fast send that lets the last window expire.
SENDS = [(lat, "OK") for lat in (549, 550, 999, 1000, 1999, 2000, 2999, 3000, 14999, 15000)] + [
    (80, "REMOTING_ERROR"),
    (5, "OK"),
]
RESTART_AT = 6  # the shared run's first part takes each producer's first six sends
# Producers without the feature (PX), saying nothing (PN: [producers] send_latency_fault_enable decides) and with
# it (PY), on a broker of their own in the shared run.
FAULT_ENABLE = (("PX", False), ("PN", None), ("PY", True))
NO_FAULT_BROKER = "broker-n"
# The other cluster's P4 on its broker-a (the same names), in the second part: a slow send where the default
# cluster's P4 fails (and is isolated for 600 s), then the same last fast send.
EAST = "east"
EAST_SENDS = {10: (3000, "OK"), 11: (5, "OK")}


def send(i, producer, version, latency, outcome, fault_enable=True, broker="broker-a"):
    return {
        "type": "send_result",
        "schema_version": 1,
        "event_time": BASE + i * GAP,
        "producer_id": producer,
        "producer_group": "PG",
        "topic": "T",
        "broker": broker,
        "queue_id": 0,
        "latency_ms": latency,
        "outcome": outcome,
        "client_version": version,
        **({} if fault_enable is None else {"send_latency_fault_enable": fault_enable}),
    }


def expected_windows(table, producer):
    rows = []
    for i, (latency, outcome) in enumerate(SENDS):
        fed = table.isolation_latency_ms if outcome != "OK" else latency
        duration = table.compute_not_available_duration_ms(fed)
        if duration:
            start = BASE + i * GAP
            rows += [("OPENED", producer, start, start + duration), ("EXPIRED", producer, start, start + duration)]
    return rows


def windows(rows, broker="broker-a", cluster=DEFAULT_CLUSTER):
    return sorted(
        (r["status"], r["producer_id"], r["window_start_ms"], r["window_end_ms"])
        for r in rows
        if r["broker"] == broker and r["cluster"] == cluster
    )


def no_fault_enable_sends(broker):
    return [
        send(i, producer, "5.3.3", lat, out, fault_enable, broker)
        for producer, fault_enable in FAULT_ENABLE
        for i, (lat, out) in enumerate(SENDS)
    ]


@pytest.fixture(scope="module")
def shared(kafka_broker, spark, tmp_path_factory):
    """P4 (4.x) and P5 (5.x) on broker-a, PX, PN and PY on broker-n with the setting false; the tables after the
    first part, the fault state's batches then, and the config after the second."""
    config, topics = job_config(
        kafka_broker.bootstrap_servers,
        tmp_path_factory.mktemp("faults"),
        "faults",
        RRM__PRODUCERS__SEND_LATENCY_FAULT_ENABLE="false",
    )
    events = [send(i, "P4", "V4_9_8", lat, out) for i, (lat, out) in enumerate(SENDS)]
    events += [send(i, "P5", "5.3.3", lat, out) for i, (lat, out) in enumerate(SENDS)]
    events += no_fault_enable_sends(NO_FAULT_BROKER)
    events += [
        {**send(i, "P4", "V4_9_8", lat, out), "schema_version": 2, "cluster": EAST}
        for i, (lat, out) in EAST_SENDS.items()
    ]
    first = [e for e in events if e["event_time"] < BASE + RESTART_AT * GAP]
    publish(kafka_broker.bootstrap_servers, first, topics)
    run_available(spark, config)
    state_files = Path(config.paths.checkpoint_root).resolve() / "send-ingest" / "fault-state"
    first_state = sorted(int(p.name) for p in state_files.iterdir() if p.name.isdigit())
    first_windows = read(spark, config, "fault_windows")
    publish(kafka_broker.bootstrap_servers, [e for e in events if e not in first], topics)
    run_available(spark, config)
    return {"config": config, "first_windows": first_windows, "first_state": first_state, "state_files": state_files}


def test_fault_windows_for_both_tables(shared, spark):
    config = shared["config"]
    fault_windows = [
        r for r in read(spark, config, "fault_windows") if r["broker"] == "broker-a" and r["cluster"] == DEFAULT_CLUSTER
    ]
    want = sorted(expected_windows(ROCKETMQ_4, "P4") + expected_windows(ROCKETMQ_5, "P5"))
    assert windows(fault_windows) == want
    # The 4.x windows by level: 550 -> 30 s ... 15000 -> 600 s, the error -> 600 s (isolation = 30000 ms).
    p4 = [
        (r["window_end_ms"] - r["window_start_ms"]) // 1000
        for r in fault_windows
        if r["producer_id"] == "P4" and r["status"] == "OPENED"
    ]
    assert sorted(p4) == sorted([30, 30, 60, 60, 120, 120, 180, 180, 600, 600])
    tables = {r["producer_id"]: r["fault_table"] for r in fault_windows}
    assert tables == {"P4": "rocketmq-4", "P5": "rocketmq-5"}
    minutes = [r for r in read(spark, config, "send_latency_minutes") if r["broker"] == "broker-a"]
    assert sum(r["sends"] for r in minutes if r["cluster"] == DEFAULT_CLUSTER) == 2 * len(SENDS)
    assert sum(r["errors"] for r in minutes if r["cluster"] == DEFAULT_CLUSTER) == 2
    assert sum(r["sends"] for r in minutes if r["cluster"] == EAST) == len(EAST_SENDS)


def test_two_clusters_same_producer_and_broker_get_their_own_windows_and_status(shared, spark):
    config = shared["config"]
    # East's P4 on its broker-a: one window of 180 s, from its 3000 ms send; the default cluster's P4 keeps its
    # own (test_fault_windows_for_both_tables), though both send at the same event times.
    start = BASE + 10 * GAP
    end = start + ROCKETMQ_4.compute_not_available_duration_ms(3000)
    assert windows(read(spark, config, "fault_windows"), cluster=EAST) == [
        ("EXPIRED", "P4", start, end),
        ("OPENED", "P4", start, end),
    ]
    items = {
        (r["cluster"], r["producer_id"])
        for r in read(spark, config, "producer_broker_status_current")
        if r["broker"] == "broker-a"
    }
    assert items == {(DEFAULT_CLUSTER, "P4"), (DEFAULT_CLUSTER, "P5"), (EAST, "P4")}
    seen = {
        r["cluster"]: r["producers_seen"]
        for r in read(spark, config, "broker_status_current")
        if r["broker"] == "broker-a"
    }
    assert seen == {DEFAULT_CLUSTER: 2, EAST: 1}


def test_sends_only_the_rules_take_join_the_replay_in_their_place(kafka_broker, spark, tmp_path):
    # PR's sends carry a field the contract does not declare: valid, but off the ingest fast path, so
    # send-ingest's one pass leaves them to the rules and the batch is reduced again the classic way.
    config, topics = job_config(kafka_broker.bootstrap_servers, tmp_path, "rules-only")
    events = []
    for i, (lat, out) in enumerate(SENDS):
        events += [send(i, "P4", "V4_9_8", lat, out), {**send(i, "PR", "V4_9_8", lat, out), "trace": "t-1"}]
    events.append({**send(0, "PX", "V4_9_8", 5, "OK"), "latency_ms": -1})  # and a reject, dead-lettered
    publish(kafka_broker.bootstrap_servers, events, topics)
    run_available(spark, config)
    got = windows(read(spark, config, "fault_windows"))
    assert got == sorted(expected_windows(ROCKETMQ_4, "P4") + expected_windows(ROCKETMQ_4, "PR"))
    assert sum(r["sends"] for r in read(spark, config, "send_latency_minutes")) == 2 * len(SENDS)
    assert [r["reason"] for r in read(spark, config, "dead_letters")] == ["NEGATIVE_LATENCY"]


def assert_only_enabled_producers_avoid(spark, config, default: bool, broker: str) -> None:
    enabled = {"PY", "PN"} if default else {"PY"}
    got = windows(read(spark, config, "fault_windows"), broker)
    assert got == sorted(w for p in sorted(enabled) for w in expected_windows(ROCKETMQ_5, p)), default
    status = {
        r["producer_id"]: r for r in read(spark, config, "producer_broker_status_current") if r["broker"] == broker
    }
    assert set(status) == {"PX", "PN", "PY"}  # every producer that sends to the broker is known
    for producer, row in status.items():
        if producer in enabled:
            assert row["fault_table"] == "rocketmq-5" and row["unavailable_until_ms"] is not None
        else:  # no fault item: nothing to be unavailable until
            assert (row["fault_table"], row["unavailable_until_ms"], row["reachable"]) == (None, None, None)
    (row,) = [r for r in read(spark, config, "broker_status_current") if r["broker"] == broker]
    assert row["producers_seen"] == 3
    minutes = [r for r in read(spark, config, "send_latency_minutes") if r["broker"] == broker]
    assert sum(r["sends"] for r in minutes) == 3 * len(SENDS)  # latency statistics count every send


def test_producers_without_send_latency_fault_enable_avoid_nothing(shared, kafka_broker, spark, tmp_path):
    # PX says it runs without the feature; PN says nothing, so [producers] send_latency_fault_enable decides
    # (false, RocketMQ's default, in the shared run; true in a run of its own); PY runs with it.
    assert_only_enabled_producers_avoid(spark, shared["config"], False, NO_FAULT_BROKER)
    config, topics = job_config(
        kafka_broker.bootstrap_servers, tmp_path, "nofault-true", RRM__PRODUCERS__SEND_LATENCY_FAULT_ENABLE="true"
    )
    publish(kafka_broker.bootstrap_servers, no_fault_enable_sends("broker-a"), topics)
    run_available(spark, config)
    assert_only_enabled_producers_avoid(spark, config, True, "broker-a")


def test_a_window_opened_before_a_restart_ends_after_it_from_the_checkpoints_fault_state(shared, spark):
    # The sends are GAP = 16 min 40 s apart: every window a send opens is ended by the next send, so the windows
    # the first part opens end in the second, which knows them only from the replay's state in the checkpoint.
    assert shared["first_state"]
    first = [r for r in shared["first_windows"] if r["producer_id"] == "P4" and r["cluster"] == DEFAULT_CLUSTER]
    assert len([r for r in first if r["status"] == "OPENED"]) > len([r for r in first if r["status"] == "EXPIRED"])
    state_files = shared["state_files"]
    assert max(int(p.name) for p in state_files.iterdir() if p.name.isdigit()) > shared["first_state"][-1]
    got = windows(r for r in read(spark, shared["config"], "fault_windows") if r["producer_id"] == "P4")
    assert got == sorted(expected_windows(ROCKETMQ_4, "P4"))
