"""Send results at every boundary of the fault tables become fault windows with exact starts and ends."""

from __future__ import annotations

from pathlib import Path

from streaming.domain.faults import ROCKETMQ_4, ROCKETMQ_5
from tests.support.job import job_config, publish, read, run_available

BASE = 1_700_000_000_000
GAP = 1_000_000  # far apart: every window ends before the next send
# Each latency threshold -1 / 0 of the 4.x table, one isolating error, then a fast send that lets the last window expire.
SENDS = [(lat, "OK") for lat in (549, 550, 999, 1000, 1999, 2000, 2999, 3000, 14999, 15000)] + [
    (80, "REMOTING_ERROR"),
    (5, "OK"),
]


def send(i, producer, version, latency, outcome, fault_enable=True):
    return {
        "type": "send_result",
        "schema_version": 1,
        "event_time": BASE + i * GAP,
        "producer_id": producer,
        "producer_group": "PG",
        "topic": "T",
        "broker": "broker-a",
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


def test_fault_windows_for_both_tables(kafka_broker, spark, tmp_path):
    config, topics = job_config(kafka_broker.bootstrap_servers, tmp_path, "faults")
    events = [send(i, "P4", "V4_9_8", lat, out) for i, (lat, out) in enumerate(SENDS)]
    events += [send(i, "P5", "5.3.3", lat, out) for i, (lat, out) in enumerate(SENDS)]
    publish(kafka_broker.bootstrap_servers, events, topics)
    run_available(spark, config)
    got = sorted(
        (r["status"], r["producer_id"], r["window_start_ms"], r["window_end_ms"])
        for r in read(spark, config, "fault_windows")
    )
    want = sorted(expected_windows(ROCKETMQ_4, "P4") + expected_windows(ROCKETMQ_5, "P5"))
    assert got == want
    # The 4.x windows by level: 550 -> 30 s ... 15000 -> 600 s, the error -> 600 s (isolation = 30000 ms).
    p4 = [
        (r["window_end_ms"] - r["window_start_ms"]) // 1000
        for r in read(spark, config, "fault_windows")
        if r["producer_id"] == "P4" and r["status"] == "OPENED"
    ]
    assert sorted(p4) == sorted([30, 30, 60, 60, 120, 120, 180, 180, 600, 600])
    tables = {r["producer_id"]: r["fault_table"] for r in read(spark, config, "fault_windows")}
    assert tables == {"P4": "rocketmq-4", "P5": "rocketmq-5"}
    minutes = read(spark, config, "send_latency_minutes")
    assert sum(r["sends"] for r in minutes) == 2 * len(SENDS)
    assert sum(r["errors"] for r in minutes) == 2


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
    got = sorted(
        (r["status"], r["producer_id"], r["window_start_ms"], r["window_end_ms"])
        for r in read(spark, config, "fault_windows")
    )
    assert got == sorted(expected_windows(ROCKETMQ_4, "P4") + expected_windows(ROCKETMQ_4, "PR"))
    assert sum(r["sends"] for r in read(spark, config, "send_latency_minutes")) == 2 * len(SENDS)
    assert [r["reason"] for r in read(spark, config, "dead_letters")] == ["NEGATIVE_LATENCY"]


def test_producers_without_send_latency_fault_enable_avoid_nothing(kafka_broker, spark, tmp_path):
    # PX says it runs without the feature; PN says nothing, so [producers] send_latency_fault_enable decides
    # (false, RocketMQ's default, in the first run; true in the second); PY runs with it.
    events = []
    for producer, fault_enable in (("PX", False), ("PN", None), ("PY", True)):
        events += [send(i, producer, "5.3.3", lat, out, fault_enable) for i, (lat, out) in enumerate(SENDS)]
    for default in (False, True):
        config, topics = job_config(
            kafka_broker.bootstrap_servers,
            tmp_path / str(default),
            f"nofault-{default}",
            RRM__PRODUCERS__SEND_LATENCY_FAULT_ENABLE=str(default).lower(),
        )
        publish(kafka_broker.bootstrap_servers, events, topics)
        run_available(spark, config)
        enabled = {"PY", "PN"} if default else {"PY"}
        got = sorted(
            (r["status"], r["producer_id"], r["window_start_ms"], r["window_end_ms"])
            for r in read(spark, config, "fault_windows")
        )
        assert got == sorted(w for p in sorted(enabled) for w in expected_windows(ROCKETMQ_5, p)), default
        status = {r["producer_id"]: r for r in read(spark, config, "producer_broker_status_current")}
        assert set(status) == {"PX", "PN", "PY"}  # every producer that sends to the broker is known
        for producer, row in status.items():
            if producer in enabled:
                assert row["fault_table"] == "rocketmq-5" and row["unavailable_until_ms"] is not None
            else:  # no fault item: nothing to be unavailable until
                assert (row["fault_table"], row["unavailable_until_ms"], row["reachable"]) == (None, None, None)
        (broker,) = read(spark, config, "broker_status_current")
        assert broker["producers_seen"] == 3
        minutes = read(spark, config, "send_latency_minutes")
        assert sum(r["sends"] for r in minutes) == 3 * len(SENDS)  # latency statistics count every send


def test_a_window_opened_before_a_restart_ends_after_it_from_the_checkpoints_fault_state(kafka_broker, spark, tmp_path):
    # The sends are GAP = 16 min 40 s apart: every window a send opens is ended by the next send, so the windows
    # the first run opens end in the second, which knows them only from the replay's state in the checkpoint.
    config, topics = job_config(kafka_broker.bootstrap_servers, tmp_path, "restart")
    events = [send(i, "P4", "V4_9_8", lat, out) for i, (lat, out) in enumerate(SENDS)]
    publish(kafka_broker.bootstrap_servers, events[:6], topics)
    run_available(spark, config)
    state_files = Path(config.paths.checkpoint_root).resolve() / "send-ingest" / "fault-state"
    first_run = sorted(int(p.name) for p in state_files.iterdir() if p.name.isdigit())
    assert first_run
    opened = [r for r in read(spark, config, "fault_windows") if r["status"] == "OPENED"]
    assert len(opened) > len([r for r in read(spark, config, "fault_windows") if r["status"] == "EXPIRED"])
    publish(kafka_broker.bootstrap_servers, events[6:], topics)
    run_available(spark, config)
    assert max(int(p.name) for p in state_files.iterdir() if p.name.isdigit()) > first_run[-1]
    got = sorted(
        (r["status"], r["producer_id"], r["window_start_ms"], r["window_end_ms"])
        for r in read(spark, config, "fault_windows")
    )
    assert got == sorted(expected_windows(ROCKETMQ_4, "P4"))
