"""A restart in the middle of a scenario, across a state version: after the first batch that follows it, every
group's and broker's series reads as before the stop, though that batch touched one new group only, and the
consumer state the previous version left is migrated with its truth kept (Kafka -> Spark -> Delta).

Run 1 builds the fleet: a group with a client ID on two channels (a duplicate, orphaned and double-owned
queues), ordinary groups (one member leaving), a group whose brokers disagree, a group polled on both brokers,
and producers isolating broker-b. Its consumer query keeps each shard's state as state version 8 wrote it
(``tests.support.state_versions``): the checkpoint is what the previous release leaves. Run 2, a new job of the
current version on the same checkpoints and tables (the upgrade of ``docs/deploy.md``, "Upgrading"), reads one
heartbeat of a new group: its consumer batch analyses that group alone, and the send queries have nothing to
read. Every group's generation, open episodes and expected assignment in the state, read from the checkpoint
with Spark's state data source, are the ones run 1 left.
"""

from __future__ import annotations

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from connectors.metrics import BY_NAME, new_registry
from streaming.domain.consumers.engine_settings import EngineSettings
from streaming.domain.consumers.shard import SCHEMA_VERSION, Shard
from tests.support.events import BASE, channel_event, hb, route
from tests.support.job import job_config, publish, run_available
from tests.support.state_versions import PREVIOUS_VERSION, consumer_state, consumer_state_as_previous

DUP = "172.17.0.1@1"
# Counted from the process's start, like every Prometheus counter after a restart (docs/metrics.md): their
# series are there again, at zero.
COUNTED_SINCE_START = ("rmqmon_group_moved_queues_total", "rmqmon_broker_isolation_episodes_total")
# Observed per send the process reads: none after this restart.
HISTOGRAM = "rmqmon_broker_send_latency_seconds"


def poll(t, broker, group, clients):
    return {
        "type": "consumer_connections",
        "schema_version": 1,
        "event_time": BASE + t,
        "broker": broker,
        "group": group,
        "stale_after_ms": 30_000,
        "collector": "test-collector",
        "subscriptions": [{"topic": "T", "expression": "*", "sub_version": 1}],
        "connections": [
            {"channel": f"10.7.0.{i}:1", "client_id": c, "client_version": "479"} for i, c in enumerate(clients)
        ],
    }


def send(t, producer, broker, latency, version="5.3.3"):
    return {
        "type": "send_result",
        "schema_version": 1,
        "event_time": BASE + t,
        "producer_id": producer,
        "producer_group": "PG",
        "topic": "T",
        "broker": broker,
        "queue_id": 0,
        "latency_ms": latency,
        "outcome": "OK",
        "client_version": version,
        "send_latency_fault_enable": True,
    }


def run1_events():
    events = [route(0), route(0, "U", (("broker-a", 3), ("broker-b", 3)))]
    for t in range(0, 60_001, 10_000):
        events += [
            hb(t, "10.1.0.1:1", DUP, "G-dup"),
            hb(t, "10.1.0.2:1", DUP, "G-dup"),
            hb(t, "10.1.0.3:1", "10.1.0.3@9", "G-dup"),
        ]
        for g in range(6):
            for c in range(3):
                if not (g == 1 and c == 2 and t > 20_000):
                    events.append(hb(t, f"10.2.{g}.{c}:1", f"10.2.{g}.{c}@1", f"G{g}", ("T",) if g % 2 else ("U",)))
        events += [hb(t, f"10.3.0.{c}:1", f"m{c}", "G-div", broker="broker-a") for c in range(3)]
        events += [hb(t, f"10.3.0.{c}:1", f"m{c}", "G-div", broker="broker-b") for c in range(2)]
        events += [poll(t, b, "G-poll", ["p1", "p2"]) for b in ("broker-a", "broker-b")]
    events.append(channel_event("UNREGISTER", 25_000, "10.2.1.2:1", "10.2.1.2@1", "G1"))
    events += [
        send(50_000, "P1", "broker-a", 5),
        send(50_000, "P1", "broker-b", 16_000),
        send(51_000, "P2", "broker-a", 5, "V4_9_8"),
        send(51_000, "P2", "broker-b", 7, "V4_9_8"),
        send(52_000, "P3", "broker-b", 16_000),
    ]
    return sorted(events, key=lambda e: e["event_time"])


