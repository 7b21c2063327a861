"""Scripted group operations as the engine's input: benign ones an on-call must not be paged for, and incidents.

Each script is one consumer group on two brokers whose members heartbeat every broker every 30 s, and one
operation on it, as ``consumer_channel`` / ``topic_route`` events in event-time order. ``batches`` cuts them
into micro-batches (events, watermark) as the job would see them, so the pure engine (``ShardEngine.apply``),
the promtool cases (``dashboards/alerts.py``) and an alert-quality harness run the same operation. Client ids
are RocketMQ 4.9+/5.x's ``IP@PID#nanotime``: a restarted process is a new member.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from streaming.contract.events import EventType

BROKERS = ("broker-a", "broker-b")
HEARTBEAT_MS = 30_000
TOPIC = "orders"


@dataclass
class _Life:
    """One process of a member: its client id, address, topics, and when it starts and stops."""

    client_id: str
    ip: str
    starts_ms: int
    stops_ms: int | None = None  # clean shutdown: UNREGISTER to every broker
    topics: tuple[str, ...] = (TOPIC,)


@dataclass
class Script:
    """A group's lives (processes) and the route of its topic; ``events`` renders them."""

    name: str
    group: str
    until_ms: int
    lives: list[_Life] = field(default_factory=list)
    queues_per_broker: int = 8

    def events(self) -> list[dict[str, Any]]:
        topics = sorted({t for life in self.lives for t in life.topics})
        out = [_route(0, topic, self.queues_per_broker) for topic in topics]
        for index, life in enumerate(self.lives):
            out += _life_events(self.group, life, index, self.until_ms)
        out.sort(key=lambda e: (e["event_time"], e["type"] != EventType.TOPIC_ROUTE, e.get("channel", "")))
        return out


def _cid(ip: str, pid: int, generation: int) -> str:
    return f"{ip}@{pid}#{1_000_000 + generation}"


def _route(t: int, topic: str, queues: int) -> dict[str, Any]:
    brokers = [{"broker": b, "read_queue_nums": queues, "write_queue_nums": queues, "perm": 6} for b in BROKERS]
    return {"type": EventType.TOPIC_ROUTE, "schema_version": 1, "event_time": t, "topic": topic, "brokers": brokers}


def _channel(t: int, kind: str, group: str, life: _Life, broker: str, port: int) -> dict[str, Any]:
    event: dict[str, Any] = {
        "type": EventType.CONSUMER_CHANNEL,
        "schema_version": 1,
        "event_time": t,
        "broker": broker,
        "kind": kind,
        "channel": f"{life.ip}:{port}",
        "client_id": life.client_id,
        "group": group,
    }
    if kind == "HEARTBEAT":
        event["subscriptions"] = [{"topic": x, "expression": "*", "sub_version": 1} for x in life.topics]
        event["client_version"] = "V5_3_3"
        event["allocate_strategy"] = "AVG"
    return event


def _life_events(group: str, life: _Life, index: int, until_ms: int) -> Iterator[dict[str, Any]]:
    port = 40_000 + index  # each process connects from its own port
    end = until_ms if life.stops_ms is None else min(life.stops_ms, until_ms)
    for b, broker in enumerate(BROKERS):
        t = life.starts_ms + b * 5  # the client reaches both brokers within milliseconds
        while t < end:
            yield _channel(t, "HEARTBEAT", group, life, broker, port)
            t += HEARTBEAT_MS
        if life.stops_ms is not None and life.stops_ms < until_ms:
            yield _channel(life.stops_ms + b * 5, "UNREGISTER", group, life, broker, port)


def steady(members: int, group: str = "g1", subnet: int = 1) -> list[_Life]:
    """``members`` processes running from the start, their heartbeats spread over the 30 s round."""
    return [
        _Life(_cid(f"10.{subnet}.0.{i}", 100 + i, 0), f"10.{subnet}.0.{i}", i * 997 % HEARTBEAT_MS)
        for i in range(members)
    ]


