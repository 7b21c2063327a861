"""Two real RocketMQ clusters into one monitor job, judged by the real clients of each.

The tier's 5.3.3 and 4.9.7 clusters both have brokers ``broker-a`` and ``broker-b``; each gets the same topic name
and a group of the same name whose clients have the same client ids (one client IP, the same instance names), so
that nothing but the cluster tells them apart. The 5.3.3 cluster (``east``: 4 queues a broker, AVG) has two of
its three clients share an id, an incident of its own; the 4.9.7 cluster (``west``: 3 queues a broker,
AVG_BY_CIRCLE, its clients reporting through the client agent with ``cluster`` set) is healthy. One collector per
cluster, each configured with its cluster's name, publishes into the one job's topics; the job runs once. Every
row, metric series and episode of the group must be its own cluster's truth, as that cluster's clients print what
they hold. east also has a hidden consumer: a second group whose two processes share a client id but not a
strategy, both consuming more slowly than a producer writes, while east's collector samples consume progress.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from streaming.app.cli import main as cli_main
from streaming.contract.validator import Rejection, validate_event
from streaming.domain.progress.verdict import QueueState
from tests.rocketmq.test_monitor_e2e import CLIENT_PLACEHOLDER, CONNECTION_ROW, progress_rows, queue_details
from tests.support.agent_events import read_records
from tests.support.job import read, run_available
from tests.support.rocketmq_client import ClientProcess
from tests.support.rocketmq_e2e import (
    PROGRESS_INTERVAL_MS,
    Client,
    Fleet,
    PollLog,
    Reading,
    e2e_config,
    expected_by_client,
    held,
    real_by_client,
    start_collector,
    wait_converged,
    wait_progress_sample,
)
from tests.support.runbook import confirm_commands

pytestmark = pytest.mark.rocketmq

BROKERS = ("broker-a", "broker-b")
PREFIX = "two"
GROUP, TOPIC = f"{PREFIX}_g", f"{PREFIX}_topic"
CLIENT_IP = "192.0.2.9"  # every client's: equal instance names make equal client ids in both clusters
LINE = {"east": "5", "west": "4.9"}
QUEUES = {"east": 4, "west": 3}
# east's hidden consumer: one client id in two processes, AVG and AVG_BY_CIRCLE, each taking CONSUME_MS over a
# message while the producer writes PRODUCER_RATE a second round the topic's 8 queues (one every 400 ms a queue).
HIDDEN = f"{PREFIX}_hidden"
HIDDEN_STRATEGIES = ("AVG", "AVG_BY_CIRCLE")
CONSUME_MS = 1200
PRODUCER_RATE = 20
HIDDEN_SECTION = "RocketMQMonitorProgressHiddenConsumer"


@dataclass
class Side:
    """One cluster's part: its name, the cluster, its clients and its collector."""

    name: str
    cluster: Any
    fleet: Fleet
    clients: list[Client]
    collector: Any
    hidden: list[Client] = dataclasses.field(default_factory=list)  # east's hidden-consumer group


def client_specs(name: str, bootstrap: str, agent_topic: str) -> list[tuple]:
    """east: ``m0`` twice (one client id, a JVM each) and ``m1``, AVG; west: ``m0`` and ``m1``, AVG_BY_CIRCLE, with
    the client agent's reporter naming its cluster."""
    if name == "east":
        return [
            ("5", GROUP, TOPIC, member, {"client_ip": CLIENT_IP, "strategy": "AVG"}) for member in ("m0", "m0", "m1")
        ]
    agent = {
        "bootstrap.servers": bootstrap,
        "topic.reported.assignments": agent_topic,
        "report.interval.ms": "2000",
        "report.check.interval.ms": "200",
        "cluster": name,
    }
    options = {"client_ip": CLIENT_IP, "strategy": "AVG_BY_CIRCLE", "agent": agent}
    return [("4.9", GROUP, TOPIC, member, options) for member in ("m0", "m1")]


def hidden_specs() -> list[tuple]:
    """east's hidden-consumer group: ``h0`` twice (one client id, a JVM each), one AVG, one AVG_BY_CIRCLE, both
    slower than the producer writes each queue. Both compute the share of the id's first place in the list
    ``[h0, h0]``: AVG a0-a3, AVG_BY_CIRCLE a0 a2 b0 b2."""
    return [
        ("5", HIDDEN, TOPIC, "h0", {"client_ip": CLIENT_IP, "strategy": strategy, "consume_sleep_ms": CONSUME_MS})
        for strategy in HIDDEN_STRATEGIES
    ]


