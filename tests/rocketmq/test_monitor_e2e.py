"""The monitor end to end on a real cluster, judged by the real clients.

Real push consumers (client lines 4.9.8 and 5.3.3; several independent clients per JVM, a JVM of its own for a
client a test signals or whose client id another shares) consume from the local cluster; the collector
polls the brokers' connection lists into the project's Kafka; the monitor's real job reads them into Delta.
What each client holds (its own process-queue table, printed by the client) is the expected answer: the
monitor's expected assignment must equal it client by client, its orphaned queues must be exactly the queues
no client holds, and departures and outages must show as the brokers saw them. Consume progress (sampled every 2 s
while a producer writes) is judged by the brokers' own offsets, read through the admin API, and by what the
clients print: orphaned queues, a killed group and its offsets reset, POP and BROADCASTING groups, queues two
clients on different strategies both consume, a listener slower than its producer. The scenarios of a cluster
line, each in groups of its own, are played together and judged from one run of the job (``played``); the
outages, which stop the collector and a broker under every group, have a run of their own.
"""

from __future__ import annotations

import json
import re
import shlex
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from connectors.job_health import JobAlert
from dashboards.alerts import PROGRESS_ALERTS
from localenv.rocketmq_cluster import TEST_SPEED
from streaming.app.cli import main as cli_main
from streaming.domain.anomaly_catalogue import CATALOGUE
from streaming.domain.consumers.episodes import StormDetector
from streaming.domain.progress.verdict import QueueState
from streaming.domain.vocabulary import AnomalyKind
from tests.support.agent_events import read_records
from tests.support.job import read, run_available
from tests.support.rocketmq_client import ClientProcess
from tests.support.rocketmq_e2e import (
    PROGRESS_INTERVAL_MS,
    PROGRESS_WINDOW,
    Client,
    Fleet,
    PollLog,
    Queue,
    Reading,
    all_queues,
    e2e_config,
    expected_by_client,
    held,
    holdings,
    real_by_client,
    start_collector,
    wait_all_converged,
    wait_progress_sample,
)
from tests.support.runbook import confirm_commands

pytestmark = pytest.mark.rocketmq

BROKERS = ("broker-a", "broker-b")
STRATEGIES = ("AVG", "AVG_BY_CIRCLE", "CONSISTENT_HASH")
REMOVALS = ("LEAVE", "EXPIRED", "VANISHED")
# The ownsub group's member without the second topic: its heartbeat interval (the other's is the test speed's).
OWNSUB_FIRST_HEARTBEAT_MS = 2_000
# Admin and mqadmin commands run at once (``run_sections``, the play's topics): JVMs, mostly starting up.
MQADMIN_AT_ONCE = 3


class Run:
    """A cluster, consumers, a collector and job tables (their own Kafka topics and groups)."""

    def __init__(self, cluster, bootstrap: str, root: Path, prefix: str) -> None:
        self.cluster, self.prefix, self.root, self.bootstrap = cluster, prefix, root, bootstrap
        self.config, self.topics = e2e_config(
            bootstrap,
            root,
            prefix,
            cluster.namesrv_addr,
            RRM__ALLOCATION__GROUPS=nearby_rule(prefix),
            RRM__PROGRESS__SLOW_TIME_LAG_S=str(SLOW_TIME_LAG_S),
        )
        self.fleet = Fleet(cluster.namesrv_addr, root / "clients")
        self.polls = PollLog(bootstrap, self.topics["consumer_connections"])
        self.collector = start_collector(self.config, root / "collector")
        self.topic = f"{prefix}_topic"
        cluster.create_topic(self.topic, 4)
        self.queues = all_queues(cluster.route(self.topic))

    def group(self, name: str) -> str:
        return f"{self.prefix}_{name}"

    def settle(self, groups: dict[str, list], brokers=BROKERS) -> dict[str, tuple]:
        """Wait until every group's clients hold steady (together: one quiet period for all) and the collector has
        polled each group on each broker since this call, strategies included; each group's holdings. Every client
        has started (and so sent its heartbeat to both brokers) or left before the call, so those polls list the
        membership the clients settle on."""
        return self.settle_apart(groups, {}, brokers)[0]

    def settle_apart(
        self, groups: dict[str, list], apart: dict[str, tuple[list, str]], brokers=BROKERS
    ) -> tuple[dict[str, tuple], dict[str, tuple]]:
        """``settle`` of ``groups`` and, in the same quiet period, of the groups ``apart`` on topics of their own
        (name: (clients, topic)), polled on broker-a since this call: each one's holdings of its own topic."""
        called_ms = int(time.time() * 1000)
        everyone = [client for clients in groups.values() for client in clients]
        together, *held_apart = wait_all_converged([(everyone, self.topic), *apart.values()])
        holdings = iter(together)
        settled = {g: tuple(next(holdings) for _ in clients) for g, clients in groups.items()}
        self.polls.wait(groups, brokers, after_ms=called_ms)
        self.polls.wait(apart, BROKERS[:1], after_ms=called_ms)
        return settled, dict(zip(apart, held_apart, strict=True))

    def process(self, spark) -> None:
        run_available(spark, self.config)

    def read(self, spark, table: str, group: str | None = None) -> list[dict]:
        rows = read(spark, self.config, table)
        return rows if group is None else [r for r in rows if r["group"] == group]

    def close(self) -> None:
        self.fleet.stop()
        self.collector.stop()
        self.polls.close()


def polled_tables(run: Run, group: str) -> list[set[str]]:
    """The group's subscription tables as the collector polled them while both members were connected."""
    return [{s["topic"] for s in p["subscriptions"]} for p in run.polls.of(group) if len(p["connections"]) == 2]


@dataclass
class Played:
    """A line's scenarios after the job's one run: each group's clients (read when the job had run), their holdings
    once settled, and what the scenarios saw on the way (``seen``, by name)."""

    run: Run
    clients: dict[str, list[Client]] = field(default_factory=dict)
    settled: dict[str, tuple] = field(default_factory=dict)
    seen: dict[str, Any] = field(default_factory=dict)


def assignment_specs(run: Run, line: str) -> list[tuple]:
    """Three clients of the line for every strategy; on 5.x also a BROADCASTING group, on 4.9.7 a group mixing a
    4.9.8 and a 5.3.3 client."""
    specs = [
        (line, run.group(s.lower()), run.topic, f"{s.lower()}-{i}", {"strategy": s})
        for s in STRATEGIES
        for i in range(3)
    ]
    if line == "5":
        return specs + [
            (line, run.group("broadcast"), run.topic, f"broadcast-{i}", {"model": "BROADCASTING"}) for i in range(2)
        ]
    return specs + [
        (client_line, run.group("mixed"), run.topic, f"mixed-{client_line}", {}) for client_line in ("4.9", "5")
    ]


# Rooms of the machine-room-nearby group: a and b, in broker names (broker-a) and the clients' instance names.
NEARBY_ROOMS = "(?:broker|nearby)-([ab])"


def nearby_rule(prefix: str) -> str:
    """The ``[[allocation.groups]]`` rule of the nearby group: what its clients' running info cannot show (the
    inner strategy and the rooms), as a user configures it."""
    return (
        f'[{{group = "{prefix}_nearby", strategy = "MACHINE_ROOM_NEARBY-AVG", '
        f"machine_room_regex = '{NEARBY_ROOMS}'}}]"
    )


def nearby_specs(run: Run) -> list[tuple]:
    """Three AllocateMachineRoomNearby (AVG inside) clients: two in room a, one in room b."""
    options = {"strategy": "MACHINE_ROOM_NEARBY", "machine_room_regex": NEARBY_ROOMS}
    return [("5", run.group("nearby"), run.topic, name, options) for name in ("nearby-a-0", "nearby-a-1", "nearby-b-0")]


def duplicate_specs(run: Run) -> list[tuple]:
    """Two clients sharing a client id (same instance name and client IP) and a third, with the agent's reporter."""
    agent = {
        "bootstrap.servers": run.bootstrap,
        "topic.reported.assignments": run.topics["reported_assignment"],
        "report.interval.ms": "2000",
        "report.check.interval.ms": "200",
    }
    return [
        ("5", run.group("circle_dup"), run.topic, name, {"client_ip": ip, "agent": agent, "strategy": "AVG_BY_CIRCLE"})
        for name, ip in (("twin", "192.0.2.7"), ("twin", "192.0.2.7"), ("other", None))
    ]


def departure_specs(run: Run) -> list[tuple]:
    """Four clients of which two depart (SIGKILL, SIGTERM), three of which one is frozen; a JVM each for those."""
    signalled = {"departing-0", "departing-1", "frozen-0"}
    return [
        ("5", run.group("departing"), run.topic, f"departing-{i}", {"own_process": f"departing-{i}" in signalled})
        for i in range(4)
    ] + [
        ("5", run.group("frozen"), run.topic, f"frozen-{i}", {"own_process": f"frozen-{i}" in signalled})
        for i in range(3)
    ]


def play(run: Run, line: str, spark) -> Played:
    """Start every scenario's clients at once, let them settle, play what each does after that, then run the job."""
    played = Played(run)
    specs = assignment_specs(run, line)
    pop_topic, second = f"{run.prefix}_pop", f"{run.prefix}_second"
    early: threading.Thread | None = None
    if line == "5":
        # The double and slow groups first (their sections run last, once the double holding lasted the alert's
        # ``for``), starting while the other topics are created.
        run.cluster.create_topic(lasting_topic(run), 2)
        lasting = double_specs(run) + slow_specs(run)
        early = threading.Thread(target=start_lasting, args=(played, lasting), name="lasting")
        early.start()
        topics = [(t, 4, BROKERS) for t in (pop_topic, second, idle_topic(run))]
        topics += [(stale_topic(run), 2, BROKERS[:1]), (diverge_topic(run), 2, BROKERS[:1])]
        with ThreadPoolExecutor(MQADMIN_AT_ONCE) as pool:  # admin JVMs side by side
            list(pool.map(lambda topic: run.cluster.create_topic(*topic), topics))
        played.seen["second_queues"] = all_queues(run.cluster.route(second))
        run.cluster.set_pop_mode(pop_topic, run.group("pop"))
        specs += duplicate_specs(run) + departure_specs(run)
        specs += [("5", run.group("pop"), pop_topic, f"pop-{i}", {"client_rebalance": False}) for i in range(2)]
        # The member without the second topic heartbeats more often than the other: the brokers' table, which each
        # heartbeat overwrites, then lacks the topic between its heartbeat and the other's, and that gap drifts
        # through the collector's polls (at equal intervals it can stay too short for any poll to see).
        specs += [
            ("5", run.group("ownsub"), run.topic, "first-only", {"heartbeat_ms": OWNSUB_FIRST_HEARTBEAT_MS}),
            ("5", run.group("ownsub"), f"{run.topic},{second}", "both", {}),
        ]
        specs += progress_specs(run) + nearby_specs(run) + stale_specs(run) + flapping_specs(run)
        specs += diverge_specs(run)
    started = time.time()
    for (_, group, *_), client in zip(specs, run.fleet.consumers(specs), strict=True):
        played.clients.setdefault(group, []).append(client)
    played.seen["started"] = (started, time.time())
    # The flapping group's members come and go on purpose: kept apart from the groups judged as settled.
    played.seen["flapping"] = played.clients.pop(run.group("flapping"), [])
    if line == "5":
        played.seen["producer"] = start_producer(run, f"{run.topic},{pop_topic}")
    if early is not None:
        early.join()
        if isinstance(played.seen.get("lasting_error"), BaseException):
            raise played.seen["lasting_error"]
    # The stale-route and diverging groups' topics are on broker-a only: their clients know no other broker (settled
    # apart, with the groups on other topics than the run's, in the others' quiet period).
    apart = (run.group("pop"), run.group("stale"), run.group("diverge"))
    pullers = {g: c for g, c in played.clients.items() if g not in apart}
    on_own_topics = {}
    if line == "5":
        on_own_topics = {
            run.group(name): (played.clients[run.group(name)], topic)
            for name, topic in (
                ("ownsub", second),
                ("slow", lasting_topic(run)),
                ("idle", idle_topic(run)),
                ("stale", stale_topic(run)),
                ("diverge", diverge_topic(run)),
            )
        }
    played.settled, settled_apart = run.settle_apart(pullers, on_own_topics)
    if line == "5":
        played.seen["idle_settled"] = settled_apart[run.group("idle")]
    played.seen["settled_at"] = int(time.time() * 1000)
    if line == "5":
        played.seen["reports"] = reports_by_process(run, played.clients[run.group("circle_dup")])
        flapping = threading.Thread(target=play_flapping, args=(played,), name="flapping")
        flapping.start()  # beside the stale-route play, which waits for the slow client's route read
        play_diverging_route(played)
        play_stale_route(played)
        flapping.join()
        if isinstance(played.seen.get("flapping_error"), BaseException):
            raise played.seen["flapping_error"]
        play_orphans(played)
        play_own_subscription(played, second)
        play_pop(played, pop_topic)
        play_stuck(played)
        play_departures(played)
        play_producer_stop(played)
        play_runbook(played)
    run.process(spark)
    # The tests judge what each client held once the job had run; the clients and the collector can stop now, so
    # that the line's other tests (a broker stopped under the outage test) cannot change it.
    played.clients = {group: [Reading.of(c) for c in clients] for group, clients in played.clients.items()}
    run.fleet.stop()
    run.collector.stop()
    return played


