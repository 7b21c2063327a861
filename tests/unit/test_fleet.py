"""The shard engine end to end without Spark: events in, the rows the Delta tables receive out."""

from __future__ import annotations

import json
from dataclasses import replace

from streaming.domain.allocation.group_rules import GroupRule
from streaming.domain.consumers.engine_settings import EngineSettings
from streaming.domain.consumers.outcomes import GroupGone, GroupSummary, IgnoredEvent, LateEvent
from streaming.domain.consumers.shard_engine import ShardEngine
from streaming.domain.vocabulary import IgnoredReason, LateReason
from streaming.job.delta.table_rows import rows_of
from tests.support.engine import settle, typed


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


def table_rows(outcomes):
    """The engine's outcomes as the tables (and metrics) receive them; an ignored event stays itself."""
    return [pair for o in outcomes for pair in ([("ignored", o)] if isinstance(o, IgnoredEvent) else rows_of(o))]


def rows(outcomes, table):
    return [r for t, r in table_rows(outcomes) if t == table]


def engine_settings(options=None):
    """``EngineSettings`` from a table of this file's options; ``group_rules`` as tables of ``GroupRule`` fields."""
    options = dict(options or {})
    rules = tuple(GroupRule(**rule) for rule in options.pop("group_rules", ()))
    return EngineSettings(**options, group_rules=rules)


def run(batches, settings=None):
    """Each batch: (events, watermark). The engine is snapshotted and restored between batches, as in Spark; after
    the last, the clock moves past the window of its last changes (``settle``), so they are cut too."""
    snapshot, out = None, []
    for events, watermark in [*batches, (None, None)]:
        engine = ShardEngine.restore(json.loads(json.dumps(snapshot)) if snapshot else None, engine_settings(settings))
        out += settle(engine) if events is None else engine.apply(typed(events), watermark)
        snapshot = engine.snapshot()
    return out, snapshot


def test_duplicate_client_id_names_the_orphaned_and_double_owned_queues():
    out, _ = run(
        [
            (
                [
                    route(0),
                    hb(1_000, "10.1.0.1:1", "172.17.0.1@1"),
                    hb(1_000, "10.1.0.2:1", "172.17.0.1@1"),
                    hb(1_000, "10.1.0.3:1", "10.0.0.9@5#77"),
                ],
                0,
            )
        ]
    )
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


def test_channels_counts_cid_all_on_one_broker_so_only_a_duplicated_id_adds_one():
    # Five members, each connected to both brokers (a channel per broker), then a sixth channel reusing c0's ID.
    members = [hb(1_000, f"10.1.0.{i}:1", f"c{i}", broker=b) for i in range(5) for b in ("broker-a", "broker-b")]
    out, _ = run([([route(0), *members], 0), ([hb(2_000, "10.1.0.9:1", "c0")], 0)])
    first, second = [o for o in out if isinstance(o, GroupSummary)]
    assert (first.members, first.channels, first.duplicate_client_ids) == (5, 5, 0)
    assert (second.members, second.channels, second.duplicate_client_ids) == (5, 6, 1)
    assert [(r["members"], r["channels"], r["duplicate_client_ids"]) for r in rows(out, "group_status_current")] == [
        (5, 5, 0),
        (5, 6, 1),
    ]


def test_unregister_and_silent_expiry_at_the_right_event_times():
    members = [hb(0, f"10.1.0.{i}:1", f"c{i}") for i in range(3)]
    out, _ = run(
        [
            ([route(0), *members], 0),
            ([ev("UNREGISTER", 10_000, "10.1.0.0:1", "c0"), hb(30_000, "10.1.0.1:1", "c1")], 0),
            ([hb(60_000, "10.1.0.1:1", "c1"), hb(90_000, "10.1.0.1:1", "c1"), hb(120_000, "10.1.0.1:1", "c1")], 0),
            ([hb(150_000, "10.1.0.1:1", "c1")], 130_000),
        ]
    )
    changes = [(r["change"], r["reason"], r["client_id"], r["event_time_ms"]) for r in rows(out, "membership_changes")]
    assert ("LEAVE", "UNREGISTER", "c0", 10_000) in changes
    assert ("EXPIRED", "SCAN", "c2", 120_001) in changes  # last heartbeat at 0, silent for more than 120 s
    generations = [r["generation"] for r in rows(out, "group_snapshots")]
    assert generations == sorted(generations) and len(set(generations)) == len(generations)
    final = rows(out, "group_snapshots")[-1]
    assert final["cid_all"] == ["c1"]
    deleted = {r["client_id"] for r in rows(out, "deleted_current_assignment")}
    assert deleted == {"c0", "c2"}