def series(job) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The group, broker and producer samples the job's /metrics page renders, by (sample name, labels), but
    the send-latency histogram's."""
    text = generate_latest(new_registry(job.metrics)).decode()
    found = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if (
                family.name.startswith(("rmqmon_group_", "rmqmon_broker_", "rmqmon_producers_"))
                and family.name != HISTOGRAM
            ):
                found[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return found


def metric_of(sample: str) -> str:
    for suffix in ("", "_total", "_bucket", "_count", "_sum"):
        if sample.endswith(suffix) and sample[: len(sample) - len(suffix)] in BY_NAME:
            return sample[: len(sample) - len(suffix)]
    return sample


def truth(shards: dict[int, dict]) -> dict[str, tuple]:
    """Per group in the consumer state (restored by the current code, migrating an older version): its
    generation, open episodes and expected assignment."""
    groups = {}
    for document in shards.values():
        (engine,) = Shard.restore(document, EngineSettings()).engines.values()  # one cluster: the default one
        for group, state in engine.groups.items():
            episodes = sorted((e.episode_id, e.anomaly, e.opened_at_ms) for e in state.episodes.values())
            groups[group] = (state.generation, episodes, state.assigned, state.owners)
    return groups


def test_after_a_restart_across_a_state_version_every_series_and_the_state_is_back(kafka_broker, spark, tmp_path):
    config, topics = job_config(kafka_broker.bootstrap_servers, tmp_path, "restart-metrics")
    publish(kafka_broker.bootstrap_servers, run1_events(), topics)
    with consumer_state_as_previous():
        before = series(run_available(spark, config))
    checkpoint = str(tmp_path / "checkpoints" / "consumer")
    left = consumer_state(spark, checkpoint)
    assert {d["schema_version"] for d in left.values()} == {PREVIOUS_VERSION}  # what the previous release leaves
    kept = truth(left)
    assert kept["G-dup"][0] >= 1 and kept["G-dup"][1] and kept["G1"][0] >= 2  # generations and an open episode
    # The scenario is what the comparison needs: every kind of series, with values that are not defaults.
    assert (
        before[("rmqmon_group_duplicate_client_ids", (("cluster", "DefaultCluster"), ("consumer_group", "G-dup")))] == 1
    )
    assert (
        before[
            (
                "rmqmon_group_open_anomalies",
                (("anomaly", "DUPLICATE_CLIENT_ID"), ("cluster", "DefaultCluster"), ("consumer_group", "G-dup")),
            )
        ]
        == 1
    )
    assert (
        before[
            (
                "rmqmon_group_queues",
                (("cluster", "DefaultCluster"), ("consumer_group", "G-dup"), ("state", "orphaned"), ("topic", "T")),
            )
        ]
        > 0
    )
    assert before[("rmqmon_group_views_diverging", (("cluster", "DefaultCluster"), ("consumer_group", "G-div")))] == 1
    assert before[("rmqmon_broker_isolated", (("broker", "broker-b"), ("cluster", "DefaultCluster")))] == 1
    assert (
        before[("rmqmon_producers_all_brokers_unavailable", (("cluster", "DefaultCluster"),))] == 1
    )  # P3 knows broker-b only
    assert before[("rmqmon_broker_polled_group_views", (("broker", "broker-a"), ("cluster", "DefaultCluster")))] == 1
    groups = {dict(labels)["consumer_group"] for _, labels in before if "consumer_group" in dict(labels)}
    assert groups == {"G-dup", "G-div", "G-poll", *(f"G{g}" for g in range(6))}

    publish(kafka_broker.bootstrap_servers, [hb(61_000, "10.9.0.1:1", "new@1", "G-new")], topics)
    restarted = run_available(spark, config)
    (progress,) = [p for p in restarted.queries["consumer"].recentProgress if p["numInputRows"]]
    assert progress["numInputRows"] == 1  # one batch after the restart, with the new group's heartbeat only
    after = series(restarted)

    new = {k for k in after if ("consumer_group", "G-new") in k[1]}
    assert new and ("rmqmon_group_members", (("cluster", "DefaultCluster"), ("consumer_group", "G-new"))) in new
    assert set(after) - new == set(before)
    restored = {k: v for k, v in before.items() if metric_of(k[0]) not in COUNTED_SINCE_START}
    assert {k: after[k] for k in restored} == restored
    assert all(after[k] == 0 for k in before if metric_of(k[0]) in COUNTED_SINCE_START)

    upgraded = consumer_state(spark, checkpoint)
    # the shard the new group's batch ran on was migrated and written at the current version
    assert any(
        d["schema_version"] == SCHEMA_VERSION and "G-new" in d["clusters"]["DefaultCluster"]["groups"]
        for d in upgraded.values()
    )
    now = truth(upgraded)
    assert set(now) == set(kept) | {"G-new"}
    assert {g: now[g] for g in kept} == kept
