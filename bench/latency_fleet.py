"""The detection-latency benchmark's fleet: consumers heartbeating both consumer brokers and producers sending,
in wall-clock time, the incidents injected into it, and the process that publishes it all to Kafka.

The publisher runs in a process of its own, so the benchmark's other threads (the ``/metrics`` watch) never take
its interpreter; it reports when each incident's first event was handed to the Kafka producer, the moment the
benchmark times the incident from, so a publisher behind the wall clock is not counted as detection time.
"""

from __future__ import annotations

import json
import multiprocessing
import multiprocessing.synchronize
import queue
import random
import time
from dataclasses import dataclass, field
from typing import Any

CONSUMER_BROKERS = ("broker-a", "broker-b")
PRODUCER_BROKERS = ("broker-a", "broker-b", "broker-c", "broker-d")
HEARTBEAT_MS, EXPIRY_MS, TICK_MS = 30_000, 120_000, 100
SLOW_FOR_MS, SLOW_LATENCY_MS = 8_000, 5_000


@dataclass
class Incident:
    kind: str
    phase: str
    target: str  # the group, or the broker of a slow_broker incident
    client_id: str = ""
    moment_ms: int = 0  # the incident's own moment (a silent member's: its expiry moment)
    at_ms: int = 0  # when its first event (for a silent member: one past its expiry) was handed to Kafka
    metric_ms: int | None = None
    delta_ms: int | None = None

    def latency(self, seen_ms: int | None) -> float | None:
        return None if seen_ms is None or not self.at_ms else (seen_ms - self.at_ms) / 1000