def run_lanes(batches, settings=None):
    """Each batch: (events as (lane, event), watermark); the engine is given each lane's newest event time, as the
    job gives each Kafka partition's. Per batch, the membership changes it made."""
    snapshot, out = None, []
    for events, watermark in batches:
        engine = ShardEngine.restore(json.loads(json.dumps(snapshot)) if snapshot else None, engine_settings(settings))
        lanes = {}
        for lane, event in events:
            if event["type"] == "consumer_channel":
                lanes[lane] = max(lanes.get(lane, 0), event["event_time"])
        made = engine.apply(typed([e for _, e in events]), watermark, lanes)
        out.append([(r["change"], r["client_id"], r["event_time_ms"]) for r in rows(made, "membership_changes")])
        snapshot = engine.snapshot()
    return out, snapshot


def test_a_silent_channel_expires_once_every_lane_has_passed_its_deadline():
    # G's c2 goes silent after 0 (deadline 120_001); G itself says nothing past the deadline, the watermark stays
    # at 0: only group H's events, on both lanes, move the clock.
    out, snapshot = run_lanes(
        [
            (
                [
                    ("p0", route(0)),
                    ("p0", hb(0, "g:1", "c1")),
                    ("p0", hb(0, "g:2", "c2")),
                    ("p1", hb(0, "h:1", "h1", group="H")),
                ],
                0,
            ),
            ([("p0", hb(90_000, "g:1", "c1")), ("p0", hb(121_000, "h:1", "h1", group="H"))], 0),  # lane p1 still at 0
            ([("p1", hb(110_000, "h:2", "h2", group="H"))], 0),  # p1 behind the deadline: c2 may yet be refreshed
            ([("p1", hb(122_000, "h:2", "h2", group="H"))], 0),  # both lanes past it
        ]
    )
    assert [c for c in out[1] + out[2] if c[1] == "c2"] == []
    assert ("EXPIRED", "c2", 120_001) in out[3]
    assert ("EXPIRED", "c1", 210_001) not in out[3]  # c1's own deadline is far off
    assert snapshot["lanes"] == {"p0": 121_000, "p1": 122_000}


def test_a_lane_that_stopped_holds_the_clock_until_the_watermark_leaves_it_an_expiry_behind():
    # Lane p1 stops at 0; c2 (lane p0) goes silent after 100_000 (deadline 220_001) while p0 runs on to 300_000.
    first = [("p0", route(0)), ("p0", hb(0, "g:1", "c1")), ("p0", hb(0, "g:2", "c2"))]
    first.append(("p1", hb(0, "h:1", "h1", group="H")))
    second = [("p0", hb(100_000, "g:1", "c1")), ("p0", hb(100_000, "g:2", "c2"))]
    third = [("p0", hb(200_000, "g:1", "c1")), ("p0", hb(300_000, "x:1", "x1", group="X"))]
    held, _ = run_lanes([(first, 0), (second, 0), (third, 119_999)])  # p1 (newest 0) not yet an expiry behind
    assert all(c[1] != "c2" for c in held[2])
    moved, snapshot = run_lanes([(first, 0), (second, 0), (third, 120_001)])  # now it is: p0's clock alone counts
    assert ("EXPIRED", "c2", 220_001) in moved[2]
    assert snapshot["lanes"] == {"p0": 300_000}


def test_subscription_change_moves_queues_and_route_change_reanalyses():
    out, _ = run(
        [
            ([route(0), hb(0, "a:1", "c1", topics=("T", "U")), hb(0, "b:1", "c2", topics=("T", "U"))], 0),
            ([hb(30_000, "b:1", "c2", topics=("T",))], 0),
        ]
    )
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


def short_lived(count, start_ms=40_000):
    """``count`` members that each join (one heartbeat) and unregister 1 s later, one every 2 s."""
    events = []
    for i in range(1, count + 1):
        t = start_ms + i * 2_000
        events += [hb(t, f"10.0.0.{i}:1", f"c{i}"), ev("UNREGISTER", t + 1_000, f"10.0.0.{i}:1", f"c{i}")]
    return events


def test_storm_opens_when_unconverged_changes_exceed_the_threshold():
    """Members that join and leave again after the group's first heartbeat round: 2 unconverged changes each, so
    two of them (4) exceed a threshold of 3, while the first round's joins (the group's birth) count nothing."""
    born = [route(0)] + [hb(i * 1_000, f"10.0.1.{i}:1", f"b{i}") for i in range(6)]  # 6 joins within 30 s
    out, _ = run([(born + short_lived(1), 0)], {"storm_threshold": 3, "storm_window_ms": 60_000})
    assert not any(r["anomaly"] == "REBALANCE_STORM" for r in rows(out, "anomaly_episodes"))
    out, _ = run([(born + short_lived(2), 0)], {"storm_threshold": 3, "storm_window_ms": 60_000})
    assert any(r["anomaly"] == "REBALANCE_STORM" and r["status"] == "OPENED" for r in rows(out, "anomaly_episodes"))


