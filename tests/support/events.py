"""Builders of contract events for the integration tests (times are offsets from ``BASE``)."""

from __future__ import annotations

BASE = 1_700_000_000_000


def hb(t, channel, cid, group="G", topics=("T",), broker="broker-a"):  # type: ignore[no-untyped-def]
    return {
        "type": "consumer_channel",
        "schema_version": 1,
        "event_time": BASE + t,
        "broker": broker,
        "kind": "HEARTBEAT",
        "channel": channel,
        "client_id": cid,
        "group": group,
        "subscriptions": [{"topic": x, "expression": "*", "sub_version": 1} for x in topics],
    }


def channel_event(kind, t, channel, cid, group="G", broker="broker-a"):  # type: ignore[no-untyped-def]
    return {
        "type": "consumer_channel",
        "schema_version": 1,
        "event_time": BASE + t,
        "broker": broker,
        "kind": kind,
        "channel": channel,
        "client_id": cid,
        "group": group,
    }


def route(t, topic="T", brokers=(("broker-a", 4), ("broker-b", 4))):  # type: ignore[no-untyped-def]
    return {
        "type": "topic_route",
        "schema_version": 1,
        "event_time": BASE + t,
        "topic": topic,
        "brokers": [{"broker": b, "read_queue_nums": n, "write_queue_nums": n, "perm": 6} for b, n in brokers],
    }


def report(t, cid, queues, group="G", topic="T"):  # type: ignore[no-untyped-def]
    """A client's reported assignment: ``queues`` as (broker, queue id) pairs, none dropped."""
    return {
        "type": "reported_assignment",
        "schema_version": 1,
        "event_time": BASE + t,
        "group": group,
        "client_id": cid,
        "topic": topic,
        "queues": [{"broker": b, "queue_id": q, "dropped": False} for b, q in queues],
    }