def rolling_restart(
    members: int, group: str = "g1", start_ms: int = 120_000, every_ms: int = 30_000, rejoin_ms: int = 10_000
) -> Script:
    """A rolling restart: member ``i`` unregisters at ``start_ms + i * every_ms`` and its replacement (a new process
    on the same address, so a new client id) joins ``rejoin_ms`` later and stays; ten minutes of quiet after."""
    lives = steady(members, group)
    for i, old in enumerate(list(lives)):
        old.stops_ms = start_ms + i * every_ms
        lives.append(_Life(_cid(old.ip, 500 + i, 1), old.ip, old.stops_ms + rejoin_ms))
    until = start_ms + members * every_ms + 600_000
    return Script(f"rolling restart of {members} members", group, until, lives)


def crash_loop(
    members: int,
    group: str = "g1",
    start_ms: int = 120_000,
    crashes: int = 12,
    life_ms: int = 20_000,
    restart_ms: int = 5_000,
    same_id: bool = True,
) -> Script:
    """One member crash-loops: it stops after ``life_ms``, restarts ``restart_ms`` later, ``crashes`` times; with
    ``same_id`` under the same client id (a pre-4.9 client in a container: PID 1), else a new one each time."""
    lives = steady(members, group)
    victim = lives[0]
    victim.stops_ms = start_ms
    t = start_ms
    for n in range(crashes):
        t += restart_ms
        cid = victim.client_id if same_id else _cid(victim.ip, 900 + n, n + 2)
        stops = t + life_ms if n < crashes - 1 else None
        lives.append(_Life(cid, victim.ip, t, stops))
        t += life_ms
    return Script(f"crash loop ({'same' if same_id else 'new'} id) in {members} members", group, t + 600_000, lives)


def never_settling(
    members: int,
    group: str = "g1",
    start_ms: int = 120_000,
    count: int = 12,
    every_ms: int = 20_000,
    life_ms: int = 10_000,
) -> Script:
    """Membership that never settles: a new member joins every ``every_ms`` and leaves ``life_ms`` later."""
    lives = steady(members, group)
    for n in range(count):
        starts = start_ms + n * every_ms
        lives.append(_Life(_cid(f"10.9.1.{n}", 300 + n, 0), f"10.9.1.{n}", starts, starts + life_ms))
    return Script(f"{count} short-lived members in {members}", group, start_ms + count * every_ms + 600_000, lives)


def scale(members: int, to: int, group: str = "g1", start_ms: int = 120_000, every_ms: int = 5_000) -> Script:
    """Scale-out (``to`` > ``members``: new members join one every ``every_ms``) or scale-in (the last ones leave)."""
    lives = steady(members, group)
    if to > members:
        for n in range(to - members):
            ip = f"10.1.1.{n}"
            lives.append(_Life(_cid(ip, 700 + n, 0), ip, start_ms + n * every_ms))
    for n, life in enumerate(reversed(lives[to:members])):
        life.stops_ms = start_ms + n * every_ms
    return Script(f"scale {members} -> {to}", group, start_ms + abs(to - members) * every_ms + 600_000, lives)


def inconsistent_subscription(members: int = 3, group: str = "g1", until_ms: int = 900_000) -> Script:
    """The last member subscribes one topic less: the broker's one table per group flips at every heartbeat."""
    lives = steady(members, group)
    for life in lives[:-1]:
        life.topics = (TOPIC, "payments")
    return Script(f"inconsistent subscription in {members}", group, until_ms, lives)


def batches(events: list[dict[str, Any]], until_ms: int, every_ms: int = 15_000) -> list[tuple[list, int]]:
    """The events cut into micro-batches of ``every_ms`` of event time, each with its end as the watermark."""
    out: list[tuple[list, int]] = []
    index = 0
    for end in range(every_ms, until_ms + every_ms, every_ms):
        batch = []
        while index < len(events) and events[index]["event_time"] < end:
            batch.append(events[index])
            index += 1
        out.append((batch, end))
    return out