def test_a_window_that_slides_re_analyses_a_group_only_when_an_anomaly_can_change():
    """Storm and flapping windows slide past a group's changes: a group with no such anomaly found or open is
    not analysed again for it (its analysis would repeat the last one, metrics row included), while a storm
    still found, or an open storm episode, is re-judged (and closes once the window empties)."""
    join = [route(0), hb(0, "10.0.0.1:1", "c1"), hb(0, "10.0.0.2:1", "c2")]
    quiet = {"storm_threshold": 3, "storm_window_ms": 60_000, "flapping_window_ms": 120_000}
    later = [hb(200_000, "10.0.0.1:1", "c1"), hb(200_000, "10.0.0.2:1", "c2")]  # both windows slid by then
    out, _ = run([(join, 0), (later, 190_000)], {**quiet, "expiry_ms": 3_600_000})
    first_batch = len(run([(join, 0)], {**quiet, "expiry_ms": 3_600_000})[0])
    assert out[first_batch:] == []  # no membership change, no anomaly: nothing analysed, nothing emitted

    stormy = [route(0), hb(0, "10.0.0.0:1", "c0"), *short_lived(2)]
    out, _ = run([(stormy, 0), ([hb(200_000, "10.0.0.0:1", "c0")], 190_000)], {**quiet, "expiry_ms": 3_600_000})
    storm = [
        (r["status"], r["event_time_ms"]) for r in rows(out, "anomaly_episodes") if r["anomaly"] == "REBALANCE_STORM"
    ]
    # closed at the event time its window slid past c2's join (the third unconverged change), not at the batch
    # that saw it: then only c2's leave (1 change) is left, not more than half the threshold
    c2_join = 40_000 + 2 * 2_000
    assert storm[0][0] == "OPENED" and storm[-1] == ("CLOSED", c2_join + 60_000 + 1)


def test_a_group_that_empties_and_returns_continues_its_generations():
    out, _ = run(
        [
            ([route(0), hb(0, "a:1", "c1")], 0),
            ([ev("UNREGISTER", 1_000, "a:1", "c1")], 0),
            ([hb(5_000, "a:1", "c1")], 0),
        ]
    )
    assert [r["generation"] for r in rows(out, "group_snapshots")] == [1, 2]
    assert GroupGone("G", 1_000) in out
    assert {"cluster": "DefaultCluster", "group": "G", "event_time_ms": 1_000} in rows(
        out, "deleted_group_status_current"
    )


# -- flapping members ([anomalies] flapping_window_ms, flapping_threshold) ---------------------------------

FLAPPING = {"flapping_threshold": 3, "flapping_window_ms": 600_000}


def both_brokers(make, t, channel, cid):
    return [make(t, channel, cid, broker="broker-a"), make(t, channel, cid, broker="broker-b")]


def join(t, channel, cid, broker):
    return hb(t, channel, cid, broker=broker)


def close(t, channel, cid, broker):
    return ev("CHANNEL_CLOSE", t, channel, cid, broker=broker)


def episodes_of(out, anomaly):
    return [r for r in rows(out, "anomaly_episodes") if r["anomaly"] == anomaly]


def test_a_member_joining_and_leaving_more_than_the_threshold_is_flapping_and_stops_after_the_window():
    stable = both_brokers(join, 0, "10.0.0.1:1", "steady")
    # "crashy" restarts every 20 s; each join and leave is seen through both brokers (one change each)
    cycle = [
        both_brokers(join, 1_000, "10.0.0.2:1", "crashy"),
        both_brokers(close, 20_000, "10.0.0.2:1", "crashy"),
        both_brokers(join, 40_000, "10.0.0.2:2", "crashy"),
        both_brokers(close, 60_000, "10.0.0.2:2", "crashy"),
    ]
    settings = {**FLAPPING, "expiry_ms": 3_600_000}  # no channel expires in this test
    out, snapshot = run([([route(0), *stable, *cycle[0], *cycle[1], *cycle[2]], 0)], settings)
    assert episodes_of(out, "FLAPPING_MEMBERS") == []  # 3 changes (6 broker events) is not more than 3
    engine = ShardEngine.restore(snapshot, engine_settings(settings))
    out = engine.apply(typed(cycle[3]), 0) + settle(engine)
    (opened,) = episodes_of(out, "FLAPPING_MEMBERS")
    assert (opened["status"], opened["opened_at_ms"], opened["topic"]) == ("OPENED", 60_000, "")
    details = json.loads(opened["details"])
    assert details["members"] == {"crashy": {"joins": 2, "leaves": 2, "first_ms": 1_000, "last_ms": 60_000}}
    assert (details["threshold"], details["window_ms"]) == (3, 600_000)
    open_kinds = rows(out, "group_status_current")[-1]["open_anomalies"]
    assert {"anomaly": "FLAPPING_MEMBERS", "episodes": 1} in open_kinds
    # the first join leaves the window at 601_000 (600 s after it), and the episode closes then
    assert episodes_of(engine.advance(600_999), "FLAPPING_MEMBERS") == []
    assert engine.next_wakeup_ms() == 601_000
    (closed,) = episodes_of(engine.advance(601_000) + settle(engine), "FLAPPING_MEMBERS")
    assert (closed["status"], closed["closed_at_ms"]) == ("CLOSED", 601_000)


