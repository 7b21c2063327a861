"""``collect`` against a real local cluster: real consumers (the project's test clients; two sharing one client
id, so in JVMs of their own), the collector's JVM publishing to the project's Kafka broker, and every record
checked against what the admin API and the clients themselves say (consume progress too, online and offline);
then bad input (a frozen client, a broker stopped) that it counts and survives."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from connectors.kafka_topics import create_topics
from connectors.processes import free_port
from connectors.rocketmq_collector import CollectorProcess
from localenv.rocketmq_cluster import AclAccount, LocalRocketMQCluster
from streaming.config import load_config
from streaming.contract.validator import Rejection, validate_event
from tests.support.kafka_records import KafkaRecords
from tests.support.rocketmq_client import ClientProcess, ConsumerSpec, HostedConsumer, consumer_host, stop_all
from tests.support.rocketmq_e2e import held

POLL_MS = 2_000
PROGRESS_MS = 2_000  # the progress cycle's cadence in these tests (30 s by default)


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
    progress_group: str
    progress_topic: str
    progress_consumer: HostedConsumer
    work: Any
    started_ms: int

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
    progress_topic, progress_group = f"{prefix}-progress", f"{prefix}-pg"
    cluster.create_topic(topic, 4)
    cluster.create_topic(progress_topic, 2)
    cluster.create_group(empty)
    kinds = ("consumer_channel", "reported_assignment", "topic_route", "consume_progress")
    kafka_topics = {kind: f"{prefix}.{kind}" for kind in kinds}
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
            "RRM__COLLECTOR__PROGRESS_INTERVAL_MS": str(PROGRESS_MS),
            "RRM__COLLECTOR__PROGRESS_MIN_OFFSET_EVERY": "2",
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
    # The progress test's group: one consumer, in a JVM of its own (the test stops it: an offline group).
    hosts.append([ConsumerSpec("progress", progress_group, progress_topic, strategy="AVG")])
    work = tmp_path_factory.mktemp(f"clients-{prefix}")
    consumers = [
        consumer_host(line, work / str(i), hosted, namesrv=cluster.namesrv_addr) for i, hosted in enumerate(hosts)
    ]
    collector = CollectorProcess(config, tmp_path_factory.mktemp(f"collector-{prefix}"), metrics_port=free_port())
    records = None
    started_ms = int(time.time() * 1000)
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
            progress_group,
            progress_topic,
            by_name["progress"],
            work,
            started_ms,
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


# mqadmin clusterList's rows: the broker cluster name, then the broker name and id.
CLUSTER_LIST_ROW = re.compile(r"^(\S+)\s+(broker-\w+)\s+0\s", re.M)


def _assert_records_valid_and_problems_counted(fleet: Fleet) -> None:
    """Every record carries its event time as a header and passes the contract as schema version 2 naming the
    cluster the collector was not told: the broker cluster name the brokers register with (as RocketMQ's own
    mqadmin lists them); the group not online and the missing route counted and logged."""
    listed = fleet.cluster.mqadmin("clusterList")
    (cluster,) = {name for name, _ in CLUSTER_LIST_ROW.findall(listed)} or {None}
    assert cluster is not None, listed
    records = fleet.records.poll()
    assert {r["type"] for r in records} >= {"consumer_connections", "topic_route", "reported_assignment"}
    # The event-time header the job plans its batches by, on every record.
    assert fleet.records.event_time_headers == [r["event_time"] for r in records]
    for record in records:
        outcome = validate_event(json.dumps(record).encode(), now_ms=int(time.time() * 1000))
        assert not isinstance(outcome, Rejection), (record, outcome)
        assert (record["schema_version"], record["cluster"]) == (2, cluster), record
    metrics = fleet.collector.metrics()
    assert metrics[f'rmqcol_cluster_info{{cluster="{cluster}"}}'] == 1
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


def _produce(fleet: Fleet, count: int, name: str) -> None:
    """``count`` messages to the progress topic from a real producer of the fleet's line, which then stops."""
    producer = ClientProcess(
        fleet.line,
        "producer",
        fleet.work / name,
        namesrv=fleet.cluster.namesrv_addr,
        group=f"{fleet.progress_group}-producer",
        topic=fleet.progress_topic,
        instance_name=name,
        rate=200,
        count=count,
    )
    try:
        producer.start(120)
        sent = producer.wait_for(lambda line: line["kind"] == "sent", 120)
        assert sent["sends_ok"] == count
    finally:
        producer.stop()


