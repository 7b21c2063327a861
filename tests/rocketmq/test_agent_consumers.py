"""Real push consumers with the client agent's reporter, registered by the application or attached.

Three consumers of one group (the project's test clients), two of them sharing a client id (same instance name
and client IP, one of each client line, so in JVMs of their own; the third shares the 5.3.3 one's JVM), over a
topic with 4 queues on each of 2 brokers. Each prints its own held queues (its process-queue table) as they
change; the agent publishes them as ``reported_assignment`` events. The latest report of each client in each
process must be exactly what that client holds, so the reports show every real holder: the queues both
duplicates hold and the ones nobody holds. Then the agent attached with ``-javaagent`` alone to a producer and
a push consumer of each line that do nothing for it (nor have it on their classpath): what they published is
what the clients themselves printed, send by send and queue by queue.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict

from connectors.kafka_topics import create_topics
from streaming.contract.events import EVENT_TIME_HEADER
from tests.support.agent_events import read_events, read_records
from tests.support.rocketmq_client import (
    ClientProcess,
    ConsumerSpec,
    HostedConsumer,
    consumer_host,
    start_all,
    stop_all,
)
from tests.support.rocketmq_e2e import CONVERGED_QUIET_S

GROUP = "agent_dup_group"
TOPIC = "agent_dup"
DUPLICATED_IP = "127.0.0.9"  # only the client id's text: the client still connects from 127.0.0.1


def held(line: dict) -> dict[str, frozenset[tuple[str, int]]]:
    return {topic: frozenset((b, q) for b, q in queues) for topic, queues in line["queues"].items() if queues}


def wait_until_quiet(clients: list[HostedConsumer], quiet_s: float, timeout_s: float, topic: str = TOPIC) -> None:
    """Until no client's held queues changed for ``quiet_s`` and every client holds something of the topic."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        lasts = [c.last("held") for c in clients]
        if all(last and topic in held(last) for last in lasts):
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
    namesrv = rocketmq_cluster.namesrv_addr
    twin = ConsumerSpec("dup", GROUP, TOPIC, client_ip=DUPLICATED_IP)
    processes = [
        consumer_host("5", tmp_path / "dup5", [twin, ConsumerSpec("solo", GROUP, TOPIC)], namesrv=namesrv, agent=agent),
        consumer_host("4.9", tmp_path / "dup49", [twin], namesrv=namesrv, agent=agent),
    ]
    try:
        start_all(processes)
        (dup5, solo), (dup49,) = (process.consumers() for process in processes)
        clients = [dup5, dup49, solo]
        assert dup5.client_id == dup49.client_id != solo.client_id
        # Two 2 s rebalance intervals (see tests.support.rocketmq_e2e.CONVERGED_QUIET_S), which also hold a
        # periodic report (every 2 s) of the settled state by every client.
        wait_until_quiet(clients, quiet_s=CONVERGED_QUIET_S, timeout_s=120)
        own = {(c.pid, c.client_id): held(c.last("held")) for c in clients}
        settled_ms = int(time.time() * 1000)  # later reports show the clients leaving, one after the other
    finally:
        stop_all(processes)

    # A holder is a client in a process: the process from the agent's header, the client id from the event.
    latest: dict[tuple[int, str], dict[str, frozenset[tuple[str, int]]]] = defaultdict(dict)
    for headers, event in read_records(kafka_broker.bootstrap_servers, reports, at_least=6):
        holder = (int(headers["rrm-agent-instance"].split("@")[0]), event["client_id"])
        assert event["group"] == GROUP and event["type"] == "reported_assignment"
        assert headers[EVENT_TIME_HEADER] == str(event["event_time"])  # the header the job plans batches by
        if event["event_time"] > settled_ms:
            continue
        queues = frozenset((q["broker"], q["queue_id"]) for q in event["queues"])
        latest[holder][event["topic"]] = queues
    assert {holder: {t: q for t, q in topics.items() if q} for holder, topics in latest.items()} == own
    assert set(latest) == {(c.pid, c.client_id) for c in clients}

    # Every real holder, from the reports: the duplicates hold the same queues, and some queues nobody holds.
    holders: dict[tuple[str, int], list[tuple[int, str]]] = defaultdict(list)
    for holder, topics in latest.items():
        for queue in topics.get(TOPIC, ()):
            holders[queue].append(holder)
    all_queues = {(b, q) for b in ("broker-a", "broker-b") for q in range(4)}
    double_owned = {q for q, found in holders.items() if len(found) > 1}
    orphaned = all_queues - set(holders)
    twins = [own[(c.pid, c.client_id)][TOPIC] for c in (dup5, dup49)]
    assert double_owned and twins[0] == twins[1] == double_owned
    assert orphaned and orphaned == all_queues - set().union(*(topics[TOPIC] for topics in own.values()))