def test_flapping_also_closes_in_a_batch_with_input_when_the_window_slides():
    events = [route(0), hb(0, "s:1", "steady")]
    for i in range(4):
        events.append(
            hb(10_000 * i, f"f:{i}", "flappy") if i % 2 == 0 else ev("UNREGISTER", 10_000 * i, f"f:{i - 1}", "flappy")
        )
    out, _ = run([(events, 0), ([hb(700_000, "s:1", "steady")], 650_000)], FLAPPING)
    assert [r["status"] for r in episodes_of(out, "FLAPPING_MEMBERS")] == ["OPENED", "CLOSED"]


def test_a_sole_member_crash_looping_is_flapping_although_its_group_empties_each_time():
    batches = []
    for i in range(3):
        batches.append(([route(0), hb(30_000 * i, f"10.0.0.1:{i}", "only")], 0))
        batches.append(([ev("CHANNEL_CLOSE", 30_000 * i + 10_000, f"10.0.0.1:{i}", "only")], 0))
    out, _ = run(batches, FLAPPING)
    # joins at 0, 30 s, 60 s, leaves at 10 s, 40 s, 70 s: the 4th change (40 s) empties the group, the 5th
    # (the join at 60 s) brings it back with its history: flapping until it empties again
    statuses = [(r["status"], r["event_time_ms"]) for r in episodes_of(out, "FLAPPING_MEMBERS")]
    assert statuses == [("OPENED", 60_000), ("CLOSED", 70_000)]


def test_other_membership_changes_do_not_count_as_flapping():
    events = [route(0), hb(0, "a:1", "c1")]
    events += [hb(1_000 * i, "a:1", "c1", topics=("T",) if i % 2 else ("T", "U")) for i in range(1, 10)]
    out, _ = run([(events, 0)], FLAPPING)
    assert episodes_of(out, "FLAPPING_MEMBERS") == []


# -- convergence grace ([membership] convergence_grace_ms, route_poll_interval_ms) -------------------------

GRACE = {"convergence_grace_ms": 20_000, "route_poll_interval_ms": 30_000}


def report(t, cid, queues, topic="T", group="G"):
    return {
        "type": "reported_assignment",
        "schema_version": 1,
        "event_time": t,
        "group": group,
        "client_id": cid,
        "topic": topic,
        "queues": [{"broker": b, "queue_id": q, "dropped": False} for b, q in queues],
    }


A = [("broker-a", i) for i in range(4)]
B = [("broker-b", i) for i in range(4)]


def test_a_report_taken_before_the_generation_plus_the_rebalance_delay_is_kept_but_never_compared():
    # c1 and c2 join at 0 (expected: c1 a0-a3, c2 b0-b3); c1 still reports its old share of everything at 5 s, and
    # again at 19.999 s: reports from the join wave, taken before the generation (0) plus the delay (20 s)
    engine = ShardEngine.restore(None, engine_settings(GRACE))
    out = engine.apply(typed([route(0), hb(0, "a:1", "c1"), hb(0, "b:1", "c2"), report(5_000, "c1", A + B)]), 0)
    out += settle(engine) + engine.apply([], 20_000) + settle(engine)
    out += engine.apply(typed([report(19_999, "c1", A + B)]), 20_000) + settle(engine)
    assert episodes_of(out, "ASSIGNMENT_MISMATCH") == []
    (held,) = [r for r in rows(out, "queue_holders_current") if (r["broker"], r["queue_id"]) == ("broker-b", 0)][-1:]
    assert (held["holders"], held["not_counted"], held["uncounted_holders"]) == ([], ["c1"], ["c1"])
    assert (held["state"], held["evidence_from_ms"], held["expected_owners"]) == ("UNKNOWN", 20_000, ["c2"])
    # the same report taken at the bound counts: the difference opens at once (the grace ended at 20 s too)
    out = engine.apply(typed([report(20_000, "c1", A + B)]), 20_000) + settle(engine)
    (opened,) = episodes_of(out, "ASSIGNMENT_MISMATCH")
    assert (opened["status"], opened["opened_at_ms"]) == ("OPENED", 20_000)
    assert json.loads(opened["details"])["clients"] == {
        "c1": {"missing": [], "unexpected": [{"broker": b, "queue_id": q} for b, q in B]}
    }


