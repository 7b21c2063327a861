"""A deterministic RocketMQ fleet simulator producing the monitor's input events.

Brokers serve topics; consumer groups' clients heartbeat every broker every 30 s (one channel per
client and broker); producers send with per-broker latency distributions. Client ids follow RocketMQ's
formats per client line: ``IP@PID#nanotime`` (4.9.0+ and 5.x), the old ``IP@PID``, and containers that
all present PID 1 behind one bridge IP (``172.17.0.1@1``).

Named scenarios each inject one known problem into their own consumer group (or broker), so tests and the
demo know exactly what the monitor must report -- ``Scenario.expected`` lists it, and nothing else may be
reported for the scenario's groups and brokers. ``mixed`` runs them all. Everything is seeded: the same
scenario, seed and start time give the same events. Event time is virtual: ``events_until(t)`` yields
every event up to ``t``, so callers choose how fast it runs.

Offsets (``streaming.app.simulation.progress``): producers store messages at a per-topic rate (``write_rates``,
messages per second and queue) and each group's holders commit at its consume rate; every 30 s a
``consume_progress`` sample per group and broker, and on request (``assignment_reports``) each live member's
``reported_assignment`` with its ``ProcessQueueInfo``. ``Simulation.progress.facts()`` is what a monitor of
consume progress should conclude: lags, confirmed orphans, stuck holders, offline groups with a backlog.

Knobs: ``namespace`` prefixes every group, topic, broker and producer group (``"s1"`` -> ``s1-orders``), so
several scenarios can share one Kafka topic set and one job without touching each other's state, with the
same events otherwise; ``extra_groups`` / ``clients_per_group`` add healthy groups (load),
``queues_per_broker`` and ``sends_per_second`` size the routes and the producers' send rate.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from streaming.app.simulation.progress import HEARTBEAT_MS, PROGRESS_INTERVAL_MS, ProgressModel
from streaming.contract.events import CLUSTER_FIELD, CLUSTER_SINCE_VERSION, EventType

BROKERS = ("broker-a", "broker-b")
AVOIDED = "BROKER_AVOIDED"  # the pseudo-anomaly of ``expected`` for brokers producers must avoid
# the pseudo-anomaly of ``expected`` for a producer group whose producers find every broker unavailable
ALL_UNAVAILABLE = "ALL_BROKERS_UNAVAILABLE"
WRITE_RATES = {"orders": 2.0, "payments": 0.5}  # messages per second and queue


@dataclass
class Member:
    client_id: str
    ip: str
    topics: tuple[str, ...]
    joins_ms: int = 0
    leaves_ms: int | None = None  # clean shutdown (UNREGISTER to every broker)
    crashes_ms: int | None = None  # silent from then on
    hidden_from: tuple[str, ...] = ()  # brokers that never receive its heartbeats
    strategy: str | None = "AVG"
    version: str = "V5_3_3"
    stuck_from_ms: int | None = None  # its listener blocks from then: it holds its queues and advances none
    # False: its running info lists none of the queues it consumes (a client behind a proxy): a hidden consumer
    lists_queues: bool = True
    # its committed offset of every queue it holds is set back by rewind_by messages then (an offset reset)
    rewinds_at_ms: int | None = None
    rewind_by: int = 0


@dataclass
class Group:
    name: str
    members: list[Member]
    orderly: bool = False  # consumes orderly: its holders lock their queues on the broker


@dataclass
class Producer:
    producer_id: str
    group: str
    version: str
    sends_per_tick: int = 4
    # The simulated producers run with sendLatencyFaultEnable (RocketMQ's default is off) and say so in
    # every send result, so they avoid slow brokers whatever [producers] send_latency_fault_enable says.
    send_latency_fault_enable: bool = True


@dataclass
class Scenario:
    name: str
    description: str
    groups: list[Group] = field(default_factory=list)
    producers: list[Producer] = field(default_factory=list)
    slow_brokers: dict[str, tuple[int, int]] = field(default_factory=dict)  # broker -> latency range from start
    down_brokers: dict[str, int] = field(default_factory=dict)  # broker -> event offset (ms) where errors start
    # What the monitor must report, and all it may report, for this scenario's groups and brokers:
    # (group, anomaly kind) from anomaly_episodes, and (broker, BROKER_AVOIDED) for fault windows.
    expected: set[tuple[str, str]] = field(default_factory=set)
    topics: tuple[str, ...] = ("orders", "payments")
    brokers: tuple[str, ...] = BROKERS
    # messages per second and queue the producers store per topic (a topic not named: none), and per group the
    # messages per second and queue its holders consume (a group not named: progress.DEFAULT_CONSUME_RATE)
    write_rates: dict[str, float] = field(default_factory=lambda: dict(WRITE_RATES))
    consume_rates: dict[str, float] = field(default_factory=dict)
    # its members' running info is reported (``reported_assignment``), as an agent or the collector would
    reports: bool = False

    @property
    def group_names(self) -> set[str]:
        return {g.name for g in self.groups}

    @property
    def expected_anomalies(self) -> set[tuple[str, str]]:
        return {e for e in self.expected if e[1] != AVOIDED}

    @property
    def expected_avoided_brokers(self) -> set[str]:
        return {b for b, kind in self.expected if kind == AVOIDED}


def _cid(rng: random.Random, ip: str, line: str = "5") -> str:
    pid = rng.randint(100, 60000)
    return f"{ip}@{pid}" if line == "old" else f"{ip}@{pid}#{rng.randint(10**12, 10**15)}"


def _healthy_group(rng: random.Random, name: str, size: int, topics: tuple[str, ...], subnet: int) -> Group:
    members = [Member(_cid(rng, f"10.{subnet}.0.{i + 1}"), f"10.{subnet}.0.{i + 1}", topics) for i in range(size)]
    return Group(name, members)


def build_scenario(
    name: str, seed: int = 1, *, namespace: str = "", extra_groups: int = 0, clients_per_group: int = 4
) -> Scenario:
    """The named scenario; see the module docstring for the knobs (all default to the plain scenario)."""
    if name not in SCENARIOS + BENCH_SCENARIOS:
        raise ValueError(f"unknown scenario {name!r}; choose from: {', '.join(SCENARIOS + BENCH_SCENARIOS)}")
    if extra_groups < 0 or clients_per_group < 1:
        raise ValueError("extra_groups must be >= 0 and clients_per_group >= 1")
    rng = random.Random(seed)
    steady = _healthy_group(rng, "billing-steady", 4, ("orders",), 10)
    producers = [
        Producer(f"10.50.0.{i}@{200 + i}#{i}", "order-producers", "V4_9_8" if i % 2 else "5.3.3") for i in range(4)
    ]
    builders = {
        "steady": lambda: Scenario("steady", "healthy groups, fast brokers", [steady], producers),
        "scale-out": lambda: _scale_out(rng, producers),
        "crash": lambda: _crash(rng, producers),
        "duplicate-ids": lambda: _duplicates(rng, producers),
        "inconsistent-subscriptions": lambda: _inconsistent(rng, producers),
        "diverging-views": lambda: _diverging(rng, producers),
        "slow-broker": lambda: Scenario(
            "slow-broker",
            "broker-b answers in 0.6-3 s: producers avoid it",
            [steady],
            producers,
            slow_brokers={"broker-b": (600, 3000)},
            expected={("broker-b", AVOIDED)},
        ),
        "broker-outage": lambda: Scenario(
            "broker-outage",
            "broker-b fails every send after 60 s",
            [steady],
            producers,
            down_brokers={"broker-b": 60_000},
            expected={("broker-b", AVOIDED)},
        ),
        "rebalance-storm": lambda: _storm(rng, producers),
        "consume-progress": lambda: _progress(rng, producers),
        # Played alone (the alert-quality bench), never in ``mixed``: every broker failing would take the other
        # scenarios' sends with it, and running info reported for every group would change their expectations.
        "all-brokers-down": lambda: _all_brokers_down(steady),
        "strategy-mismatch": lambda: _strategy_mismatch(rng, producers),
        "progress-faults": lambda: _progress_faults(rng, producers),
    }
    if name == "mixed":
        scenario = _mixed([builders[n]() for n in SCENARIOS if n not in ("steady", "mixed")], steady, producers)
    else:
        scenario = builders[name]()
    if extra_groups:
        scenario = _with_extra_groups(scenario, seed, extra_groups, clients_per_group)
    return _namespaced(scenario, namespace) if namespace else scenario


def _mixed(parts: list[Scenario], steady: Group, producers: list[Producer]) -> Scenario:
    """Every consumer-side scenario beside each other, and the slow broker (the outage would need broker-b too)."""
    mixed = Scenario(
        "mixed",
        "every consumer-side scenario at once, each in its own group, and a slow broker-b",
        [steady],
        producers,
    )
    for part in parts:
        mixed.groups += [g for g in part.groups if g.name != steady.name]
        mixed.slow_brokers.update(part.slow_brokers)
        mixed.expected |= part.expected
        mixed.topics += tuple(t for t in part.topics if t not in mixed.topics)
        mixed.write_rates.update(part.write_rates)
        mixed.consume_rates.update(part.consume_rates)
    return mixed


def _with_extra_groups(scenario: Scenario, seed: int, count: int, size: int) -> Scenario:
    """Healthy load: ``count`` more groups of ``size`` members (own rng, so the scenario's ids do not move)."""
    rng = random.Random(seed * 7919 + count)
    extra = [
        Group(f"load-{i:04d}", [Member(_cid(rng, ip), ip, ("orders",)) for ip in _load_ips(i, size)])
        for i in range(count)
    ]
    return replace(scenario, groups=scenario.groups + extra)


def _load_ips(group: int, size: int) -> list[str]:
    return [f"10.{100 + group // 250}.{group % 250}.{1 + k % 250}" for k in range(size)]


def _namespaced(s: Scenario, ns: str) -> Scenario:
    def n(name: str) -> str:
        return f"{ns}-{name}"

    groups = [
        replace(
            g,
            name=n(g.name),
            members=[
                replace(m, topics=tuple(n(t) for t in m.topics), hidden_from=tuple(n(b) for b in m.hidden_from))
                for m in g.members
            ],
        )
        for g in s.groups
    ]
    return replace(
        s,
        groups=groups,
        producers=[replace(p, group=n(p.group)) for p in s.producers],
        slow_brokers={n(b): r for b, r in s.slow_brokers.items()},
        down_brokers={n(b): t for b, t in s.down_brokers.items()},
        expected={(n(x), kind) for x, kind in s.expected},
        topics=tuple(n(t) for t in s.topics),
        brokers=tuple(n(b) for b in s.brokers),
        write_rates={n(t): r for t, r in s.write_rates.items()},
        consume_rates={n(g): r for g, r in s.consume_rates.items()},
    )


def _scale_out(rng: random.Random, producers: list[Producer]) -> Scenario:
    group = _healthy_group(rng, "search-scale-out", 2, ("orders",), 11)
    group.members += [Member(_cid(rng, f"10.11.0.{i}"), f"10.11.0.{i}", ("orders",), joins_ms=90_000) for i in (3, 4)]
    return Scenario("scale-out", "two members join after 90 s", [group], producers)


def _crash(rng: random.Random, producers: list[Producer]) -> Scenario:
    group = _healthy_group(rng, "audit-crash", 3, ("orders",), 12)
    group.members[2].crashes_ms = 60_000
    # Silent expiry: the broker's scan removes the channel 120 s after its last heartbeat and sends no CHANGE;
    # the survivors' 20 s rebalance timer picks it up. No anomaly: cidAll covers every queue all along.
    return Scenario("crash", "a member crashes at 60 s and expires 120 s later", [group], producers)


def _duplicates(rng: random.Random, producers: list[Producer]) -> Scenario:
    group = _healthy_group(rng, "ledger-containers", 1, ("payments",), 13)
    group.members += [Member("172.17.0.1@1", f"10.13.1.{i}", ("payments",), version="V4_5_1") for i in (1, 2)]
    return Scenario(
        "duplicate-ids",
        "two containers report 172.17.0.1@1 (host networking, PID 1)",
        [group],
        producers,
        expected={(group.name, a) for a in ("DUPLICATE_CLIENT_ID", "ORPHANED_QUEUES", "DOUBLE_OWNED_QUEUES")},
    )


def _inconsistent(rng: random.Random, producers: list[Producer]) -> Scenario:
    group = _healthy_group(rng, "mailer-mixed-subs", 3, ("orders", "payments"), 14)
    group.members[2].topics = ("orders",)
    for i, member in enumerate(group.members):
        member.joins_ms = i * 7_000  # clients start apart, so their heartbeats (and the flips) do too
    return Scenario(
        "inconsistent-subscriptions",
        "one member does not subscribe payments",
        [group],
        producers,
        # The non-subscriber's share of payments is computed by the others but pulled by nobody: those queues
        # are the inconsistent subscription's (its episode names them), not an orphaned queues episode of their
        # own (docs/design/group-analysis.md). And the broker keeps one subscription table per group that every
        # heartbeat overwrites: the members' heartbeats flip payments in and out, each flip a CHANGE and a
        # rebalance of the clients (docs: rocketmq-semantics 5.3) -- but no queue moves, and the flips are the
        # inconsistent subscription's, not a storm's (docs/design/rebalance-storms.md).
        expected={(group.name, "INCONSISTENT_SUBSCRIPTION")},
    )


def _diverging(rng: random.Random, producers: list[Producer]) -> Scenario:
    group = _healthy_group(rng, "risk-split-view", 3, ("orders",), 15)
    group.members[1].hidden_from = ("broker-b",)
    return Scenario(
        "diverging-views",
        "broker-b never receives one member's heartbeats",
        [group],
        producers,
        expected={(group.name, "DIVERGING_BROKER_VIEWS")},
    )


def _storm(rng: random.Random, producers: list[Producer]) -> Scenario:
    group = _healthy_group(rng, "cache-flapping", 2, ("orders",), 16)
    for i in range(12):  # short-lived members: each joins, leaves 10 s later; a new one every 20 s
        group.members.append(
            Member(
                _cid(rng, f"10.16.1.{i}"),
                f"10.16.1.{i}",
                ("orders",),
                joins_ms=10_000 + i * 20_000,
                leaves_ms=20_000 + i * 20_000,
            )
        )
    # and one member that keeps restarting under the same client id: it joins and leaves every 20 s, more
    # than [anomalies] flapping_threshold (3) times within flapping_window_ms (10 min): flapping
    for life in range(3):
        group.members.append(
            Member(
                "10.16.2.1@7#1",
                "10.16.2.1",
                ("orders",),
                joins_ms=5_000 + life * 40_000,
                leaves_ms=25_000 + life * 40_000,
            )
        )
    return Scenario(
        "rebalance-storm",
        "short-lived members join and leave every 10 s; one member restarts every 40 s",
        [group],
        producers,
        expected={(group.name, "REBALANCE_STORM"), (group.name, "FLAPPING_MEMBERS")},
    )


def _progress(rng: random.Random, producers: list[Producer]) -> Scenario:
    stuck = _healthy_group(rng, "fulfil-stuck", 2, ("orders",), 17)
    stuck.members[0].stuck_from_ms = 60_000  # a listener that never returns pins each of its queues' offset
    offline = _healthy_group(rng, "archive-offline", 2, ("orders", "payments"), 18)
    for member in offline.members:
        member.crashes_ms = 120_000  # every member dies; the producers go on writing
    idle = _healthy_group(rng, "audit-idle", 2, ("audit",), 19)
    idle.orderly = True
    return Scenario(
        "consume-progress",
        "a stuck holder from 60 s, a group whose members all die at 120 s, an idle orderly group",
        [stuck, offline, idle],
        producers,
        # Membership stays healthy: the monitor's consume progress tells these apart (Simulation.progress.facts():
        # the stuck queues, the offline group's backlog, the idle group's lag 0); of them only the offline group's
        # backlog is an anomaly episode (the others are queue states in consume_progress).
        expected={(offline.name, "OFFLINE_GROUP_BACKLOG")},
        topics=("orders", "payments", "audit"),
        write_rates={**WRITE_RATES, "audit": 0.0},
    )


def _all_brokers_down(steady: Group) -> Scenario:
    # Producers of their own: whether every broker is unavailable to a producer is judged over every broker its
    # fault items name, so producers that also send elsewhere (another scenario's, in the same job) never are.
    producers = [Producer(f"10.51.0.{i}@{300 + i}#{i}", "audit-producers", "5.3.3") for i in range(4)]
    return Scenario(
        "all-brokers-down",
        "every broker fails every send after 60 s: producers find none available",
        [steady],
        producers,
        down_brokers={b: 60_000 for b in BROKERS},
        expected={(b, AVOIDED) for b in BROKERS} | {(producers[0].group, ALL_UNAVAILABLE)},
    )


def _strategy_mismatch(rng: random.Random, producers: list[Producer]) -> Scenario:
    group = _healthy_group(rng, "ledger-mismatch", 4, ("orders",), 20)
    group.members[3].strategy = "AVG_BY_CIRCLE"  # one member allocates with another strategy than the other three
    return Scenario(
        "strategy-mismatch",
        "one of four members allocates with AVG_BY_CIRCLE, the others with AVG; running info reported",
        [group],
        producers,
        # It holds what AVG_BY_CIRCLE gives it, not what the group computes: its report differs from its expected
        # share, some queues are held twice and others by nobody (the progress facts say which).
        expected={(group.name, "ASSIGNMENT_MISMATCH")},
        # a backlog at every sample (so the progress states show), never an old one (not slow): producers write
        # 10 messages per second and queue, the group consumes 9.8 (a tick's whole messages)
        write_rates={**WRITE_RATES, "orders": 10.0},
        consume_rates={group.name: 9.8},
        reports=True,
    )


def _progress_faults(rng: random.Random, producers: list[Producer]) -> Scenario:
    slow = _healthy_group(rng, "report-slow", 2, ("orders",), 21)
    hidden = _healthy_group(rng, "search-hidden", 2, ("orders",), 22)
    hidden.members[1].lists_queues = False  # consumes its share; its running info lists none of it
    rewind = _healthy_group(rng, "ledger-rewind", 2, ("orders",), 23)
    # at 15 min (a backlog at every sample by then) its offsets are reset 3,000 messages back: 5 minutes below
    # their high point at 9.8 messages per second, a whole window
    rewind.members[0].rewinds_at_ms, rewind.members[0].rewind_by = 900_000, 3_000
    return Scenario(
        "progress-faults",
        "a group consuming slower than producers write; a member whose running info lists none of its queues; "
        "a member's offsets reset 3,000 messages back at 15 min",
        [slow, hidden, rewind],
        producers,
        # The hidden consumer's report differs from its expected share (it reports none): a mismatch too.
        expected={(hidden.name, "ASSIGNMENT_MISMATCH")},
        write_rates={**WRITE_RATES, "orders": 10.0},  # as strategy-mismatch: the hidden group has a backlog, not slow
        consume_rates={slow.name: 5.0, hidden.name: 9.8, rewind.name: 9.8},
        reports=True,
    )


# The alert-quality bench's own scenarios, each played alone (not in SCENARIOS: not in ``mixed`` and the tests).
BENCH_SCENARIOS = ("all-brokers-down", "strategy-mismatch", "progress-faults")
# The named scenarios ``mixed`` and the tests play.
SCENARIOS = (
    "steady",
    "scale-out",
    "crash",
    "duplicate-ids",
    "inconsistent-subscriptions",
    "diverging-views",
    "slow-broker",
    "broker-outage",
    "rebalance-storm",
    "consume-progress",
    "mixed",
)


class Simulation:
    """Events of one scenario from ``start_ms`` on, in event-time order, generated lazily.

    ``progress_interval_ms``: a ``consume_progress`` sample per group and broker this often (0: none; a
    multiple of the 5 s tick). ``assignment_reports``: each live member's ``reported_assignment`` per topic
    at every sample, with its ``ProcessQueueInfo``. Off by default: the job compares reports with the
    assignment it expects (``ASSIGNMENT_MISMATCH``), and the simulated clients rebalance at once, not on
    RocketMQ's timers, so turning them on for a job run is a change of that run's expectations. ``cluster``: the
    RocketMQ cluster every event names (contract version 2); None publishes version 1, the job's default cluster."""

    def __init__(
        self,
        scenario: Scenario,
        start_ms: int,
        seed: int = 1,
        queues_per_broker: int = 4,
        sends_per_second: float | None = None,
        progress_interval_ms: int = PROGRESS_INTERVAL_MS,
        assignment_reports: bool = False,
        cluster: str | None = None,
    ) -> None:
        if queues_per_broker < 1:
            raise ValueError("queues_per_broker must be >= 1")
        if sends_per_second is not None and sends_per_second < 0:
            raise ValueError("sends_per_second must be >= 0")
        self.scenario = scenario
        self.start_ms = start_ms
        self.rng = random.Random(seed)
        self.queues = queues_per_broker
        self.cursor_ms = start_ms  # events before this were generated
        self.tick_ms = 5_000
        # per producer and tick; None keeps each producer's own rate
        self.sends_per_tick = None if sends_per_second is None else round(sends_per_second * self.tick_ms / 1000)
        self.progress = ProgressModel(scenario, start_ms, seed, queues_per_broker, self.tick_ms, progress_interval_ms)
        self.assignment_reports = assignment_reports
        self.cluster = cluster

    def _route(self, t: int, topic: str) -> dict[str, Any]:
        return {
            "type": EventType.TOPIC_ROUTE,
            "schema_version": 1,
            "event_time": t,
            "topic": topic,
            "brokers": [
                {"broker": b, "read_queue_nums": self.queues, "write_queue_nums": self.queues, "perm": 6}
                for b in self.scenario.brokers
            ],
        }

    def _channel(self, t: int, kind: str, group: Group, member: Member, broker: str) -> dict[str, Any]:
        event = {
            "type": EventType.CONSUMER_CHANNEL,
            "schema_version": 1,
            "event_time": t,
            "broker": broker,
            "kind": kind,
            "channel": f"{member.ip}:{40000 + self.scenario.brokers.index(broker)}",
            "client_id": member.client_id,
            "group": group.name,
            "client_version": member.version,
        }
        if kind == "HEARTBEAT":
            event["subscriptions"] = [{"topic": x, "expression": "*", "sub_version": 1} for x in member.topics]
            if member.strategy:
                event["allocate_strategy"] = member.strategy
        return event

    def _tick(self, t: int) -> Iterator[dict[str, Any]]:
        offset = t - self.start_ms
        brokers = self.scenario.brokers
        if offset == 0 or offset % 60_000 == 0:  # routes are republished every minute, like a route poller
            for topic in self.scenario.topics:
                yield self._route(t, topic)
        for group in self.scenario.groups:
            for member in group.members:
                for broker in brokers:
                    if broker in member.hidden_from:
                        continue
                    if member.leaves_ms is not None and offset == member.leaves_ms - member.leaves_ms % self.tick_ms:
                        yield self._channel(t, "UNREGISTER", group, member, broker)
                        continue
                    alive = offset >= member.joins_ms and (member.leaves_ms is None or offset < member.leaves_ms)
                    alive = alive and (member.crashes_ms is None or offset < member.crashes_ms)
                    # each client heartbeats every 30 s; its phase depends on when it joined
                    if alive and (offset - member.joins_ms) % HEARTBEAT_MS < self.tick_ms:
                        yield self._channel(t, "HEARTBEAT", group, member, broker)
        for producer in self.scenario.producers:
            count = producer.sends_per_tick if self.sends_per_tick is None else self.sends_per_tick
            for _ in range(count):
                broker = self.rng.choice(brokers)
                latency, outcome = self.rng.randint(2, 40), "OK"
                if broker in self.scenario.slow_brokers:
                    low, high = self.scenario.slow_brokers[broker]
                    latency = self.rng.randint(low, high)
                down_from = self.scenario.down_brokers.get(broker)
                if down_from is not None and offset >= down_from:
                    latency, outcome = 3000, "TIMEOUT"
                yield {
                    "type": EventType.SEND_RESULT,
                    "schema_version": 1,
                    "event_time": t + self.rng.randint(0, self.tick_ms - 1),
                    "producer_id": producer.producer_id,
                    "producer_group": producer.group,
                    "topic": self.scenario.topics[0],
                    "broker": broker,
                    "queue_id": self.rng.randrange(self.queues),
                    "latency_ms": latency,
                    "outcome": outcome,
                    "client_version": producer.version,
                    "send_latency_fault_enable": producer.send_latency_fault_enable,
                }
        yield from self.progress.tick(t, self.assignment_reports)

    def events_until(self, until_ms: int) -> list[dict[str, Any]]:
        """Every event with a tick time in [cursor, until_ms), sorted by event time."""
        events: list[dict[str, Any]] = []
        while self.cursor_ms < until_ms:
            events.extend(self._tick(self.cursor_ms))
            self.cursor_ms += self.tick_ms
        events.sort(key=lambda e: e["event_time"])
        if self.cluster is not None:
            return [{**e, "schema_version": CLUSTER_SINCE_VERSION, CLUSTER_FIELD: self.cluster} for e in events]
        return events