def start_lasting(played: Played, specs: list[tuple]) -> None:
    """Start the double and slow groups' clients and the lasting topic's producer (to the end: the fleet stops
    it); an error in ``seen["lasting_error"]``."""
    run = played.run
    try:
        for (_, group, *_), client in zip(specs, run.fleet.consumers(specs), strict=True):
            played.clients.setdefault(group, []).append(client)
        start_producer(run, lasting_topic(run), "lasting")
    except BaseException as error:  # noqa: BLE001 - raised again by the play
        played.seen["lasting_error"] = error


# The stuck group's first consumer blocks its listener for good on the message it receives this many-th.
STUCK_ON_MESSAGE = 20


def progress_specs(run: Run) -> list[tuple]:
    """A group of one consumer in a JVM of its own, SIGKILLed with the departures; a group of two whose first
    consumer blocks its listener on one message (``STUCK_ON_MESSAGE``) and consumes the rest; a group of two on
    a topic nothing is sent to."""
    return [
        ("5", run.group("offline"), run.topic, "offline-0", {"own_process": True}),
        ("5", run.group("stuck"), run.topic, "stuck-0", {"block_on_message": STUCK_ON_MESSAGE}),
        ("5", run.group("stuck"), run.topic, "stuck-1", {}),
    ] + [("5", run.group("idle"), idle_topic(run), f"idle-{i}", {}) for i in range(2)]


def idle_topic(run: Run) -> str:
    """The idle group's topic: nothing is ever sent to it."""
    return f"{run.prefix}_idle"


# Messages a second the producer writes to each of its topics.
PRODUCED_PER_TOPIC_S = 10


def start_producer(run: Run, topics: str, name: str = "producer") -> ClientProcess:
    """A producer writing to ``topics`` in turn (``PRODUCED_PER_TOPIC_S`` messages a second to each) until it is
    stopped (``play_producer_stop``, or the fleet's stop)."""
    producer = ClientProcess(
        "5",
        "producer",
        run.root / name,
        namesrv=run.cluster.namesrv_addr,
        group=run.group(name),
        topic=topics,
        rate=PRODUCED_PER_TOPIC_S * len(topics.split(",")),
    )
    run.fleet.clients.append(producer)
    producer.start()
    return producer


def admin_progress(run: Run, groups: list[str]) -> dict[str, dict[str, list[dict]]]:
    """The brokers' own consume stats of ``groups`` now, through the admin API."""
    with run.cluster.consume_progress(*sorted(set(groups))) as reader:
        return reader.read()


def play_orphans(played: Played) -> None:
    """The duplicate-id group's queues nobody holds get the offset a former holder would have committed (the
    queue's max offset then, through the admin API: a never-held queue has no offset, and no orphan is confirmed
    of it)."""
    run = played.run
    clients = played.clients[run.group("circle_dup")]
    unheld = run.queues - {q for c in clients for q in held(c, run.topic)}
    played.seen["orphan_commits"] = run.cluster.commit_offsets(run.group("circle_dup"), run.topic, unheld)


def play_producer_stop(played: Played) -> None:
    """Stop the producer (the lasting one writes on), wait for a progress sample of every group taken after that on
    both brokers, then read the brokers' consume stats (the judge of the lags: with no sends and no holder, nothing
    moves after the stop) and the connections of the offline group."""
    run = played.run
    producer = played.seen.pop("producer")
    producer.terminate()
    producer.wait_exit(60)
    stopped_at = played.seen["producer_stopped_at"] = int(time.time() * 1000)
    groups = [run.group(g) for g in ("circle_dup", "offline", "pop", "stuck", "idle", "slow", "broadcast")]
    wait_progress_sample(run.bootstrap, run.topics["consume_progress"], groups[:6], BROKERS, stopped_at)
    played.seen["admin_progress"] = admin_progress(run, groups)
    played.seen["offline_listed"] = {
        broker: run.cluster.connections(run.group("offline"), broker) for broker in BROKERS
    }
    played.seen["stuck_listed"] = {broker: run.cluster.connections(run.group("stuck"), broker) for broker in BROKERS}


# The runbook sections whose commands are checked on the real cluster, with the scenario group each is about.
def alert_of(kind: AnomalyKind) -> str:
    name = CATALOGUE[kind].alert_name
    assert name is not None, f"{kind} has no alert"
    return name


RUNBOOK_CHECKED = {
    alert_of(AnomalyKind.ORPHANED_QUEUES): "circle_dup",
    alert_of(AnomalyKind.DOUBLE_OWNED_QUEUES): "circle_dup",
    alert_of(AnomalyKind.DUPLICATE_CLIENT_ID): "circle_dup",
    alert_of(AnomalyKind.INCONSISTENT_SUBSCRIPTION): "ownsub",
    alert_of(AnomalyKind.OFFLINE_GROUP_BACKLOG): "offline",
    PROGRESS_ALERTS[QueueState.ORPHAN_CONFIRMED].name: "circle_dup",
    PROGRESS_ALERTS[QueueState.STUCK_HOLDER].name: "stuck",
    PROGRESS_ALERTS[QueueState.REWIND].name: "offline",
}
# A client id a runbook command names (``-i``): the one to look at; a broker address (``-b``): each broker's.
CLIENT_PLACEHOLDER = re.compile(r"<[^>]+>|CLIENT_ID")
BROKER_PLACEHOLDER = "BROKER_ADDR"


def runbook_clients(played: Played, name: str) -> list[str]:
    """The clients whose running info a runbook command of scenario ``name`` reads: the duplicated id (whose
    share the orphaned queues are), each member of the inconsistent subscription, the stuck holder, both clients of
    the stale route, the diverging group's slow client (the one holding another share than it should)."""
    clients = played.clients[played.run.group(name)]
    if name == "circle_dup":
        ids = [c.client_id for c in clients]
        return sorted({i for i in ids if ids.count(i) > 1})
    if name == "diverge":
        return [clients[1].client_id]
    return [c.client_id for c in clients[: 1 if name == "stuck" else None]]


# Checked while their incident lasts, within its play, rather than with the others once the producer stopped.
RUNBOOK_DURING = {
    alert_of(AnomalyKind.OBSERVED_UNHELD_QUEUES): "stale",
    alert_of(AnomalyKind.OBSERVED_DOUBLE_HOLDING): "stale",
    alert_of(AnomalyKind.FLAPPING_MEMBERS): "flapping",
    alert_of(AnomalyKind.REBALANCE_STORM): "flapping",
    alert_of(AnomalyKind.DIVERGING_BROKER_VIEWS): "diverge",
    alert_of(AnomalyKind.ASSIGNMENT_MISMATCH): "diverge",
}
# Checked at the ends of the others' run (their incidents last to the end: the lasting producer writes on).
RUNBOOK_LASTING = {
    PROGRESS_ALERTS[QueueState.DOUBLE_OWNED].name: "double",
    PROGRESS_ALERTS[QueueState.SLOW].name: "slow",
}
RUNBOOK_CHECKED |= RUNBOOK_DURING | RUNBOOK_LASTING


def run_sections(played: Played, headings: list[str], name: str, moment: str = "") -> None:
    """Run the runbook sections' mqadmin commands for scenario ``name``'s group, each distinct command once (the
    sections share its output): their output by (section, command, subject) in ``seen["runbook"]``, the subject a
    client id (``-i``), a broker name (``-b``), or for a command naming neither ``moment``."""
    run_asked(played, section_commands(played, headings, name, moment))


def section_commands(
    played: Played, headings: list[str], name: str, moment: str = ""
) -> dict[tuple[str, str, str], tuple[str, ...]]:
    """``run_sections``' mqadmin arguments by (section, command, subject)."""
    run = played.run
    asked: dict[tuple[str, str, str], tuple[str, ...]] = {}
    for heading in headings:
        for command in confirm_commands(heading):
            if not command.startswith("mqadmin "):
                continue
            words = CLIENT_PLACEHOLDER.sub("{client}", command).split()[1:]
            words = [run.group(name) if w == "G" else w for w in words]
            if "{client}" in words:
                subjects = {c: {"{client}": c} for c in runbook_clients(played, name)}
            elif BROKER_PLACEHOLDER in words:
                subjects = {b: {BROKER_PLACEHOLDER: run.cluster.broker_addr(b)} for b in BROKERS}
            else:
                subjects = {moment: {}}
            for subject, values in subjects.items():
                asked[(heading, command, subject)] = tuple(values.get(w, w) for w in words)
    return asked


def run_asked(played: Played, asked: dict[tuple[str, str, str], tuple[str, ...]]) -> None:
    """Each distinct command of ``asked`` once, ``MQADMIN_AT_ONCE`` side by side (each is a JVM of its own, mostly
    starting up); the outputs into ``seen["runbook"]``."""
    distinct = sorted(set(asked.values()))
    with ThreadPoolExecutor(MQADMIN_AT_ONCE) as pool:
        ran = dict(zip(distinct, pool.map(lambda args: played.run.cluster.mqadmin(*args), distinct), strict=True))
    played.seen.setdefault("runbook", {}).update({key: ran[args] for key, args in asked.items()})


def play_runbook(played: Played) -> None:
    """Run each checked runbook section's mqadmin commands for its scenario's group while the incidents are live
    (the clients still hold what they hold, the first producer stopped, the lasting one writing): the slow
    section's before and after the others (``seen["slow_checked"]``, by moment), the double-owned one's last."""
    slow = PROGRESS_ALERTS[QueueState.SLOW].name
    checked = played.seen["slow_checked"] = {"first": int(time.time() * 1000)}
    asked = section_commands(played, [slow], "slow", "first")
    by_name: dict[str, list[str]] = {}
    for heading, name in RUNBOOK_CHECKED.items():
        if heading not in RUNBOOK_DURING and heading not in RUNBOOK_LASTING:
            by_name.setdefault(name, []).append(heading)
    for name, headings in by_name.items():
        asked |= section_commands(played, headings, name)
    run_asked(played, asked)
    check_double_owned(played)
    checked["second"] = int(time.time() * 1000)
    run_sections(played, [slow], "slow", "second")


def play_stuck(played: Played) -> None:
    """Wait for the stuck group's first consumer to block on a message while the producer writes (the line it prints
    names the queue and offset), then for the job's window to see the queue's offset stand still behind new
    messages: ``PROGRESS_WINDOW`` samples and one more. Meanwhile the diverging group's sections run (its incident
    lasts to the end)."""
    blocked_by = played.clients[played.run.group("stuck")][0]
    played.seen["blocked"] = blocked_by.wait_for(lambda line: line["kind"] == "blocked", 120)
    window_seen = time.monotonic() + (PROGRESS_WINDOW + 1) * PROGRESS_INTERVAL_MS / 1000
    diverging = [alert_of(AnomalyKind.DIVERGING_BROKER_VIEWS), alert_of(AnomalyKind.ASSIGNMENT_MISMATCH)]
    run_sections(played, diverging, "diverge")
    time.sleep(max(0.0, window_seen - time.monotonic()))


def play_own_subscription(played: Played, second: str) -> None:
    """A polled table lacks the second topic only between the first-only member's heartbeat and the other's: wait
    (bounded) for a poll that caught one, so the job reads it."""
    run, group = played.run, played.run.group("ownsub")
    deadline = time.monotonic() + 120
    while not any(second not in table for table in polled_tables(run, group)) and time.monotonic() < deadline:
        time.sleep(1.0)


def play_pop(played: Played, pop_topic: str) -> None:
    """The producer sends to the POP group's topic; each consumer pops queues of both brokers and receives messages
    (the judge); its pulled queues of the topic then."""
    run, group = played.run, played.run.group("pop")

    def pops_and_consumes(line: dict) -> bool:
        brokers = {broker for broker, _ in line.get("pop_queues", {}).get(pop_topic, [])}
        return brokers == set(BROKERS) and line["consumed"].get(pop_topic, 0) > 0

    for client in played.clients[group]:
        client.wait_for(lambda line: line["kind"] == "held" and pops_and_consumes(line), 120)
    played.seen["pop_pulled"] = [held(client, pop_topic) for client in played.clients[group]]
    run.polls.wait([group], BROKERS, after_ms=int(time.time() * 1000))


# An operator resets the offline group's offsets this long after its consumers died (well clear of the generation its
# members' departure made, so the fall is no rebalance's), to the messages stored this long before they died.
REWIND_AFTER_MS = 10_000
REWIND_BACK_MS = 20_000
# mqadmin resetOffsetByTime's table (5.x brokers reset a group with no consumer online themselves): broker, queue, the
# offset reset to.
RESET_ROW = re.compile(r"^(broker-\w+)\s+(\d+)\s+(\d+)\s*$", re.M)


def rewind_offline(played: Played, killed_at_ms: int) -> None:
    """``mqadmin resetOffsetByTime`` of the offline group's topic, ``REWIND_AFTER_MS`` after its consumers died, to
    ``REWIND_BACK_MS`` before; the brokers' consume stats of the group just before it in ``seen["before_rewind"]``,
    when it ran and what it printed in ``seen["rewind"]``."""
    run, group = played.run, played.run.group("offline")
    time.sleep(max(0.0, (killed_at_ms + REWIND_AFTER_MS) / 1000 - time.time()))
    played.seen["before_rewind"] = admin_progress(run, [group])
    at = int(time.time() * 1000)
    output = run.cluster.mqadmin(
        "resetOffsetByTime", "-g", group, "-t", run.topic, "-s", str(killed_at_ms - REWIND_BACK_MS)
    )
    played.seen["rewind"] = (at, output)


