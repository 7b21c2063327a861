"""The consumer-side scenarios of the job-scenarios test as events: run 1's, run 2's and the consume-progress ones.

Each scenario lives in its own consumer group; the consume-progress ones (groups ``G-p*``) sample topic P every
15 s, ten samples: a whole window; in G-pmove a member leaves under load. Shared by the test that runs them through
the real job and the unit test that runs them through the pure engine however batched.
"""

from __future__ import annotations

import json

from tests.support.events import BASE, hb, report, route
from tests.support.events import channel_event as ev


def alive(group, channel, cid, topics=("T",), broker="broker-a", until=180_000):
    """Heartbeats every 30 s, as a live client sends them."""
    return [hb(t, channel, cid, group, topics, broker) for t in range(0, until + 1, 30_000)]


# Valid events with text after the object, which the job ignores: topic U's route and the ghost's report.
TRAILING = b' {"trailing": true}'


def run1_events():
    events = [route(0, "T"), ("topic_route", json.dumps(route(0, "U")).encode() + TRAILING)]
    # LEAVE: c0 unregisters at 60 s; c2 goes silent after its first heartbeat and expires.
    for t in range(0, 180_001, 30_000):
        events.append(hb(t, "10.2.0.1:1", "c1", "G-leave"))
    events += [
        hb(0, "10.2.0.0:1", "c0", "G-leave"),
        ev("UNREGISTER", 60_000, "10.2.0.0:1", "c0", "G-leave"),
        hb(0, "10.2.0.2:1", "c2", "G-leave"),
    ]
    # Subscription change (run 2 drops U from c2).
    events += alive("G-sub", "10.3.0.1:1", "c1", ("T", "U")) + alive("G-sub", "10.3.0.2:1", "c2", ("T", "U"))
    # Diverging views: broker-b never saw c2.
    events += alive("G-div", "10.4.0.1:1", "c1") + alive("G-div", "10.4.0.2:1", "c2")
    events += alive("G-div", "10.4.0.1:2", "c1", broker="broker-b")
    # A report from a group of which no broker knows a channel: nothing to compare it with.
    ghost = report(90_000, "ghost", [("broker-a", 0), ("broker-a", 1)], "G-ghost")
    events.append(("reported_assignment", json.dumps(ghost).encode() + TRAILING))
    return events


def run2_events():
    return [
        hb(200_000, "10.3.0.2:1", "c2", "G-sub", topics=("T",)),
        hb(200_000, "10.3.0.1:1", "c1", "G-sub", topics=("T", "U")),
        hb(210_000, "10.2.0.1:1", "c1", "G-leave"),
        progress(200_000, "G-poff", [(0, 30, 30), (1, 9, 9)]),  # the offline group caught up
    ]


PROGRESS_SAMPLES = [5_000 + 15_000 * i for i in range(10)]  # a whole window (10 samples): critical states count
ORPHAN_OFFSETS = (50, 40)  # G-porph's queue 1: broker and consumer offset, flat


# G-pmove (P's 2 queues, AVG: c1 queue 0, c2 queue 1): c2 leaves at 42 s with 5 messages cached beyond its commit,
# c1 reports queue 1 at 70 s. Queue 1's (broker offset, consumer offset) at each of PROGRESS_SAMPLES:
MOVE_LEAVE_MS, MOVE_TAKEN_MS = 42_000, 70_000
# Reports count from a generation plus the clients' rebalance delay (20 s): the members' first ones at 21 s, after
# their join's; c1's report at 63 s, after the leave's, still without queue 1.
REPORTED_MS, MOVE_RECHECK_MS = 21_000, 63_000
MOVE_OFFSETS = [(100, 95), (110, 105), (120, 115), (130, 115), (140, 115), (150, 130), (160, 150)]
MOVE_OFFSETS += [(170 + 10 * i, 170 + 10 * i) for i in range(3)]
MOVE_CACHE = {"commit_offset": 115, "cached_msg_count": 5, "cached_msg_min_offset": 115, "cached_msg_max_offset": 119}


