"""``collect`` against a real local cluster: real consumers (the project's test clients; two sharing one client
id, so in JVMs of their own), the collector's JVM publishing to the project's Kafka broker, and every record
checked against what the admin API and the clients themselves say; then bad input (a frozen client, a broker
stopped) that it counts and survives."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from connectors.processes import free_port
from connectors.rocketmq_collector import CollectorProcess
from localenv.kafka_broker import create_topics
from localenv.rocketmq_cluster import AclAccount, LocalRocketMQCluster
from streaming.config import load_config
from streaming.contract.validator import Rejection, validate_event
from tests.support.kafka_records import KafkaRecords
from tests.support.rocketmq_client import ConsumerSpec, HostedConsumer, consumer_host, stop_all
from tests.support.rocketmq_e2e import held

POLL_MS = 2_000


@dataclass
class Fleet:
    line: str
    cluster: LocalRocketMQCluster
    collector: CollectorProcess
    records: KafkaRecords
    group: str
    empty_group: str
    topic: str
    missing_topic: str
    duplicates: list[HostedConsumer]
    solo: HostedConsumer

    def latest(self, kind: str, **fields: Any) -> dict[str, Any] | None:
        for record in reversed(self.records.poll()):
            if record["type"] == kind and all(record.get(k) == v for k, v in fields.items()):
                return record
        return None

    def counter(self, name: str) -> float:
        return self.collector.metrics().get(name, 0.0)


def wait_for(what: str, condition: Callable[[], Any], timeout_s: float = 120.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        result = condition()
        if result:
            return result
        time.sleep(0.5)
    raise AssertionError(f"not within {timeout_s:.0f} s: {what}")


@pytest.fixture(scope="module", params=["5", "4.9"])
def fleet(request, rocketmq_clusters, kafka_broker, tmp_path_factory) -> Iterator[Fleet]:
    line = request.param
    cluster: LocalRocketMQCluster = rocketmq_clusters(line)
    prefix = "col" + line.replace(".", "")
    topic, missing, group, empty = f"{prefix}-orders", f"{prefix}-missing", f"{prefix}-g", f"{prefix}-empty"
    cluster.create_topic(topic, 4)
    cluster.create_group(empty)
    kafka_topics = {kind: f"{prefix}.{kind}" for kind in ("consumer_channel", "reported_assignment", "topic_route")}
    create_topics(kafka_broker.bootstrap_servers, kafka_topics.values())
    config = load_config(
        env={
            "RRM__KAFKA__BOOTSTRAP_SERVERS": kafka_broker.bootstrap_servers,
            **{f"RRM__KAFKA__TOPICS__{kind.upper()}": name for kind, name in kafka_topics.items()},
            "RRM__COLLECTOR__NAMESRV_ADDR": cluster.namesrv_addr,
            "RRM__COLLECTOR__COLLECTOR_ID": f"test-{prefix}",
            "RRM__COLLECTOR__POLL_INTERVAL_MS": str(POLL_MS),
            "RRM__COLLECTOR__RUNNING_INFO_INTERVAL_MS": str(POLL_MS),
            "RRM__COLLECTOR__ADMIN_TIMEOUT_MS": "2000",
            "RRM__COLLECTOR__INCLUDE_GROUPS": f'["{prefix}-*"]',
        }
    )
    topics = f"{topic},{missing}"
    duplicates = [
        ConsumerSpec(f"dup-{i}", group, topics, instance_name="dup", client_ip="10.9.9.9", strategy="AVG")
        for i in range(2)
    ]
    solo = ConsumerSpec("solo", group, topics, client_ip="10.9.9.9", strategy="AVG_BY_CIRCLE")
    # The duplicates need a JVM each (one JVM has one client instance per id); the solo client shares the first's,
    # except in the 4.9 fleet, where the frozen-client test freezes it alone.
    hosts = [[duplicates[0], solo], [duplicates[1]]] if line == "5" else [[duplicates[0]], [duplicates[1]], [solo]]
    work = tmp_path_factory.mktemp(f"clients-{prefix}")
    consumers = [
        consumer_host(line, work / str(i), hosted, namesrv=cluster.namesrv_addr) for i, hosted in enumerate(hosts)
    ]
    collector = CollectorProcess(config, tmp_path_factory.mktemp(f"collector-{prefix}"), metrics_port=free_port())
    records = None
    try:
        for process in consumers:
            process.launch()
        collector.start()  # while the consumers start
        for process in consumers:
            process.wait_started(120)
        by_name = {c.name: c for process in consumers for c in process.consumers()}
        collector.wait_polling()
        records = KafkaRecords(kafka_broker.bootstrap_servers, kafka_topics.values())
        yield Fleet(
            line,
            cluster,
            collector,
            records,
            group,
            empty,
            topic,
            missing,
            [by_name["dup-0"], by_name["dup-1"]],
            by_name["solo"],
        )
    finally:
        collector.stop()
        stop_all(consumers)
        if records is not None:
            records.close()


def _complete_view(fleet: Fleet, broker: str) -> dict[str, Any] | None:
    """The broker's latest poll of the group once it shows all three channels with their running info."""
    event = fleet.latest("consumer_connections", group=fleet.group, broker=broker)
    if event is None or len(event["connections"]) != 3:
        return None
    return event if all("allocate_strategy" in c for c in event["connections"]) else None