Rows = dict[tuple[str, int], dict[str, Any]]
BROKERS = ("broker-a", "broker-b")


def _sample(fleet: Fleet, group: str, broker: str, after_ms: int) -> Rows | None:
    """The rows of the first progress sample of ``group`` on ``broker`` taken after ``after_ms`` (the events of one
    sample share its event_time), or None."""
    events = [
        r
        for r in fleet.records.poll()
        if r["type"] == "consume_progress"
        and (r["group"], r["broker"]) == (group, broker)
        and r["event_time"] > after_ms
    ]
    if not events:
        return None
    first = min(e["event_time"] for e in events)
    sample = [e for e in events if e["event_time"] == first]
    assert all(e.get("error") is None for e in sample), sample
    return {(q["topic"], q["queue_id"]): q for e in sample for q in e["queues"]}


def _expected(fleet: Fleet, admin_rows: list[dict[str, Any]]) -> Rows:
    """What the collector should publish for a broker's admin answer (min offsets aside: not read every cycle)."""
    return {
        (q["topic"], q["queue_id"]): {
            "topic": q["topic"],
            "queue_id": q["queue_id"],
            "broker_offset": q["broker_offset"],
            "consumer_offset": max(0, q["consumer_offset"]),
            **({"pull_offset": q["pull_offset"]} if fleet.line == "5" else {}),  # 5.1.0+ brokers only
            "last_timestamp": q["last_timestamp"],
        }
        for q in admin_rows
    }


def _progress_equal_to_the_admin_api(fleet: Fleet, groups: tuple[str, ...]) -> dict[str, dict[str, Rows]]:
    """Per group and broker, the admin API's consume stats (read twice, equal: a quiet moment), once the collector's
    samples taken between the two reads equal them; the admin's rows by (topic, queue id)."""
    with fleet.cluster.consume_progress(*groups) as reader:
        before = reader.read()

        def attempt() -> dict[str, dict[str, Rows]] | None:
            nonlocal before
            asked = int(time.time() * 1000)
            wait_for(
                "a progress sample of every group and broker after the admin read",
                lambda: all(_sample(fleet, g, b, asked) is not None for g in groups for b in BROKERS),
                60,
            )
            samples = {(g, b): _sample(fleet, g, b, asked) for g in groups for b in BROKERS}
            after = reader.read()
            quiet, before = before == after, after
            if not quiet:
                return None  # something moved between the reads: read again
            for (group, broker), rows in samples.items():
                published = {k: {f: v for f, v in q.items() if f != "min_offset"} for k, q in rows.items()}
                if published != _expected(fleet, after[group][broker]):
                    return None
            return {g: {b: {(q["topic"], q["queue_id"]): q for q in after[g][b]} for b in BROKERS} for g in groups}

        return wait_for("the collector's progress samples equal the admin API's", attempt, 120)


def _assert_min_offsets_published(fleet: Fleet, admin: dict[str, Rows]) -> None:
    """Min offsets come every second cycle; when present, each is the broker's own (its topic stats)."""
    for broker in BROKERS:
        with_min = wait_for(
            f"a progress sample of {broker} with min offsets",
            lambda b=broker: [
                e
                for e in fleet.records.poll()
                if e["type"] == "consume_progress"
                and (e["group"], e["broker"]) == (fleet.progress_group, b)
                and e["queues"]
                and all("min_offset" in q for q in e["queues"])
            ],
            30,
        )
        for event in with_min:
            for q in event["queues"]:
                assert q["min_offset"] == admin[broker][(q["topic"], q["queue_id"])]["min_offset"], (broker, q)


def _reported_after_consuming(fleet: Fleet, consumed: int) -> dict[str, Any]:
    """The holder's reported assignment once its commit offsets account for every message it consumed."""
    consumer = fleet.progress_consumer
    holding = held(consumer, fleet.progress_topic)

    def settled() -> dict[str, Any] | None:
        event = fleet.latest(
            "reported_assignment", group=fleet.progress_group, client_id=consumer.client_id, topic=fleet.progress_topic
        )
        if event is None or {(q["broker"], q["queue_id"]) for q in event["queues"]} != holding:
            return None
        done = sum(q["commit_offset"] for q in event["queues"]) == consumed
        return event if done and all(q["cached_msg_count"] == 0 for q in event["queues"]) else None

    return wait_for("a reported assignment with every consumed message committed", settled, 60)


