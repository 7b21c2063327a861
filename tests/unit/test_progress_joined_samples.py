"""A group's progress samples of several brokers at one time are joined with one context of the group, built once
(``shard_engine._JoinedGroup``); any other event between them builds it again. That changes nothing: the outcomes
and snapshots are those of an engine building the context at every sample, also when a member's report between
two samples of one time changes what it holds.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from streaming.domain.consumers import shard_engine
from streaming.domain.consumers.engine_settings import EngineSettings
from streaming.domain.consumers.outcomes import QueueProgress
from streaming.domain.consumers.shard_engine import ShardEngine
from tests.support.engine import typed
from tests.support.events import BASE, hb, report, route

SETTINGS = EngineSettings()
BROKERS = ("broker-a", "broker-b")


def progress(t: int, broker: str, consumed: int) -> dict[str, Any]:
    queues = [
        {"topic": "T", "queue_id": q, "broker_offset": 100, "consumer_offset": consumed, "last_timestamp": BASE + t}
        for q in range(4)
    ]
    event = {"type": "consume_progress", "schema_version": 1, "event_time": BASE + t, "group": "G"}
    return {**event, "broker": broker, "queues": queues}


def settled() -> list[dict[str, Any]]:
    """Two members on both brokers, the route, and each member's report of its share (AVG: c1 broker-a's queues),
    again once the clients' rebalance delay after the group's generation passed (then they count)."""
    beats = [hb(0, f"10.0.0.{i}:{b[-1]}", f"c{i}", broker=b) for i in (1, 2) for b in BROKERS]
    reports = [
        report(t, client, [(broker, q) for q in range(4)])
        for t in (1_000, 40_000)
        for client, broker in (("c1", "broker-a"), ("c2", "broker-b"))
    ]
    return [route(0), *beats, *reports]


def with_commit_offsets(event: dict[str, Any], offset: int) -> dict[str, Any]:
    """A report whose queues carry their ``ProcessQueueInfo`` commit offset: what it holds unchanged, its holder
    views changed (no new generation, no pending change: the group's context differs only in them)."""
    return {**event, "queues": [{**q, "commit_offset": offset} for q in event["queues"]]}


SAMPLES = [
    # broker-a's and broker-b's samples at 60 s with c2's report of its same queues between them, its commit offsets
    # now known
    progress(60_000, "broker-a", 90),
    with_commit_offsets(report(60_000, "c2", [("broker-b", q) for q in range(4)]), 93),
    progress(60_000, "broker-b", 90),
    # and at 90 s together
    progress(90_000, "broker-a", 95),
    progress(90_000, "broker-b", 95),
]


class Counted(ShardEngine):
    """The engine counting the group contexts it builds."""

    built = 0

    def _progress_context(self, group: str, time_ms: int, changed: bool) -> Any:
        Counted.built += 1
        return super()._progress_context(group, time_ms, changed)


def through(engine_class: type[ShardEngine]) -> tuple[list[Any], dict[str, Any]]:
    """Both calls (the settled group, then the samples), each restored from the previous one's snapshot."""
    outcomes: list[Any] = []
    snapshot = None
    for call, watermark in ((settled(), BASE), (SAMPLES, BASE + 30_000)):
        engine = engine_class.restore(json.loads(json.dumps(snapshot)) if snapshot else None, SETTINGS)
        outcomes += engine.apply(typed(call), watermark)
        snapshot = engine.snapshot()
    return outcomes, snapshot


def test_samples_of_one_time_share_one_context_and_a_report_between_them_is_read(monkeypatch: pytest.MonkeyPatch):
    Counted.built = 0
    joined, joined_snapshot = through(Counted)
    # at 60 s one context before the report and one after it, at 90 s one for both brokers, and the call's end
    # (``_expire_progress``) builds none: nothing falls due
    assert Counted.built == 3

    real = shard_engine._JoinedGroup
    monkeypatch.setattr(shard_engine, "_JoinedGroup", lambda key, context, brokers: real(("", -1, False), context, {}))
    every, every_snapshot = through(ShardEngine)
    assert joined == every and joined_snapshot == every_snapshot

    b0 = [o for o in joined if type(o) is QueueProgress and (o.broker, o.queue_id) == ("broker-b", 0)]
    assert [[(h.client_id, h.commit_offset) for h in o.sample.holders] for o in b0] == [[("c2", 93)]] * 2