def wait_polled(
    polls: PollLog, cluster: str, clients: list[Client], after_ms: int, group: str = GROUP, timeout_s: float = 120
) -> None:
    """Until the cluster's collector has polled the group on both brokers after ``after_ms``, listing every client
    with its strategy (its running info read)."""
    ids = {c.client_id for c in clients}
    deadline = time.monotonic() + timeout_s
    while True:
        latest = {
            p["broker"]: p
            for p in polls.of(group)
            if p.get("cluster") == cluster and p["event_time"] > after_ms and p["connections"]
        }
        complete = {
            b
            for b, p in latest.items()
            if {c["client_id"] for c in p["connections"]} == ids
            and all(c.get("allocate_strategy") for c in p["connections"])
        }
        if complete == set(BROKERS):
            return
        assert time.monotonic() < deadline, f"{cluster}: no complete poll of {group} after {after_ms}: {latest}"
        time.sleep(1.0)


def wait_reported(bootstrap: str, topic: str, sides: dict[str, Side], after_ms: int, timeout_s: float = 90) -> None:
    """Until the collectors have published, per cluster, a running-info report of every client id taken after
    ``after_ms`` (the clients had settled then), so the job counts what they hold now."""
    wanted = {(name, c.client_id) for name, side in sides.items() for c in [*side.clients, *side.hidden]}
    deadline = time.monotonic() + timeout_s
    while True:
        seen = {
            (e.get("cluster"), e["client_id"])
            for headers, e in read_records(bootstrap, topic, timeout_s=10)
            if "rrm-agent-instance" not in headers and e["event_time"] > after_ms and e["topic"] == TOPIC
        }
        if wanted <= seen:
            return
        assert time.monotonic() < deadline, f"no report after {after_ms} of {sorted(wanted - seen)}"
        time.sleep(1.0)


def start_side(name: str, cluster: Any, config: Any, root: Path, bootstrap: str, agent_topic: str) -> Side:
    """The cluster's topic (its route listing every queue), its collector named ``name``, then its clients; on
    east also the hidden-consumer group, a producer and consume progress sampled every ``PROGRESS_INTERVAL_MS``."""
    cluster.create_topic(TOPIC, QUEUES[name])
    collector = dataclasses.replace(
        config.collector,
        namesrv_addr=cluster.namesrv_addr,
        cluster=name,
        collector_id=f"{PREFIX}-{name}",
        progress_interval_ms=PROGRESS_INTERVAL_MS if name == "east" else 0,
    )
    side = Side(name, cluster, Fleet(cluster.namesrv_addr, root / f"clients-{name}"), [], None)
    side.collector = start_collector(dataclasses.replace(config, collector=collector), root / f"collector-{name}")
    producer = None
    if name == "east":  # started with the consumers
        producer = ClientProcess(
            "5",
            "producer",
            root / "producer-east",
            namesrv=cluster.namesrv_addr,
            group=f"{PREFIX}_producer",
            topic=TOPIC,
            rate=PRODUCER_RATE,
        )
        side.fleet.clients.append(producer)
        producer.launch()
    specs = client_specs(name, bootstrap, agent_topic)
    clients = side.fleet.consumers(specs + (hidden_specs() if name == "east" else []))
    side.clients, side.hidden = clients[: len(specs)], clients[len(specs) :]
    if producer is not None:
        producer.wait_started(60)
    return side


def run_hidden_section(east: Side) -> tuple[int, dict[str, str]]:
    """The hidden-consumer section's mqadmin commands on east's hidden group while it lasts, all at once: when they
    started, and what each printed by its verb."""
    (client_id,) = {c.client_id for c in east.hidden}
    commands = [
        [HIDDEN if w == "G" else w for w in CLIENT_PLACEHOLDER.sub(client_id, c).split()[1:]]
        for c in confirm_commands(HIDDEN_SECTION)
        if c.startswith("mqadmin ")
    ]
    started_ms = int(time.time() * 1000)
    printed = in_parallel(*(partial(east.cluster.mqadmin, *words) for words in commands))
    return started_ms, {words[0]: out for words, out in zip(commands, printed, strict=True)}