def _settled(fleet: Fleet, produced: int, consumed: int) -> bool:
    """Whether the collector's latest samples of the progress topic sum to these offsets on both brokers: only a
    hint of when to ask the admin API."""
    totals = [0, 0]
    for broker in BROKERS:
        event = fleet.latest("consume_progress", group=fleet.progress_group, broker=broker)
        for q in [] if event is None else event["queues"]:
            if q["topic"] == fleet.progress_topic:
                totals[0] += q["broker_offset"]
                totals[1] += q["consumer_offset"]
    return totals == [produced, consumed]


_CYCLE_LINE = re.compile(r"cycle (?P<n>\d+) took \d+ ms; \{(?P<counters>.*)\}")


def _per_cycle(log: str, series: str) -> list[int]:
    """Each cycle's increase of a counter series, from the lines a collector with ``max_cycles`` logs."""
    totals = []
    for match in _CYCLE_LINE.finditer(log):
        found = re.search(re.escape(series) + r"=(\d+)", match.group("counters"))
        totals.append(int(found.group(1)) if found else 0)
    return [b - a for a, b in zip([0, *totals], totals, strict=False)]


@pytest.mark.parametrize("fleet", ["5"], indirect=True)
def test_running_info_calls_per_cycle_stay_within_their_budget(fleet: Fleet, kafka_broker, tmp_path):
    """A second collector over the fleet's groups with ``running_info_per_cycle = 1`` and every client due each
    cycle: each cycle asks one client's running info, never more, the others wait (counted as deferred), and the
    budget goes to the clients not asked yet, so different clients are reported in turn; each cycle's connection
    calls are one per (group, broker)."""
    kafka_topic = f"col5.budget-{int(time.time())}"
    create_topics(kafka_broker.bootstrap_servers, [kafka_topic])
    kinds = ("consumer_channel", "reported_assignment", "topic_route", "consume_progress")
    config = load_config(
        env={
            "RRM__KAFKA__BOOTSTRAP_SERVERS": kafka_broker.bootstrap_servers,
            **{f"RRM__KAFKA__TOPICS__{kind.upper()}": kafka_topic for kind in kinds},
            "RRM__COLLECTOR__NAMESRV_ADDR": fleet.cluster.namesrv_addr,
            "RRM__COLLECTOR__COLLECTOR_ID": "budget",
            "RRM__COLLECTOR__POLL_INTERVAL_MS": str(POLL_MS),
            "RRM__COLLECTOR__RUNNING_INFO_INTERVAL_MS": "500",  # shorter than a cycle: every client due each cycle
            "RRM__COLLECTOR__RUNNING_INFO_PER_CYCLE": "1",
            "RRM__COLLECTOR__ADMIN_TIMEOUT_MS": "2000",
            "RRM__COLLECTOR__INCLUDE_GROUPS": '["col5-*"]',
            "RRM__COLLECTOR__PROGRESS_INTERVAL_MS": "0",
        }
    )
    collector = CollectorProcess(config, tmp_path / "budget", max_cycles=3, metrics_port=0)
    collector.start()
    try:
        collector.wait(180)
    finally:
        collector.stop()
    log = collector.log_text()
    asked = _per_cycle(log, 'rmqcol_rpc_total{call="running_info"}')
    assert len(asked) == 3 and all(n == 1 for n in asked), (asked, log[-3000:])
    assert _per_cycle(log, "rmqcol_running_info_deferred_total")[0] >= 1, log[-3000:]
    records = KafkaRecords(kafka_broker.bootstrap_servers, [kafka_topic])
    try:
        polls = wait_for(
            "the cycles' polls", lambda: [r for r in records.poll() if r["type"] == "consumer_connections"]
        )
        reported = {r["client_id"] for r in records.poll() if r["type"] == "reported_assignment"}
    finally:
        records.close()
    assert len(reported) >= 2, reported
    groups = {p["group"] for p in polls}
    assert _per_cycle(log, 'rmqcol_rpc_total{call="consumer_connections"}') == [2 * len(groups)] * 3, groups


