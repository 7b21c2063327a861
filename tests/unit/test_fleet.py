"""The shard engine end to end without Spark: events in, the rows the Delta tables receive out."""

from __future__ import annotations

import json

from streaming.domain.fleet import ShardEngine


def hb(t, channel, cid, topics=("T",), broker="broker-a", group="G", **extra):
    return {
        "type": "consumer_channel",
        "schema_version": 1,
        "event_time": t,
        "broker": broker,
        "kind": "HEARTBEAT",
        "channel": channel,
        "client_id": cid,
        "group": group,
        "subscriptions": [{"topic": x, "expression": "*", "sub_version": 1} for x in topics],
        **extra,
    }


def ev(kind, t, channel, cid, broker="broker-a", group="G"):
    return {
        "type": "consumer_channel",
        "schema_version": 1,
        "event_time": t,
        "broker": broker,
        "kind": kind,
        "channel": channel,
        "client_id": cid,
        "group": group,
    }


def route(t, topic="T", brokers=(("broker-a", 4), ("broker-b", 4))):
    return {
        "type": "topic_route",
        "schema_version": 1,
        "event_time": t,
        "topic": topic,
        "brokers": [{"broker": b, "read_queue_nums": n, "write_queue_nums": n, "perm": 6} for b, n in brokers],
    }


def rows(records, table):
    return [r for t, r in records if t == table]


def run(batches, settings=None):
    """Each batch: (events, watermark). The engine is snapshotted and restored between batches, as in Spark."""
    snapshot, out = None, []
    for events, watermark in batches:
        engine = ShardEngine.restore(json.loads(json.dumps(snapshot)) if snapshot else None, settings or {})
        out += engine.apply(events, watermark)
        snapshot = engine.snapshot()
    return out, snapshot


def test_duplicate_client_id_names_the_orphaned_and_double_owned_queues():
    out, _ = run([([route(0), hb(1_000, "10.1.0.1:1", "172.17.0.1@1"), hb(1_000, "10.1.0.2:1", "172.17.0.1@1"),
                    hb(1_000, "10.1.0.3:1", "10.0.0.9@5#77")], 0)])  # fmt: skip
    opened = {r["anomaly"]: json.loads(r["details"]) for r in rows(out, "anomaly_episodes") if r["status"] == "OPENED"}
    assert set(opened) == {"ORPHANED_QUEUES", "DOUBLE_OWNED_QUEUES", "DUPLICATE_CLIENT_ID"}
    assert opened["ORPHANED_QUEUES"]["queues"] == [
        {"broker": "broker-b", "queue_id": 2},
        {"broker": "broker-b", "queue_id": 3},
    ]
    assert [(q["broker"], q["queue_id"]) for q in opened["DOUBLE_OWNED_QUEUES"]["queues"]] == [
        ("broker-a", 3),
        ("broker-b", 0),
        ("broker-b", 1),
    ]
    current = {
        r["client_id"]: [(q["broker"], q["queue_id"]) for q in r["queues"]] for r in rows(out, "current_assignment")
    }
    assert current["172.17.0.1@1"] == [("broker-a", 3), ("broker-b", 0), ("broker-b", 1)]
    assert rows(out, "group_snapshots")[-1]["cid_all"] == ["10.0.0.9@5#77", "172.17.0.1@1", "172.17.0.1@1"]


def test_unregister_and_silent_expiry_at_the_right_event_times():
    members = [hb(0, f"10.1.0.{i}:1", f"c{i}") for i in range(3)]
    out, _ = run([
        ([route(0), *members], 0),
        ([ev("UNREGISTER", 10_000, "10.1.0.0:1", "c0"), hb(30_000, "10.1.0.1:1", "c1")], 0),
        ([hb(60_000, "10.1.0.1:1", "c1"), hb(90_000, "10.1.0.1:1", "c1"), hb(120_000, "10.1.0.1:1", "c1")], 0),
        ([hb(150_000, "10.1.0.1:1", "c1")], 130_000),
    ])  # fmt: skip
    changes = [(r["change"], r["reason"], r["client_id"], r["event_time_ms"]) for r in rows(out, "membership_changes")]
    assert ("LEAVE", "UNREGISTER", "c0", 10_000) in changes
    assert ("EXPIRED", "SCAN", "c2", 120_001) in changes  # last heartbeat at 0, silent for more than 120 s
    generations = [r["generation"] for r in rows(out, "group_snapshots")]
    assert generations == sorted(generations) and len(set(generations)) == len(generations)
    final = rows(out, "group_snapshots")[-1]
    assert final["cid_all"] == ["c1"]
    deleted = {r["client_id"] for r in rows(out, "current_assignment") if r["_op"] == "delete"}
    assert deleted == {"c0", "c2"}


def test_subscription_change_moves_queues_and_route_change_reanalyses():
    out, _ = run([
        ([route(0), hb(0, "a:1", "c1", topics=("T", "U")), hb(0, "b:1", "c2", topics=("T", "U"))], 0),
        ([hb(30_000, "b:1", "c2", topics=("T",))], 0),
    ])  # fmt: skip
    last = rows(out, "group_snapshots")[-1]
    assert "SUBSCRIPTION_CHANGED" in last["triggers"]
    out2, _ = run(
        [([route(0), hb(0, "a:1", "c1"), hb(0, "b:1", "c2")], 0), ([route(5_000, brokers=(("broker-a", 8),))], 0)]
    )
    snapshots = rows(out2, "group_snapshots")
    assert snapshots[-1]["triggers"] == ["ROUTE_CHANGED"]
    # c1 keeps a0-a3; c2's b0-b3 are gone from the route and c2 now owns the new a4-a7: 4 queues moved
    assert json.loads(snapshots[-1]["details"])["topics"]["T"]["moved"] == 4


def test_replaying_a_batch_from_the_same_snapshot_gives_the_same_rows():
    batch = [route(0), hb(0, "a:1", "x@1"), hb(0, "b:1", "x@1"), hb(5, "c:1", "y@2")]
    assert run([(batch, 0)]) == run([(batch, 0)])


def test_storm_opens_when_rebalances_exceed_the_threshold():
    events = [route(0)]
    for i in range(6):  # each new channel is a rebalance
        events.append(hb(i * 1_000, f"10.0.0.{i}:1", f"c{i}"))
    out, _ = run([(events, 0)], {"storm_threshold": 3, "storm_window_ms": 60_000})
    assert any(r["anomaly"] == "REBALANCE_STORM" and r["status"] == "OPENED" for r in rows(out, "anomaly_episodes"))


def test_a_group_that_empties_and_returns_continues_its_generations():
    out, _ = run([
        ([route(0), hb(0, "a:1", "c1")], 0),
        ([ev("UNREGISTER", 1_000, "a:1", "c1")], 0),
        ([hb(5_000, "a:1", "c1")], 0),
    ])  # fmt: skip
    assert [r["generation"] for r in rows(out, "group_snapshots")] == [1, 2]
    assert any(r.get("removed") for r in rows(out, "group_metrics"))
