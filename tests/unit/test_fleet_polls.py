"""The shard engine fed by brokers' polls: views, staleness rows, and groups without client-side allocation."""

from __future__ import annotations

import json

import pytest

from tests.unit.test_fleet import hb, route, rows, run

STALE_AFTER = 30_000


def conn(channel, cid, **extra):
    return {"channel": channel, "client_id": cid, **extra}


def poll(t, connections, broker="broker-a", group="G", topics=("T",), **extra):
    return {
        "type": "consumer_connections",
        "schema_version": 1,
        "event_time": t,
        "broker": broker,
        "group": group,
        "stale_after_ms": STALE_AFTER,
        "collector": "collector-1",
        "subscriptions": [{"topic": x, "expression": "*", "sub_version": 1} for x in topics],
        "connections": list(connections),
        **extra,
    }


C1, C2, C3 = conn("10.0.0.1:1", "c1"), conn("10.0.0.2:1", "c2"), conn("10.0.0.3:1", "c3")
C1_AGAIN = conn("10.0.0.9:1", "c1")  # a second client with c1's id


def both(t, a, b=None):
    return [poll(t, a, "broker-a"), poll(t, a if b is None else b, "broker-b")]


def test_a_client_vanishing_from_one_brokers_poll_is_removed_from_that_view_only():
    out, _ = run([([route(0), *both(1_000, [C1, C2, C3])], 1_000), (both(11_000, [C1, C2, C3], [C1, C2]), 11_000)])
    vanished = [r for r in rows(out, "membership_changes") if r["change"] == "VANISHED"]
    assert [(r["broker"], r["client_id"], r["event_time_ms"]) for r in vanished] == [("broker-b", "c3", 11_000)]
    diverging = [e for e in rows(out, "anomaly_episodes") if e["anomaly"] == "DIVERGING_BROKER_VIEWS"]
    assert [e["status"] for e in diverging] == ["OPENED"]


def test_a_view_whose_polls_stop_turns_stale_without_removal_or_orphaned_queues_and_resumes():
    batches = [([route(0), *both(1_000, [C1, C2])], 1_000)]
    # broker-b's polls stop for 200 s of event time (more than the 120 s channel expiry); broker-a's go on.
    batches += [([poll(t, [C1, C2], "broker-a")], t) for t in range(11_000, 211_001, 10_000)]
    out_stale, snapshot = run(batches)
    assert not [r for r in rows(out_stale, "membership_changes") if r["change"] not in ("JOIN", "SUBSCRIPTION_CHANGED")]
    assert not [e for e in rows(out_stale, "anomaly_episodes") if e["anomaly"] == "ORPHANED_QUEUES"]
    changes = rows(out_stale, "broker_view_changes")
    assert [(r["broker"], r["status"], r["event_time_ms"]) for r in changes] == [
        ("broker-a", "FRESH", 1_000),
        ("broker-b", "FRESH", 1_000),
        ("broker-b", "STALE", 1_000 + STALE_AFTER + 1),
    ]
    current = {r["broker"]: r for r in rows(out_stale, "broker_views_current")}  # the last row per broker wins
    assert current["broker-b"]["status"] == "STALE" and current["broker-b"]["channels"] == 2
    assert current["broker-b"]["stale_since_ms"] == 1_000 + STALE_AFTER + 1
    assert current["broker-a"]["status"] == "FRESH" and current["broker-a"]["polled_at_ms"] == 211_000
    # broker-b answers again, without c2: fresh again, and the difference from the last seen view is a change.
    batches.append((both(221_000, [C1, C2], [C1]), 221_000))
    out, _ = run(batches)
    resumed = out[len(out_stale) :]
    assert [(r["broker"], r["status"]) for r in rows(resumed, "broker_view_changes")] == [("broker-b", "FRESH")]
    assert [(r["broker"], r["change"], r["client_id"]) for r in rows(resumed, "membership_changes")] == [
        ("broker-b", "VANISHED", "c2")
    ]
    assert json.loads(snapshot["groups"]["G"])["membership"]["views"]["broker-b"]["poll"][2] is True  # stale, kept


def test_a_stale_view_takes_no_part_while_a_fresh_one_has_channels():
    # broker-a is polled every 20 s (fresh throughout); broker-b's polls stop after 1 s (stale from 31 s); c2 leaves
    # broker-a's view at 41 s, when only a stale view still lists it
    batches = [([route(0), *both(1_000, [C1, C2])], 1_000), ([poll(21_000, [C1, C2], "broker-a")], 21_000)]
    batches += [([poll(t, [C1], "broker-a")], t) for t in range(41_000, 81_001, 20_000)]
    out, _ = run(batches)
    last = rows(out, "group_snapshots")[-1]
    assert last["cid_all"] == ["c1"] and '"stale_views":["broker-b"]' in last["details"]
    assert not [e for e in rows(out, "anomaly_episodes") if e["anomaly"] == "DIVERGING_BROKER_VIEWS"]


