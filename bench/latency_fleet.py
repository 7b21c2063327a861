"""The detection-latency benchmark's fleet: consumers heartbeating both consumer brokers and producers sending,
in wall-clock time, the incidents injected into it, and the thread that publishes it all to Kafka."""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

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
    at_ms: int = 0  # the incident's moment (a silent member's: its expiry moment)
    metric_ms: int | None = None
    delta_ms: int | None = None

    def latency(self, seen_ms: int | None) -> float | None:
        return None if seen_ms is None else (seen_ms - self.at_ms) / 1000


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
    slow_until: dict[str, int] = field(default_factory=dict)
    last_heartbeat: dict[tuple[int, int], int] = field(default_factory=dict)
    buckets: dict[int, list[tuple[int, int]]] = field(default_factory=dict)  # tick of the 30 s round -> members

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
        return events + self.sends(start_ms, end_ms)

    def sends(self, start_ms: int, end_ms: int) -> list[tuple[str, bytes, bytes]]:
        """The sends of [start_ms, end_ms), each at a moment of its own in it, slow while its broker is. A
        publisher that falls behind covers seconds in one interval, so a send is judged by its own moment: judged
        by the interval's end, a slow spell shorter than the interval would give no slow send at all."""
        count = self.sends_per_second * (end_ms // TICK_MS - start_ms // TICK_MS) * TICK_MS // 1000
        topic, events = self.topics["send_result"], []
        for _ in range(count):
            producer, broker = self.rng.randrange(self.producers), self.rng.choice(PRODUCER_BROKERS)
            at_ms = start_ms + self.rng.randrange(max(end_ms - start_ms, 1))
            slow = self.slow_until.get(broker, 0) > at_ms
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


class Publisher(threading.Thread):
    """Publishes the fleet's events every 100 ms and runs each scheduled action at its time."""

    def __init__(self, fleet: Fleet, bootstrap: str) -> None:
        from kafka import KafkaProducer

        super().__init__(daemon=True)
        self.fleet = fleet
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=20, batch_size=262_144)
        self.actions: list[tuple[int, Callable[[int], list]]] = []
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.late_ticks = 0
        self.longest_tick_ms = 0  # the longest interval one tick covered (TICK_MS when it keeps up)

    def at(self, when_ms: int, action: Callable[[int], list]) -> None:
        with self.lock:
            self.actions.append((when_ms, action))

    def run(self) -> None:
        previous = now_ms()
        for topic, key, value in self.fleet.routes(previous):
            self.producer.send(topic, key=key, value=value)
        while not self.stopped.wait(max(0.0, (TICK_MS - now_ms() % TICK_MS) / 1000)):
            now = now_ms()
            events = self.fleet.due(previous, now)
            with self.lock:
                due = [a for a in self.actions if a[0] <= now]
                self.actions = [a for a in self.actions if a[0] > now]
            for _, action in due:
                events += action(now)
            for topic, key, value in events:
                self.producer.send(topic, key=key, value=value)
            self.late_ticks += now_ms() - now > TICK_MS
            self.longest_tick_ms = max(self.longest_tick_ms, now - previous)
            previous = now
        self.producer.flush(30)
        self.producer.close()


def now_ms() -> int:
    return int(time.time() * 1000)
