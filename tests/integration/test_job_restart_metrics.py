"""A restart in the middle of a scenario keeps every group's and broker's metric series, open anomalies included.

Run 1 of the real job builds groups (one with a duplicate client ID, one whose member left and moved queues, a
healthy one) and brokers that producers avoid; run 2, a new job from the same checkpoints and tables with
metrics of its own (as after a process restart), sees only a new group join. No old group or broker changes
in run 2, so the sinks set none of their series: each must be back from the restore, equal to run 1's.
"""

from __future__ import annotations

import random

import pytest

from connectors.metrics import CATALOGUE
from tests.support.events import BASE, hb, route
from tests.support.events import channel_event as ev
from tests.support.job import job_config, publish, run_available

# Families of a group or a broker, and the count of producers that avoid every broker.
FAMILIES = {s.name for s in CATALOGUE if s.labels[:1] in (("consumer_group",), ("broker",))}
FAMILIES.add("rmqmon_producers_all_brokers_unavailable")


def run1_events() -> list[dict]:
    events = [route(0, "T")]
    for t in range(0, 90_001, 30_000):
        # G-dup: client ID c1 on two channels, an anomaly open until one of them leaves.
        events += [hb(t, "10.1.0.1:1", "c1", "G-dup"), hb(t, "10.1.0.2:1", "c1", "G-dup"),
                   hb(t, "10.1.0.3:1", "c3", "G-dup")]  # fmt: skip
        events += [hb(t, f"10.2.0.{i}:1", f"c{i}", "G-ok", broker=b) for i in range(3) for b in ("broker-a", "broker-b")]
        events += [hb(t, f"10.3.0.{i}:1", f"c{i}", "G-move") for i in range(3) if i < 2 or t < 60_000]
    events.append(ev("UNREGISTER", 60_000, "10.3.0.2:1", "c2", "G-move"))
    rng = random.Random(3)
    for i in range(120):  # producers on both lines; some sends slow or failing, so brokers get avoided
        latency = rng.choice([3, 600, 1200, 3500]) if i % 7 == 0 else rng.randint(1, 40)
        events.append({"type": "send_result", "schema_version": 1, "event_time": BASE + i * 700,
                       "producer_id": f"P{i % 4}", "producer_group": "PG", "topic": "T",
                       "broker": ("broker-a", "broker-b")[i % 3 == 0], "queue_id": 0, "latency_ms": latency,
                       "outcome": "OK" if i % 29 else "TIMEOUT", "client_version": ("V4_9_8", "5.3.3")[i % 2],
                       "send_latency_fault_enable": True})  # fmt: skip
    return sorted(events, key=lambda e: e["event_time"])


def series(job) -> dict[tuple[str, tuple[str, ...]], object]:  # type: ignore[no-untyped-def]
    m = job.metrics
    found = {}
    for family in (m.gauges, m.counters, m.histograms):
        for name, table in family.items():
            if name in FAMILIES:
                found.update({(name, labels): value for labels, value in table.items()})
    return found


@pytest.fixture(scope="module")
def runs(kafka_broker, spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("restart-metrics")
    config, topics = job_config(kafka_broker.bootstrap_servers, root, "restart")
    publish(kafka_broker.bootstrap_servers, run1_events(), topics)
    before = series(run_available(spark, config))
    publish(kafka_broker.bootstrap_servers, [hb(95_000, "10.4.0.1:1", "c1", "G-new")], topics)
    after = series(run_available(spark, config))  # restarted: a new job, metrics of its own
    return before, after


def test_every_group_and_broker_series_is_back_with_its_value_after_a_restart(runs):
    before, after = runs
    assert {key for key in after if key[1][:1] != ("G-new",)} == set(before)
    for key, value in before.items():
        if key[0] == "rmqmon_broker_send_latency_seconds":  # (buckets, sum): sums of float seconds, per batch
            buckets, total = after[key]
            assert buckets == value[0] and total == pytest.approx(value[1])
        else:
            assert after[key] == value, key


def test_the_scenario_exported_what_the_restart_must_keep(runs):
    before, after = runs
    g = "rmqmon_group_"
    assert after[(g + "duplicate_client_ids", ("G-dup",))] == 1.0
    assert after[(g + "open_anomalies", ("G-dup", "DUPLICATE_CLIENT_ID"))] == 1.0
    assert after[(g + "moved_queues_total", ("G-move", "T"))] > 0
    assert after[(g + "rebalances_total", ("G-move",))] == 2.0
    assert after[(g + "members", ("G-new",))] == 1.0  # the new group's batch ran after the restore
    brokers = {labels[0] for name, labels in before if name.startswith("rmqmon_broker_")}
    assert brokers == {"broker-a", "broker-b"}
    assert sum(v for (name, _), v in before.items() if name == "rmqmon_broker_isolation_episodes_total") > 0
    assert any(name == "rmqmon_broker_send_latency_seconds" for name, _ in after)