def test_a_poll_older_than_the_views_last_is_counted_late_and_changes_nothing():
    out, _ = run([([route(0), poll(10_000, [C1, C2])], 10_000), ([poll(5_000, [C1])], 10_000)])
    assert rows(out, "late_events")[-1]["reason"] == "stale_poll"
    assert not [r for r in rows(out, "membership_changes") if r["change"] == "VANISHED"]


def test_an_empty_poll_of_an_unknown_group_keeps_nothing_and_a_group_that_empties_deletes_its_views():
    out, snapshot = run([([poll(1_000, [])], 1_000)])
    assert out == [] and not snapshot["groups"]
    # another group's poll 1 s later moves the clock past the emptying poll's window within the same call
    later = poll(3_000, [C2], group="H")
    out, snapshot = run([([route(0), poll(1_000, [C1])], 1_000), ([poll(2_000, []), later], 2_000)])
    views = [(r, False) for r in rows(out, "broker_views_current") if r["group"] == "G"]
    views += [(r, True) for r in rows(out, "deleted_broker_views_current") if r["group"] == "G"]
    assert views[-1] == (
        {"cluster": "DefaultCluster", "group": "G", "broker": "broker-a", "event_time_ms": 2_000},
        True,
    )
    assert [gone for r, gone in views if r["event_time_ms"] == 2_000] == [True]  # the emptying poll's upsert goes
    assert set(snapshot["groups"]) == {"H"}


def heartbeats(t, model, consume_type):
    return [
        hb(t, f"10.0.0.{i}:1", f"c{i}", broker=b, message_model=model, consume_type=consume_type)
        for i in (1, 2, 3)
        for b in ("broker-a", "broker-b")
    ]


def polls(t, model, consume_type):
    return (
        both(t, [C1, C2, C3])
        if model is None
        else [{**p, "message_model": model, "consume_type": consume_type} for p in both(t, [C1, C1_AGAIN, C2, C3])]
    )


@pytest.mark.parametrize("source", [heartbeats, polls])
@pytest.mark.parametrize(
    ("model", "consume_type", "mode"),
    [("BROADCASTING", "CONSUME_PASSIVELY", "BROADCAST"), ("CLUSTERING", "CONSUME_POP", "BROKER")],
)
def test_groups_without_client_side_allocation_get_no_expected_assignment_from_either_source(
    source, model, consume_type, mode
):
    # Four brokers' worth of queues on two routes, and (for polls) a client id on two channels: a client-side
    # group would have orphaned and double-owned queues here.
    out, _ = run([([route(0, brokers=(("broker-a", 8), ("broker-b", 8))), *source(1_000, model, consume_type)], 1_000)])
    snapshot = rows(out, "group_snapshots")[-1]
    assert snapshot["strategy"] == mode and f'"allocation":"{mode}"' in snapshot["details"]
    assert not rows(out, "expected_assignments") and not rows(out, "current_assignment")
    kinds = {e["anomaly"] for e in rows(out, "anomaly_episodes")}
    assert not kinds & {"ORPHANED_QUEUES", "DOUBLE_OWNED_QUEUES", "INCONSISTENT_SUBSCRIPTION"}


@pytest.mark.parametrize("source", [heartbeats, polls])
def test_a_clustering_push_group_still_gets_its_assignment_from_either_source(source):
    out, _ = run([([route(0), *source(1_000, "CLUSTERING", "CONSUME_PASSIVELY")], 1_000)])
    assert rows(out, "group_snapshots")[-1]["strategy"] == "AVG"
    assert sorted(r["client_id"] for r in rows(out, "expected_assignments")) == ["c1", "c2", "c3"]


def test_diverging_views_close_while_one_is_stale_and_reopen_when_it_answers_the_same_again():
    batches = [([route(0), *both(1_000, [C1, C2], [C1])], 1_000)]
    batches += [([poll(t, [C1, C2], "broker-a")], t) for t in range(11_000, 61_001, 10_000)]
    batches.append((both(71_000, [C1, C2], [C1]), 71_000))
    out, _ = run(batches)
    diverging = [
        (e["status"], e["event_time_ms"])
        for e in rows(out, "anomaly_episodes")
        if e["anomaly"] == "DIVERGING_BROKER_VIEWS"
    ]
    assert diverging == [("OPENED", 1_000), ("CLOSED", 1_000 + STALE_AFTER + 1), ("OPENED", 71_000)]
    assert [s["generation"] for s in rows(out, "group_snapshots")] == [1]  # staleness is no rebalance