def test_clients_that_converge_within_the_grace_never_open_a_mismatch():
    out, snapshot = run(
        [
            ([route(0), hb(0, "a:1", "c1"), hb(0, "b:1", "c2"), report(5_000, "c1", A + B)], 0),
            ([report(15_000, "c1", A), report(15_000, "c2", B)], 0),
        ],
        GRACE,
    )
    engine = ShardEngine.restore(snapshot, engine_settings(GRACE))
    out += engine.advance(25_000) + engine.apply(typed([report(40_000, "c1", A)]), 30_000)
    assert episodes_of(out, "ASSIGNMENT_MISMATCH") == []


def test_a_mismatch_after_the_grace_opens_at_once():
    out, _ = run([([route(0), hb(0, "a:1", "c1"), hb(0, "b:1", "c2")], 0), ([report(20_000, "c1", A + B)], 0)], GRACE)
    assert [(r["status"], r["opened_at_ms"]) for r in episodes_of(out, "ASSIGNMENT_MISMATCH")] == [("OPENED", 20_000)]


def test_a_route_change_extends_the_grace_by_the_route_poll_interval():
    steady = [route(0), hb(0, "a:1", "c1"), hb(0, "b:1", "c2"), report(30_000, "c1", A), report(30_000, "c2", B)]
    engine = ShardEngine.restore(
        None, engine_settings({**GRACE, "expiry_ms": 3_600_000})
    )  # no channel expires in this test
    engine.apply(typed(steady), 0)
    # broker-b loses its queues at 100 s; c2 keeps reporting b0-b3 (its next route poll is up to 30 s away)
    out = engine.apply(typed([route(100_000, brokers=(("broker-a", 8),)), report(140_000, "c2", B)]), 90_000)
    out += settle(engine)
    assert episodes_of(out, "ASSIGNMENT_MISMATCH") == []  # 40 s < 20 s + 30 s
    assert engine.next_wakeup_ms() == 150_000
    out = engine.advance(150_000) + settle(engine)
    assert [(r["status"], r["opened_at_ms"]) for r in episodes_of(out, "ASSIGNMENT_MISMATCH")] == [("OPENED", 150_000)]


def test_an_open_mismatch_is_kept_unjudged_after_a_new_generation_until_a_report_counts_again():
    engine = ShardEngine.restore(None, engine_settings(GRACE))
    out = engine.apply(typed([route(0), hb(0, "a:1", "c1"), hb(0, "b:1", "c2"), report(30_000, "c1", A + B)]), 0)
    (opened,) = episodes_of(out + settle(engine), "ASSIGNMENT_MISMATCH")
    # c3 joins at 50 s: a new generation, and c1's report of 30 s no longer counts; neither does one of 55 s (before
    # 50 s + 20 s): the episode stays as it is, neither closed nor updated
    out = engine.apply(typed([hb(50_000, "c:1", "c3")]), 40_000) + settle(engine)
    out += engine.apply(typed([report(55_000, "c1", A[:3])]), 40_000) + settle(engine)
    assert episodes_of(out, "ASSIGNMENT_MISMATCH") == []
    assert [e.anomaly for e in engine.groups["G"].episodes.values()] == ["ASSIGNMENT_MISMATCH"]
    # c1 reports again at 70 s (it holds its share of three, a0-a2): the first counted report judges, and closes it
    out = engine.apply(typed([report(70_000, "c1", A[:3])]), 60_000) + settle(engine)
    (closed,) = episodes_of(out, "ASSIGNMENT_MISMATCH")
    assert (closed["status"], closed["episode_id"], closed["closed_at_ms"]) == ("CLOSED", opened["episode_id"], 70_000)


# -- observed ownership ([membership] client_rebalance_delay_ms, observed_grace_ms) ---------------------------

OBSERVED = {**GRACE, "client_rebalance_delay_ms": 20_000, "observed_grace_ms": 5_000}


def joined(engine):
    """c1 and c2 join G at 0 on a route of a0-a3, b0-b3 (expected: c1 the a queues, c2 the b queues)."""
    return engine.apply(typed([route(0), hb(0, "a:1", "c1"), hb(0, "b:1", "c2")]), 0) + settle(engine)


def holders_of(out, broker, queue_id):
    return [r for r in rows(out, "queue_holders_current") if (r["broker"], r["queue_id"]) == (broker, queue_id)]