def test_consume_progress_is_what_the_brokers_say_online_and_offline(fleet: Fleet):
    """A producer writes 40 messages and the group's one consumer takes them all; its reported queues carry its
    process queues' commit offsets. The consumer stops (the group is offline) and 30 more are written. Each
    broker's progress sample of that group, of the fleet's online group and of the empty group equals the admin
    API's own read of that broker (broker, consumer and, on 5.x, pull offsets; min offsets when read): the offline
    group is still sampled, with the lag of 30 the brokers have, and the commit offsets it reported are what the
    brokers keep."""
    first, more = 40, 30
    every_queue = {(b, i) for b in BROKERS for i in range(2)}
    wait_for(
        "the holder holds every queue (then it consumes all that is written)",
        lambda: held(fleet.progress_consumer, fleet.progress_topic) == every_queue,
        120,
    )
    _produce(fleet, first, "producer-1")
    fleet.progress_consumer.wait_for(
        lambda line: line["kind"] == "held" and line["consumed"].get(fleet.progress_topic, 0) >= first, 60
    )
    reported = _reported_after_consuming(fleet, first)

    fleet.progress_consumer.stop()  # a clean shutdown persists its offsets to the brokers
    stopped_ms = int(time.time() * 1000)
    _produce(fleet, more, "producer-2")
    for broker in BROKERS:
        wait_for(
            f"{broker} lists no consumer of the progress group",
            lambda b=broker: (e := fleet.latest("consumer_connections", group=fleet.progress_group, broker=b))
            and e["event_time"] > stopped_ms
            and e["connections"] == [],
            60,
        )
    wait_for("the collector's samples show every message", lambda: _settled(fleet, first + more, first), 60)

    admin = _progress_equal_to_the_admin_api(fleet, (fleet.progress_group, fleet.group, fleet.empty_group))
    progress = {
        b: {k: q for k, q in rows.items() if k[0] == fleet.progress_topic}
        for b, rows in admin[fleet.progress_group].items()
    }
    assert {(b, k[1]) for b, rows in progress.items() for k in rows} == {(b, i) for b in BROKERS for i in range(2)}
    assert sum(q["broker_offset"] for rows in progress.values() for q in rows.values()) == first + more
    assert sum(q["consumer_offset"] for rows in progress.values() for q in rows.values()) == first
    assert all(admin[fleet.group][b] for b in BROKERS)  # the online group has offsets on both brokers
    assert admin[fleet.empty_group] == {b: {} for b in BROKERS}  # the empty group none: sampled with no queues
    _assert_min_offsets_published(fleet, admin[fleet.progress_group])

    # What the holder reported before it stopped is what the brokers keep for it.
    assert reported["consume_orderly"] is False
    for q in reported["queues"]:
        committed = progress[q["broker"]][(fleet.progress_topic, q["queue_id"])]["consumer_offset"]
        assert q["commit_offset"] == committed, q
        assert (q["cached_msg_count"], q["cached_msg_size_mib"]) == (0, 0), q
        assert isinstance(q["locked"], bool), q  # a 5.x client marks every new process queue locked
        assert fleet.started_ms <= q["last_pull_timestamp"] <= reported["event_time"], q
        assert fleet.started_ms <= q["last_consume_timestamp"] <= reported["event_time"], q

    records = fleet.records.poll()
    progress_events = [r for r in records if r["type"] == "consume_progress"]
    for record in progress_events + [r for r in records if r["type"] == "reported_assignment"]:
        outcome = validate_event(json.dumps(record).encode(), now_ms=int(time.time() * 1000))
        assert not isinstance(outcome, Rejection), (record, outcome)
    assert all(r["collector"] == f"test-col{fleet.line.replace('.', '')}" for r in progress_events)
    # At most one consume-stats call per (group, broker) per cycle: three watched groups, two brokers.
    metrics = fleet.collector.metrics()
    cycles = metrics["rmqcol_progress_cycles_total"]
    assert 0 < metrics['rmqcol_rpc_total{call="consume_stats"}'] <= (cycles + 1) * 3 * 2
    assert metrics['rmqcol_rpc_total{call="topic_stats"}'] > 0


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
        # Its consume progress is unknown, never lag 0: a sample with the reason and no queues, for every group.
        for group in (fleet.group, fleet.empty_group, fleet.progress_group):
            unknown = wait_for(
                f"an unknown progress sample of {group} on broker-b",
                lambda g=group: (e := fleet.latest("consume_progress", group=g, broker="broker-b"))
                and e["event_time"] > stopped_at
                and e.get("error")
                and e,
                60,
            )
            assert unknown["queues"] == [] and "consume_tps" not in unknown, unknown
            assert "broker-b" in unknown["error"], unknown
            assert not isinstance(validate_event(json.dumps(unknown).encode()), Rejection), unknown
        assert fleet.latest("consume_progress", group=fleet.group, broker="broker-a")["event_time"] > stopped_at
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
    done = _collect(tmp_path, kafka_broker.bootstrap_servers, topic, cluster, "cli", 3, 'include_groups = ["cli-*"]')
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