def _connections_equal_to_the_admin_api(fleet: Fleet, broker: str) -> dict[str, Any]:
    """The broker's first complete poll of the group, then one after an admin read that equals it."""
    wait_for(f"{broker}'s view of {fleet.group} with running info", lambda b=broker: _complete_view(fleet, b))

    def same_as_admin(b: str = broker) -> dict[str, Any] | None:
        admin = {(c["client_id"], c["channel"], str(c["version"])) for c in fleet.cluster.connections(fleet.group, b)}
        asked = int(time.time() * 1000)
        wait_for(
            "a poll after the admin read",
            lambda: (e := fleet.latest("consumer_connections", group=fleet.group, broker=b))
            and e["event_time"] > asked,
        )
        event = fleet.latest("consumer_connections", group=fleet.group, broker=b)
        published = {(c["client_id"], c["channel"], c["client_version"]) for c in event["connections"]}
        return event if published == admin else None

    return wait_for(f"{broker}'s published connections equal the admin API's", same_as_admin, 60)


def _assert_channels_and_subscriptions(fleet: Fleet, event: dict[str, Any], dup_id: str, solo_id: str) -> None:
    """Two channels for the shared client id, one for the solo client, and what each says it runs."""
    by_client: dict[str, list[dict[str, Any]]] = {}
    for connection in event["connections"]:
        by_client.setdefault(connection["client_id"], []).append(connection)
    assert len(by_client[dup_id]) == 2 and len({c["channel"] for c in by_client[dup_id]}) == 2
    assert len(by_client[solo_id]) == 1
    assert {c["allocate_strategy"] for c in by_client[dup_id]} == {"AVG"}
    assert by_client[solo_id][0]["allocate_strategy"] == "AVG_BY_CIRCLE"
    assert {c["language"] for c in event["connections"]} == {"JAVA"}
    subscribed = {fleet.topic, fleet.missing_topic, f"%RETRY%{fleet.group}"}
    assert {s["topic"] for s in event["subscriptions"]} == subscribed
    assert all({s["topic"] for s in c["subscriptions"]} == subscribed for c in event["connections"])
    assert (event["message_model"], event["consume_type"]) == ("CLUSTERING", "CONSUME_PASSIVELY")
    assert (event["stale_after_ms"], event["collector"]) == (3 * POLL_MS, f"test-col{fleet.line.replace('.', '')}")


def _wait_for_reported_queues(fleet: Fleet, dup_id: str, solo_id: str) -> None:
    """Each client id's reported assignment equals the queues a client holding it says it has."""

    def reported_equals_client(client_id: str, holders: list[HostedConsumer]) -> bool:
        event = fleet.latest("reported_assignment", group=fleet.group, client_id=client_id, topic=fleet.topic)
        if event is None:
            return False
        reported = {(q["broker"], q["queue_id"]) for q in event["queues"]}
        return any(reported == held(h, fleet.topic) for h in holders)

    wait_for("the solo client's reported queues equal its own", lambda: reported_equals_client(solo_id, [fleet.solo]))
    # Running info reaches the first channel with the id: one of the two duplicates, whichever it is.
    wait_for(
        "the duplicate id's reported queues equal one holder's",
        lambda: reported_equals_client(dup_id, fleet.duplicates),
    )


def _assert_empty_group_and_routes(fleet: Fleet) -> None:
    """The empty group polled with nothing on each broker; the routes as the cluster has them, none if missing."""
    for broker in ("broker-a", "broker-b"):
        empty = wait_for(
            "the empty group's poll",
            lambda b=broker: fleet.latest("consumer_connections", group=fleet.empty_group, broker=b),
        )
        assert (empty["connections"], empty["subscriptions"]) == ([], [])
    route = fleet.latest("topic_route", topic=fleet.topic)
    assert {
        b["broker"]: {k: b[k] for k in ("read_queue_nums", "write_queue_nums", "perm")} for b in route["brokers"]
    } == fleet.cluster.route(fleet.topic)
    assert all(b["has_master"] for b in route["brokers"])
    assert fleet.latest("topic_route", topic=fleet.missing_topic)["brokers"] == []