def play_departures(played: Played) -> None:
    """SIGKILL one departing client and every client of the offline group, SIGTERM another, SIGSTOP a frozen one;
    wait until both brokers' polls no longer list the frozen client (its channel expired), meanwhile rewinding the
    offline group's offsets (``rewind_offline``), then for the survivors to settle."""
    run = played.run
    departing, frozen_group = run.group("departing"), run.group("frozen")
    killed, terminated = played.clients[departing][:2]
    frozen = played.clients[frozen_group][0]
    offline = played.clients[run.group("offline")]
    frozen_at = int(time.time() * 1000)
    frozen.freeze()
    killed.kill()
    for client in offline:  # every consumer of the group, while the producer writes
        client.kill()
    rewind = threading.Thread(target=rewind_offline, args=(played, int(time.time() * 1000)), name="rewind")
    rewind.start()
    terminated.terminate()
    terminated.wait_exit(60)
    gone_at: dict[str, int] = {}
    deadline = time.monotonic() + 180
    while len(gone_at) < len(BROKERS) and time.monotonic() < deadline:
        for poll in run.polls.of(frozen_group):
            listed = {c["client_id"] for c in poll["connections"]}
            if poll["event_time"] > frozen_at and frozen.client_id not in listed:
                gone_at.setdefault(poll["broker"], poll["event_time"])
        time.sleep(1.0)
    rewind.join()
    survivors = {departing: played.clients[departing][2:], frozen_group: played.clients[frozen_group][1:]}
    played.seen.update(frozen_at=frozen_at, gone_at=gone_at, survivors_settled=run.settle(survivors))
    played.seen["survivors_settled_at"] = int(time.time() * 1000)


# The stale-route group's slow client reads its topic's route this often (a long pollNameServerInterval); the fast one
# every second. Its share then stays that of the old route for up to this long after the route changes.
STALE_POLL_MS = 90_000


def stale_topic(run: Run) -> str:
    """The stale-route group's topic: 2 queues on broker-a, then 3."""
    return f"{run.prefix}_stale"


def stale_specs(run: Run) -> list[tuple]:
    """Two AVG clients that read their topic's route every second and every ``STALE_POLL_MS``: client ids
    ``<ip>@stale-fast`` and ``<ip>@stale-slow``, so the fast one computes the first share."""
    return [
        ("5", run.group("stale"), stale_topic(run), name, {"poll_name_server_ms": poll_ms})
        for name, poll_ms in (("stale-fast", 1000), ("stale-slow", STALE_POLL_MS))
    ]


def wait_for_commits(run: Run, group: str, topic: str, timeout_s: float = 90.0) -> None:
    """Wait until a broker lists ``group``'s offsets of ``topic``. The brokers' consume stats cover only the topics a
    group has committed an offset of, and a client commits an empty queue's offset only after its first pull comes
    back empty (held by long polling for up to 15 s) and its next 5 s persist: until then consumerProgress shows none
    of the topic's queues, held or not."""
    deadline = time.time() + timeout_s
    with run.cluster.consume_progress(group) as reader:
        while not any(q["topic"] == topic for queues in reader.read()[group].values() for q in queues):
            assert time.time() < deadline, f"no broker lists {group}'s offsets of {topic} after {timeout_s:.0f} s"
            time.sleep(2)


