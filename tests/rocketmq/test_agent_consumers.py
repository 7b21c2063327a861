"""Real push consumers with the client agent's reporter: every holder of a duplicated client id reports.

Three consumer JVMs of one group (the project's test clients), two of them sharing a client id (same
instance name and client IP, one of each client line), over a topic with 4 queues on each of 2 brokers. Each
prints its own held queues (its process-queue table) as they change; the agent publishes them as
``reported_assignment`` events. The latest report of each process must be exactly what that process holds,
so the reports show every real holder: the queues both duplicates hold and the ones nobody holds.
"""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path

from localenv.kafka_broker import create_topics
from localenv.rocketmq_cluster import TEST_SPEED
from tests.support.agent_events import read_records
from tests.support.rocketmq_client import ClientProcess

GROUP = "agent_dup_group"
TOPIC = "agent_dup"
DUPLICATED_IP = "127.0.0.9"  # only the client id's text: the client still connects from 127.0.0.1


def consumer(line: str, name: str, tmp_path: Path, cluster, agent: dict[str, str], **identity: str) -> ClientProcess:
    return ClientProcess(
        line,
        "consumer",
        tmp_path / name,
        agent=agent,
        jvm_properties=TEST_SPEED.client_jvm_properties(),
        namesrv=cluster.namesrv_addr,
        group=GROUP,
        topics=TOPIC,
        strategy="AVG",
        heartbeat_ms=TEST_SPEED.client_heartbeat_interval_ms,
        **identity,
    )


def held(line: dict) -> dict[str, frozenset[tuple[str, int]]]:
    return {topic: frozenset((b, q) for b, q in queues) for topic, queues in line["queues"].items() if queues}


def wait_until_quiet(clients: list[ClientProcess], quiet_s: float, timeout_s: float) -> None:
    """Until no client's held queues changed for ``quiet_s`` and every client holds something of the topic."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        lasts = [c.last("held") for c in clients]
        if all(last and TOPIC in held(last) for last in lasts):
            newest = max(last["time"] for last in lasts)
            if time.time() * 1000 - newest >= quiet_s * 1000:
                return
        time.sleep(0.5)
    raise AssertionError(f"consumers did not settle in {timeout_s} s: {[c.last('held') for c in clients]}")


def test_every_holder_of_a_duplicated_client_id_reports_its_own_queues(rocketmq_cluster, kafka_broker, tmp_path):
    rocketmq_cluster.create_topic(TOPIC, 4)
    reports = "agent-dup.reported-assignments"
    create_topics(kafka_broker.bootstrap_servers, [reports])
    agent = {
        "bootstrap.servers": kafka_broker.bootstrap_servers,
        "topic.reported.assignments": reports,
        "report.interval.ms": "2000",
        "report.check.interval.ms": "200",
    }
    clients = [
        consumer("5", "dup5", tmp_path, rocketmq_cluster, agent, instance_name="dup", client_ip=DUPLICATED_IP),
        consumer("4.9", "dup49", tmp_path, rocketmq_cluster, agent, instance_name="dup", client_ip=DUPLICATED_IP),
        consumer("5", "solo", tmp_path, rocketmq_cluster, agent, instance_name="solo"),
    ]
    try:
        for client in clients:
            client.start()
        assert clients[0].client_id == clients[1].client_id != clients[2].client_id
        wait_until_quiet(clients, quiet_s=8, timeout_s=120)
        time.sleep(3)  # one more periodic report of the settled state
        own = {c.pid: held(c.last("held")) for c in clients}
        settled_ms = int(time.time() * 1000)  # later reports show the clients leaving, one after the other
    finally:
        for client in clients:
            client.stop()

    latest: dict[int, dict[str, frozenset[tuple[str, int]]]] = defaultdict(dict)
    client_ids: dict[int, str] = {}
    for headers, event in read_records(kafka_broker.bootstrap_servers, reports, at_least=6):
        pid = int(headers["rrm-agent-instance"].split("@")[0])
        assert event["group"] == GROUP and event["type"] == "reported_assignment"
        if event["event_time"] > settled_ms:
            continue
        client_ids[pid] = event["client_id"]
        queues = frozenset((q["broker"], q["queue_id"]) for q in event["queues"])
        latest[pid][event["topic"]] = queues
    assert {pid: {t: q for t, q in topics.items() if q} for pid, topics in latest.items()} == own
    assert client_ids == {c.pid: c.client_id for c in clients}

    # Every real holder, from the reports: the duplicates hold the same queues, and some queues nobody holds.
    holders: dict[tuple[str, int], list[int]] = defaultdict(list)
    for pid, topics in latest.items():
        for queue in topics.get(TOPIC, ()):
            holders[queue].append(pid)
    all_queues = {(b, q) for b in ("broker-a", "broker-b") for q in range(4)}
    double_owned = {q for q, pids in holders.items() if len(pids) > 1}
    orphaned = all_queues - set(holders)
    assert double_owned and own[clients[0].pid][TOPIC] == own[clients[1].pid][TOPIC] == double_owned
    assert orphaned and orphaned == all_queues - set().union(*(topics[TOPIC] for topics in own.values()))