def _assert_records_valid_and_problems_counted(fleet: Fleet) -> None:
    """Routes and assignments pass the contract; the group not online and the missing route counted and logged."""
    for record in fleet.records.poll():
        if record["type"] in ("topic_route", "reported_assignment"):
            outcome = validate_event(json.dumps(record).encode(), now_ms=int(time.time() * 1000))
            assert not isinstance(outcome, Rejection), (record, outcome)
    metrics = fleet.collector.metrics()
    assert metrics['rmqcol_problems_total{kind="group_not_online"}'] >= 2
    assert metrics['rmqcol_problems_total{kind="topic_without_route"}'] >= 1
    assert "group " + fleet.empty_group + " has no connection on broker-a" in fleet.collector.log_text()
    assert "topic " + fleet.missing_topic + " has no route" in fleet.collector.log_text()


def test_connections_routes_and_assignments_are_what_the_cluster_and_clients_say(fleet: Fleet):
    dup_id, solo_id = fleet.duplicates[0].client_id, fleet.solo.client_id
    assert fleet.duplicates[1].client_id == dup_id != solo_id

    for broker in ("broker-a", "broker-b"):
        event = _connections_equal_to_the_admin_api(fleet, broker)
        _assert_channels_and_subscriptions(fleet, event, dup_id, solo_id)

    _wait_for_reported_queues(fleet, dup_id, solo_id)
    _assert_empty_group_and_routes(fleet)
    _assert_records_valid_and_problems_counted(fleet)


@pytest.mark.parametrize("fleet", ["4.9"], indirect=True)
def test_a_frozen_client_and_a_stopped_broker_are_counted_and_the_collector_goes_on(fleet: Fleet):
    def failures() -> float:
        return fleet.counter('rmqcol_problems_total{kind="running_info_timeout"}') + fleet.counter(
            'rmqcol_problems_total{kind="running_info_failed"}'
        )

    before = failures()
    fleet.solo.freeze()
    try:
        wait_for("a failed running-info call of the frozen client", lambda: failures() > before, 60)
        cycles = fleet.counter("rmqcol_cycles_total")
        wait_for("two more cycles", lambda: fleet.counter("rmqcol_cycles_total") >= cycles + 2, 60)
    finally:
        fleet.solo.thaw()
    assert fleet.collector.running()
    assert f"running info of client {fleet.solo.client_id} (group {fleet.group})" in fleet.collector.log_text()

    def broker_problems() -> float:
        return fleet.counter('rmqcol_problems_total{kind="broker_left"}') + fleet.counter(
            'rmqcol_problems_total{kind="broker_unreachable"}'
        )

    before = broker_problems()
    fleet.cluster.stop_broker("broker-b")
    stopped_at = int(time.time() * 1000)
    try:
        wait_for("broker-b counted as gone", lambda: broker_problems() > before, 60)
        wait_for(
            "broker-a still polled",
            lambda: (e := fleet.latest("consumer_connections", group=fleet.group, broker="broker-a"))
            and e["event_time"] > stopped_at + POLL_MS,
        )
        cycles = fleet.counter("rmqcol_cycles_total")
        wait_for("two more cycles", lambda: fleet.counter("rmqcol_cycles_total") >= cycles + 2, 60)
        last_b = fleet.latest("consumer_connections", group=fleet.group, broker="broker-b")
        assert last_b["event_time"] <= stopped_at + 2 * POLL_MS  # nothing published for it once it was gone
    finally:
        fleet.cluster.start_broker("broker-b")
    restarted_at = int(time.time() * 1000)
    wait_for(
        "broker-b polled again",
        lambda: (e := fleet.latest("consumer_connections", group=fleet.group, broker="broker-b"))
        and e["event_time"] > restarted_at,
    )
    assert fleet.collector.running()