def test_two_clients_reporting_one_queue_for_the_grace_is_observed_double_holding():
    engine = ShardEngine.restore(None, engine_settings(OBSERVED))
    joined(engine)
    out = engine.apply(typed([report(20_000, "c1", A), report(20_000, "c2", B + A[:1])]), 20_000) + settle(engine)
    out += engine.apply(typed([report(24_000, "c1", A), report(24_000, "c2", B + A[:1])]), 20_000) + settle(engine)
    assert episodes_of(out, "OBSERVED_DOUBLE_HOLDING") == []  # shown for 4 s: short of the 5 s grace
    # the reports hold a0 twice whatever the allocation says: it predicts no double
    assert episodes_of(out, "DOUBLE_OWNED_QUEUES") == []
    (row,) = holders_of(out, "broker-a", 0)[-1:]
    assert (row["holders"], row["expected_owners"], row["state"], row["since_ms"]) == (
        ["c1", "c2"],
        ["c1"],
        "DOUBLE_HELD",
        20_000,
    )
    out = engine.apply(typed([report(25_000, "c1", A), report(25_000, "c2", B + A[:1])]), 20_000) + settle(engine)
    (opened,) = episodes_of(out, "OBSERVED_DOUBLE_HOLDING")
    assert (opened["status"], opened["opened_at_ms"], opened["severity"]) == ("OPENED", 25_000, "warning")
    details = json.loads(opened["details"])
    assert [(q["broker"], q["queue_id"], q["holders"]) for q in details["queues"]] == [("broker-a", 0, ["c1", "c2"])]
    assert episodes_of(out, "OBSERVED_UNHELD_QUEUES") == []
    # c2 lets a0 go: the double is gone from what they report, the episode closes
    out = engine.apply(typed([report(30_000, "c2", B)]), 20_000) + settle(engine)
    assert [r["status"] for r in episodes_of(out, "OBSERVED_DOUBLE_HOLDING")] == ["CLOSED"]
    assert holders_of(out, "broker-a", 0)[-1]["state"] == "HELD"


def test_a_queue_every_subscriber_reports_unheld_for_the_grace_is_observed_unheld():
    engine = ShardEngine.restore(None, engine_settings(OBSERVED))
    joined(engine)
    batch = [report(21_000, "c1", A[1:]), report(21_000, "c2", B), report(26_000, "c1", A[1:]), report(26_000, "c2", B)]
    out = engine.apply(typed(batch), 20_000) + settle(engine)
    (opened,) = episodes_of(out, "OBSERVED_UNHELD_QUEUES")
    assert (opened["opened_at_ms"], opened["severity"]) == (26_000, "critical")
    assert [(q["broker"], q["queue_id"]) for q in json.loads(opened["details"])["queues"]] == [("broker-a", 0)]
    assert episodes_of(out, "ORPHANED_QUEUES") == []  # the allocation gives a0 to c1: not predicted
    (row,) = holders_of(out, "broker-a", 0)[-1:]
    assert (row["state"], row["holders"], row["expected_owners"]) == ("UNHELD", [], ["c1"])


def test_a_handoff_seen_half_before_and_half_after_is_no_double_holding_even_without_a_grace():
    engine = ShardEngine.restore(None, engine_settings({**OBSERVED, "observed_grace_ms": 0}))
    joined(engine)
    # c1 still held a0 when it reported at 20 s; c2 took it by 21 s, when c1 no longer held it (its next report)
    out = engine.apply(typed([report(20_000, "c1", A), report(21_000, "c2", B + A[:1])]), 20_000) + settle(engine)
    out += engine.apply(typed([report(22_000, "c1", A[1:])]), 20_000) + settle(engine)
    assert episodes_of(out, "OBSERVED_DOUBLE_HOLDING") == []
    # reports taken together that both hold it are double-holding at once without a grace
    out = engine.apply(typed([report(30_000, "c1", A), report(30_000, "c2", B + A[:1])]), 20_000) + settle(engine)
    assert [r["status"] for r in episodes_of(out, "OBSERVED_DOUBLE_HOLDING")] == ["OPENED"]


def test_an_observed_episode_stays_unjudged_through_a_generation_until_every_subscriber_reports_again():
    engine = ShardEngine.restore(None, engine_settings({**OBSERVED, "expiry_ms": 3_600_000}))
    joined(engine)
    out = engine.apply(typed([report(20_000, "c1", A), report(20_000, "c2", B + A[:1])]), 20_000)
    out += engine.apply(typed([report(25_000, "c1", A), report(25_000, "c2", B + A[:1])]), 20_000) + settle(engine)
    assert [r["status"] for r in episodes_of(out, "OBSERVED_DOUBLE_HOLDING")] == ["OPENED"]
    # c3 joins at 40 s: the reports of 25 s are older than 40 s + 20 s, so nothing judges the episode
    out = engine.apply(typed([hb(40_000, "c:1", "c3")]), 30_000) + settle(engine)
    out += engine.apply(typed([report(45_000, "c2", B[:2])]), 30_000) + settle(engine)
    assert episodes_of(out, "OBSERVED_DOUBLE_HOLDING") == []
    assert holders_of(out, "broker-a", 0)[-1]["state"] == "UNKNOWN"
    # every subscriber's counted report at 60 s: a0 has one holder, the episode closes
    batch = [report(60_000, "c1", A[:3]), report(60_000, "c2", A[3:] + B[:2]), report(60_000, "c3", B[2:])]
    out = engine.apply(typed(batch), 50_000) + settle(engine)
    assert [r["status"] for r in episodes_of(out, "OBSERVED_DOUBLE_HOLDING")] == ["CLOSED"]
    assert {r["state"] for r in rows(out, "queue_holders_current")} == {"HELD"}