def in_parallel(*calls: Callable[[], Any]) -> list[Any]:
    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        return [f.result() for f in [pool.submit(call) for call in calls]]


@pytest.fixture(scope="module")
def two_clusters(kafka_broker, rocketmq_clusters, spark, tmp_path_factory) -> Iterator[dict[str, Any]]:
    """Both clusters' clients settled and polled by their cluster's collector, then the one job once (the
    collectors stopped first: everything they saw is in Kafka); each side's clients as they were then, the
    tables, the agent's reports."""
    root: Path = tmp_path_factory.mktemp(PREFIX)
    bootstrap = kafka_broker.bootstrap_servers
    east, west = rocketmq_clusters("5"), rocketmq_clusters("4.9")
    # No consume progress: the groups' queues and members are the subject.
    config, topics = e2e_config(bootstrap, root, PREFIX, east.namesrv_addr, RRM__COLLECTOR__PROGRESS_INTERVAL_MS="0")
    polls = PollLog(bootstrap, topics["consumer_connections"])
    sides: dict[str, Side] = {}
    try:
        for side in in_parallel(
            *(
                partial(start_side, name, cluster, config, root, bootstrap, topics["reported_assignment"])
                for name, cluster in (("east", east), ("west", west))
            )
        ):
            sides[side.name] = side
        east = sides["east"]
        everyone = [c for side in sides.values() for c in side.clients] + east.hidden
        holdings = iter(wait_converged(everyone, TOPIC))  # one quiet period for all
        settled = {name: tuple(next(holdings) for _ in side.clients) for name, side in sides.items()}
        settled["hidden"] = tuple(holdings)
        settled_ms = int(time.time() * 1000)
        for name, side in sides.items():
            wait_polled(polls, name, side.clients, settled_ms)
        wait_polled(polls, "east", east.hidden, settled_ms, group=HIDDEN)
        wait_reported(bootstrap, topics["reported_assignment"], sides, settled_ms)
        # The hidden queues' last orphan_samples samples all taken after the reports (no holder counted in any),
        # while the hidden section's mqadmin commands run.
        last_after = int(time.time() * 1000) + (config.progress.orphan_samples - 1) * PROGRESS_INTERVAL_MS
        runbook, _ = in_parallel(
            partial(run_hidden_section, east),
            partial(wait_progress_sample, bootstrap, topics["consume_progress"], [HIDDEN], BROKERS, last_after),
        )
        in_parallel(*(side.collector.stop for side in sides.values()))
        job = run_available(spark, config)
        for name, side in sides.items():
            assert tuple(held(c, TOPIC) for c in side.clients) == settled[name], f"{name}: a client moved"
            side.clients = [Reading.of(c) for c in side.clients]
        assert tuple(held(c, TOPIC) for c in east.hidden) == settled["hidden"], "hidden: a client moved"
        east.hidden = [Reading.of(c) for c in east.hidden]
        tables = {
            t: [r for r in read(spark, config, t) if r.get("group") == GROUP]
            for t in ("current_assignment", "queue_holders_current", "group_status_current", "anomaly_episodes")
        }
        hidden_tables = {
            t: [r for r in read(spark, config, t) if r.get("group") == HIDDEN and r["topic"] == TOPIC]
            for t in ("queue_holders_current", "consume_progress")
        }
        agent_reports = [
            e
            for headers, e in read_records(bootstrap, topics["reported_assignment"])
            if "rrm-agent-instance" in headers
        ]
        series = {
            name: {k: v for k, v in job.metrics.gauges[name].items() if k[1] == GROUP}
            for name in ("rmqmon_group_members", "rmqmon_group_channels", "rmqmon_group_duplicate_client_ids")
        }
        yield {
            "sides": sides,
            "tables": tables,
            "agent_reports": agent_reports,
            "series": series,
            "hidden": {"tables": hidden_tables, "runbook": runbook, "delta_root": str(config.paths.delta_root)},
        }
    finally:
        in_parallel(*(side.fleet.stop for side in sides.values()), *(side.collector.stop for side in sides.values()))
        polls.close()