def test_collect_command_polls_the_configured_cycles_and_exits(rocketmq_clusters, kafka_broker, tmp_path):
    cluster: LocalRocketMQCluster = rocketmq_clusters("4.9")
    cluster.create_group("cli-empty")
    topic = "cli.consumer-connections"
    create_topics(kafka_broker.bootstrap_servers, [topic])
    config = tmp_path / "monitor.toml"
    config.write_text(
        f'[kafka]\nbootstrap_servers = "{kafka_broker.bootstrap_servers}"\n'
        f'[kafka.topics]\nconsumer_channel = "{topic}"\n'
        f'[collector]\nnamesrv_addr = "{cluster.namesrv_addr}"\ncollector_id = "cli"\n'
        'poll_interval_ms = 1000\nmetrics_port = 0\ninclude_groups = ["cli-*"]\n'
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "streaming.cli",
            "collect",
            "--config",
            str(config),
            "--cycles",
            "3",
            "--work-dir",
            str(tmp_path / "work"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "cycle 3 took" in done.stderr
    records = KafkaRecords(kafka_broker.bootstrap_servers, [topic])
    try:

        def both_brokers() -> list[dict[str, Any]] | None:
            polls = [r for r in records.poll() if r["group"] == "cli-empty"]
            return polls if len({r["broker"] for r in polls}) == 2 else None

        polls = wait_for("the empty group's polls of both brokers", both_brokers, 60)
    finally:
        records.close()
    # One poll per broker and cycle (a first cycle on a busy machine may find the name server slow, and skip).
    assert {(r["broker"], r["collector"], len(r["connections"])) for r in polls} == {
        ("broker-a", "cli", 0),
        ("broker-b", "cli", 0),
    }
    assert len(polls) <= 6


def test_calls_refused_by_access_control_are_logged_and_counted_as_acl_denied(kafka_broker, tmp_path):
    """A 5.3.3 cluster with access control (ACL 2.0): a collector without credentials, or with a wrong secret, is
    refused by both brokers; every refusal counts as ``acl_denied`` (not ``admin_error``) with a log line saying
    so, and the collector keeps polling. With the account's credentials the same collector reads the groups."""
    account = AclAccount("rrm-admin", "rrm-secret-1")
    cluster = LocalRocketMQCluster("5", tmp_path / "cluster", acl=account, stop_grace_s=5.0)
    cluster.start()
    try:
        cluster.create_group("acl-g")  # signed with the account: the brokers know one group
        topic = "acl.consumer-connections"
        create_topics(kafka_broker.bootstrap_servers, [topic])
        base = {
            "RRM__KAFKA__BOOTSTRAP_SERVERS": kafka_broker.bootstrap_servers,
            "RRM__KAFKA__TOPICS__CONSUMER_CHANNEL": topic,
            "RRM__COLLECTOR__NAMESRV_ADDR": cluster.namesrv_addr,
            "RRM__COLLECTOR__POLL_INTERVAL_MS": str(POLL_MS),
            "RRM__COLLECTOR__INCLUDE_GROUPS": '["acl-*"]',
        }
        credentials = {
            "none": {},
            "wrong": {"RRM__COLLECTOR__ACCESS_KEY": account.access_key, "RRM__COLLECTOR__SECRET_KEY": "not-the-secret"},
            "right": {
                "RRM__COLLECTOR__ACCESS_KEY": account.access_key,
                "RRM__COLLECTOR__SECRET_KEY": account.secret_key,
            },
        }
        counters, logs = {}, {}
        # The three collectors run at the same time: each has its own credentials, counters and log.
        collectors = {
            name: CollectorProcess(load_config(env={**base, **extra}), tmp_path / name, metrics_port=free_port())
            for name, extra in credentials.items()
        }
        try:
            for collector in collectors.values():
                collector.start()
            for name, collector in collectors.items():
                collector.wait_polling()
                wait_for("two more cycles", lambda: collector.metrics().get("rmqcol_cycles_total", 0) >= 3, 120)  # noqa: B023
                assert collector.running()
                counters[name], logs[name] = collector.metrics(), collector.log_text()
        finally:
            for collector in collectors.values():
                collector.stop()
    finally:
        cluster.stop()

    for name in ("none", "wrong"):
        denied = counters[name].get('rmqcol_problems_total{kind="acl_denied"}', 0)
        assert denied >= 4, (name, counters[name])  # both brokers refuse the subscription groups, cycle after cycle
        assert counters[name].get('rmqcol_problems_total{kind="admin_error"}', 0) == 0, (name, counters[name])
        assert counters[name].get("rmqcol_groups") == 0, (name, counters[name])
        refusals = [line for line in logs[name].splitlines() if "refused by access control" in line]
        assert {b for b in ("broker-a", "broker-b") if any(b in line for line in refusals)} == {
            "broker-a",
            "broker-b",
        }, logs[name][-2000:]
    assert counters["right"].get('rmqcol_problems_total{kind="acl_denied"}', 0) == 0, counters["right"]
    assert counters["right"].get("rmqcol_groups") == 1, counters["right"]