def play_stale_route(played: Played) -> None:
    """Expand the stale-route group's topic from 2 queues to 3 right after a route read of the slow client could
    have happened (its reads are ``STALE_POLL_MS`` apart from its start, within the fleet's start): the fast client
    takes a0 a1 within a second, the slow one keeps a1 (its old route's share) until its next read. The clients'
    own held lines are the judge of when both held a1. Costs one admin call, and a wait only when now is within the
    span of the slow client's possible reads or too close to the next one."""
    run = played.run
    wait_for_commits(run, run.group("stale"), stale_topic(run))
    first, last = played.seen["started"]
    reads = int((time.time() - first) // (STALE_POLL_MS / 1000))
    after_read = last + reads * STALE_POLL_MS / 1000 + 1
    if first + (reads + 1) * STALE_POLL_MS / 1000 - max(time.time(), after_read) < 20:
        after_read += STALE_POLL_MS / 1000  # less than 20 s before the next read: after that one
    time.sleep(max(0.0, after_read - time.time()))
    played.seen["stale_route_at"] = int(time.time() * 1000)
    run.cluster.create_topic(stale_topic(run), 3, brokers=BROKERS[:1])
    # While both hold a1 (the fast client took a0 a1 on the new route, the slow one keeps a1 until its next read,
    # at least 20 s away) and neither a2: the observed unheld and double-holding sections' commands.
    fast, slow = played.clients[run.group("stale")]
    a1 = ("broker-a", 1)
    at = played.seen["stale_route_at"]
    fast.wait_for(
        lambda line: line["kind"] == "held"
        and line["time"] >= at
        and a1 in held_in(line, stale_topic(run))
        and len(held_in(line, stale_topic(run))) == 2,
        60,
    )
    if a1 in held(slow, stale_topic(run)):
        checked_from = int(time.time() * 1000)
        observed = [alert_of(AnomalyKind.OBSERVED_DOUBLE_HOLDING), alert_of(AnomalyKind.OBSERVED_UNHELD_QUEUES)]
        run_sections(played, observed, "stale")
        played.seen["stale_checked"] = (checked_from, int(time.time() * 1000))


# The diverging group's slow client reads its topic's route this often: never again within the play.
DIVERGE_POLL_MS = 900_000


def diverge_topic(run: Run) -> str:
    """The diverging group's topic: 2 queues on broker-a, then on broker-b too."""
    return f"{run.prefix}_diverge"


def diverge_specs(run: Run) -> list[tuple]:
    """Two AVG clients that read their topic's route every second and every ``DIVERGE_POLL_MS``."""
    return [
        ("5", run.group("diverge"), diverge_topic(run), name, {"poll_name_server_ms": poll_ms})
        for name, poll_ms in (("diverge-fast", 1000), ("diverge-slow", DIVERGE_POLL_MS))
    ]


def play_diverging_route(played: Played) -> None:
    """Extend the diverging group's topic to broker-b: the fast client reads the new route within a second and
    heartbeats broker-b too, the slow one keeps the old route (broker-a only) to the end. broker-b then lists only
    the fast client, broker-a both: their views diverge, and the slow client keeps its old share. One admin call,
    before the stale-route play's wait for its slow client's read."""
    run = played.run
    played.seen["diverge_route_at"] = int(time.time() * 1000)
    run.cluster.create_topic(diverge_topic(run), 2)


def lasting_topic(run: Run) -> str:
    """The double and slow groups' topic: two queues on each broker, written by a producer of its own to the end of
    the play (their incidents last while the other groups' producer is stopped)."""
    return f"{run.prefix}_lasting"


# The slow group's listener takes this long per message, on one thread: 2 messages a second against the lasting
# producer's PRODUCED_PER_TOPIC_S, so its backlog and the age of its oldest unconsumed message keep growing.
SLOW_LISTENER_MS = 500
# The job's SLOW threshold in these runs (180 s in production): the slow group passes it within seconds.
SLOW_TIME_LAG_S = 10


def slow_specs(run: Run) -> list[tuple]:
    """One consumer of the lasting topic with a slow listener (``SLOW_LISTENER_MS`` a message, one thread)."""
    options = {"consume_sleep_ms": SLOW_LISTENER_MS, "consume_threads": 1}
    return [("5", run.group("slow"), lasting_topic(run), "slow-0", options)]


def double_specs(run: Run) -> list[tuple]:
    """Two clients of one group on the lasting topic allocating with different strategies (AVG, AVG_BY_CIRCLE):
    each computes its own share of the same member list, so the queues both shares have are held by both (both
    pull them and consume every message) and others by neither, for as long as both run."""
    return [
        ("5", run.group("double"), lasting_topic(run), f"double-{strategy.lower()}", {"strategy": strategy})
        for strategy in ("AVG", "AVG_BY_CIRCLE")
    ]


def open_double_spans(clients: list, topic: str) -> dict[Queue, Span]:
    """The queues of ``topic`` two or more of ``clients`` hold together now, with the span they began."""
    return {q: spans[-1] for q, spans in held_spans(clients, topic).items() if spans[-1][3] is None}


def duration_ms(duration: str) -> int:
    """A Prometheus ``for:`` duration (``90s``, ``2m``, ``1h``) in ms."""
    return int(duration[:-1]) * {"s": 1_000, "m": 60_000, "h": 3_600_000}[duration[-1]]


# How long the double holding must have lasted before its section's commands run: until the monitor sees it
# (the clients' rebalance delay, a running-info read, a window of samples), 2 samples of DOUBLE_OWNED, and the
# alert's ``for``. The group starts first: the rest of the play covers most of it.
DOUBLE_LASTED_MS = (
    TEST_SPEED.rebalance_wait_interval_ms
    + 5_000
    + (PROGRESS_WINDOW + 2) * PROGRESS_INTERVAL_MS
    + duration_ms(PROGRESS_ALERTS[QueueState.DOUBLE_OWNED].for_)
)


def check_double_owned(played: Played) -> None:
    """Once the double group's clients have held the same queues together (their own held lines) for
    ``DOUBLE_LASTED_MS``, run the double-owned section's commands; the holding's start and the commands' start and
    end in ``seen["double_checked"]``."""
    run = played.run
    spans = open_double_spans(played.clients[run.group("double")], lasting_topic(run))
    assert spans, "the double group's clients hold no queue together"
    began_by = max(span[1] for span in spans.values())
    time.sleep(max(0.0, (began_by + DOUBLE_LASTED_MS) / 1000 - time.time()))
    checked_from = int(time.time() * 1000)
    run_sections(played, [PROGRESS_ALERTS[QueueState.DOUBLE_OWNED].name], "double")
    played.seen["double_checked"] = (began_by, checked_from, int(time.time() * 1000))


# The flapping group's second member is stopped and started again (the same instance name: the same client id) this
# many times: with its first join, 2 * FLAPS + 1 joins and leaves, over the flapping threshold (3).
FLAPS = 2


def flapping_specs(run: Run) -> list[tuple]:
    """A steady member (so that the group never empties) and one in a process of its own that comes and goes."""
    group = run.group("flapping")
    return [("5", group, run.topic, "steady", {}), ("5", group, run.topic, "flap", {"own_process": True})]


# Members that join the flapping group in its member's first restarted process and leave with it at the next stop:
# short-lived members (a join and a leave each, all of it unconverged), as a crash loop under new client ids makes
# them. With the flapping member's own restarts, more unconverged changes than the storm threshold (10) allows.
STORM_MEMBERS = 5


def storm_specs(run: Run) -> list[tuple]:
    """The flapping member and ``STORM_MEMBERS`` short-lived ones, in one process."""
    group = run.group("flapping")
    return [("5", group, run.topic, "flap", {})] + [
        ("5", group, run.topic, f"short-{i}", {}) for i in range(STORM_MEMBERS)
    ]


def play_flapping(played: Played) -> None:
    """Stop the flapping member (SIGTERM: it unregisters) and start it again ``FLAPS`` times, each state held until
    a collector poll of both brokers showed it; its first restarted process also runs the short-lived members, who
    leave with it at the next stop (a rebalance storm), started once the group's first heartbeat round (the storm
    detector's birth) is over. The flapping section's commands run while the member was gone and once it (with
    the short-lived ones) was back, the storm section's then too and once they had left again. Its processes in
    order, in ``seen["flapping"]`` after the steady member; the short-lived members in ``seen["storm"]``."""
    run, group = played.run, played.run.group("flapping")
    members = played.seen["flapping"]
    storm: list = played.seen.setdefault("storm", [])
    flapping, storming = alert_of(AnomalyKind.FLAPPING_MEMBERS), alert_of(AnomalyKind.REBALANCE_STORM)
    polls = PollLog(run.bootstrap, run.topics["consumer_connections"])

    def seen_by_polls(client_ids: set[str], listed: bool, after_ms: int) -> None:
        deadline = time.monotonic() + 60
        while True:
            latest = {p["broker"]: p for p in polls.of(group) if p["event_time"] > after_ms}
            ids = {b: {c["client_id"] for c in p["connections"]} for b, p in latest.items()}
            if len(ids) == len(BROKERS) and all(
                client_ids <= found if listed else not client_ids & found for found in ids.values()
            ):
                return
            assert time.monotonic() < deadline, f"no poll after {after_ms} shows {client_ids} listed={listed}"
            time.sleep(0.5)

    try:
        for flap in range(FLAPS):
            leaving = {members[-1].client_id, *(c.client_id for c in storm)}
            members[-1].process.terminate()
            members[-1].process.wait_exit(60)
            seen_by_polls(leaving, False, int(time.time() * 1000))
            if flap == 0:
                run_sections(played, [flapping], "flapping", "gone")
                born_ms = min(p["event_time"] for p in polls.of(group) if p["connections"])
                time.sleep(max(0.0, (born_ms + StormDetector.birth_ms + 1000) / 1000 - time.time()))
                flap_again, *short_lived = run.fleet.consumers(storm_specs(run))
                members.append(flap_again)
                storm += short_lived
            else:
                run_sections(played, [storming], "flapping", "left")
                members += run.fleet.consumers([flapping_specs(run)[1]])
            seen_by_polls(
                {members[-1].client_id, *(c.client_id for c in storm if flap == 0)}, True, int(time.time() * 1000)
            )
            if flap == 0:
                run_sections(played, [flapping, storming], "flapping", "back")
    except BaseException as error:  # noqa: BLE001 - raised again by the play in its own thread
        played.seen["flapping_error"] = error
    finally:
        polls.close()


@pytest.fixture(scope="module")
def played(kafka_broker, rocketmq_clusters, spark, tmp_path_factory) -> Iterator[Callable[[str], Played]]:
    """``get(line)``: the line's scenarios played on its cluster and processed by one job run (on first use; a
    play that failed fails every test of its line with its error)."""
    plays: dict[str, Played | BaseException] = {}
    runs: list[Run] = []

    def get(line: str) -> Played:
        if line not in plays:
            prefix = "e2e" + line.replace(".", "")
            try:
                runs.append(
                    Run(
                        rocketmq_clusters(line), kafka_broker.bootstrap_servers, tmp_path_factory.mktemp(prefix), prefix
                    )
                )
                plays[line] = play(runs[-1], line, spark)
            except Exception as error:  # noqa: BLE001 - raised again for each test of the line
                plays[line] = error
        found = plays[line]
        if isinstance(found, BaseException):
            raise found
        return found

    try:
        yield get
    finally:
        for run in runs:
            run.close()


@pytest.fixture
def monitor_run(kafka_broker, rocketmq_clusters, tmp_path) -> Iterator:
    runs: list[Run] = []

    def make(line: str, prefix: str) -> Run:
        runs.append(Run(rocketmq_clusters(line), kafka_broker.bootstrap_servers, tmp_path / prefix, prefix))
        return runs[-1]

    try:
        yield make
    finally:
        for run in runs:
            run.close()


def assert_expected_is_held(run: Run, spark, group: str, clients: list, settled: tuple) -> None:
    """The monitor's current expected assignment of ``group`` equals, client by client, what the clients hold
    (and held all along since they settled)."""
    assert holdings(clients, run.topic) == settled, f"{group}: a client's queues changed while the job ran"
    expected = expected_by_client(run.read(spark, "current_assignment", group), group, run.topic)
    assert expected == real_by_client(clients, run.topic), group


def episodes(run: Run, spark, group: str, anomaly: str) -> list[dict]:
    return [r for r in run.read(spark, "anomaly_episodes", group) if r["anomaly"] == anomaly]


@pytest.mark.parametrize("line", ["5", "4.9"])
def test_expected_assignment_is_what_each_real_client_holds(played, spark, line):
    """Every strategy with three clients of one line, on the cluster of the same line; on 5.x also a
    BROADCASTING group, on 4.9.7 also a group mixing a 4.9.8 and a 5.3.3 client."""
    scenarios = played(line)
    run = scenarios.run
    groups = {g: scenarios.clients[g] for _, g, *_ in assignment_specs(run, line)}

    clustering = {g: c for g, c in groups.items() if not g.endswith("_broadcast")}
    for group, group_clients in clustering.items():
        # The real clients between them hold every queue exactly once: the groups are healthy.
        assert sorted(q for c in group_clients for q in held(c, run.topic)) == sorted(run.queues), group
        assert_expected_is_held(run, spark, group, group_clients, scenarios.settled[group])
    versions = {c["client_version"] for p in run.polls.of(run.group("mixed")) for c in p["connections"]}
    assert line == "5" or len(versions) == 2, "the mixed group's clients are not of both lines"

    if line == "5":
        group = run.group("broadcast")
        assert all(held(c, run.topic) == run.queues for c in groups[group]), "broadcasting clients hold all"
        snapshots = run.read(spark, "group_snapshots", group)
        assert snapshots and {r["strategy"] for r in snapshots} == {"BROADCAST"}
        assert run.read(spark, "current_assignment", group) == []
        assert episodes(run, spark, group, "ORPHANED_QUEUES") == []
        assert episodes(run, spark, group, "DOUBLE_OWNED_QUEUES") == []


def test_duplicate_client_id_orphans_exactly_the_queues_no_client_holds(played, spark):
    """Two consumers with one client id (same instance name and client IP, separate JVMs) and a third: the
    duplicates compute the same share, so the queues of the share nobody computes are held by nobody. Each
    runs the client agent's reporter, so every holder reports its own queues (the admin API can ask only one
    of the duplicates): the monitor's double-owned and orphaned queues must be what those reports show. A
    holder is a client in a process: the third shares a JVM with one of the duplicates."""
    scenarios = played("5")
    run = scenarios.run
    group = run.group("circle_dup")
    clients = scenarios.clients[group]
    reports = scenarios.seen["reports"]
    assert clients[0].client_id == clients[1].client_id != clients[2].client_id
    assert clients[0].pid != clients[1].pid

    unheld = run.queues - {q for c in clients for q in held(c, run.topic)}
    assert unheld, "the real clients left no queue unheld: the scenario did not happen"
    assert episodes(run, spark, group, "DUPLICATE_CLIENT_ID"), "no DUPLICATE_CLIENT_ID episode"
    current = run.read(spark, "anomalies_current", group)
    assert {"DUPLICATE_CLIENT_ID", "ORPHANED_QUEUES", "DOUBLE_OWNED_QUEUES"} <= {r["anomaly"] for r in current}
    assert_expected_is_held(run, spark, group, clients, scenarios.settled[group])

    def named(anomaly: str) -> set[tuple[str, int]]:
        rows = [r for r in current if r["anomaly"] == anomaly and r["topic"] == run.topic]
        assert len(rows) == 1, anomaly
        return {(q["broker"], q["queue_id"]) for q in json.loads(rows[0]["details"])["queues"]}

    # Every real holder, from the agents' reports: the reports are what each client holds ...
    assert reports == {(c.pid, c.client_id): held(c, run.topic) for c in clients}
    holders: dict[tuple[str, int], int] = {}
    for queues in reports.values():
        for queue in queues:
            holders[queue] = holders.get(queue, 0) + 1
    # ... and the monitor's analysis names exactly the queues several of them hold and the ones none holds.
    assert named("DOUBLE_OWNED_QUEUES") == {q for q, n in holders.items() if n > 1} != set()
    assert named("ORPHANED_QUEUES") == run.queues - set(holders) == unheld


def reports_by_process(run: Run, clients: list, timeout_s: float = 60.0) -> dict[tuple[int, str], frozenset]:
    """The latest queues of the run's topic each client reported through the agent, by process and client id,
    once every client has reported what it holds now (the agent's reports carry the process in a header, the
    client id in the event; the collector publishes to the same topic without the header)."""
    deadline = time.monotonic() + timeout_s
    while True:
        timed: dict[tuple[int, str], tuple[int, frozenset]] = {}
        for headers, event in read_records(run.bootstrap, run.topics["reported_assignment"], timeout_s=10):
            if "rrm-agent-instance" not in headers:
                continue  # the collector's (from one client's running info)
            holder = (int(headers["rrm-agent-instance"].split("@")[0]), event["client_id"])
            if event["topic"] == run.topic and event["event_time"] >= timed.get(holder, (-1,))[0]:
                queues = frozenset((q["broker"], q["queue_id"]) for q in event["queues"])
                timed[holder] = (event["event_time"], queues)
        latest = {holder: queues for holder, (_, queues) in timed.items()}
        if latest == {(c.pid, c.client_id): held(c, run.topic) for c in clients} or time.monotonic() > deadline:
            return latest
        time.sleep(1)


def test_departures_are_the_membership_changes_the_survivors_rebalance_on(played, spark):
    """SIGKILL and SIGTERM: the brokers drop the clients at once, the survivors rebalance. SIGSTOP: the client
    stays in the brokers' lists until the broker expires it (the tier's 15 s channel expiry on 5.x), and in the
    monitor's membership exactly as long."""
    scenarios = played("5")
    run = scenarios.run
    departing, frozen_group = run.group("departing"), run.group("frozen")
    departing_clients, frozen_clients = scenarios.clients[departing], scenarios.clients[frozen_group]
    killed, terminated, frozen = departing_clients[0], departing_clients[1], frozen_clients[0]
    frozen_at, gone_at = scenarios.seen["frozen_at"], scenarios.seen["gone_at"]
    survivors = {departing: departing_clients[2:], frozen_group: frozen_clients[1:]}
    assert set(gone_at) == set(BROKERS), "the brokers never expired the frozen client"

    for group, group_clients in survivors.items():
        assert_expected_is_held(run, spark, group, group_clients, scenarios.seen["survivors_settled"][group])
        assert {q for c in group_clients for q in held(c, run.topic)} == run.queues, f"{group}: survivors"
    changes = [r for r in run.read(spark, "membership_changes") if r["group"] in survivors]
    for client in (killed, terminated):
        removed = {r["broker"] for r in changes if r["client_id"] == client.client_id and r["change"] in REMOVALS}
        assert removed == set(BROKERS), f"{client.client_id} was not removed from every broker's view"
    for client in departing_clients[2:] + frozen_clients[1:]:
        assert not [r for r in changes if r["client_id"] == client.client_id and r["change"] in REMOVALS]
    # The frozen client left each broker's view at the poll that first missed it, not before.
    frozen_removals = {
        r["broker"]: r["event_time_ms"]
        for r in changes
        if r["client_id"] == frozen.client_id and r["change"] in REMOVALS
    }
    assert frozen_removals == gone_at
    for snapshot in run.read(spark, "group_snapshots", frozen_group):
        if frozen_at <= snapshot["event_time_ms"] < min(gone_at.values()):
            assert frozen.client_id in snapshot["cid_all"], snapshot
    latest = max(run.read(spark, "group_snapshots", frozen_group), key=lambda r: r["generation"])
    assert frozen.client_id not in latest["cid_all"]


def test_collector_and_broker_outages_leave_views_stale_not_empty(monitor_run, spark, capsys):
    """The collector stopped for longer than the channel expiry: the views go stale, nobody is removed, no
    queue is orphaned, and they resume when it is back. A broker stopped under a running collector: its view
    goes stale while the other broker's keeps being polled, and the stale-view runbook section's commands say
    so (the monitor's query names that broker alone, RocketMQ's clusterList no longer lists it)."""
    run = monitor_run("5", "outage")
    group = run.group("avg")
    clients = run.fleet.consumers([("5", group, run.topic, f"outage-{i}", {}) for i in range(3)])
    run.settle({group: clients})

    run.collector.stop()
    last_poll = max(p["event_time"] for p in run.polls.of(group))
    expiry_ms = max(run.config.membership.channel_expiry_ms, run.config.collector.effective_stale_after_ms)
    # Down past the expiry by a poll interval: the restarted collector's first poll (later still, by its start-up)
    # comes after every member would have expired had the monitor taken the silence for departures.
    while time.time() * 1000 < last_poll + expiry_ms + run.config.collector.poll_interval_ms:
        time.sleep(0.5)
    run.collector = start_collector(run.config, run.root / "collector-again")
    settled = run.settle({group: clients})
    run.process(spark)

    changes = run.read(spark, "broker_view_changes", group)
    for broker in BROKERS:
        statuses = [r["status"] for r in sorted(changes, key=lambda r: r["event_time_ms"]) if r["broker"] == broker]
        assert statuses[-2:] == ["STALE", "FRESH"], f"{broker}: {statuses}"
        stale = [r for r in changes if r["broker"] == broker and r["status"] == "STALE"]
        assert all(r["polled_at_ms"] <= last_poll for r in stale)
    assert [r for r in run.read(spark, "membership_changes", group) if r["change"] in REMOVALS] == []
    assert episodes(run, spark, group, "ORPHANED_QUEUES") == []
    assert {r["status"] for r in run.read(spark, "broker_views_current", group)} == {"FRESH"}
    assert_expected_is_held(run, spark, group, clients, settled[group])

    stopped_at = int(time.time() * 1000)
    run.cluster.stop_broker("broker-b")
    try:
        # broker-a's view keeps being polled past the point where broker-b's must be stale.
        wait_from = stopped_at + run.config.collector.effective_stale_after_ms + 2000
        deadline = time.monotonic() + 120
        while not any(p["event_time"] > wait_from for p in run.polls.of(group, "broker-a")):
            assert time.monotonic() < deadline, "the collector stopped polling broker-a"
            time.sleep(1.0)
        assert run.collector.running()
        run.process(spark)
        views = {r["broker"]: r for r in run.read(spark, "broker_views_current", group)}
        assert views["broker-b"]["status"] == "STALE" and views["broker-a"]["status"] == "FRESH"
        assert views["broker-a"]["polled_at_ms"] > views["broker-b"]["stale_since_ms"]
        assert run.collector.running()
        assert_stale_view_section(run, capsys, stopped="broker-b", since_ms=views["broker-b"]["stale_since_ms"])
    finally:
        run.cluster.start_broker("broker-b")


def assert_stale_view_section(run: Run, capsys, stopped: str, since_ms: int) -> None:  # type: ignore[no-untyped-def]
    """The stale-view section's commands with a broker stopped: its query names that broker alone, stale since
    ``since_ms``; clusterList lists the running broker's address and not the stopped one's. (Its ``health`` reads
    a running job's metrics page: this test's job runs to the end of its input and stops.)"""
    addresses = {b: run.cluster.broker_addr(b) for b in BROKERS}
    for command in confirm_commands(JobAlert.VIEW_STALE):
        words = shlex.split(command)
        if words[0] == "query":
            assert cli_main([*words, "--delta-root", str(run.config.paths.delta_root), "--json"]) == 0
            rows = json.loads(capsys.readouterr().out)
            assert [(r["broker"], r["since_ms"]) for r in rows] == [(stopped, since_ms)], rows
        elif words[0] == "mqadmin":
            listed = run.cluster.mqadmin(*words[1:])
            assert {b for b, a in addresses.items() if a in listed} == set(BROKERS) - {stopped}, listed


def test_a_pop_mode_group_is_broker_side_without_queue_anomalies(played, spark):
    """Two 5.3.3 push consumers with client rebalance off, their group in POP mode for the topic on both brokers:
    each asks the broker for its queues and pops real messages. The brokers' connection lists still say
    CONSUME_PASSIVELY; the clients' running info shows the broker assigns. The monitor must show the group as
    broker-side: no expected assignment, no orphaned or double-owned queues."""
    scenarios = played("5")
    run = scenarios.run
    group = run.group("pop")
    clients = scenarios.clients[group]
    pop_topic = f"{run.prefix}_pop"
    # The judge (played): each real consumer popped queues of both brokers and received messages, pulling none.
    assert scenarios.seen["pop_pulled"] == [frozenset()] * len(clients), "a POP consumer pulls queues of the topic"

    polls = [p for p in run.polls.of(group) if p["connections"]]
    assert {p["consume_type"] for p in polls} == {"CONSUME_PASSIVELY"}  # what the brokers' lists say of POP
    assert {c["consume_type"] for c in polls[-1]["connections"]} == {"CONSUME_POP"}
    snapshots = run.read(spark, "group_snapshots", group)
    assert snapshots and {r["strategy"] for r in snapshots} == {"BROKER"}
    assert run.read(spark, "current_assignment", group) == []
    assert run.read(spark, "expected_assignments", group) == []
    assert episodes(run, spark, group, "ORPHANED_QUEUES") == []
    assert episodes(run, spark, group, "DOUBLE_OWNED_QUEUES") == []
    assert all(c.last("held")["consumed"][pop_topic] > 0 for c in clients)


def test_a_topic_one_member_subscribes_is_analysed_from_the_clients_own_subscriptions(played, spark):
    """Two 5.3.3 consumers of one group, one of them also subscribing a second topic. Each heartbeat overwrites
    the brokers' one subscription table of the group, so the second topic comes and goes in the polled tables;
    the collector carries each client's own subscriptions (and fetches their routes), and the monitor must
    analyse the second topic from them, judged by what the clients hold: the member without it named, the
    queues nobody holds the inconsistent subscription's (no orphaned queues episode), the subscriber's expected
    share what it holds."""
    scenarios = played("5")
    run = scenarios.run
    second = f"{run.prefix}_second"
    second_queues = scenarios.seen["second_queues"]
    group = run.group("ownsub")
    clients = scenarios.clients[group]
    first_only, both = clients

    assert held(first_only, second) == frozenset() != held(both, second)
    unheld = second_queues - held(both, second)
    assert unheld, "the subscriber holds every queue of the second topic: nothing is orphaned"
    assert any(second not in table for table in polled_tables(run, group)), "no polled table lacked the second topic"

    current = [r for r in run.read(spark, "anomalies_current", group) if r["topic"] == second]
    by_anomaly = {r["anomaly"]: json.loads(r["details"]) for r in current}
    inconsistent = by_anomaly["INCONSISTENT_SUBSCRIPTION"]
    assert (inconsistent["subscribers"], inconsistent["non_subscribers"]) == ([both.client_id], [first_only.client_id])
    # the queues nobody holds are the inconsistent subscription's, not an orphaned queues episode
    assert {(q["broker"], q["queue_id"]) for q in inconsistent["unpulled_queues"]} == unheld
    assert "ORPHANED_QUEUES" not in by_anomaly
    expected = expected_by_client(run.read(spark, "current_assignment", group), group, second)
    assert expected == {both.client_id: held(both, second)}
    assert_expected_is_held(run, spark, group, clients, scenarios.settled[group])


def progress(run: Run, spark, group: str) -> dict[tuple[str, str, int], dict]:
    """The monitor's current verdict of each queue of ``group``, by (topic, broker, queue id)."""
    return {(r["topic"], r["broker"], r["queue_id"]): r for r in run.read(spark, "queue_progress_current", group)}


def broker_stats(seen: dict[str, Any], group: str) -> dict[tuple[str, str, int], dict]:
    """The brokers' own consume stats of ``group`` as the admin API read them (``admin_progress``)."""
    return {
        (q["topic"], broker, q["queue_id"]): q
        for broker, queues in seen["admin_progress"][group].items()
        for q in queues
    }


def broker_lag(row: dict) -> int:
    return row["broker_offset"] - row["consumer_offset"]


def test_orphaned_queues_are_confirmed_with_the_brokers_own_lag(played, spark):
    """The duplicate-id group while the producer writes: the queues no real client holds (the clients' own
    reports) are ORPHAN_CONFIRMED, and no other queue; each with the lag the brokers answer (read after the
    producer stopped and the collector sampled again: with no sends and no holder nothing moves), its offset the
    one committed for it and never moved since."""
    scenarios = played("5")
    run = scenarios.run
    group = run.group("circle_dup")
    unheld = run.queues - {q for c in scenarios.clients[group] for q in held(c, run.topic)}
    commits = scenarios.seen["orphan_commits"]
    assert set(commits) == unheld and all(offset > 0 for offset in commits.values()), commits

    verdicts = progress(run, spark, group)
    confirmed = {(b, q) for (t, b, q), r in verdicts.items() if r["state"] == "ORPHAN_CONFIRMED"}
    assert confirmed == unheld, {k: v["state"] for k, v in verdicts.items()}
    stats = broker_stats(scenarios.seen, group)
    for broker, queue_id in unheld:
        row, real = verdicts[(run.topic, broker, queue_id)], stats[(run.topic, broker, queue_id)]
        assert real["consumer_offset"] == commits[(broker, queue_id)], "an orphaned queue's offset moved"
        assert (row["broker_offset"], row["consumer_offset"]) == (real["broker_offset"], real["consumer_offset"])
        assert row["lag"] == broker_lag(real) > 0
        assert row["holders"] == [] and row["severity"] == "critical"


def test_an_offline_group_with_a_backlog_keeps_an_open_episode(played, spark):
    """Every consumer of a group SIGKILLed while the producer writes: once the brokers list none of it, an
    OFFLINE_GROUP_BACKLOG episode stays open, naming the queues the brokers answer a backlog for."""
    scenarios = played("5")
    run = scenarios.run
    group = run.group("offline")
    assert scenarios.seen["offline_listed"] == {broker: [] for broker in BROKERS}
    stats = broker_stats(scenarios.seen, group)
    backlog = {k: broker_lag(r) for k, r in stats.items() if broker_lag(r) > 0}
    assert backlog, "the brokers answer no backlog of the offline group"

    (episode,) = [r for r in run.read(spark, "anomalies_current", group) if r["anomaly"] == "OFFLINE_GROUP_BACKLOG"]
    details = json.loads(episode["details"])
    assert {(q["topic"], q["broker"], q["queue_id"]) for q in details["queues"]} == set(backlog)
    assert 0 < details["lag"] <= sum(backlog.values())
    verdicts = progress(run, spark, group)
    assert {k: r["lag"] for k, r in verdicts.items() if k in backlog} == backlog
    assert not any(r["group_online"] for r in verdicts.values())


def test_a_sigkill_under_load_costs_each_moved_queue_a_handoff(played, spark):
    """A SIGKILL (and a SIGTERM) in a group while the producer writes: every queue whose real holder changed (the
    clients' own holdings once settled before the kill and at the end) has rebalance-cost rows from the change on,
    chained from the client that held it before to the client that holds it now; each hand-off took time (the old
    owner's last progress before the change, the new owner's first advance after it) and the queue's last row
    saw its new holder advance the offset."""
    scenarios = played("5")
    run = scenarios.run
    group = run.group("departing")
    clients = scenarios.clients[group]
    before = {q: c.client_id for c, queues in zip(clients, scenarios.settled[group], strict=True) for q in queues}
    after = {q: c.client_id for c in clients[2:] for q in held(c, run.topic)}
    assert set(before) == set(after) == run.queues
    moved = {q for q in run.queues if before[q] != after[q]}
    killed = clients[0]
    assert {q for q, holder in before.items() if holder == killed.client_id} <= moved

    rows: dict[tuple[str, int], list[dict]] = {}
    for row in sorted(run.read(spark, "rebalance_cost", group), key=lambda r: (r["t0_ms"], r["generation"])):
        if row["topic"] == run.topic and row["t0_ms"] >= scenarios.seen["frozen_at"]:
            rows.setdefault((row["broker"], row["queue_id"]), []).append(row)
    assert moved <= set(rows), f"moved queues without a cost row: {sorted(moved - set(rows))}"
    for queue in moved:
        chain = rows[queue]
        assert chain[0]["old_owner"] == before[queue] and chain[-1]["new_owner"] == after[queue], chain
        assert all(a["new_owner"] == b["old_owner"] for a, b in zip(chain, chain[1:], strict=False)), chain
        assert all(r["old_owner"] != r["new_owner"] for r in chain), chain
        last = chain[-1]
        assert last["handoff_end_ms"] is not None and last["samples"] > 0, last
        for row in chain:
            if row["handoff_end_ms"] is not None:
                assert row["handoff_start_ms"] < row["t0_ms"] <= row["handoff_end_ms"], row
                assert row["handoff_gap_ms"] == row["handoff_end_ms"] - row["handoff_start_ms"] > 0, row


def test_pop_and_broadcasting_groups_get_no_ownership_verdict(played, spark):
    """The POP group (the brokers assign) and the BROADCASTING group (each client keeps its offsets): every queue
    of theirs the brokers answer stats for is tracked NOT_OWNED_MODEL (group-level lag only), never orphaned,
    stuck or double-owned."""
    scenarios = played("5")
    run = scenarios.run
    for name in ("pop", "broadcast"):
        group = run.group(name)
        verdicts = progress(run, spark, group)
        assert set(verdicts) == set(broker_stats(scenarios.seen, group)), group
        assert {r["state"] for r in verdicts.values()} <= {"NOT_OWNED_MODEL"}, group
        assert all(r["lag"] is not None for r in verdicts.values())
    assert progress(run, spark, run.group("pop")), "no queue of the POP group is tracked"


def test_a_listener_blocked_on_one_message_is_a_stuck_holder_with_an_offset_hole(played, spark):
    """A consumer whose listener blocks for good on one message while the producer writes and its other messages
    are consumed: that queue, and no other queue of the group, is STUCK_HOLDER, held by that client, its offset
    pinned at the blocked message (the brokers' own consume stats, read after the producer stopped, answer that
    offset and a backlog behind it); while the producer wrote, its cause was the offset hole."""
    scenarios = played("5")
    run = scenarios.run
    group = run.group("stuck")
    blocked, (holder, _) = scenarios.seen["blocked"], scenarios.clients[group]
    queue = (blocked["topic"], blocked["broker"], blocked["queue_id"])
    assert (blocked["broker"], blocked["queue_id"]) in held(holder, run.topic), "the blocking client let go"
    for broker, listed in scenarios.seen["stuck_listed"].items():
        assert holder.client_id in {c["client_id"] for c in listed}, f"{broker} no longer lists the stuck holder"
    real = broker_stats(scenarios.seen, group)[queue]
    assert real["consumer_offset"] == blocked["queue_offset"] and broker_lag(real) > 0, real

    history = [r for r in run.read(spark, "consume_progress", group) if r["state"] == "STUCK_HOLDER"]
    assert {(r["topic"], r["broker"], r["queue_id"]) for r in history} == {queue}
    assert all(r["holders"] == [holder.client_id] for r in history), history[-1]["holders"]
    stopped_at = scenarios.seen["producer_stopped_at"]
    assert "OFFSET_HOLE" in {r["cause"] for r in history if r["event_time_ms"] < stopped_at}
    current = progress(run, spark, group)
    assert {k for k, r in current.items() if r["state"] == "STUCK_HOLDER"} == {queue}
    row = current[queue]
    assert (row["broker_offset"], row["consumer_offset"]) == (real["broker_offset"], real["consumer_offset"])
    assert row["lag"] == broker_lag(real) and row["severity"] == "critical"
    assert row["expected_owner"] == holder.client_id, "the assignment gives the queue to another client"


def test_queues_two_clients_on_different_strategies_hold_are_double_owned(played, spark):
    """Two clients of one group, on AVG and AVG_BY_CIRCLE, while a producer writes: each holds its own share of
    the same member list (their own held lines), so some queues are held by both, which pull them and consume
    every message (their lag stays small: both consume). The monitor judges exactly those queues DOUBLE_OWNED from
    the clients' running info, naming both, and did at every sample of them through the alert's ``for`` before
    its section's commands ran (the clients still held them both then)."""
    scenarios = played("5")
    run = scenarios.run
    group, topic = run.group("double"), lasting_topic(run)
    clients = scenarios.clients[group]
    doubly = set.intersection(*(set(held(c, topic)) for c in clients))
    assert doubly, "the two strategies gave the clients no common queue"
    began_by, checked_from, _ = scenarios.seen["double_checked"]
    assert both_held_at(clients, topic, checked_from) == doubly, "the clients' common queues changed"
    assert all(c.last("held")["consumed"].get(topic, 0) > 0 for c in clients)

    rows = [r for r in run.read(spark, "consume_progress", group) if r["topic"] == topic]
    doubled = [r for r in rows if r["state"] == "DOUBLE_OWNED"]
    assert {(r["broker"], r["queue_id"]) for r in doubled} == doubly, {(r["broker"], r["queue_id"]) for r in doubled}
    ids = sorted(c.client_id for c in clients)
    assert all(sorted(r["holders"]) == ids and r["severity"] == "critical" for r in doubled), doubled[-1]
    for_ms = duration_ms(PROGRESS_ALERTS[QueueState.DOUBLE_OWNED].for_)
    assert began_by + 2 * PROGRESS_INTERVAL_MS + for_ms <= checked_from
    through = [r for r in rows if (r["broker"], r["queue_id"]) in doubly]
    through = [r for r in through if checked_from - for_ms <= r["event_time_ms"] <= checked_from]
    assert through and {r["state"] for r in through} == {"DOUBLE_OWNED"}, sorted(
        (r["event_time_ms"], r["broker"], r["queue_id"], r["state"]) for r in through if r["state"] != "DOUBLE_OWNED"
    )


def test_a_listener_slower_than_its_producer_is_slow(played, spark):
    """One consumer whose listener takes ``SLOW_LISTENER_MS`` a message on one thread while a producer writes
    ``PRODUCED_PER_TOPIC_S`` a second to its topic: its own consumed count is a fraction of what the brokers
    stored. The monitor judges each queue of the topic SLOW (the offset advancing, the lag rising, the time lag
    over the threshold at every sample), held by it alone, and still does at the end (the producer writes on)."""
    scenarios = played("5")
    run = scenarios.run
    group, topic = run.group("slow"), lasting_topic(run)
    (client,) = scenarios.clients[group]
    stopped_at = scenarios.seen["producer_stopped_at"]  # the brokers' stats were read then
    stored = sum(r["broker_offset"] for (t, _, _), r in broker_stats(scenarios.seen, group).items() if t == topic)
    assert 0 < 2 * consumed_by(client, topic, stopped_at) < stored, "the slow listener kept up"

    slow_queues = all_queues(run.cluster.route(topic))
    slow = [r for r in run.read(spark, "consume_progress", group) if r["topic"] == topic and r["state"] == "SLOW"]
    assert {(r["broker"], r["queue_id"]) for r in slow} == slow_queues, slow
    assert all(r["time_lag_estimate_s"] > SLOW_TIME_LAG_S for r in slow), slow
    assert all(r["holders"] == [client.client_id] and r["severity"] == "warning" for r in slow), slow[-1]
    current = {(b, q): r["state"] for (t, b, q), r in progress(run, spark, group).items() if t == topic}
    assert current == dict.fromkeys(slow_queues, "SLOW"), current


def test_an_idle_group_raises_nothing(played, spark):
    """Two consumers of a topic nothing is ever sent to: between them they hold every queue of it (their own
    holdings), the brokers answer no backlog for any; the monitor tracks the queues the brokers answer, none in
    a state with a severity, and records no anomaly of the group but the retry topic's queues its clients' own
    held lines show unheld, held twice or held by another than expected, until they read that topic's whole
    route."""
    scenarios = played("5")
    run = scenarios.run
    group, topic = run.group("idle"), idle_topic(run)
    clients = scenarios.clients[group]
    assert sorted(q for c in clients for q in held(c, topic)) == sorted(all_queues(run.cluster.route(topic)))
    assert holdings(clients, topic) == scenarios.seen["idle_settled"], "the idle group's holdings changed"
    stats = broker_stats(scenarios.seen, group)
    assert stats and all(broker_lag(r) == 0 for r in stats.values()), stats

    verdicts = progress(run, spark, group)
    assert set(verdicts) == set(stats)
    history = run.read(spark, "consume_progress", group)
    assert {r["state"] for r in history} <= {"IDLE", "NO_OFFSET", "OK", "INCOMPLETE"}, {r["state"] for r in history}
    assert all(r["severity"] is None for r in history)
    # Nothing of its topic; of its retry topic at most what the clients' own held lines confirm: a client reads the
    # route of %RETRY%<group> (created by its first heartbeat on each broker) only at its next route poll, up to
    # 30 s after it started, and holds nothing of it until then, or its share of the one broker's queue the route
    # had when read (on a busy machine, the other client's too), which the monitor may see as observed unheld
    # queues, observed double holding or an assignment mismatch, closed since. And while the two join, one broker
    # may list a client its other broker does not list yet (each learns of it at the client's heartbeat to it):
    # diverging views, judged at the polls' own times whatever the batch, closed since.
    episodes_ = run.read(spark, "anomaly_episodes", group)
    retry = f"%RETRY%{group}"
    allowed = {(kind, retry) for kind in ("OBSERVED_UNHELD_QUEUES", "OBSERVED_DOUBLE_HOLDING", "ASSIGNMENT_MISMATCH")}
    allowed.add(("DIVERGING_BROKER_VIEWS", ""))
    assert {(e["anomaly"], e["topic"]) for e in episodes_} <= allowed, episodes_
    for opened in (e for e in episodes_ if e["status"] == "OPENED"):
        details = json.loads(opened["details"])
        holding = {c.client_id: held_at([c], retry, opened["opened_at_ms"]) for c in clients}
        if opened["anomaly"] == "DIVERGING_BROKER_VIEWS":
            pass  # its closing is asserted below
        elif opened["anomaly"] == "ASSIGNMENT_MISMATCH":
            for client_id, differs in details["clients"].items():
                unexpected, missing = (
                    {(q["broker"], q["queue_id"]) for q in differs[k]} for k in ("unexpected", "missing")
                )
                assert unexpected <= holding[client_id] and not missing & holding[client_id], (client_id, opened)
        else:
            named = {(q["broker"], q["queue_id"]) for q in details["queues"]}
            holders = {q: sum(q in h for h in holding.values()) for q in named}
            double = opened["anomaly"] == "OBSERVED_DOUBLE_HOLDING"
            assert named and all(n >= 2 if double else n == 0 for n in holders.values()), (holders, opened)
        assert any(e["status"] == "CLOSED" and e["episode_id"] == opened["episode_id"] for e in episodes_)


def held_at(clients: list, topic: str, at_ms: int) -> set[Queue]:
    """The queues of ``topic`` any of ``clients`` held at ``at_ms``, from their own timed held lines."""
    found: set[Queue] = set()
    for client in clients:
        lines = [line for line in client.of_kind("held") if line["time"] <= at_ms]
        found |= held_in(lines[-1], topic) if lines else set()
    return found


def test_a_machine_room_nearby_group_is_analysed_with_its_rule(played, spark):
    """Three AllocateMachineRoomNearby clients (two in room a, one in room b): the collector reports the bare
    strategy name, the group's rule supplies the inner strategy and the rooms, and the expected assignment equals
    what each real client holds; the room-b client holds exactly broker-b's queues (the rooms were in play)."""
    scenarios = played("5")
    run = scenarios.run
    group = run.group("nearby")
    clients = scenarios.clients[group]
    assert held(clients[2], run.topic) == {q for q in run.queues if q[0] == "broker-b"}
    assert sorted(q for c in clients for q in held(c, run.topic)) == sorted(run.queues)
    assert_expected_is_held(run, spark, group, clients, scenarios.settled[group])

    snapshots = run.read(spark, "group_snapshots", group)
    assert snapshots and {r["strategy"] for r in snapshots} == {"MACHINE_ROOM_NEARBY-AVG"}
    sources = [json.loads(r["details"])["strategy_sources"] for r in snapshots]
    assert "reported" in {source.get("strategy") for source in sources}, sources
    assert episodes(run, spark, group, "UNKNOWN_STRATEGY") == []


# A double holding's bounds from the clients' held lines: it began after one time and by another, and ended after
# one and by another (None while it lasts). A line is printed by a watcher that scans every 100 ms: it shows a change
# made after the previous scan began (its ``after``) and before it was printed (its ``time``).
Span = tuple[int, int, int | None, int | None, tuple[str, ...]]


def held_spans(clients: list, topic: str) -> dict[tuple[str, int], list[Span]]:
    """Per queue of ``topic``, the spans in which two or more of ``clients`` held it together, with their client
    ids, from each client's own timed ``held`` lines."""
    changes = sorted(
        (line["time"], line.get("after", line["time"]), c.client_id, held_in(line, topic))
        for c in clients
        for line in c.of_kind("held")
    )
    holding: dict[str, frozenset] = {}
    spans: dict[tuple[str, int], list[list]] = {}
    for at, after, client_id, queues in changes:
        holding[client_id] = queues
        for queue in {q for qs in holding.values() for q in qs} | set(spans):
            holders = tuple(sorted(c for c, qs in holding.items() if queue in qs))
            open_span = spans.get(queue, [])[-1:] and spans[queue][-1][3] is None
            if len(holders) >= 2 and not open_span:
                spans.setdefault(queue, []).append([after, at, None, None, holders])
            elif len(holders) < 2 and open_span:
                spans[queue][-1][2:4] = [after, at]
    return {q: [tuple(span) for span in found] for q, found in spans.items()}  # type: ignore[misc]


def held_in(line: dict, topic: str) -> frozenset:
    return frozenset((b, q) for b, q in line["queues"].get(topic, []))


def test_a_stale_route_is_recorded_as_observed_double_holding_while_it_lasts(played, spark):
    """The slow client keeps its old route's share (a1) after the topic grew to 3 queues, while the fast client
    already computes a0 a1 on the new route: both hold a1, as each prints its own process queues. The monitor,
    from the clients' running info, records that as OBSERVED_DOUBLE_HOLDING while it lasts (not DOUBLE_OWNED_QUEUES:
    no allocation predicts it), naming a1 and both holders, and closes it once the slow client let a1 go."""
    scenarios = played("5")
    run, group = scenarios.run, scenarios.run.group("stale")
    clients = scenarios.clients[group]
    route_at = scenarios.seen["stale_route_at"]
    doubles = {q: spans for q, spans in held_spans(clients, stale_topic(run)).items() if spans[-1][1] >= route_at}
    assert list(doubles) == [("broker-a", 1)], f"the clients did not both hold a1 after the route change: {doubles}"
    ((began_after, _, ended_after, ended_by, holders),) = doubles[("broker-a", 1)][-1:]
    assert holders == tuple(sorted(c.client_id for c in clients))
    observed = episodes(run, spark, group, "OBSERVED_DOUBLE_HOLDING")
    (opened,) = [e for e in observed if e["status"] == "OPENED"]
    # Opened on reports taken while both held a1: after it began, and by the time it ended.
    assert began_after <= opened["opened_at_ms"] and (ended_by is None or opened["opened_at_ms"] <= ended_by)
    (queue,) = json.loads(opened["details"])["queues"]
    assert (queue["broker"], queue["queue_id"], tuple(queue["holders"])) == ("broker-a", 1, holders)
    if ended_after is not None:
        (closed,) = [e for e in observed if e["status"] == "CLOSED"]
        assert closed["closed_at_ms"] >= ended_after, (closed["closed_at_ms"], ended_after, ended_by)
    assert episodes(run, spark, group, "DOUBLE_OWNED_QUEUES") == []


def test_a_member_restarted_again_and_again_is_flapping_with_its_real_joins_and_leaves(played, spark):
    """The flapping member's process stopped and started again ``FLAPS`` times under one client id: its group's
    FLAPPING_MEMBERS episode names that id alone, not the steady member's, with a join for each process started
    and a leave for each stopped (each seen through both brokers, counted once when their polls saw it within the
    coalescing second, else twice)."""
    scenarios = played("5")
    run, group = scenarios.run, scenarios.run.group("flapping")
    steady, *flaps = scenarios.seen["flapping"]
    assert len(flaps) == FLAPS + 1 and len({c.client_id for c in flaps}) == 1
    (current,) = [r for r in run.read(spark, "anomalies_current", group) if r["anomaly"] == "FLAPPING_MEMBERS"]
    members = json.loads(current["details"])["members"]
    assert set(members) == {flaps[0].client_id} and steady.client_id not in members
    counted = members[flaps[0].client_id]
    assert len(flaps) <= counted["joins"] <= 2 * len(flaps) and FLAPS <= counted["leaves"] <= 2 * FLAPS, counted


def test_short_lived_members_are_a_rebalance_storm_naming_each(played, spark):
    """Members that joined the flapping group in one process and left with it (a crash loop under new client ids
    makes them): the group's REBALANCE_STORM episode counts each one's join and leave as unconverged, the flapping
    member's restarts beyond one too, and names no steady member."""
    scenarios = played("5")
    run, group = scenarios.run, scenarios.run.group("flapping")
    steady, flapping = scenarios.seen["flapping"][:2]
    short_lived = {c.client_id for c in scenarios.seen["storm"]}
    (opened,) = [e for e in episodes(run, spark, group, "REBALANCE_STORM") if e["status"] == "OPENED"]
    unconverged = json.loads(opened["details"])["unconverged_by_subject"]
    assert {c: unconverged.get(c) for c in short_lived} == dict.fromkeys(short_lived, 2), unconverged
    assert set(unconverged) == short_lived | {flapping.client_id} and steady.client_id not in unconverged


def knows_broker_b(client: Client, topic: str) -> bool:
    """Whether the client ever held a queue of ``topic`` on broker-b (its own held lines): its route had broker-b."""
    return any(broker == "broker-b" for line in client.of_kind("held") for broker, _ in held_in(line, topic))


def test_a_client_on_an_old_route_makes_diverging_views_and_a_mismatch(played, spark):
    """The diverging group's topic grew to broker-b; its fast client read the new route and holds broker-b queues
    at times (its own held lines), the slow one keeps the old route (broker-a only) and its old share. The monitor's
    DIVERGING_BROKER_VIEWS episode names the members each broker lists, as the clients' routes make them, and its
    ASSIGNMENT_MISMATCH the slow client with what it holds (its own table) against what the monitor expects of it."""
    scenarios = played("5")
    run = scenarios.run
    group, topic = run.group("diverge"), diverge_topic(run)
    fast, slow = scenarios.clients[group]
    assert knows_broker_b(fast, topic) and not knows_broker_b(slow, topic)

    current = run.read(spark, "anomalies_current", group)
    (diverging,) = [r for r in current if r["anomaly"] == "DIVERGING_BROKER_VIEWS"]
    views = json.loads(diverging["details"])["views"]
    assert views == {"broker-a": sorted([fast.client_id, slow.client_id]), "broker-b": [fast.client_id]}, views
    (mismatch,) = [r for r in current if r["anomaly"] == "ASSIGNMENT_MISMATCH" and r["topic"] == topic]
    named = json.loads(mismatch["details"])["clients"][slow.client_id]
    expected = expected_by_client(run.read(spark, "current_assignment", group), group, topic)[slow.client_id]
    holds = held(slow, topic)
    assert {(q["broker"], q["queue_id"]) for q in named["unexpected"]} == holds - expected != set(), named
    assert {(q["broker"], q["queue_id"]) for q in named["missing"]} == expected - holds != set(), named


def test_an_operator_s_reset_of_an_offline_group_is_a_rewind(played, spark):
    """mqadmin resetOffsetByTime of the offline group (its consumers dead) sets every queue's offset back (the
    brokers' consume stats just before, its own table of the offsets reset to): the monitor judges each queue
    REWIND at the samples after the reset, with the offset it was reset to, and at no sample before it."""
    scenarios = played("5")
    run, group = scenarios.run, scenarios.run.group("offline")
    at, output = scenarios.seen["rewind"]
    reset = reset_offsets(scenarios.seen, group, run.topic)
    assert set(reset) == run.queues and all(before > after for before, after in reset.values()), output
    rewinds = [r for r in run.read(spark, "consume_progress", group) if r["state"] == "REWIND"]
    assert {(r["topic"], r["broker"], r["queue_id"]) for r in rewinds} == {(run.topic, *q) for q in run.queues}
    assert all(r["event_time_ms"] > at and r["severity"] == "critical" for r in rewinds), rewinds
    assert all(r["consumer_offset"] == reset[(r["broker"], r["queue_id"])][1] for r in rewinds), rewinds


# Later than any event time: a group that never converged again.
NEVER_MS = 2**63 - 1


def converged_at(scenarios: Played, group: str, topic: str) -> int:
    """When the group's real clients had last converged on ``topic`` (their held queues of it steady): the first
    settling, the survivors' for the departure groups, the slow client's move to the new route for the stale-route
    group, and in any case no earlier than the last change of a client's holding of the topic (the settling waits
    on the group's topic, not its retry topic: that one's queues appear on each broker as the clients use it, and
    the clients see them at their next route poll); never again for the diverging group once its topic grew (its
    slow client keeps the old route to the end), nor for the double group (its clients' strategies disagree for
    good)."""
    run = scenarios.run
    if group in (run.group("diverge"), run.group("double")):
        return NEVER_MS
    clients = scenarios.clients[group]
    if group in (run.group("departing"), run.group("frozen")):
        settled = scenarios.seen["survivors_settled_at"]
    elif group == run.group("stale"):
        spans = held_spans(clients, stale_topic(run))
        ends = [ended_by for found in spans.values() for *_, ended_by, _ in found]
        settled = max([scenarios.seen["settled_at"], *[e for e in ends if e is not None]])
    else:
        settled = scenarios.seen["settled_at"]
    return max(settled, last_holding_change(clients, topic))


def last_holding_change(clients: list, topic: str) -> int:
    """The time of the latest held line of ``clients`` whose queues of ``topic`` differ from the client's line
    before it (0 when none ever held it)."""
    latest = 0
    for client in clients:
        before: frozenset = frozenset()
        for line in client.of_kind("held"):
            now = held_in(line, topic)
            if now != before:
                latest = max(latest, line["time"])
            before = now
    return latest


@pytest.mark.parametrize("line", ["5", "4.9"])
def test_no_assignment_mismatch_opens_after_the_real_clients_converged(played, spark, line):
    """Reports from before a group's latest generation plus the clients' rebalance delay are not compared, so no
    group whose real clients had converged gets an ASSIGNMENT_MISMATCH afterwards; and where their reports count,
    each queue's holders in queue_holders_current are the clients that print it among their own process queues."""
    scenarios = played(line)
    run = scenarios.run
    late = {
        group: [
            (e["topic"], e["opened_at_ms"])
            for e in episodes(run, spark, group, "ASSIGNMENT_MISMATCH")
            if e["status"] == "OPENED" and e["opened_at_ms"] > converged_at(scenarios, group, e["topic"])
        ]
        for group in scenarios.clients
    }
    assert late == {g: [] for g in late}
    for _, group, *_ in assignment_specs(run, line):
        if group.endswith("_broadcast"):
            continue
        rows = [r for r in run.read(spark, "queue_holders_current", group) if r["topic"] == run.topic]
        real = {q: sorted(c.client_id for c in scenarios.clients[group] if q in held(c, run.topic)) for q in run.queues}
        assert {(r["broker"], r["queue_id"]): sorted(r["holders"]) for r in rows} == real, group
        assert {r["state"] for r in rows} == {"HELD"}, group


# mqadmin's printed tables: a consumerConnection row (client id, address); a consumerProgress row (topic, broker,
# queue, broker offset, consumer offset, with ``-s true`` the holder's IP or N/A, diff); a running info's
# subscription and ProcessQueueInfo rows (consumerStatus -i).
CONNECTION_ROW = re.compile(r"^(\S+@\S+)\s+(\S+:\d+)\s+\S+\s+V", re.M)
PROGRESS_ROW = re.compile(
    r"^(\S+)\s+(broker-\w+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(?:(\S*[./]\S*)\s+)?(-?\d+)\s+-?\d+\s", re.M
)
SUBSCRIPTION_ROW = re.compile(r"^\d{3} Topic: (\S+)\s+ClassFilter", re.M)
QUEUE_DETAIL_ROW = re.compile(r"^(\S+)\s+(broker-\w+)\s+(\d+)\s+ProcessQueueInfo \[(.*)\]$", re.M)


def reset_offsets(seen: dict[str, Any], group: str, topic: str) -> dict[Queue, tuple[int, int]]:
    """Each queue's consumer offset before the rewind (the brokers' consume stats) and the one resetOffsetByTime's
    table (``RESET_ROW``) says it reset to."""
    before = {
        (broker, q["queue_id"]): q["consumer_offset"]
        for broker, queues in seen["before_rewind"][group].items()
        for q in queues
        if q["topic"] == topic
    }
    return {(b, int(q)): (before[(b, int(q))], int(reset)) for b, q, reset in RESET_ROW.findall(seen["rewind"][1])}


def first_rewind_ms(scenarios: Played, spark) -> int:
    """When the offline group's first queue was judged REWIND."""
    rows = scenarios.run.read(spark, "consume_progress", scenarios.run.group("offline"))
    return min(r["event_time_ms"] for r in rows if r["state"] == "REWIND")


# Sections whose ``query progress`` is asked as the queues were at a moment: the rewind's at one it held (the job's
# window has left it by the end), the double holding's and the slow listener's when their commands ran.
RUNBOOK_AT = {
    PROGRESS_ALERTS[QueueState.REWIND].name: first_rewind_ms,
    PROGRESS_ALERTS[QueueState.DOUBLE_OWNED].name: lambda scenarios, _: scenarios.seen["double_checked"][1],
    PROGRESS_ALERTS[QueueState.SLOW].name: lambda scenarios, _: scenarios.seen["slow_checked"]["first"],
}


# consumerProgress's LastTime of a row (after the diff and the in-flight count): the store time of the message
# before the consumer offset, in the tools' local time, or N/A.
LAST_TIME_ROW = re.compile(
    r"^(\S+)\s+(broker-\w+)\s+(\d+)\s+\d+\s+\d+\s+(?:\S*[./]\S*\s+)?-?\d+\s+-?\d+\s+(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d|N/A)",
    re.M,
)


# A running info's allocation strategy property (consumerStatus -i): its class's simple name.
STRATEGY_PROPERTY = re.compile(r"^allocateMessageQueueStrategy\s*: (?:\S+\.)?(\w+)@", re.M)
CONSUME_TPS = re.compile(r"^Consume TPS: ([\d.]+)$", re.M)


def last_times(output: str, topic: str) -> dict[Queue, float]:
    """consumerProgress's LastTime of each queue of ``topic`` that has one, in epoch seconds (the tools print the
    machine's local time, as ``time.mktime`` reads it)."""
    return {
        (broker, int(queue_id)): time.mktime(time.strptime(at, "%Y-%m-%d %H:%M:%S"))
        for t, broker, queue_id, at in LAST_TIME_ROW.findall(output)
        if t == topic and at != "N/A"
    }


def consumed_by(client, topic: str, at_ms: int) -> int:
    """How many messages of ``topic`` the client had consumed by ``at_ms``, from its own timed held lines."""
    lines = [line for line in client.of_kind("held") if line["time"] <= at_ms]
    return lines[-1]["consumed"].get(topic, 0) if lines else 0


def both_held_at(clients: list, topic: str, at_ms: int) -> set[Queue]:
    """The queues of ``topic`` every one of ``clients`` held at ``at_ms`` (their own timed held lines)."""
    return set.intersection(*(held_at([c], topic, at_ms) for c in clients))


def mqadmin_output(seen: dict, heading: str, verb: str) -> dict[str, str]:
    """What the section's ``mqadmin VERB`` printed during the play, by the client it named ("" for none)."""
    found = {client: out for (h, command, client), out in seen.items() if h == heading and command.split()[1] == verb}
    assert found, f"{heading} names no mqadmin {verb} (or it was not run)"
    return found


def progress_rows(output: str, topic: str) -> dict[Queue, tuple[int, int, str | None, int]]:
    """consumerProgress's rows of ``topic``: (broker offset, consumer offset, client IP or None, diff) by queue."""
    rows = {}
    for t, broker, queue_id, broker_offset, consumer_offset, ip, diff in PROGRESS_ROW.findall(output):
        if t == topic:
            rows[(broker, int(queue_id))] = (int(broker_offset), int(consumer_offset), ip or None, int(diff))
    return rows


def queue_details(output: str, topic: str) -> dict[Queue, dict[str, str]]:
    """A running info's ProcessQueueInfo of each queue of ``topic`` it holds, field by field."""
    return {
        (broker, int(queue_id)): dict(field.split("=", 1) for field in info.split(", "))
        for t, broker, queue_id, info in QUEUE_DETAIL_ROW.findall(output)
        if t == topic
    }


def test_each_runbook_command_confirms_its_incident_on_the_real_cluster(played, spark, capsys):
    """The runbook sections of the incidents played here: each mqadmin command they name, run while the incident
    was live, shows it as the real clients and brokers have it; each monitor query they name answers for the
    group."""
    scenarios = played("5")
    run, seen = scenarios.run, scenarios.seen["runbook"]
    lags = {name: broker_stats(scenarios.seen, run.group(name)) for name in ("circle_dup", "offline", "stuck")}

    # Duplicate client id: consumerConnection lists the twins' id once per real process, each its own address.
    twins = runbook_clients(scenarios, "circle_dup")
    (listed,) = mqadmin_output(
        seen, CATALOGUE[AnomalyKind.DUPLICATE_CLIENT_ID].alert_name, "consumerConnection"
    ).values()
    addresses = [addr for client, addr in CONNECTION_ROW.findall(listed) if client in twins]
    real_twins = [c for c in scenarios.clients[run.group("circle_dup")] if c.client_id in twins]
    assert len(set(addresses)) == len(real_twins) == 2, listed

    # Inconsistent subscription: each member's running info lists the topics the member subscribes.
    members = {c.client_id: c for c in scenarios.clients[run.group("ownsub")]}
    subscribed = {"first-only": {run.topic}, "both": {run.topic, f"{run.prefix}_second"}}
    status = mqadmin_output(seen, alert_of(AnomalyKind.INCONSISTENT_SUBSCRIPTION), "consumerStatus")
    assert set(status) == set(members)
    for client, output in status.items():
        topics = {t for t in SUBSCRIPTION_ROW.findall(output) if not t.startswith("%RETRY%")}
        assert topics == subscribed[members[client].name], output

    # Offline group: no broker lists a connection; consumerProgress's Diff is the brokers' lag of every queue.
    (connections,) = mqadmin_output(seen, alert_of(AnomalyKind.OFFLINE_GROUP_BACKLOG), "consumerConnection").values()
    assert not CONNECTION_ROW.findall(connections) and "CODE: 206" in connections, connections  # not online
    (offline,) = mqadmin_output(seen, alert_of(AnomalyKind.OFFLINE_GROUP_BACKLOG), "consumerProgress").values()
    rows = progress_rows(offline, run.topic)
    assert {q: r[3] for q, r in rows.items()} == {(b, q): broker_lag(r) for (_, b, q), r in lags["offline"].items()}
    assert all(r[3] > 0 for r in rows.values()), offline

    # Confirmed orphans: consumerProgress -s true shows the queues no client holds with no holder (N/A) and the
    # brokers' lag; the expected owner's running info holds its share and none of them.
    dup = scenarios.clients[run.group("circle_dup")]
    unheld = run.queues - {q for c in dup for q in held(c, run.topic)}
    orphans = PROGRESS_ALERTS[QueueState.ORPHAN_CONFIRMED].name
    (progress_out,) = mqadmin_output(seen, orphans, "consumerProgress").values()
    rows = progress_rows(progress_out, run.topic)
    assert {q for q, r in rows.items() if r[2] == "N/A"} == unheld, progress_out
    for queue in unheld:
        assert rows[queue][3] == broker_lag(lags["circle_dup"][(run.topic, *queue)]) > 0
    (owner_status,) = mqadmin_output(seen, orphans, "consumerStatus").values()
    assert set(queue_details(owner_status, run.topic)) == set(held(real_twins[0], run.topic)), owner_status
    # The same queues as the predicted orphans' section shows them; the twins' common queues (doubly owned) are
    # in the running info of their id.
    (predicted,) = mqadmin_output(seen, alert_of(AnomalyKind.ORPHANED_QUEUES), "consumerProgress").values()
    assert {q for q, r in progress_rows(predicted, run.topic).items() if r[2] == "N/A"} == unheld, predicted
    doubly = set(held(real_twins[0], run.topic)) & set(held(real_twins[1], run.topic))
    (twin_status,) = mqadmin_output(seen, alert_of(AnomalyKind.DOUBLE_OWNED_QUEUES), "consumerStatus").values()
    assert doubly and doubly <= set(queue_details(twin_status, run.topic)), twin_status

    # Stuck holder: its running info shows the blocked message as the oldest cached one; the Diff does not fall.
    blocked = scenarios.seen["blocked"]
    queue = (blocked["broker"], blocked["queue_id"])
    (holder_status,) = mqadmin_output(seen, PROGRESS_ALERTS[QueueState.STUCK_HOLDER].name, "consumerStatus").values()
    info = queue_details(holder_status, blocked["topic"])[queue]
    assert int(info["cachedMsgMinOffset"]) == blocked["queue_offset"] and int(info["cachedMsgCount"]) > 0, info
    (stuck,) = mqadmin_output(seen, PROGRESS_ALERTS[QueueState.STUCK_HOLDER].name, "consumerProgress").values()
    _, consumer_offset, _, diff = progress_rows(stuck, blocked["topic"])[queue]
    assert consumer_offset == blocked["queue_offset"] and diff == broker_lag(lags["stuck"][(blocked["topic"], *queue)])

    # Observed double holding (the stale route): each client's running info, read while both held a1, lists a1.
    stale = scenarios.clients[run.group("stale")]
    status = mqadmin_output(seen, alert_of(AnomalyKind.OBSERVED_DOUBLE_HOLDING), "consumerStatus")
    assert set(status) == {c.client_id for c in stale}, "the double holding ended before its commands ran"
    for output in status.values():
        assert ("broker-a", 1) in queue_details(output, stale_topic(run)), output

    # Observed unheld queues (the stale route): consumerProgress -s true, run once both held a1, shows the queues
    # neither client held then (a2, the slow client's share on the new route, unless its next read came while the
    # commands ran) with Client IP N/A, and no other.
    (unheld_out,) = mqadmin_output(seen, alert_of(AnomalyKind.OBSERVED_UNHELD_QUEUES), "consumerProgress").values()
    grown = {("broker-a", q) for q in range(3)}
    unheld_then = [frozenset(grown - held_at(stale, stale_topic(run), at)) for at in scenarios.seen["stale_checked"]]
    rows = progress_rows(unheld_out, stale_topic(run))
    not_pulled = {q for q, r in rows.items() if r[2] == "N/A"}
    # A message (not a tuple) so that pytest prints all of it: the rows, and the table as mqadmin printed it.
    shown = unheld_out[max(unheld_out.find("#Topic"), 0) :]
    assert unheld_then[0] == {("broker-a", 2)} and not_pulled in unheld_then, (
        f"unheld at the checks {unheld_then}, N/A {sorted(not_pulled)}, rows {rows}\n{shown}"
    )

    # Flapping member: consumerConnection, run while the member was gone and once it was back (with the short-lived
    # members of its process), lists its id only the second time, beside the steady member's both times.
    steady, flapping = scenarios.seen["flapping"][0], scenarios.seen["flapping"][1]
    short_lived = {c.client_id for c in scenarios.seen["storm"]}
    listed = mqadmin_output(seen, alert_of(AnomalyKind.FLAPPING_MEMBERS), "consumerConnection")
    ids = {moment: {client for client, _ in CONNECTION_ROW.findall(out)} for moment, out in listed.items()}
    back = {steady.client_id, flapping.client_id} | short_lived
    assert ids == {"gone": {steady.client_id}, "back": back}, listed
    # Rebalance storm: consumerConnection lists the short-lived members while they lived, and not once they left.
    listed = mqadmin_output(seen, alert_of(AnomalyKind.REBALANCE_STORM), "consumerConnection")
    ids = {moment: {client for client, _ in CONNECTION_ROW.findall(out)} for moment, out in listed.items()}
    assert len(short_lived) == STORM_MEMBERS and ids == {"back": back, "left": {steady.client_id}}, listed

    # Diverging views: each broker's own list (consumerConnection -b) holds the clients that know that broker, as
    # the clients' own holdings show it (the slow client never held a queue of broker-b: its route has none);
    # clusterList gives both brokers' addresses.
    fast, slow = scenarios.clients[run.group("diverge")]
    topic = diverge_topic(run)
    assert knows_broker_b(fast, topic) and not knows_broker_b(slow, topic)
    listed = mqadmin_output(seen, alert_of(AnomalyKind.DIVERGING_BROKER_VIEWS), "consumerConnection")
    ids = {broker: {client for client, _ in CONNECTION_ROW.findall(out)} for broker, out in listed.items()}
    assert ids == {"broker-a": {fast.client_id, slow.client_id}, "broker-b": {fast.client_id}}, listed
    (cluster,) = mqadmin_output(seen, alert_of(AnomalyKind.DIVERGING_BROKER_VIEWS), "clusterList").values()
    assert all(run.cluster.broker_addr(b) in cluster for b in BROKERS), cluster
    # Assignment mismatch: the slow client's running info holds its old route's share, what it prints it holds;
    # unless the broker consumerStatus asks (the first of the retry topic's route) is broker-b, which does not list
    # it (above): then it is "not online", as the runbook warns.
    (slow_status,) = mqadmin_output(seen, alert_of(AnomalyKind.ASSIGNMENT_MISMATCH), "consumerStatus").values()
    if "not online" in slow_status:
        assert f"<{run.group('diverge')}> <{slow.client_id}> not online" in slow_status, slow_status
    else:
        assert set(queue_details(slow_status, topic)) == set(held(slow, topic)) != set(), slow_status

    # Double ownership (two strategies): each holder's running info, read once the holding had lasted the alert's
    # for, lists every queue both clients held then and still held after (their own held lines).
    doubled = scenarios.clients[run.group("double")]
    _, double_from, double_to = scenarios.seen["double_checked"]
    both_held = [both_held_at(doubled, lasting_topic(run), at) for at in (double_from, double_to)]
    assert both_held[0] == both_held[1] != set(), both_held
    status = mqadmin_output(seen, PROGRESS_ALERTS[QueueState.DOUBLE_OWNED].name, "consumerStatus")
    assert set(status) == {c.client_id for c in doubled}, status
    for output in status.values():
        assert both_held[0] <= set(queue_details(output, lasting_topic(run))), output
    # ... and its strategy among its properties: one on each (the cause the section points to).
    strategies = sorted(s for output in status.values() for s in STRATEGY_PROPERTY.findall(output))
    assert strategies == ["AllocateMessageQueueAveragely", "AllocateMessageQueueAveragelyByCircle"], strategies

    # Slow listener: consumerProgress, run twice apart while the producer wrote, shows each queue of its
    # topic consumed (the consumer offset advanced), its Diff grown, and a LastTime (the store time of the last
    # consumed message) older than the slow threshold.
    slow_client = scenarios.clients[run.group("slow")][0]
    slow_out = mqadmin_output(seen, PROGRESS_ALERTS[QueueState.SLOW].name, "consumerProgress")
    slow_rows = {moment: progress_rows(out, lasting_topic(run)) for moment, out in slow_out.items()}
    slow_queues = all_queues(run.cluster.route(lasting_topic(run)))
    first, second = slow_rows["first"], slow_rows["second"]
    assert set(first) == set(second) == slow_queues, slow_out
    assert all(second[q][1] > first[q][1] and second[q][3] > first[q][3] > 0 for q in slow_queues), slow_rows
    checked = scenarios.seen["slow_checked"]
    for moment, out in slow_out.items():
        ages = {q: checked[moment] / 1000 - at for q, at in last_times(out, lasting_topic(run)).items()}
        assert set(ages) == slow_queues and all(age > SLOW_TIME_LAG_S for age in ages.values()), (ages, out)
    # Its Consume TPS counts what the group pulled, twice what the client consumed meanwhile and more (its own
    # count).
    consumed = [consumed_by(slow_client, lasting_topic(run), checked[m]) for m in ("first", "second")]
    consumed_per_s = (consumed[1] - consumed[0]) * 1000 / (checked["second"] - checked["first"])
    (tps,) = CONSUME_TPS.findall(slow_out["second"])
    assert 0 < 2 * consumed_per_s < float(tps), (consumed_per_s, slow_out["second"])

    # Rewind: consumerProgress shows the offsets the operator's reset set (nothing consumed since).
    reset = reset_offsets(scenarios.seen, run.group("offline"), run.topic)
    (rewound,) = mqadmin_output(seen, PROGRESS_ALERTS[QueueState.REWIND].name, "consumerProgress").values()
    assert {q: r[1] for q, r in progress_rows(rewound, run.topic).items()} == {q: r[1] for q, r in reset.items()}

    # The monitor's own commands of each section answer for the group (a state the job's window has left since, as
    # at a moment it held).
    delta_root = str(run.config.paths.delta_root)
    history: dict[str, list[dict]] = {}
    progressed: dict[str, list[dict]] = {}
    for heading, name in RUNBOOK_CHECKED.items():
        for command in confirm_commands(heading):
            if command.startswith("query "):
                group = run.group(name)
                words = [group if w == "G" else w.replace("'G'", f"'{group}'") for w in shlex.split(command)]
                if words[1] == "progress" and heading in RUNBOOK_AT:
                    words += ["--at", str(RUNBOOK_AT[heading](scenarios, spark))]
                code = cli_main([*words, "--delta-root", delta_root, "--json"])
                answer = capsys.readouterr().out
                assert code == 0 and json.loads(answer), (command, answer)
                rows = json.loads(answer)
                assert all(r.get("group", group) == group for r in rows), command
                if words[1] == "sql":
                    history[heading] = rows
                if words[1] == "progress":
                    progressed[heading] = rows
    # The rewind's history: each queue's consumer offset before the reset, then the one it was reset to.
    offsets: dict[Queue, list[int]] = {}
    for row in history[PROGRESS_ALERTS[QueueState.REWIND].name]:
        if row["topic"] == run.topic:
            offsets.setdefault((row["broker"], row["queue_id"]), []).append(row["consumer_offset"])
    # The mismatch's holders: the queues the slow client holds (its own held lines), each expected of another.
    holders = [r for r in history[alert_of(AnomalyKind.ASSIGNMENT_MISMATCH)] if r["topic"] == topic]
    slow_holds = {(r["broker"], r["queue_id"]) for r in holders if slow.client_id in r["holders"]}
    assert slow_holds == held(slow, topic), holders
    assert not any(slow.client_id in r["expected_owners"] for r in holders if slow.client_id in r["holders"]), holders
    # The storm's and flapping member's history: each short-lived member joined and left (seen gone by a poll).
    for heading in (alert_of(AnomalyKind.REBALANCE_STORM), alert_of(AnomalyKind.FLAPPING_MEMBERS)):
        changes = {(r["client_id"], r["change"]) for r in history[heading]}
        members = short_lived if heading == alert_of(AnomalyKind.REBALANCE_STORM) else {flapping.client_id}
        assert {(c, change) for c in members for change in ("JOIN", "VANISHED")} <= changes, (heading, changes)
    # The double-owned and slow queues as the monitor had them when their sections' commands ran: the queues both
    # clients held, naming both; the slow topic's queues, held by the slow client.
    named = progressed[PROGRESS_ALERTS[QueueState.DOUBLE_OWNED].name]
    assert {(r["broker"], r["queue_id"]) for r in named if r["topic"] == lasting_topic(run)} == both_held[0], named
    assert all(sorted(r["holders"]) == sorted(c.client_id for c in doubled) for r in named), named
    named = progressed[PROGRESS_ALERTS[QueueState.SLOW].name]
    assert {(r["broker"], r["queue_id"]) for r in named if r["topic"] == lasting_topic(run)} == slow_queues, named
    assert all(r["holders"] == [slow_client.client_id] for r in named), named
    for queue, (before, after) in reset.items():
        seen_offsets = offsets[queue]
        last_before = len(seen_offsets) - 1 - seen_offsets[::-1].index(before)
        assert set(seen_offsets[last_before + 1 :]) == {after}, (queue, before, after, seen_offsets)