ATTACHED_TOPIC = "agent_attached"
ATTACHED_SENDS = 40
VERSION_BY_LINE = {"4.9": "V4_9_8", "5": "V5_3_3"}


def test_attached_with_javaagent_alone_it_publishes_what_unmodified_clients_did(
    rocketmq_cluster, kafka_broker, tmp_path
):
    rocketmq_cluster.create_topic(ATTACHED_TOPIC, 4)
    bootstrap = kafka_broker.bootstrap_servers
    sends, reports = "agent-attached.send-results", "agent-attached.reported-assignments"
    create_topics(bootstrap, [sends, reports])
    attach = {
        "bootstrap.servers": bootstrap,
        "topic.send.results": sends,
        "topic.reported.assignments": reports,
        "report.interval.ms": "2000",
        "report.check.interval.ms": "200",
    }
    namesrv = rocketmq_cluster.namesrv_addr
    lines = ("4.9", "5")
    consumers = [
        consumer_host(
            line,
            tmp_path / f"consumer{line}",
            [ConsumerSpec(f"attached{line.replace('.', '')}", "agent_attached_group", ATTACHED_TOPIC)],
            namesrv=namesrv,
            attach=attach,
        )
        for line in lines
    ]
    producers = {
        line: ClientProcess(
            line,
            "producer",
            tmp_path / f"producer{line}",
            attach=attach,
            namesrv=namesrv,
            group=f"agent_attached_p{line.replace('.', '')}",
            topic=ATTACHED_TOPIC,
            instance_name=f"attached_p{line.replace('.', '')}",
            rate=50,
            count=ATTACHED_SENDS,
            print_sends=True,
        )
        for line in lines
    }
    try:
        start_all([*consumers, *producers.values()])
        hosted = [process.consumers()[0] for process in consumers]
        for producer in producers.values():
            producer.wait_for(lambda line: line["kind"] == "sent", 60)
        wait_until_quiet(hosted, quiet_s=CONVERGED_QUIET_S, timeout_s=120, topic=ATTACHED_TOPIC)
        own = {c.client_id: held(c.last("held")) for c in hosted}
        settled_ms = int(time.time() * 1000)
        published = read_events(bootstrap, sends, at_least=ATTACHED_SENDS * len(lines))
        reported = read_records(bootstrap, reports, at_least=len(lines))
    finally:
        stop_all([*consumers, *producers.values()])

    # Every attempt each producer made, on the queue it made it to, and nothing else: its successful sends as OK,
    # and each attempt its own send hook saw fail (a timeout on a loaded machine, retried by the client) as one
    # failed attempt on that queue.
    for line, producer in producers.items():
        mine = [event for key, event in published if key == producer.client_id]
        assert {(e["producer_group"], e["topic"], e["client_version"]) for e in mine} == {
            (f"agent_attached_p{line.replace('.', '')}", ATTACHED_TOPIC, VERSION_BY_LINE[line])
        }
        sent = Counter((s["broker"], s["queue_id"]) for s in producer.of_kind("send"))
        assert sum(sent.values()) == ATTACHED_SENDS
        assert Counter((e["broker"], e["queue_id"]) for e in mine if e["outcome"] == "OK") == sent
        failed = Counter((f["broker"], f["queue_id"]) for f in producer.of_kind("failed_attempt"))
        assert Counter((e["broker"], e["queue_id"]) for e in mine if e["outcome"] != "OK") == failed
    # Each consumer's latest report before the stop: exactly what it held.
    latest: dict[str, dict[str, frozenset[tuple[str, int]]]] = defaultdict(dict)
    for _, event in sorted(reported, key=lambda record: record[1]["event_time"]):
        if event["event_time"] <= settled_ms and event["group"] == "agent_attached_group":
            latest[event["client_id"]][event["topic"]] = frozenset(
                (q["broker"], q["queue_id"]) for q in event["queues"]
            )
    assert {client: {t: q for t, q in topics.items() if q} for client, topics in latest.items()} == own
