"""The latency fleet as the real collector publishes it: per poll cycle one ``consumer_connections`` poll per
group and broker, the members' ``reported_assignment``s at the running-info cadence (and again after a change of
the group), the routes at the republish cadence, one ``consume_progress`` sample per group and broker at the
progress cadence, and the producers' ``send_result``s (``latency_fleet.Fleet``'s).

The cadences are ``conf/monitor.toml``'s ``[collector]`` defaults (``CADENCES``); within a cycle the polls (and
the progress samples) are spread over the time the collector took for as many calls in ``bench/results/
collector.json`` (``collector_progress.json``), capped at the cycle. An incident shows as the collector would see
it: a member leaving is gone from the group's next polls, a duplicate client id is a second connection with one
id, a silent member is gone from the polls once the brokers would expire it (120 s after its last heartbeat).
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from bench.latency_fleet import EXPIRY_MS, HEARTBEAT_MS, PRODUCER_BROKERS, TICK_MS, Fleet
from streaming.domain.allocation.strategies import Averagely
from streaming.domain.queues import MessageQueue

ROOT = Path(__file__).resolve().parent.parent
BROKERS = PRODUCER_BROKERS  # every group is polled on every broker, as sends go to every broker
QUEUES_PER_BROKER = 4
COLLECTOR_ID = "sizing-bench"
TOPICS = 100  # groups read topic T<group % 100>
PLACEHOLDER = -1  # event_time in a cached serialized event, replaced at each use


@dataclass(frozen=True)
class Cadences:
    """The collector's cadences (ms) and how fast it makes its calls (calls per second)."""

    poll_ms: int
    stale_after_ms: int
    running_info_ms: int
    running_info_after_change_ms: int
    route_ms: int
    progress_ms: int
    poll_calls_per_s: float
    progress_calls_per_s: float

    def as_dict(self) -> dict[str, float]:
        return dict(self.__dict__)


def cadences(conf: Path = ROOT / "conf" / "monitor.toml", results: Path = ROOT / "bench" / "results") -> Cadences:
    """``[collector]``'s defaults, and the call rates the collector benches measured."""
    c = tomllib.loads(conf.read_text())["collector"]
    runs = json.loads((results / "collector.json").read_text())["runs"]  # one per fleet size: the largest
    polls = max(runs, key=lambda run: run["groups"])["collector"]
    progress = json.loads((results / "collector_progress.json").read_text())["progress_cycle"]
    return Cadences(
        poll_ms=c["poll_interval_ms"],
        stale_after_ms=c["stale_after_ms"] or 3 * c["poll_interval_ms"],
        running_info_ms=c["running_info_interval_ms"],
        running_info_after_change_ms=c["running_info_after_change_ms"],
        route_ms=c["route_republish_interval_ms"],
        progress_ms=c["progress_interval_ms"],
        poll_calls_per_s=round(polls["by_call"]["consumer_connections"] / polls["cycle_s"], 1),
        progress_calls_per_s=round(progress["calls"] / progress["cycle_s"], 1),
    )


def _template(value: dict) -> tuple[bytes, bytes]:
    """A serialized event around its ``event_time``."""
    text = json.dumps(value, separators=(",", ":"))
    head, tail = text.split(f'"event_time":{PLACEHOLDER}', 1)
    return (head + '"event_time":').encode(), tail.encode()