def test_a_report_older_than_the_clients_latest_changes_nothing():
    engine = ShardEngine.restore(None, engine_settings(OBSERVED))
    joined(engine)
    engine.apply(typed([report(25_000, "c1", A)]), 20_000)
    before = engine.snapshot()
    assert engine.apply(typed([report(24_000, "c1", A + B)]), 20_000) == []
    assert engine.snapshot() == before


def test_a_group_gone_deletes_its_holders_rows():
    engine = ShardEngine.restore(None, engine_settings(OBSERVED))
    joined(engine)
    engine.apply(typed([report(25_000, "c1", A), report(25_000, "c2", B)]), 20_000)
    out = engine.apply(typed([ev("UNREGISTER", 30_000, "a:1", "c1"), ev("UNREGISTER", 30_000, "b:1", "c2")]), 20_000)
    out += settle(engine)
    gone = rows(out, "deleted_queue_holders_current")
    assert sorted((r["broker"], r["queue_id"]) for r in gone) == sorted(A + B)


# -- MACHINE_ROOM_NEARBY with machine_room_regex -----------------------------------------------------------


def test_machine_room_regex_names_the_rooms_of_brokers_and_clients():
    rule = {
        "group": "G",
        "strategy": "MACHINE_ROOM_NEARBY-AVG",
        "machine_room_separator": "-",
        "machine_room_regex": r"\b(hz|sh)\b",
    }
    brokers = (("broker-a.hz", 3), ("broker-b.sh", 1))
    events = [route(0, brokers=brokers), hb(0, "a:1", "10.0.0.1@1#hz"), hb(0, "b:1", "10.0.0.2@1#sh")]
    out, _ = run([(events, 0)], {"group_rules": [rule]})
    shares = {
        r["client_id"]: [(q["broker"], q["queue_id"]) for q in r["queues"]] for r in rows(out, "expected_assignments")
    }
    assert shares == {
        "10.0.0.1@1#hz": [("broker-a.hz", 0), ("broker-a.hz", 1), ("broker-a.hz", 2)],
        "10.0.0.2@1#sh": [("broker-b.sh", 0)],
    }
    # by the separator the brokers' room is "broker", where no client is: everyone shares all queues (AVG)
    out, _ = run([(events, 0)], {"group_rules": [{**rule, "machine_room_regex": None}]})
    by_separator = {
        r["client_id"]: [(q["broker"], q["queue_id"]) for q in r["queues"]] for r in rows(out, "expected_assignments")
    }
    assert by_separator == {
        "10.0.0.1@1#hz": [("broker-a.hz", 0), ("broker-a.hz", 1)],
        "10.0.0.2@1#sh": [("broker-a.hz", 2), ("broker-b.sh", 0)],
    }


def test_a_name_the_regex_does_not_match_is_a_strategy_error_like_a_null_room():
    rule = {"group": "G", "strategy": "MACHINE_ROOM_NEARBY-AVG", "machine_room_regex": r"^(hz|sh)-"}
    out, _ = run([([route(0), hb(0, "a:1", "hz-c1")], 0)], {"group_rules": [rule]})
    (orphaned,) = episodes_of(out, "ORPHANED_QUEUES")
    assert "Machine room is null for mq" in " ".join(json.loads(orphaned["details"])["causes"])


def test_the_job_hands_every_anomaly_membership_and_machine_room_option_to_the_engine(tmp_path):
    from streaming.config import load_config

    path = tmp_path / "monitor.toml"
    path.write_text(
        "[membership]\nconvergence_grace_ms = 7000\nroute_poll_interval_ms = 9000\n"
        "[anomalies]\nflapping_window_ms = 120000\nflapping_threshold = 5\nstorm_coalesce_ms = 250\n"
        '[[allocation.groups]]\ngroup = "orders-*"\nstrategy = "MACHINE_ROOM_NEARBY-AVG"\n'
        'machine_room_regex = "^(idc[0-9]+)-"\n'
    )
    settings = load_config(path, env={}).engine_settings
    assert (settings.convergence_grace_ms, settings.route_poll_interval_ms) == (7_000, 9_000)
    assert (settings.flapping_window_ms, settings.flapping_threshold, settings.storm_coalesce_ms) == (120_000, 5, 250)
    assert settings.group_rules == (
        GroupRule("orders-*", "MACHINE_ROOM_NEARBY-AVG", machine_room_regex="^(idc[0-9]+)-"),
    )
    engine = ShardEngine.restore(None, settings)
    assert (engine.flapping.window_ms, engine.flapping.threshold, engine.flapping.coalesce_ms) == (120_000, 5, 250)