def queues_of(name: str) -> set[tuple[str, int]]:
    """The topic's queues on the cluster: ``create_topic`` waited until its route listed each of them."""
    return {(broker, q) for broker in BROKERS for q in range(QUEUES[name])}


def by_cluster(rows: list[dict], name: str) -> list[dict]:
    return [r for r in rows if r["cluster"] == name]


def test_each_cluster_s_rows_are_what_its_own_clients_hold(two_clusters):
    """Same broker, group, topic names and client ids in both clusters: the job's current assignment and queue
    holders of each cluster are that cluster's clients' own holdings, over that cluster's queues only."""
    sides, tables = two_clusters["sides"], two_clusters["tables"]
    for table, rows in tables.items():
        # Both clusters' rows where both have the group; no row of a third (a default one, say) anywhere.
        assert {r["cluster"] for r in rows} == {"east", "west"} or table == "anomaly_episodes", table
        assert {r["cluster"] for r in rows} <= {"east", "west"}, table
    for name, side in sides.items():
        queues = queues_of(name)
        expected = expected_by_client(by_cluster(tables["current_assignment"], name), GROUP, TOPIC)
        assert expected == real_by_client(side.clients, TOPIC), name
        holders = {
            (r["broker"], r["queue_id"]): set(r["holders"])
            for r in by_cluster(tables["queue_holders_current"], name)
            if r["topic"] == TOPIC
        }
        real = {q: {c.client_id for c in side.clients if q in held(c, TOPIC)} for q in queues}
        assert holders == real, name


def test_the_duplicate_client_id_of_one_cluster_is_that_cluster_s_alone(two_clusters):
    """east's two processes with one client id are east's duplicate (and its unheld share east's orphans); west,
    whose clients have the very same ids once each, has none of it."""
    sides, tables = two_clusters["sides"], two_clusters["tables"]
    east_ids = [c.client_id for c in sides["east"].clients]
    assert east_ids[0] == east_ids[1] != east_ids[2] and {c.client_id for c in sides["west"].clients} == set(east_ids)
    (east_status,) = by_cluster(tables["group_status_current"], "east")
    (west_status,) = by_cluster(tables["group_status_current"], "west")
    # Each cluster's members and channels as its brokers list them: east 2 ids on 3 channels, one id twice.
    assert (east_status["members"], east_status["channels"], east_status["duplicate_client_ids"]) == (2, 3, 1)
    assert (west_status["members"], west_status["channels"], west_status["duplicate_client_ids"]) == (2, 2, 0)
    duplicates = [r for r in tables["anomaly_episodes"] if r["anomaly"] == "DUPLICATE_CLIENT_ID"]
    assert duplicates and {r["cluster"] for r in duplicates} == {"east"}
    named = [set(json.loads(r["details"])["client_ids"]) for r in duplicates if r["details"]]
    assert named and all(ids == {east_ids[0]} for ids in named), named
    episodes = {(r["cluster"], r["anomaly"]) for r in tables["anomaly_episodes"]}
    assert ("east", "DUPLICATE_CLIENT_ID") in episodes
    unheld = queues_of("east") - {q for c in sides["east"].clients for q in held(c, TOPIC)}
    assert unheld, "east's clients left no queue unheld: the incident did not happen"
    assert ("east", "ORPHANED_QUEUES") in episodes
    west_incidents = {a for c, a in episodes if c == "west"} & {
        "DUPLICATE_CLIENT_ID",
        "ORPHANED_QUEUES",
        "DOUBLE_OWNED_QUEUES",
    }
    assert west_incidents == set()


def test_the_agent_names_its_cluster_and_reports_what_each_client_holds(two_clusters):
    """west's clients report through the agent with ``cluster`` set: version 2 events naming west, valid by the
    contract, the latest of each client what it holds."""
    west = two_clusters["sides"]["west"]
    reports = [e for e in two_clusters["agent_reports"] if e["topic"] == TOPIC]
    assert reports
    latest: dict[str, dict] = {}
    for event in reports:
        assert not isinstance(validate_event(json.dumps(event).encode()), Rejection), event
        assert (event["schema_version"], event["cluster"]) == (2, "west"), event
        if event["event_time"] >= latest.get(event["client_id"], {"event_time": -1})["event_time"]:
            latest[event["client_id"]] = event
    assert {i: {(q["broker"], q["queue_id"]) for q in e["queues"]} for i, e in latest.items()} == {
        c.client_id: set(held(c, TOPIC)) for c in west.clients
    }