def _collect_command(
    tmp_path: Path, bootstrap: str, topic: str, cluster: LocalRocketMQCluster, name: str, cycles: int, extra: str
) -> list[str]:
    """``rebalance-monitor collect --cycles`` as a user runs it, publishing its polls to ``topic``."""
    config = tmp_path / f"{name}.toml"
    config.write_text(
        f'[kafka]\nbootstrap_servers = "{bootstrap}"\n[kafka.topics]\nconsumer_channel = "{topic}"\n'
        f'[collector]\nnamesrv_addr = "{cluster.namesrv_addr}"\ncollector_id = "{name}"\n'
        f"poll_interval_ms = 1000\nmetrics_port = 0\n{extra}\n"
    )
    command = [sys.executable, "-m", "streaming.app.cli", "collect", "--config", str(config), "--cycles", str(cycles)]
    return [*command, "--work-dir", str(tmp_path / f"work-{name}")]


def _collect(*args: Any, cli: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    command = [*_collect_command(*args), *cli]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, env=dict(os.environ))


def jump_shard(group: str, count: int) -> int:
    """The shard of ``count`` a group belongs to, as docs/collector.md defines it (jump consistent hash of the
    CRC-32 of the name's UTF-8 bytes), written here from the published algorithm."""
    key, bucket, jump = zlib.crc32(group.encode()), -1, 0
    while jump < count:
        bucket = jump
        key = (key * 2862933555777941757 + 1) % 2**64
        jump = int((bucket + 1) * (float(1 << 31) / float((key >> 33) + 1)))
    return bucket


def test_a_cycle_longer_than_the_poll_interval_is_counted_and_logged(rocketmq_clusters, kafka_broker, tmp_path):
    """The name server frozen (SIGSTOP) for longer than the admin timeout while the collector starts its cycles:
    a cycle waits out the cluster-info call (3 s against a 1 s interval), and the collector says the polls are
    late instead of silently stretching the interval."""
    cluster: LocalRocketMQCluster = rocketmq_clusters("4.9")
    topic = "overrun.consumer-connections"
    create_topics(kafka_broker.bootstrap_servers, [topic])
    command = _collect_command(
        tmp_path, kafka_broker.bootstrap_servers, topic, cluster, "overrun", 4, 'include_groups = ["overrun-*"]'
    )
    namesrv = cluster.info().namesrv.pid
    log = (tmp_path / "collect.log").open("w+")
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log, text=True, env=dict(os.environ))
    try:
        wait_for("the collector's start", lambda: "watching name server" in (tmp_path / "collect.log").read_text())
        os.kill(namesrv, signal.SIGSTOP)
        try:
            time.sleep(5.0)  # longer than the admin timeout (3 s) of the cycle under way or the next
        finally:
            os.kill(namesrv, signal.SIGCONT)
        assert process.wait(timeout=120) == 0
    finally:
        if process.poll() is None:
            process.kill()
        log.close()
    text = (tmp_path / "collect.log").read_text()
    assert re.search(r"poll cycle took \d+ ms, more than poll_interval_ms 1000", text), text[-3000:]
    assert re.search(r'rmqcol_cycles_overrun_total\{cycle="poll"\}=[1-9]', text), text[-3000:]


def test_shard_assignment_covers_every_group_once_and_adding_an_instance_moves_groups_only_to_it():
    """The collector's own shard function (``Shards``, the class its group filter calls) over 3,000 group names
    for 1 to 6 instances: each name in exactly one shard of 0 to n-1, the one the published algorithm gives, no
    shard empty or holding more than twice its share, and going from n to n+1 instances moves a group only to
    the new instance n (about 1/(n+1) of them), so an instance can be added without the others moving groups."""
    names = [f"group-{i}" for i in range(2_000)] + [f"%RETRY%app-{i}" for i in range(500)]
    names += [f"payments.{chr(0x4E00 + i)}-{i}" for i in range(500)]  # non-ASCII: the UTF-8 bytes are hashed
    counts = range(1, 7)
    from connectors import jvm_artifacts

    run = subprocess.run(
        ["java", "-cp", jvm_artifacts.collector_classpath(), "io.github.rrm.collector.Shards", *map(str, counts)],
        input="\n".join(names) + "\n",
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        check=True,
    )
    rows = [line.split("\t") for line in run.stdout.splitlines()]
    answers = {count: {row[-1]: int(row[i]) for row in rows} for i, count in enumerate(counts)}
    for count in counts:
        assert sorted(answers[count]) == sorted(names)  # every name once
        assert answers[count] == {name: jump_shard(name, count) for name in names}
        sizes = [sum(1 for s in answers[count].values() if s == shard) for shard in range(count)]
        assert min(sizes) > 0 and max(sizes) <= 2 * len(names) / count, sizes
    for count in counts[:-1]:
        moved = [n for n in names if answers[count + 1][n] != answers[count][n]]
        assert {answers[count + 1][n] for n in moved} == {count}  # only to the new instance
        assert len(moved) <= 2 * len(names) / (count + 1), (count, len(moved))