# -- input the engine cannot use: handed back, never dropped silently ------------------------------------------


def test_a_report_for_a_group_no_broker_knows_is_handed_back_as_given_and_changes_nothing():
    engine = ShardEngine.restore(None, engine_settings(GRACE))
    engine.apply(typed([route(0)]), 0)
    before = engine.snapshot()
    (ghost,) = typed([report(5_000, "c9", A[:2], group="ghosts")])
    out = engine.apply([ghost], 0)
    assert out == [
        IgnoredEvent(
            ghost,
            "reported_assignment",
            IgnoredReason.UNKNOWN_GROUP,
            "group ghosts is known to no broker at 5000: the report of c9 (2 queues of T) has nothing to compare with",
        )
    ]
    assert out[0].event is ghost  # the very object: the adapter keeps its origin by its identity
    assert engine.snapshot() == before


def test_a_report_after_the_group_emptied_is_handed_back_and_one_while_it_lives_is_not():
    engine = ShardEngine.restore(None, engine_settings(GRACE))
    out = engine.apply(typed([route(0), hb(0, "a:1", "c1"), report(1_000, "c1", A + B)]), 0)
    assert not [o for o in out if isinstance(o, IgnoredEvent)]
    # the last member leaves; a report after that, in the same batch or the next, has nothing to compare with
    out = engine.apply(typed([ev("UNREGISTER", 2_000, "a:1", "c1"), report(3_000, "c1", A + B)]), 0)
    out += engine.apply(typed([report(4_000, "c1", A + B)]), 0)
    assert "G" not in engine.groups
    assert [o.reason for o in out if isinstance(o, IgnoredEvent)] == ["UNKNOWN_GROUP", "UNKNOWN_GROUP"]


def test_a_route_older_than_the_applied_one_is_counted_late_and_changes_nothing():
    engine = ShardEngine.restore(None, EngineSettings())
    engine.apply(typed([route(10_000), hb(10_000, "a:1", "c1")]), 0)
    before = engine.snapshot()
    out = engine.apply(typed([route(5_000, brokers=(("broker-a", 1),))]), 0)
    assert out == [LateEvent(LateReason.STALE_ROUTE, "topic_route", 5_000, topic="T")]
    assert rows(out, "late_events") == [
        {
            "reason": "stale_route",
            "event_type": "topic_route",
            "count": 1,
            "event_time_ms": 5_000,
            "group": None,
            "broker": None,
            "topic": "T",
            "cluster": "DefaultCluster",
        }
    ]
    assert engine.snapshot() == before
    # the same route again, at its own time, is not late: it changes nothing and says nothing
    assert engine.apply(typed([route(10_000)]), 0) == []


def test_group_metrics_of_a_restored_shard_are_what_each_group_last_emitted_with_nothing_moved():
    dup = [
        hb(1_000, "10.1.0.1:1", "172.17.0.1@1", group="G-dup"),
        hb(1_000, "10.1.0.2:1", "172.17.0.1@1", group="G-dup"),
        hb(1_000, "10.1.0.3:1", "c3", group="G-dup"),
    ]
    moving = [hb(1_000, f"10.2.0.{i}:1", f"c{i}", group="G-move") for i in range(3)]
    later = [
        ev("UNREGISTER", 5_000, "10.2.0.2:1", "c2", group="G-move"),
        report(6_000, "c3", [("broker-a", 0)], group="G-dup"),
    ]
    out, snapshot = run([([route(0), *dup, *moving], 0), (later, 0)])
    last = {s.group: s for s in out if isinstance(s, GroupSummary)}
    assert last["G-move"].topics["T"].moved > 0  # the unregister moved queues; a restored shard moved none
    engine = ShardEngine.restore(json.loads(json.dumps(snapshot)), EngineSettings())
    restored = {s.group: s for s in engine.group_metrics(9_000)}

    def without_time_and_moves(summary):
        topics = {t: replace(values, moved=0) for t, values in summary.topics.items()}
        return replace(summary, event_time_ms=0, topics=topics)

    assert {g: without_time_and_moves(s) for g, s in restored.items()} == {
        g: without_time_and_moves(s) for g, s in last.items()
    }
    assert all(t.moved == 0 for s in restored.values() for t in s.topics.values())
    assert restored["G-dup"].duplicate_client_ids == 1 and restored["G-dup"].open_anomalies["DUPLICATE_CLIENT_ID"] == 1
    assert engine.snapshot() == snapshot  # reading the metrics changed nothing