def test_each_cluster_s_group_is_its_own_metric_series(two_clusters):
    """The group's series are one per cluster, each with its own brokers' members, channels and duplicate ids:
    east's duplicated client id (two channels) shows in east's series only."""
    series = two_clusters["series"]
    assert series["rmqmon_group_members"] == {("east", GROUP): 2, ("west", GROUP): 2}
    assert series["rmqmon_group_channels"] == {("east", GROUP): 3, ("west", GROUP): 2}
    assert series["rmqmon_group_duplicate_client_ids"] == {("east", GROUP): 1, ("west", GROUP): 0}


def test_a_twin_holding_queues_its_id_s_running_info_does_not_is_a_hidden_consumer(two_clusters, capsys):
    """east's hidden group: one client id in two processes that compute different shares (AVG and AVG_BY_CIRCLE).
    A broker relays a running-info request for the id to one of its channels, so the collector reads one twin's
    queues (the monitor's holders are exactly one twin's own held queues) and the other twin's remaining queues
    are in no report, while that twin commits on them: HIDDEN_CONSUMER at exactly those queues, as the section's
    query names them. RocketMQ's own tools show the same: consumerConnection lists the id at two addresses,
    consumerStatus one twin's queues, and consumerProgress the other twin's remaining queues with Client IP N/A,
    a Diff, and a consumer offset past the one the brokers answered the collector before."""
    hidden = two_clusters["hidden"]
    twins = two_clusters["sides"]["east"].hidden
    (client_id,) = {c.client_id for c in twins}
    shares = [held(c, TOPIC) for c in twins]
    assert shares[0] != shares[1] and all(shares), shares

    # The monitor: its holders of the id are the queues of the twin the collector's request reached.
    reported = {
        (r["broker"], r["queue_id"]) for r in hidden["tables"]["queue_holders_current"] if client_id in r["holders"]
    }
    (reached,) = [i for i, share in enumerate(shares) if share == reported]
    unseen = shares[1 - reached] - reported
    assert unseen, shares
    # Each queue's state at the last progress sample the collector took (the job ran after it stopped, and a
    # queue whose samples stopped for a window is no longer current: the section's query asks for that moment).
    samples = sorted(hidden["tables"]["consume_progress"], key=lambda r: r["event_time_ms"])
    states = {(r["broker"], r["queue_id"]): r["state"] for r in samples}
    assert {q for q, state in states.items() if state == QueueState.HIDDEN_CONSUMER} == unseen, states
    last_sample_ms = samples[-1]["event_time_ms"]
    commands = [c for c in confirm_commands(HIDDEN_SECTION) if c.startswith("query ")]
    assert commands, "the hidden-consumer section names no query"
    for command in commands:
        words = [HIDDEN if w == "G" else w for w in shlex.split(command)] + ["--at", str(last_sample_ms)]
        code = cli_main([*words, "--delta-root", hidden["delta_root"], "--json"])
        rows = json.loads(capsys.readouterr().out)
        assert code == 0 and {(r["cluster"], r["topic"]) for r in rows} == {("east", TOPIC)}, (command, rows)
        assert {(r["broker"], r["queue_id"]) for r in rows} == unseen, (command, rows)

    # RocketMQ's own tools, run while it lasted; the brokers' consumer offsets the collector read before them.
    started_ms, ran = hidden["runbook"]
    before = {(r["broker"], r["queue_id"]): r["consumer_offset"] for r in samples if r["event_time_ms"] < started_ms}
    addresses = [
        address for client, address in CONNECTION_ROW.findall(ran["consumerConnection"]) if client == client_id
    ]
    assert len(set(addresses)) == 2, ran["consumerConnection"]
    (relayed,) = [i for i, share in enumerate(shares) if set(queue_details(ran["consumerStatus"], TOPIC)) == share]
    rows = progress_rows(ran["consumerProgress"], TOPIC)
    moving_unheld = {q for q, row in rows.items() if row[2] == "N/A" and row[3] > 0 and row[1] > (before.get(q) or 0)}
    assert moving_unheld == shares[1 - relayed] - shares[relayed], (rows, before)