def progress(t, group, queues, **extra):
    """A consume_progress event of topic P on broker-a; ``queues``: (queue id, broker offset, consumer offset)."""
    rows = [
        {"topic": "P", "queue_id": q, "broker_offset": b, "consumer_offset": c, "last_timestamp": BASE - 60_000}
        for q, b, c in queues
    ]
    event = {"type": "consume_progress", "schema_version": 1, "event_time": BASE + t, "group": group}
    return {**event, "broker": "broker-a", "queues": rows, **extra}


def progress_report(t, group, cid, queues):
    """``cid``'s report of P: (queue id, its ProcessQueueInfo fields)."""
    event = report(t, cid, [("broker-a", q) for q, _ in queues], group, "P")
    for row, (_, fields) in zip(event["queues"], queues, strict=True):
        row.update(fields)
    return event


def progress_events():
    """G-porph: c1 holds only queue 0 of P, queue 1 nobody (an orphan with a flat backlog). G-pstuck: c1 holds both,
    queue 0 with 1,500 cached messages and a flat offset (flow control). G-pidle: nothing to consume. G-poff: no
    member ever, messages waiting. Plus a progress event the schema refuses and one the engine refuses."""
    events = [route(0, "P", (("broker-a", 2),))]
    for group, host in (("G-porph", "10.6.0.1"), ("G-pstuck", "10.6.0.2"), ("G-pidle", "10.6.0.3")):
        events += alive(group, f"{host}:1", "c1", ("P",))
    events += [
        progress_report(REPORTED_MS, "G-porph", "c1", [(0, {})]),
        progress_report(REPORTED_MS, "G-pstuck", "c1", [(0, {"cached_msg_count": 1_500}), (1, {})]),
        progress_report(REPORTED_MS, "G-pidle", "c1", [(0, {}), (1, {})]),
    ]
    for i, t in enumerate(PROGRESS_SAMPLES):
        events += [
            progress(t, "G-porph", [(0, 100 + i, 100 + i), (1, *ORPHAN_OFFSETS)]),
            progress(t, "G-pstuck", [(0, 90 + i, 40), (1, 10, 10)]),
            progress(t, "G-pidle", [(0, 7, 7), (1, 0, 0)]),
        ]
    events += [progress(t, "G-poff", [(0, 30, 20 + i), (1, 9, 9)]) for i, t in enumerate(PROGRESS_SAMPLES[:3])]
    events += alive("G-pmove", "10.6.0.4:1", "c1", ("P",)) + [
        hb(t, "10.6.0.5:1", "c2", "G-pmove", ("P",)) for t in range(0, MOVE_LEAVE_MS, 30_000)
    ]
    events += [
        ev("UNREGISTER", MOVE_LEAVE_MS, "10.6.0.5:1", "c2", "G-pmove"),
        progress_report(REPORTED_MS, "G-pmove", "c1", [(0, {})]),
        progress_report(REPORTED_MS, "G-pmove", "c2", [(1, {})]),
        progress_report(30_000, "G-pmove", "c2", [(1, MOVE_CACHE)]),
        progress_report(MOVE_RECHECK_MS, "G-pmove", "c1", [(0, {})]),
        progress_report(MOVE_TAKEN_MS, "G-pmove", "c1", [(0, {}), (1, {})]),
    ]
    events += [
        progress(t, "G-pmove", [(0, 10 + i, 10 + i), (1, *MOVE_OFFSETS[i])]) for i, t in enumerate(PROGRESS_SAMPLES)
    ]
    bad_queue = progress(5_000, "G-pidle", [(0, 7, 7)])
    bad_queue["queues"][0]["queue_id"] = -1
    contradicting = progress(6_000, "G-pidle", [(0, 7, 7)], error="timeout")
    return events + [("consume_progress", json.dumps(e).encode()) for e in (bad_queue, contradicting)]