def _spread(count: int, interval_ms: int, calls_per_s: float) -> dict[int, list[int]]:
    """Tick of the interval -> the groups whose calls fall in it: ``count`` groups, in order, over the time the
    collector takes for their calls on every broker, at most the interval."""
    spread_ms = min(interval_ms - TICK_MS, int(count * len(BROKERS) / calls_per_s * 1000))
    buckets: dict[int, list[int]] = {}
    for group in range(count):
        buckets.setdefault((group * spread_ms // max(count, 1)) // TICK_MS, []).append(group)
    return buckets


@dataclass
class CollectorFleet(Fleet):
    """``Fleet`` published as the collector's events (see the module's docstring)."""

    cadence: Cadences = field(default_factory=cadences)
    gone_at: dict[tuple[int, int], int] = field(default_factory=dict)  # a member's last moment in the polls
    rereport: dict[int, list[int]] = field(default_factory=dict)  # group -> moments of its after-change reports
    _seen: dict[int, tuple[int, ...]] = field(default_factory=dict)  # group -> members in its last poll
    _cache: dict[int, tuple[tuple[int, ...], list]] = field(default_factory=dict)
    _first_polls: dict[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.poll_buckets = _spread(self.groups, self.cadence.poll_ms, self.cadence.poll_calls_per_s)
        self.progress_buckets = _spread(self.groups, self.cadence.progress_ms, self.cadence.progress_calls_per_s)
        self.started_ms: int | None = None

    @property
    def polled(self) -> bool:
        return True

    def first_polls(self) -> dict[int, int]:
        return self._first_polls

    def duplicate(self, now_ms: int, group: int, client_id: str) -> list[tuple[str, bytes, bytes]]:
        self.extra[(group, self.members)] = client_id
        return []

    def unregister(self, now_ms: int, group: int, member: int) -> list[tuple[str, bytes, bytes]]:
        self.gone_at[(group, member)] = now_ms
        return []

    def silence(self, now_ms: int, group: int, member: int) -> int:
        phase = (group * 7919 + member * 104729) % HEARTBEAT_MS  # its heartbeats' moment in the 30 s round
        expiry_ms = now_ms - (now_ms - phase) % HEARTBEAT_MS + EXPIRY_MS
        self.gone_at[(group, member)] = expiry_ms
        return expiry_ms

    def present(self, group: int, at_ms: int) -> tuple[int, ...]:
        """The group's connections the brokers list at ``at_ms`` (member slots; ``members`` is a duplicate's)."""
        slots = tuple(m for m in range(self.members) if self.gone_at.get((group, m), at_ms + 1) > at_ms)
        return slots + ((self.members,) if (group, self.members) in self.extra else ())

    def _events(self, group: int, slots: tuple[int, ...]) -> list:
        """The group's polls (one per broker) and reports, serialized around their event times."""
        cached = self._cache.get(group)
        if cached is not None and cached[0] == slots:
            return cached[1]
        ip, topic = f"10.{group // 250}.{group % 250}", f"T{group % TOPICS}"
        subscriptions = [{"topic": topic, "expression": "*", "sub_version": 1}]
        ids = {m: self.extra.get((group, m)) or self.client_id(group, m) for m in slots}
        connections = [
            {
                "channel": f"{ip}.{m % self.members}:{40000 + m}",
                "client_id": ids[m],
                "client_version": "V5_3_3",
                "allocate_strategy": "AVG",
                "subscriptions": subscriptions,
            }
            for m in slots
        ]
        polls = [
            (
                self.topics["consumer_connections"],
                _template(
                    {
                        "type": "consumer_connections",
                        "schema_version": 1,
                        "event_time": PLACEHOLDER,
                        "broker": broker,
                        "group": f"G{group}",
                        "stale_after_ms": self.cadence.stale_after_ms,
                        "collector": COLLECTOR_ID,
                        "subscriptions": subscriptions,
                        "connections": connections,
                    }
                ),
            )
            for broker in BROKERS
        ]
        queues = sorted(MessageQueue(topic, b, q) for b in BROKERS for q in range(QUEUES_PER_BROKER))
        members = sorted({ids[m] for m in slots})
        reports = [
            (
                self.topics["reported_assignment"],
                _template(
                    {
                        "type": "reported_assignment",
                        "schema_version": 1,
                        "event_time": PLACEHOLDER,
                        "group": f"G{group}",
                        "client_id": client,
                        "topic": topic,
                        "queues": [
                            {"broker": q.broker_name, "queue_id": q.queue_id}
                            for q in Averagely().allocate(f"G{group}", client, queues, members)
                        ],
                    }
                ),
            )
            for client in members
        ]
        self._cache[group] = (slots, [polls, reports])
        return [polls, reports]

    def _progress(self, group: int, at_ms: int) -> list[tuple[str, bytes, bytes]]:
        assert self.started_ms is not None
        topic = f"T{group % TOPICS}"
        offset = (at_ms - self.started_ms) // 500  # 2 messages/s a queue, all consumed: no lag
        return [
            (
                self.topics["consume_progress"],
                f"G{group}".encode(),
                json.dumps(
                    {
                        "type": "consume_progress",
                        "schema_version": 1,
                        "event_time": at_ms,
                        "group": f"G{group}",
                        "broker": broker,
                        "collector": COLLECTOR_ID,
                        "consume_tps": 8.0,
                        "queues": [
                            {
                                "topic": topic,
                                "queue_id": q,
                                "broker_offset": offset,
                                "consumer_offset": offset,
                                "pull_offset": offset,
                                "last_timestamp": at_ms,
                            }
                            for q in range(QUEUES_PER_BROKER)
                        ],
                    },
                    separators=(",", ":"),
                ).encode(),
            )
            for broker in BROKERS
        ]

    def _poll(self, group: int, at_ms: int, reports: bool) -> list[tuple[str, bytes, bytes]]:
        slots = self.present(group, at_ms)
        if self._seen.get(group, slots) != slots:  # the collector re-asks a changed group's running info
            after = at_ms + self.cadence.running_info_after_change_ms
            self.rereport[group] = [after, after + self.cadence.poll_ms]
        self._seen[group] = slots
        polls, reported = self._events(group, slots)
        due = self.rereport.get(group)
        if due and due[0] <= at_ms:
            due.pop(0)
            reports = True
        stamp, key = str(at_ms).encode(), f"G{group}".encode()
        out = [(topic, key, head + stamp + tail) for topic, (head, tail) in polls]
        if reports:
            out += [(topic, key, head + stamp + tail) for topic, (head, tail) in reported]
        return out

    def due(self, start_ms: int, end_ms: int) -> list[tuple[str, bytes, bytes]]:
        """Every event of the wall-clock interval [start_ms, end_ms): a publisher behind by more than a cycle
        skips the cycles it missed, as the collector would."""
        if self.started_ms is None:
            self.started_ms = start_ms
        events: list[tuple[str, bytes, bytes]] = []
        self._first_polls = {}
        poll_ticks, progress_ticks = self.cadence.poll_ms // TICK_MS, self.cadence.progress_ms // TICK_MS
        reports_every = max(1, self.cadence.running_info_ms // self.cadence.poll_ms)
        for tick in range(start_ms // TICK_MS, end_ms // TICK_MS)[-poll_ticks:]:
            at_ms = (tick + 1) * TICK_MS
            if tick % (self.cadence.route_ms // TICK_MS) == 0 and tick > start_ms // TICK_MS:
                events += self.routes(at_ms)
            cycle = tick // poll_ticks
            for group in self.poll_buckets.get(tick % poll_ticks, ()):
                self._first_polls.setdefault(group, len(events))
                events += self._poll(group, at_ms, cycle % reports_every == 0)
            for group in self.progress_buckets.get(tick % progress_ticks, ()):
                events += self._progress(group, at_ms)
        sends = self.sends(start_ms, end_ms)
        self.first_slow = {broker: len(events) + at for broker, at in self.first_slow.items()}
        return events + sends

    def routes(self, now_ms: int) -> list[tuple[str, bytes, bytes]]:
        queues = QUEUES_PER_BROKER

        def route(topic: str) -> tuple[str, bytes, bytes]:
            value = {
                "type": "topic_route",
                "schema_version": 1,
                "event_time": now_ms,
                "topic": topic,
                "brokers": [
                    {"broker": b, "read_queue_nums": queues, "write_queue_nums": queues, "perm": 6} for b in BROKERS
                ],
            }
            return self.topics["topic_route"], topic.encode(), json.dumps(value).encode()

        return [route(f"T{t}") for t in range(min(TOPICS, self.groups))] + [route("orders")]
