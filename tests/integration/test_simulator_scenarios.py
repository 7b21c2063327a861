"""Every simulator scenario through the real job: the monitor reports what the scenario injects, and nothing else.

One job run for all ten scenarios, each in its own namespace (``tests.support.fleet``). Per scenario,
``Scenario.expected`` is the whole truth: the (group, anomaly) pairs in ``anomaly_episodes`` for its groups
must equal its anomaly entries, and the brokers with fault windows must equal its ``BROKER_AVOIDED``
entries. The scenarios with no anomaly to report also have their membership history checked (a silent
expiry, a scale-out).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from connectors.emitter import EventEmitter, InvalidEvent
from connectors.kafka_topics import create_topics
from streaming.app.simulation.fleet import AVOIDED, SCENARIOS, Simulation, build_scenario
from tests.support.fleet import CLUSTER_COPY, OTHER_CLUSTER, SEED, START_MS, fleet_run, scenarios
from tests.support.job import read

TABLES = ("anomaly_episodes", "membership_changes", "group_snapshots", "fault_windows", "broker_status_current")


@pytest.fixture(scope="module")
def tables(kafka_broker, spark, tmp_path_factory):
    config = fleet_run(kafka_broker, spark, tmp_path_factory)
    return {t: read(spark, config, t) for t in TABLES}


def reported(tables, scenario) -> dict[tuple[str, str], list[dict]]:
    found: dict[tuple[str, str], list[dict]] = {}
    for row in tables["anomaly_episodes"]:
        if row["group"] in scenario.group_names:
            found.setdefault((row["group"], row["anomaly"]), []).append(row)
    return found


@pytest.mark.parametrize("name", SCENARIOS)
def test_the_monitor_reports_every_anomaly_the_scenario_injects(name, tables):
    scenario = scenarios()[name]
    assert scenario.expected_anomalies <= set(reported(tables, scenario))
    # every group of the scenario was seen and analysed
    assert scenario.group_names <= {r["group"] for r in tables["group_snapshots"]}


@pytest.mark.parametrize("name", SCENARIOS)
def test_the_monitor_reports_no_anomaly_the_scenario_does_not_inject(name, tables):
    scenario = scenarios()[name]
    extra = set(reported(tables, scenario)) - scenario.expected_anomalies
    assert not extra, f"not injected: {sorted(extra)}"


@pytest.mark.parametrize("name", SCENARIOS)
def test_fault_windows_only_on_the_brokers_the_scenario_makes_producers_avoid(name, tables):
    scenario = scenarios()[name]
    brokers = set(scenario.brokers)
    faulted = {r["broker"] for r in tables["fault_windows"] if r["broker"] in brokers and r["status"] == "OPENED"}
    assert faulted == scenario.expected_avoided_brokers
    seen = {r["broker"] for r in tables["broker_status_current"] if r["broker"] in brokers}
    assert seen == brokers  # producers sent to every broker of the scenario


def test_producers_avoid_the_slow_broker_for_its_latency_and_the_failed_one_for_its_errors(tables):
    windows = [r for r in tables["fault_windows"] if r["status"] == "OPENED"]
    slow = [r for r in windows if r["broker"] == "slow-broker-broker-b"]
    assert slow and all(r["cause"] == "OK" and r["trigger_latency_ms"] >= 600 and not r["isolation"] for r in slow)
    # both fault tables are in use: 4.9.8 producers (rocketmq-4, 30 s and more) and 5.x ones (rocketmq-5)
    assert {r["fault_table"] for r in slow} == {"rocketmq-4", "rocketmq-5"}
    down = [r for r in windows if r["broker"] == "broker-outage-broker-b"]
    assert down and all(r["cause"] == "TIMEOUT" and r["isolation"] for r in down)
    assert min(r["window_start_ms"] for r in down) >= START_MS + 60_000  # the outage starts at 60 s
    status = {r["broker"]: r for r in tables["broker_status_current"]}
    # at the end of the run every producer still avoids the broker that keeps failing, and none the healthy one
    assert status["broker-outage-broker-b"]["producers_avoiding"] >= 2  # at least the 4.9.8 ones (600 s)
    assert status["broker-outage-broker-a"]["producers_avoiding"] == 0


def test_a_crashed_member_expires_silently_and_the_group_rebalances(tables):
    scenario = scenarios()["crash"]
    (group,) = scenario.groups
    crashed = group.members[2].client_id
    changes = [r for r in tables["membership_changes"] if r["group"] == group.name and r["client_id"] == crashed]
    gone = [r for r in changes if r["change"] not in ("JOIN", "SUBSCRIPTION_CHANGED")]
    # its last heartbeat was at 30 s: every broker's scan removes it after 120 s more, no UNREGISTER
    assert {(r["change"], r["reason"], r["broker"]) for r in gone} == {("EXPIRED", "SCAN", b) for b in scenario.brokers}
    assert all(r["event_time_ms"] - START_MS == 150_001 and r["notifies_clients"] is False for r in gone)
    last = max((r for r in tables["group_snapshots"] if r["group"] == group.name), key=lambda r: r["generation"])
    assert crashed not in last["cid_all"] and last["members"] == 2


def test_scale_out_ends_with_four_members_sharing_the_queues(tables):
    (group,) = scenarios()["scale-out"].groups
    snapshots = sorted(
        (r for r in tables["group_snapshots"] if r["group"] == group.name), key=lambda r: r["generation"]
    )
    assert snapshots[0]["members"] == 2 and snapshots[-1]["members"] == 4
    joined = {
        r["client_id"]
        for r in tables["membership_changes"]
        if r["group"] == group.name and r["change"] == "JOIN" and r["event_time_ms"] - START_MS == 90_000
    }
    assert joined == {m.client_id for m in group.members[2:]}
    topic = json.loads(snapshots[-1]["details"])["topics"]["scale-out-orders"]
    assert (topic["queues"], topic["orphaned"], topic["double_owned"], topic["skew_queues"]) == (8, 0, 0, 0)


def test_scenario_names_are_namespaced_and_the_namespace_changes_nothing_else():  # (no job needed)
    plain = Simulation(build_scenario("duplicate-ids", SEED), START_MS, SEED).events_until(START_MS + 60_000)
    spaced = Simulation(build_scenario("duplicate-ids", SEED, namespace="x"), START_MS, SEED)
    spaced_events = spaced.events_until(START_MS + 60_000)
    assert len(plain) == len(spaced_events)
    for a, b in zip(plain, spaced_events, strict=True):
        for key in ("group", "topic", "broker", "producer_group"):
            if key in a:
                assert b[key] == f"x-{a[key]}"
        for subscription, spaced_subscription in zip(
            a.get("subscriptions", []), b.get("subscriptions", []), strict=True
        ):
            assert spaced_subscription == {**subscription, "topic": f"x-{subscription['topic']}"}
        for queue, spaced_queue in zip(a.get("queues", []), b.get("queues", []), strict=True):  # consume progress
            assert spaced_queue == {**queue, "topic": f"x-{queue['topic']}"}
        names = ("group", "topic", "broker", "producer_group", "brokers", "subscriptions", "queues")
        same = {k: v for k, v in a.items() if k not in names}
        assert same == {k: b[k] for k in same}
    assert AVOIDED not in {kind for _, kind in build_scenario("crash").expected}


def test_the_emitter_reports_what_the_broker_refused_and_refuses_what_the_job_would_dead_letter(kafka_broker):
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap_servers)
    try:  # a topic whose records may not exceed 200 bytes: a heartbeat with subscriptions is larger
        admin.create_topics([NewTopic("tiny.channels", 1, 1, topic_configs={"max.message.bytes": "200"})])
    finally:
        admin.close()
    create_topics(kafka_broker.bootstrap_servers, ["tiny.routes"])
    events = Simulation(build_scenario("steady"), START_MS).events_until(START_MS + 1)
    emitter = EventEmitter(
        kafka_broker.bootstrap_servers,
        {"consumer_channel": "tiny.channels", "topic_route": "tiny.routes", "send_result": "tiny.routes"},
        retries=0,
    )
    try:
        emitter.emit_all(events)
        report = emitter.flush()
        heartbeats = sum(e["type"] == "consumer_channel" for e in events)
        assert (report.sent, report.failed) == (len(events) - heartbeats, heartbeats)
        assert "MessageSizeTooLarge" in report.errors[0] or "RecordTooLarge" in report.errors[0]
        with pytest.raises(InvalidEvent, match="MISSING_FIELD"):
            emitter.emit({k: v for k, v in events[0].items() if k != "event_time"})
    finally:
        emitter.close()


# The consumer tables the copy of a scenario in another cluster writes rows to, with the columns that name what a
# row is about (besides its cluster).
CLUSTER_TABLES = {
    "membership_changes": ("group", "broker", "client_id", "change", "event_time_ms"),
    "group_snapshots": ("group", "generation", "event_time_ms"),
    "expected_assignments": ("group", "generation", "topic", "client_id"),
    "current_assignment": ("group", "topic", "client_id"),
    "anomaly_episodes": ("group", "anomaly", "status", "event_time_ms"),
    "anomalies_current": ("group", "anomaly"),
    "group_status_current": ("group",),
    "consume_progress": ("group", "topic", "broker", "queue_id", "event_time_ms"),
    "queue_progress_current": ("group", "topic", "broker", "queue_id"),
}


def test_the_same_names_in_two_clusters_are_two_of_everything(kafka_broker, spark, tmp_path_factory):
    """The copy of a scenario in another cluster, same groups, brokers, topics and client ids: every consumer table
    holds each cluster's own rows (the same facts, since the input is the same), keyed apart, never one merged."""
    from connectors.delta_reader import read_arrow

    config = fleet_run(kafka_broker, spark, tmp_path_factory)
    root = Path(config.paths.delta_root).resolve()
    groups = scenarios()[CLUSTER_COPY].group_names
    written = 0
    for table, about in CLUSTER_TABLES.items():
        rows = [r for r in read_arrow(root / table).to_pylist() if r["group"] in groups]
        by_cluster: dict[str, set[tuple]] = {}
        for r in rows:
            by_cluster.setdefault(r["cluster"], set()).add(tuple(r[c] for c in about))
        if not rows:  # a current table the scenario leaves empty at its end (no open episode, say)
            continue
        written += 1
        assert set(by_cluster) == {"DefaultCluster", OTHER_CLUSTER}, table
        assert by_cluster["DefaultCluster"] == by_cluster[OTHER_CLUSTER], table
        # no row is counted twice in one cluster: a merged state would show as one cluster's rows only
        assert len(rows) == sum(1 for r in rows if r["cluster"] == "DefaultCluster") * 2, table
    assert written >= len(CLUSTER_TABLES) - 1
    snapshots = [r for r in read_arrow(root / "group_snapshots").to_pylist() if r["group"] in groups]
    generations = {
        c: max(r["generation"] for r in snapshots if r["cluster"] == c) for c in ("DefaultCluster", OTHER_CLUSTER)
    }
    assert generations["DefaultCluster"] == generations[OTHER_CLUSTER]  # each cluster numbers its own generations