@dataclass
class Fleet:
    """Consumers heartbeating both consumer brokers every 30 s and producers sending, in wall-clock time."""

    groups: int
    members: int
    producers: int
    sends_per_second: int
    topics: dict[str, str]
    rng: random.Random = field(default_factory=lambda: random.Random(7))
    silenced: set[tuple[int, int]] = field(default_factory=set)
    extra: dict[tuple[int, int], str] = field(default_factory=dict)  # (group, slot) -> client id
    slow_from: dict[str, int] = field(default_factory=dict)  # a broker's slow spell: [slow_from, slow_until)
    slow_until: dict[str, int] = field(default_factory=dict)
    last_heartbeat: dict[tuple[int, int], int] = field(default_factory=dict)
    buckets: dict[int, list[tuple[int, int]]] = field(default_factory=dict)  # tick of the 30 s round -> members
    # where the last ``due`` list holds each broker's first slow send
    first_slow: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for group in range(self.groups):
            for member in range(self.members + 1):  # the last slot: a duplicate channel, when one is added
                tick = ((group * 7919 + member * 104729) % HEARTBEAT_MS) // TICK_MS
                self.buckets.setdefault(tick, []).append((group, member))

    def client_id(self, group: int, member: int) -> str:
        return f"10.{group // 250}.{group % 250}.{member}@{1000 + member}#{group * 100 + member}"

    def heartbeat(self, now_ms: int, group: int, member: int, client_id: str) -> list[tuple[str, bytes, bytes]]:
        topic = self.topics["consumer_channel"]
        events = []
        for broker in CONSUMER_BROKERS:
            value = {
                "type": "consumer_channel",
                "schema_version": 1,
                "event_time": now_ms,
                "broker": broker,
                "kind": "HEARTBEAT",
                "channel": f"10.{group // 250}.{group % 250}.{member}:{40000 + member}",
                "client_id": client_id,
                "group": f"G{group}",
                "client_version": "V5_3_3",
                "subscriptions": [{"topic": f"T{group % 100}", "expression": "*", "sub_version": 1}],
            }
            events.append((topic, f"G{group}".encode(), json.dumps(value).encode()))
        return events

    def unregister(self, now_ms: int, group: int, member: int) -> list[tuple[str, bytes, bytes]]:
        self.silenced.add((group, member))
        topic = self.topics["consumer_channel"]
        return [
            (
                topic,
                f"G{group}".encode(),
                json.dumps(
                    {
                        "type": "consumer_channel",
                        "schema_version": 1,
                        "event_time": now_ms,
                        "broker": broker,
                        "kind": "UNREGISTER",
                        "channel": f"10.{group // 250}.{group % 250}.{member}:{40000 + member}",
                        "client_id": self.client_id(group, member),
                        "group": f"G{group}",
                    }
                ).encode(),
            )
            for broker in CONSUMER_BROKERS
        ]

    def duplicate(self, now_ms: int, group: int, client_id: str) -> list[tuple[str, bytes, bytes]]:
        """A second channel of ``group`` with ``client_id``: its events now (none when it shows only in the next
        poll)."""
        self.extra[(group, self.members)] = client_id
        return self.heartbeat(now_ms, group, self.members, client_id)

    def silence(self, now_ms: int, group: int, member: int) -> int:
        """``member`` of ``group`` stops heartbeating at ``now_ms``: the moment the brokers expire it."""
        self.silenced.add((group, member))
        return self.last_heartbeat.get((group, member), now_ms) + EXPIRY_MS

    @property
    def polled(self) -> bool:
        """Whether a collector's polls show the members (a member is gone from the next poll, not removed by
        an event of its own)."""
        return False

    def first_polls(self) -> dict[int, int]:
        """Where the last ``due`` list holds each group's first poll (a heartbeat fleet has none)."""
        return {}

    def due(self, start_ms: int, end_ms: int) -> list[tuple[str, bytes, bytes]]:
        """Every event of the wall-clock interval [start_ms, end_ms)."""
        events = []
        ticks = range(start_ms // TICK_MS, end_ms // TICK_MS)
        for tick in ticks[-(HEARTBEAT_MS // TICK_MS) :]:
            for group, member in self.buckets.get(tick % (HEARTBEAT_MS // TICK_MS), ()):
                if member == self.members:
                    if (group, member) in self.extra:
                        events += self.heartbeat(end_ms, group, member, self.extra[(group, member)])
                elif (group, member) not in self.silenced:
                    self.last_heartbeat[(group, member)] = end_ms
                    events += self.heartbeat(end_ms, group, member, self.client_id(group, member))
        sends = self.sends(start_ms, end_ms)
        self.first_slow = {broker: len(events) + at for broker, at in self.first_slow.items()}
        return events + sends

    def sends(self, start_ms: int, end_ms: int) -> list[tuple[str, bytes, bytes]]:
        """The sends of [start_ms, end_ms), each at a moment of its own in it, slow while its broker is. A
        publisher that falls behind covers seconds in one interval, so a send is judged by its own moment: judged
        by the interval's end, a slow spell shorter than the interval would give no slow send at all."""
        count = self.sends_per_second * (end_ms // TICK_MS - start_ms // TICK_MS) * TICK_MS // 1000
        topic, events = self.topics["send_result"], []
        self.first_slow = {}
        for _ in range(count):
            producer, broker = self.rng.randrange(self.producers), self.rng.choice(PRODUCER_BROKERS)
            at_ms = start_ms + self.rng.randrange(max(end_ms - start_ms, 1))
            slow = self.slow_from.get(broker, 0) <= at_ms < self.slow_until.get(broker, 0)
            if slow:
                self.first_slow.setdefault(broker, len(events))
            value = {
                "type": "send_result",
                "schema_version": 1,
                "event_time": at_ms,
                "producer_id": f"P{producer}",
                "producer_group": f"PG{producer % 20}",
                "topic": "orders",
                "broker": broker,
                "queue_id": self.rng.randrange(4),
                "outcome": "OK",
                "latency_ms": SLOW_LATENCY_MS if slow else self.rng.randint(1, 40),
                "client_version": "V5_3_3",
                "send_latency_fault_enable": True,
            }
            events.append((topic, f"P{producer}".encode(), json.dumps(value).encode()))
        return events

    def routes(self, now_ms: int) -> list[tuple[str, bytes, bytes]]:
        def route(topic: str, brokers: tuple[str, ...]) -> tuple[str, bytes, bytes]:
            value = {
                "type": "topic_route",
                "schema_version": 1,
                "event_time": now_ms,
                "topic": topic,
                "brokers": [{"broker": b, "read_queue_nums": 4, "write_queue_nums": 4, "perm": 6} for b in brokers],
            }
            return self.topics["topic_route"], topic.encode(), json.dumps(value).encode()

        return [route(f"T{t}", CONSUMER_BROKERS) for t in range(min(100, self.groups))] + [
            route("orders", PRODUCER_BROKERS)
        ]


INPUT_SHAPES = ("heartbeat", "collector")


@dataclass(frozen=True)
class FleetShape:
    """What the publisher process builds its ``Fleet`` from: ``input_shape`` "heartbeat" (each member's channel
    events, as brokers would publish them) or "collector" (``bench.collector_fleet``: the collector's polls,
    reported assignments, routes and consume-progress samples)."""

    groups: int
    members: int
    producers: int
    sends_per_second: int
    topics: dict[str, str]
    input_shape: str = "heartbeat"

    def fleet(self) -> Fleet:
        if self.input_shape == "collector":
            from bench.collector_fleet import CollectorFleet

            return CollectorFleet(self.groups, self.members, self.producers, self.sends_per_second, self.topics)
        return Fleet(self.groups, self.members, self.producers, self.sends_per_second, self.topics)


@dataclass(frozen=True)
class Injection:
    """An incident for the publisher to inject at ``when_ms``: ``kind`` on ``group``'s ``member`` (with
    ``client_id`` for a duplicate), or on ``broker`` for a slow broker."""

    index: int
    kind: str
    when_ms: int
    group: int = -1
    member: int = -1
    client_id: str = ""
    broker: str = ""


@dataclass(frozen=True)
class Handed:
    """The publisher's report on injection ``index``: its own moment, and when its first event was handed to
    the Kafka producer (a silent member's: the first event past its expiry)."""

    index: int
    moment_ms: int
    handed_ms: int


class Publisher:
    """The fleet published every 100 ms by a process of its own (``publish``), and the incidents injected into
    it when told (``inject``); ``reports`` receives a ``Handed`` per incident."""

    def __init__(self, shape: FleetShape, bootstrap: str) -> None:
        context = multiprocessing.get_context("spawn")
        self.injections: multiprocessing.Queue[Injection] = context.Queue()
        self.reports: multiprocessing.Queue[Handed] = context.Queue()
        self.stopped = context.Event()
        self.ticks = context.Array("q", 2)  # late ticks, the longest interval one tick covered (ms)
        self.process = context.Process(
            target=publish,
            args=(shape, bootstrap, self.injections, self.reports, self.stopped, self.ticks),
            name="latency-fleet-publisher",
            daemon=True,
        )

    def start(self) -> None:
        self.process.start()

    def inject(self, injection: Injection) -> None:
        self.injections.put(injection)

    def stop(self) -> None:
        self.stopped.set()
        self.process.join(60)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()

    @property
    def late_ticks(self) -> int:
        return int(self.ticks[0])

    @property
    def longest_tick_ms(self) -> int:
        return int(self.ticks[1])


class Injector:
    """The publisher's side of the incidents: applies each to the fleet at its time and says which event is its
    first (``tick_events``)."""

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet
        self.scheduled: list[Injection] = []
        self.slow: dict[str, tuple[int, int]] = {}  # broker -> (index, moment) until its first slow send
        self.expiring: list[tuple[int, int, int]] = []  # (index, expiry moment, group) of silenced members
        # group -> (index, moment) of incidents whose first event is the group's next poll (a collector fleet's)
        self.awaiting_poll: dict[int, list[tuple[int, int]]] = {}

    def due(self, now_ms: int) -> list[tuple[Injection, list[tuple[str, bytes, bytes]]]]:
        """The injections due at ``now_ms``, applied to the fleet, each with its own events."""
        due = [i for i in self.scheduled if i.when_ms <= now_ms]
        self.scheduled = [i for i in self.scheduled if i.when_ms > now_ms]
        applied = []
        for injection in due:
            fleet, events = self.fleet, []
            if injection.kind == "slow_broker":
                fleet.slow_from[injection.broker], fleet.slow_until[injection.broker] = now_ms, now_ms + SLOW_FOR_MS
                self.slow[injection.broker] = (injection.index, now_ms)
            elif injection.kind == "silent_member":
                expiry_ms = fleet.silence(now_ms, injection.group, injection.member)
                self.expiring.append((injection.index, expiry_ms, injection.group))
            else:
                if injection.kind == "duplicate_client_id":
                    events = fleet.duplicate(now_ms, injection.group, injection.client_id)
                else:
                    events = fleet.unregister(now_ms, injection.group, injection.member)
                if not events:  # it shows in the group's next poll
                    self.awaiting_poll.setdefault(injection.group, []).append((injection.index, now_ms))
            applied.append((injection, events))
        return applied

    def tick_marks(self, tick_end_ms: int) -> dict[int, list[tuple[int, int]]]:
        """Position in the tick's fleet events -> the (index, moment) of incidents whose first event that is: a
        broker's first slow send, and the tick's first event for silent members expired by its end (for a fleet
        of polls: the group's first poll after it expired, or after it lost or gained a connection)."""
        marks: dict[int, list[tuple[int, int]]] = {}
        for broker, position in self.fleet.first_slow.items():
            if broker in self.slow:
                marks.setdefault(position, []).append(self.slow.pop(broker))
        expired = [e for e in self.expiring if e[1] <= tick_end_ms]
        self.expiring = [e for e in self.expiring if e[1] > tick_end_ms]
        polled = self.fleet.first_polls()
        for index, moment, group in expired:
            if self.fleet.polled:
                self.awaiting_poll.setdefault(group, []).append((index, moment))
            else:
                marks.setdefault(0, []).append((index, moment))
        for group, position in polled.items():
            if group in self.awaiting_poll:
                marks.setdefault(position, []).extend(self.awaiting_poll.pop(group))
        return marks


def tick_events(
    fleet: Fleet, injector: Injector, previous_ms: int, now_ms: int
) -> list[tuple[tuple[str, bytes, bytes], list[tuple[int, int]]]]:
    """One tick's events in the order they are handed to Kafka, each with the incidents (index, own moment) whose
    first event it is: the incidents due at ``now_ms`` with their own events first, then the fleet's events of
    [previous_ms, now_ms), made once the incidents apply (a member unregistered or silenced at ``now_ms`` sends
    no heartbeat after it; a slow spell starts at ``now_ms``)."""
    ordered: list[tuple[tuple[str, bytes, bytes], list[tuple[int, int]]]] = []
    for injection, own in injector.due(now_ms):
        ordered += [(event, [(injection.index, now_ms)] if n == 0 else []) for n, event in enumerate(own)]
    events = fleet.due(previous_ms, now_ms)
    marks = injector.tick_marks(now_ms)
    return ordered + [(event, marks.get(position, [])) for position, event in enumerate(events)]


def publish(
    shape: FleetShape,
    bootstrap: str,
    injections: multiprocessing.Queue[Injection],
    reports: multiprocessing.Queue[Handed],
    stopped: multiprocessing.synchronize.Event,
    ticks: Any,  # a shared array: late ticks, the longest interval one tick covered (ms)
) -> None:
    """The publisher process: every 100 ms one tick's events (``tick_events``), each incident reported once its
    first event is handed to the producer."""
    from kafka import KafkaProducer

    from bench.job_workload import record_headers

    fleet = shape.fleet()
    injector = Injector(fleet)
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=20, batch_size=262_144)
    previous = now_ms()
    for topic, key, value in fleet.routes(previous):
        producer.send(topic, key=key, value=value, headers=record_headers(value))
    while not stopped.wait(max(0.0, (TICK_MS - now_ms() % TICK_MS) / 1000)):
        now = now_ms()
        while True:
            try:
                injector.scheduled.append(injections.get_nowait())
            except queue.Empty:
                break
        for (topic, key, value), handed in tick_events(fleet, injector, previous, now):
            producer.send(topic, key=key, value=value, headers=record_headers(value))
            for index, moment in handed:
                reports.put(Handed(index, moment, now_ms()))
        ticks[0] += now_ms() - now > TICK_MS
        ticks[1] = max(ticks[1], now - previous)
        previous = now
    producer.flush(30)
    producer.close()


def now_ms() -> int:
    return int(time.time() * 1000)
