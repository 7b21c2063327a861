"""The records ``bench_job`` and its neighbours publish: send results and heartbeat rounds, keyed as the
contract says, and the producer that publishes them to the local Kafka broker, each with the event-time header
every producer of the contract adds."""

from __future__ import annotations

import json
import re

from streaming.contract.events import event_time_headers

BASE = 1_700_000_000_000
# A serialized event's own time: the benchmarks' events are ``json.dumps`` of dicts whose top-level
# ``event_time`` comes before any nested object, so the first match is the event's.
_EVENT_TIME = re.compile(rb'"event_time": ?(-?[0-9]+)')


def record_headers(value: bytes) -> list[tuple[str, bytes]]:
    """The Kafka headers of a benchmark's serialized event (``events.event_time_headers``), found without
    decoding the value: the job plans capped batches by them, as it does the collector's and the agent's."""
    found = _EVENT_TIME.search(value)
    return event_time_headers({"event_time": int(found.group(1))}) if found else []


def produce(bootstrap: str, topic: str, records) -> int:  # type: ignore[no-untyped-def]
    """Publish ``(key, value)`` records; the key is the contract's (docs/events.md), so one producer's sends and
    one group's channel events stay in one partition, as a collector following the contract publishes them."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=50, batch_size=512 * 1024, acks=1)
    count = 0
    for key, value in records:
        producer.send(topic, value, key=key.encode(), headers=record_headers(value))
        count += 1
    producer.flush()
    producer.close()
    return count


def sends(n: int):  # type: ignore[no-untyped-def]
    import random

    rng = random.Random(3)
    for i in range(n):
        slow = rng.random() < 0.01
        producer_id = f"10.1.{i % 200 // 256}.{i % 200}@9#1"
        yield (
            producer_id,
            json.dumps(
                {
                    "type": "send_result",
                    "schema_version": 1,
                    "event_time": BASE + i * 5,
                    "producer_id": producer_id,
                    "producer_group": "PG",
                    "topic": "T",
                    "broker": f"broker-{i % 8}",
                    "queue_id": i % 16,
                    "latency_ms": rng.randint(600, 4000) if slow else rng.randint(1, 40),
                    "outcome": "OK",
                    "client_version": "V4_9_8",
                }
            ).encode(),
        )


def heartbeats(groups: int, members: int, rounds: int):  # type: ignore[no-untyped-def]
    for topic in ("T0", "T1", "T2", "T3"):
        yield (
            topic,
            json.dumps(
                {
                    "type": "topic_route",
                    "schema_version": 1,
                    "event_time": BASE,
                    "topic": topic,
                    "brokers": [
                        {"broker": b, "read_queue_nums": 8, "write_queue_nums": 8, "perm": 6}
                        for b in ("broker-a", "broker-b")
                    ],
                }
            ).encode(),
        )
    for r in range(rounds):
        for g in range(groups):
            for m in range(members):
                for b, broker in enumerate(("broker-a", "broker-b")):
                    yield (
                        f"group-{g}",
                        json.dumps(
                            {
                                "type": "consumer_channel",
                                "schema_version": 1,
                                "event_time": BASE + r * 30_000 + m * 10,
                                "broker": broker,
                                "kind": "HEARTBEAT",
                                "channel": f"10.{g // 250}.{g % 250}.{m}:{40000 + b}",
                                "client_id": f"10.{g // 250}.{g % 250}.{m}@{m}#7",
                                "group": f"group-{g}",
                                "subscriptions": [{"topic": f"T{g % 4}", "expression": "*", "sub_version": 1}],
                            }
                        ).encode(),
                    )


def progress_samples(groups: int, rounds: int, queues: int = 8):  # type: ignore[no-untyped-def]
    """One ``consume_progress`` event per group and broker every 30 s (5 s after that round's heartbeats), a row
    per queue of the group's topic (``heartbeats``' topics: 8 queues on each broker): producers write 20
    messages per queue per sample, the group commits all but a few, so each queue advances with a small lag."""
    for r in range(rounds):
        for g in range(groups):
            for broker in ("broker-a", "broker-b"):
                yield (
                    f"group-{g}",
                    json.dumps(
                        {
                            "type": "consume_progress",
                            "schema_version": 1,
                            "event_time": BASE + r * 30_000 + 5_000,
                            "group": f"group-{g}",
                            "broker": broker,
                            "consume_tps": 0.6,
                            "queues": [
                                {
                                    "topic": f"T{g % 4}",
                                    "queue_id": q,
                                    "broker_offset": 20 * (r + 1),
                                    "consumer_offset": 20 * (r + 1) - (q + r) % 4,
                                    "pull_offset": 20 * (r + 1),
                                    "last_timestamp": BASE + r * 30_000 + 4_000,
                                }
                                for q in range(queues)
                            ],
                        }
                    ).encode(),
                )
