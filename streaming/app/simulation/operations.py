"""Scripted group operations as the engine's input: benign ones an on-call must not be paged for, and incidents.

Each script is one consumer group on two brokers whose members heartbeat every broker every 30 s, and one
operation on it, as ``consumer_channel`` / ``topic_route`` events in event-time order (``Script.polls``: as a
collector's ``consumer_connections`` polls instead, with broker and collector outages). ``batches`` cuts them
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
    routes: list[tuple[int, str, dict[str, int]]] = field(default_factory=list)  # (t, topic, queues per broker)
    # (t, client id, held queues of TOPIC as (broker, queue id)): what members report holding (running info)
    reports: list[tuple[int, str, tuple[tuple[str, int], ...]]] = field(default_factory=list)

    def _routes(self) -> list[dict[str, Any]]:
        topics = sorted({t for life in self.lives for t in life.topics})
        return [_route(0, topic, self.queues_per_broker) for topic in topics] + [
            _route(t, topic, self.queues_per_broker, queues) for t, topic, queues in self.routes
        ]

    def events(self) -> list[dict[str, Any]]:
        """As the brokers publish them: each member's heartbeats and unregistrations, per broker."""
        out = self._routes()
        for index, life in enumerate(self.lives):
            out += _life_events(self.group, life, index, self.until_ms)
        out += [_report(t, self.group, client, queues) for t, client, queues in self.reports]
        out.sort(key=lambda e: (e["event_time"], e["type"] != EventType.TOPIC_ROUTE, e.get("channel", "")))
        return out

    def polls(self, poll_ms: int = 10_000, stale_after_ms: int = 30_000, outages: Outages | None = None) -> list:
        """As a collector reads them: every ``poll_ms`` each broker's connection list of the group (``outages``:
        a collector that does not poll, a broker that restarts and knows a member again only from its first
        heartbeat after the restart)."""
        outages = outages or Outages()
        out = self._routes()
        for t in range(0, self.until_ms, poll_ms):
            if outages.collector_polls(t):
                polled = (self._poll(t, b, broker, stale_after_ms, outages) for b, broker in enumerate(BROKERS))
                out += [e for e in polled if e is not None]
        out.sort(key=lambda e: (e["event_time"], e["type"] != EventType.TOPIC_ROUTE))
        return out

    def _poll(self, t: int, b: int, broker: str, stale_after_ms: int, outages: Outages) -> dict[str, Any] | None:
        down = outages.brokers.get(broker)
        if down is not None and down[0] <= t < down[1]:
            return None  # the broker does not answer
        connections = []
        for index, life in enumerate(self.lives):
            first_beat = life.starts_ms + b * 5
            if first_beat > t or (life.stops_ms is not None and life.stops_ms <= t):
                continue
            if down is not None and t >= down[1]:  # restarted: its table holds who heartbeat since
                beats_since = first_beat + max(0, -(-(down[1] - first_beat) // HEARTBEAT_MS)) * HEARTBEAT_MS
                if beats_since > t:
                    continue
            subscriptions = [{"topic": x, "expression": "*", "sub_version": 1} for x in life.topics]
            connections.append(
                {
                    "channel": f"{life.ip}:{40_000 + index}",
                    "client_id": life.client_id,
                    "client_version": "479",
                    "allocate_strategy": "AVG",
                    "subscriptions": subscriptions,
                }
            )
        table = sorted({x for c in connections for x in (s["topic"] for s in c["subscriptions"])})
        return {
            "type": EventType.CONSUMER_CONNECTIONS,
            "schema_version": 1,
            "event_time": t + b * 5,
            "broker": broker,
            "group": self.group,
            "stale_after_ms": stale_after_ms,
            "collector": "scripted",
            "subscriptions": [{"topic": x, "expression": "*", "sub_version": 1} for x in table],
            "connections": connections,
        }


@dataclass(frozen=True)
class Outages:
    """What a polled script's collector and brokers miss: (from, to) event-time ranges, relative to the script."""

    collector: tuple[int, int] | None = None
    brokers: dict[str, tuple[int, int]] = field(default_factory=dict)

    def collector_polls(self, t: int) -> bool:
        return self.collector is None or not self.collector[0] <= t < self.collector[1]


def _cid(ip: str, pid: int, generation: int) -> str:
    return f"{ip}@{pid}#{1_000_000 + generation}"


def _route(t: int, topic: str, queues: int, per_broker: dict[str, int] | None = None) -> dict[str, Any]:
    per = per_broker or {}
    brokers = [
        {"broker": b, "read_queue_nums": per.get(b, queues), "write_queue_nums": per.get(b, queues), "perm": 6}
        for b in BROKERS
    ]
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


def _report(t: int, group: str, client_id: str, queues: tuple[tuple[str, int], ...]) -> dict[str, Any]:
    return {
        "type": EventType.REPORTED_ASSIGNMENT,
        "schema_version": 1,
        "event_time": t,
        "group": group,
        "client_id": client_id,
        "topic": TOPIC,
        "queues": [{"broker": b, "queue_id": q} for b, q in queues],
    }


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


def subscription_rollout(
    members: int, group: str = "g1", start_ms: int = 120_000, every_ms: int = 30_000, rejoin_ms: int = 10_000
) -> Script:
    """A new subscription deployed member by member: a rolling restart whose new processes subscribe one topic
    more; until the last one is replaced the group's subscriptions differ."""
    script = rolling_restart(members, group, start_ms, every_ms, rejoin_ms)
    for life in script.lives[members:]:
        life.topics = (TOPIC, "payments")
    script.name = f"subscription rolled out to {members} members"
    return script


def queue_expansion(members: int = 4, group: str = "g1", start_ms: int = 120_000, apart_ms: int = 60_000) -> Script:
    """A topic's queues expanded from 8 to 16 per broker, one broker and then the other ``apart_ms`` later."""
    script = Script(f"queues of {TOPIC} expanded 8 -> 16", group, start_ms + apart_ms + 600_000, steady(members, group))
    script.routes = [
        (start_ms, TOPIC, {BROKERS[0]: 16}),
        (start_ms + apart_ms, TOPIC, {BROKERS[0]: 16, BROKERS[1]: 16}),
    ]
    return script


def stale_holdings(group: str = "g1", start_ms: int = 120_000, lasting_ms: int = 600_000) -> Script:
    """Two members on 2 queues per broker (AVG: the first a0 a1, the second b0 b1) that report what they hold every
    15 s; from ``start_ms``, for ``lasting_ms``, the first holds a1 and b0 (an old route's share): b0 is held twice
    and a0 by nobody, as the clients report it, while the allocation predicts neither."""
    lives = steady(2, group)
    script = Script(f"stale holdings for {lasting_ms // 60_000} minutes", group, start_ms + lasting_ms + 300_000, lives)
    script.queues_per_broker = 2
    own = {
        lives[0].client_id: (("broker-a", 0), ("broker-a", 1)),
        lives[1].client_id: (("broker-b", 0), ("broker-b", 1)),
    }
    stale = (("broker-a", 1), ("broker-b", 0))
    for t in range(30_000, script.until_ms, 15_000):
        for life in lives:
            wrong = life is lives[0] and start_ms <= t < start_ms + lasting_ms
            script.reports.append((t + 7_000, life.client_id, stale if wrong else own[life.client_id]))
    return script


def steady_group(members: int, group: str = "g1", until_ms: int = 900_000) -> Script:
    """Nothing happens: ``members`` processes heartbeat (the background of a broker or collector restart)."""
    return Script(f"{members} steady members", group, until_ms, steady(members, group))


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
