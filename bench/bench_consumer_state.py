"""The consumer state function's CPU per call on collector-shaped input, without Spark: what one shard's call costs.

One shard of ``--groups`` groups (1,000 groups over the job's 8 shards: 125) of 10 members polled on 4 brokers, as
the sizing bench's collector publishes them. Two shapes, each as the job's state function runs them (rows as the
JVM stage hands them on, ``shard_events``, ``ShardEngine.apply``, the snapshot compressed as the state store keeps
it; CPU time of this process):

* ``keeping-up``: a call per 2 s trigger, a fifth of the groups' polls in it (the collector polls a group on every
  broker at one moment of its 10 s cycle): the state restored from and stored to its blob each call (measured after
  a first cycle of calls);
* ``catching-up``: a call of a minute of input (six polls per group and broker), polls one row each or folded
  into runs (``--fold``), as a job behind its input reads it.

The blob is stored and read as the job does (its groups' texts in segments, inflated only when read,
``state_blob``), or, with ``--whole-blob``,
as one zlib stream of the whole document; ``blob_ms_per_call`` is the part of the call spent reading and writing it.

    python -m bench.bench_consumer_state [--groups 125] [--calls 20] [--fold] [--whole-blob]
"""

from __future__ import annotations

import argparse
import json
import struct
import time
from typing import Any

from streaming.domain.consumers.engine_settings import EngineSettings
from streaming.domain.consumers.shard_engine import TEXT_KEYS, ShardEngine
from streaming.job.consumer.events import EVENT_COLUMNS, lane_times, shard_events
from streaming.job.consumer.heartbeat_runs import RUN
from streaming.job.runtime import state_blob
from streaming.job.runtime.python_worker import collector_paused

BROKERS = ("broker-a", "broker-b", "broker-c", "broker-d")
MEMBERS, POLL_MS, STALE_AFTER_MS, TOPICS = 10, 10_000, 30_000, 100
START = 1_700_000_000_000


def poll_fields(group: int, broker: str) -> dict[str, Any]:
    subscriptions = [{"topic": f"T{group % TOPICS}", "expression": "*", "sub_version": 1}]
    connections = [
        {"channel": f"10.{group // 250}.{group % 250}.{m}:{40000 + m}", "client_id": f"G{group}-{m}"}
        | {"client_version": "V5_3_3", "allocate_strategy": "AVG", "subscriptions": subscriptions}
        for m in range(MEMBERS)
    ]
    return {"type": "consumer_connections", "schema_version": 1, "broker": broker, "group": f"G{group}"} | {
        "stale_after_ms": STALE_AFTER_MS,
        "collector": "bench",
        "subscriptions": subscriptions,
        "connections": connections,
    }


def route(topic: int) -> dict[str, Any]:
    brokers = [{"broker": b, "read_queue_nums": 4, "write_queue_nums": 4, "perm": 6} for b in BROKERS]
    return {"type": "topic_route", "schema_version": 1, "topic": f"T{topic}", "brokers": brokers}


def columns_of(events: list[tuple[int, dict[str, Any]]], fold: bool) -> dict[str, list[Any]]:
    """The rows ``shard_input`` and the JVM stage hand the state function; with ``fold`` a view's polls of the call
    as one run row (a poll's fields without its time; without ``fold`` with it, as code before poll runs read it)."""
    rows: list[dict[str, Any]] = []
    runs: dict[str, list[dict[str, Any]]] = {}
    for offset, (time_ms, fields) in enumerate(events):
        row = dict.fromkeys(EVENT_COLUMNS)
        typed = json.dumps(
            fields if fold and fields["type"] == "consumer_connections" else {**fields, "event_time": time_ms}
        )
        row.update(event_time_ms=time_ms, event_type=fields["type"], kafka_topic="rmq", kafka_partition=0)
        row.update(kafka_offset=offset, typed_json=typed, raw_value=typed, **{RUN: None})
        if fold and fields["type"] == "consumer_connections":
            runs.setdefault(typed, []).append(row)
        else:
            rows.append(row)
    for members in runs.values():
        packed = [v for r in members for v in (r["event_time_ms"], r["kafka_offset"])]
        head = dict(members[0])
        head[RUN] = struct.pack(f"<{len(packed)}q", *packed) if len(members) > 1 else None
        rows.append(head)
    return {name: [r[name] for r in rows] for name in (*EVENT_COLUMNS, RUN)}