def test_a_name_server_of_several_broker_clusters_gives_no_default_cluster_name():
    """The collector's own rule (``ClusterName``, what its cycle calls with cluster info's broker cluster names)
    for several: no name, an error naming the option (one broker cluster's name is the fleet test's default)."""
    from connectors import jvm_artifacts

    command = ["java", "-cp", jvm_artifacts.collector_classpath(), "io.github.rrm.collector.ClusterName", "ns:9876"]
    several = subprocess.run([*command, "east-b", "east-a"], capture_output=True, text=True, timeout=120)
    assert several.returncode == 1
    assert several.stdout.strip() == (
        "name server ns:9876 holds broker clusters east-a, east-b: set [collector] cluster to the name this "
        "collector's events should carry"
    )


def test_collectors_configured_as_shards_poll_every_group_exactly_once(rocketmq_clusters, kafka_broker, tmp_path):
    """Two collectors as shards 0 and 1 of 2 over one cluster (the first configured in its file, the second by
    ``collect --shard 1/2``): each group is polled by exactly one of them, the one its shard names
    (docs/collector.md), and neither polls the other's groups."""
    cluster: LocalRocketMQCluster = rocketmq_clusters("4.9")
    groups = [f"shard-g{i:02d}" for i in range(12)]
    for group in groups:
        cluster.create_group(group)
    topic = "shards.consumer-connections"
    create_topics(kafka_broker.bootstrap_servers, [topic])
    with ThreadPoolExecutor(2) as both:  # the two instances run side by side, as a user runs them
        runs = list(
            both.map(
                lambda i: _collect(
                    tmp_path,
                    kafka_broker.bootstrap_servers,
                    topic,
                    cluster,
                    f"shard-{i}",
                    2,
                    'include_groups = ["shard-*"]' + ("\nshard_index = 0\nshard_count = 2" if i == 0 else ""),
                    cli=("--shard", "1/2") if i == 1 else (),
                ),
                range(2),
            )
        )
    for run in runs:
        assert run.returncode == 0, run.stderr[-2000:]
    records = KafkaRecords(kafka_broker.bootstrap_servers, [topic])
    try:

        def every_group() -> dict[str, set[str]] | None:
            by_group: dict[str, set[str]] = {}
            for poll in records.poll():
                by_group.setdefault(poll["group"], set()).add(poll["collector"])
            return by_group if set(groups) <= set(by_group) else None

        polled_by = wait_for("a poll of every group", every_group, 60)
    finally:
        records.close()
    assert set(polled_by) == set(groups)
    assert polled_by == {g: {f"shard-{jump_shard(g, 2)}"} for g in groups}
    assert all(any(c == {f"shard-{i}"} for c in polled_by.values()) for i in range(2)), "one shard polled nothing"


@pytest.mark.parametrize("line", ["5", "4.9"])
def test_calls_refused_by_access_control_are_logged_and_counted_as_acl_denied(kafka_broker, tmp_path, line):
    """A cluster with access control (5.3.3: ACL 2.0; 4.9.7: ACL 1, plain_acl.yml): a collector without
    credentials, or with a wrong secret, is refused by both brokers; every refusal counts as ``acl_denied`` (not
    ``admin_error``) with a log line saying so, and the collector keeps polling. With the account's credentials
    the same collector reads the groups."""
    account = AclAccount("rrm-admin", "rrm-secret-1")
    cluster = LocalRocketMQCluster(line, tmp_path / "cluster", acl=account, stop_grace_s=5.0)
    cluster.start()
    try:
        cluster.create_group("acl-g")  # signed with the account: the brokers know one group
        topic = f"acl-{line}.consumer-connections"
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
    assert not any(secret in text for secret in (account.secret_key, "not-the-secret") for text in logs.values())