WARM_UP_CALLS = 5  # one collector cycle of keeping-up calls before those measured
BLOB_CPU = [0.0]  # process CPU spent in the blob's decode and compress


def call(blob: bytes | None, columns: dict[str, list[Any]], watermark_ms: int, whole: bool) -> tuple[bytes, int]:
    """One call of the state function on a shard: restore, events, apply, snapshot; the blob and events applied.
    Python's cyclic collector paused through it, as the job's state function pauses it."""
    with collector_paused():
        return _call(blob, columns, watermark_ms, whole)


def _call(blob: bytes | None, columns: dict[str, list[Any]], watermark_ms: int, whole: bool) -> tuple[bytes, int]:
    began = time.process_time()
    document = None if blob is None else state_blob.decode(blob, unread=True)
    BLOB_CPU[0] += time.process_time() - began
    engine = ShardEngine.restore(document, EngineSettings())
    events, _, _ = shard_events(columns, engine, watermark_ms)
    engine.apply(events, watermark_ms, lane_times(columns))
    snapshot = engine.snapshot()
    began = time.process_time()
    stored = state_blob.compress(snapshot, () if whole else TEXT_KEYS)
    BLOB_CPU[0] += time.process_time() - began
    return stored, len(events)


def measure(groups: int, calls: int, fold: bool, whole: bool = False) -> dict[str, Any]:
    polls = {(g, b): poll_fields(g, b) for g in range(groups) for b in BROKERS}
    routes = [(START - 1, route(t)) for t in range(min(groups, TOPICS))]
    blob, _ = call(None, columns_of(routes + [(START, p) for p in polls.values()], fold), 0, whole)
    results: dict[str, Any] = {}
    # keeping up: each 2 s call polls the groups whose moment of the 10 s cycle falls in it; the first cycle (the
    # groups' first generation cut, a poll of each group after it) is not measured
    cpu, applied, clock = 0.0, 0, START
    for n in range(WARM_UP_CALLS + calls):
        if n == WARM_UP_CALLS:
            cpu, applied, BLOB_CPU[0] = 0.0, 0, 0.0
        clock += 2_000
        due = [(clock, p) for (g, _), p in polls.items() if g % 5 == n % 5]
        columns = columns_of(due, fold)
        began = time.process_time()
        blob, count = call(blob, columns, clock - 2_000, whole)
        cpu += time.process_time() - began
        applied += count
    results["keeping_up"] = {
        "ms_per_call": round(1000 * cpu / calls, 2),
        "blob_ms_per_call": round(1000 * BLOB_CPU[0] / calls, 2),
        "events_applied_per_call": applied / calls,
    }
    # catching up: a minute of input per call
    cpu, applied = 0.0, 0
    BLOB_CPU[0] = 0.0
    for _ in range(max(1, calls // 5)):
        minute = [(clock + k * POLL_MS, p) for k in range(1, 7) for p in polls.values()]
        columns = columns_of(minute, fold)
        began = time.process_time()
        blob, count = call(blob, columns, clock, whole)
        cpu += time.process_time() - began
        applied += count
        clock += 6 * POLL_MS
    rounds = max(1, calls // 5)
    results["catching_up"] = {
        "ms_per_call": round(1000 * cpu / rounds, 1),
        "blob_ms_per_call": round(1000 * BLOB_CPU[0] / rounds, 1),
        "polls_per_call": 6 * len(polls),
        "events_applied_per_call": applied / rounds,
    }
    results["state_bytes"] = len(blob)
    blob_form = "whole" if whole else "segmented"
    return {"groups": groups, "brokers": len(BROKERS), "members": MEMBERS, "fold": fold, "blob": blob_form, **results}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=125, help="groups in the shard (default 125: 1,000 over 8)")
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--fold", action="store_true", help="polls folded into runs, as the JVM stage does")
    parser.add_argument("--whole-blob", action="store_true", help="the blob as one zlib stream, not segmented")
    args = parser.parse_args()
    print(json.dumps(measure(args.groups, args.calls, args.fold, args.whole_blob)))


if __name__ == "__main__":
    main()
