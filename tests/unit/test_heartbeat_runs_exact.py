"""Heartbeat runs change nothing: the consumer state function gives the same answer with and without them.

The JVM stage (``heartbeat_runs``, tested against this contract in ``tests/spark/test_heartbeat_runs.py``)
folds each channel's identical heartbeats of a Spark partition into one row carrying every heartbeat's time
and offset; the state function (``consumer.events.shard_events``) counts late heartbeats one by one and hands the
runs to ``ShardEngine.apply_runs``, which takes a run that only refreshes a known channel at once, holds another
steady run from its first heartbeat to its last, and leaves the rest to apply heartbeat by heartbeat.

Proven on random shards: two groups on two brokers whose channels repeat heartbeats at gaps inside and past the
expiry, change their subscriptions or client ids, leave, arrive out of order (behind a removal or a later
update), are published on the wrong partition, or travel as raw JSON; topic routes and reported assignments
in between; batches cut anywhere, each with the watermark one minute behind the previous batches' newest
event. For every batch, the records (as a multiset), each group's membership changes (in order), the late
counts and the engine's state must equal those of the same batch given one row per heartbeat.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections import Counter

from hypothesis import example, given, settings
from hypothesis import strategies as st

from streaming.domain.consumers.engine_settings import EngineSettings
from streaming.domain.consumers.shard_engine import ShardEngine
from streaming.job.consumer.events import EVENT_COLUMNS, lane_times, shard_events
from streaming.job.consumer.heartbeat_runs import RUN
from tests.support.engine import typed
from tests.unit.test_fleet import table_rows

EXPIRY_MS = 120_000
DELAY_MS = 60_000
START = 1_700_000_000_000
SUBSCRIPTIONS = ([("T", "*", 1)], [("T", "*", 1), ("U", "*", 1)], [("T", "*", 2)], [("U", "tag", 1)])
ENGINE = EngineSettings(expiry_ms=EXPIRY_MS, storm_threshold=3, flapping_threshold=2)

action_strategy = st.one_of(
    st.tuples(
        st.just("beats"),
        st.sampled_from(("G1", "G2")),
        st.sampled_from(("b1", "b2")),
        st.integers(0, 2),  # channel
        st.sampled_from((0, 0, 0, 0, 1, 2, 3)),  # subscriptions: mostly the usual ones
        st.sampled_from(("", "", "", "x")),  # client id suffix: now and then a new client on the channel
        st.integers(1, 8),  # how many heartbeats
        st.sampled_from((10_000, 30_000, 30_000, 60_000, 119_000, 121_000)),  # their spacing
    ),
    st.tuples(
        st.just("leave"),
        st.sampled_from(("G1", "G2")),
        st.sampled_from(("b1", "b2")),
        st.integers(0, 2),
        st.sampled_from(("UNREGISTER", "CHANNEL_CLOSE")),
    ),
    st.tuples(st.just("route"), st.sampled_from(("T", "U")), st.integers(1, 4)),
    st.tuples(st.just("report"), st.sampled_from(("G1", "G2")), st.integers(0, 2), st.integers(0, 3)),
)
step_strategy = st.tuples(
    action_strategy,
    st.integers(-150_000, 90_000),  # where the action starts, relative to the clock: sometimes in the past
    st.integers(0, 40_000),  # how far the clock then moves
    st.sampled_from(("keyed", "keyed", "keyed", "other partition", "raw json")),
)


def published(steps):
    """(event, partition, as_raw_json) in publication order; offsets follow per partition."""
    out, clock = [], START
    for action, start, advance, how in steps:
        t = clock + start
        kind = action[0]
        if kind == "beats":
            _, group, broker, channel, subs, suffix, count, spacing = action
            for k in range(count):
                event = {
                    "type": "consumer_channel",
                    "schema_version": 1,
                    "event_time": t + k * spacing,
                    "broker": broker,
                    "kind": "HEARTBEAT",
                    "channel": f"10.0.0.{channel}:9{broker[-1]}",
                    "client_id": f"{group}-c{channel}{suffix}",
                    "group": group,
                    "subscriptions": [
                        {"topic": a, "expression": e, "sub_version": v} for a, e, v in SUBSCRIPTIONS[subs]
                    ],
                }
                out.append((event, group, how))
        elif kind == "leave":
            _, group, broker, channel, removal = action
            event = {
                "type": "consumer_channel",
                "schema_version": 1,
                "event_time": t,
                "broker": broker,
                "kind": removal,
                "channel": f"10.0.0.{channel}:9{broker[-1]}",
                "client_id": f"{group}-c{channel}",
                "group": group,
            }
            out.append((event, group, how))
        elif kind == "route":
            _, topic, queues = action
            event = {
                "type": "topic_route",
                "schema_version": 1,
                "event_time": t,
                "topic": topic,
                "brokers": [{"broker": "b1", "read_queue_nums": queues, "write_queue_nums": queues, "perm": 6}],
            }
            out.append((event, topic, how))
        else:
            _, group, channel, queue = action
            event = {
                "type": "reported_assignment",
                "schema_version": 1,
                "event_time": t,
                "group": group,
                "client_id": f"{group}-c{channel}",
                "topic": "T",
                "queues": [{"broker": "b1", "queue_id": queue}],
            }
            out.append((event, group, how))
        clock += advance
    return out


def rows_of(batch, first_offsets):
    """One row per record, as ``shard_input`` gives them: typed channel events as fields, the rest as JSON."""
    rows = []
    for event, key, how in batch:
        home = zlib.crc32(key.encode()) % 2
        partition = home if how != "other partition" else 1 - home
        offset = first_offsets[partition]
        first_offsets[partition] += 1
        row = dict.fromkeys(EVENT_COLUMNS)
        row.update(
            event_time_ms=event["event_time"],
            event_type=event["type"],
            kafka_topic="rmq",
            kafka_partition=partition,
            kafka_offset=offset,
        )
        if event["type"] == "consumer_channel" and how != "raw json":
            row.update({f"c_{f}": event.get(f) for f in ("broker", "kind", "channel", "client_id", "group")})
            row["c_subscriptions"] = json.dumps(event.get("subscriptions", []))
        else:
            row["raw_value"] = row["typed_json"] = json.dumps(event)
        rows.append(row)
    return rows


def as_runs(rows, fold):
    """What the JVM stage hands on: with ``fold``, each partition's identical typed heartbeats as one row (a
    heartbeat seen once as it was); without, every row as it was (the job without heartbeat runs)."""
    out, runs = [], {}
    for row in rows:
        heartbeat = row["raw_value"] is None and row["c_kind"] == "HEARTBEAT"
        if not (fold and heartbeat):
            out.append(dict(row, **{RUN: None}))
            continue
        key = tuple(row[c] for c in EVENT_COLUMNS if c.startswith("c_")) + (row["kafka_partition"],)
        runs.setdefault(key, []).append(row)
    for members in runs.values():
        if len(members) == 1:
            out.append(dict(members[0], **{RUN: None}))
            continue
        members.sort(key=lambda r: (r["event_time_ms"], r["kafka_offset"]))
        pairs = [v for r in members for v in (r["event_time_ms"], r["kafka_offset"])]
        out.append(dict(members[0], **{RUN: struct.pack(f"<{len(pairs)}q", *pairs)}))
    out.reverse()  # the order of rows reaching the function must not matter
    return {name: [r[name] for r in out] for name in (*EVENT_COLUMNS, RUN)}


def run_shard(batches, fold):
    snapshot, seen_max, trace = None, 0, []
    offsets = [0, 0]
    for batch in batches:
        watermark = max(seen_max - DELAY_MS, 0)
        engine = ShardEngine.restore(snapshot, ENGINE)
        columns = as_runs(rows_of(batch, offsets), fold)
        events, late, _ = shard_events(columns, engine, watermark)
        records = table_rows(engine.apply(typed(events), watermark, lane_times(columns)))
        snapshot = engine.snapshot()
        changes = {}
        for table, row in records:
            if table == "membership_changes":
                changes.setdefault(row["group"], []).append(row)
        multiset = Counter(json.dumps([t, r], sort_keys=True, default=str) for t, r in records)
        trace.append((multiset, changes, late, snapshot, len(events)))
        seen_max = max([seen_max, *(e["event_time"] for e, _, _ in batch)])
    return trace


# A run held across another channel's expiry at the time of a report: an expiry found only by a scan at one of
# the group's events joined the cut of whichever event found it, and the skipped heartbeats decided which.
EXPIRY_AT_A_REPORT = [
    *[(("route", "T", 1), 0, 0, "keyed")] * 7,
    (("beats", "G1", "b1", 1, 0, "", 1, 10_000), -25_885, 40_000, "keyed"),
    (("report", "G1", 0, 0), 54_116, 13_123, "keyed"),
    (("beats", "G1", "b1", 0, 0, "", 2, 10_000), 0, 24_363, "keyed"),
    (("beats", "G1", "b1", 0, 0, "", 1, 10_000), 16_631, 0, "keyed"),
]


@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.lists(step_strategy, min_size=1, max_size=30), st.lists(st.integers(0, 200), max_size=4))
@example(EXPIRY_AT_A_REPORT, [])
def test_runs_give_every_batch_the_answer_of_one_row_per_heartbeat(steps, cuts):
    events = published(steps)
    bounds = sorted({0, *(c % len(events) for c in cuts), len(events)})
    batches = [events[a:b] for a, b in zip(bounds, bounds[1:], strict=False) if b > a]
    folded, plain = run_shard(batches, fold=True), run_shard(batches, fold=False)
    for got, expected in zip(folded, plain, strict=True):
        assert got[:4] == expected[:4]
        assert got[4] <= expected[4]  # never more events to apply than heartbeats


def test_a_steady_group_costs_one_event_per_batch_once_known():
    """Not only exact: a batch of a dozen rounds of a new group applies a held heartbeat per channel and one
    heartbeat at the end; the next batch (the channels known) applies that one heartbeat only."""
    rounds = [
        [(("beats", "G1", b, c, 0, "", 12, 30_000), start, 0, "keyed") for b in ("b1", "b2") for c in range(3)]
        for start in (0, 360_000)
    ]
    batches = [published(steps) for steps in rounds]
    folded, plain = run_shard(batches, fold=True), run_shard(batches, fold=False)
    assert [t[:4] for t in folded] == [t[:4] for t in plain]
    assert [t[4] for t in folded] == [6 + 1, 1] and [t[4] for t in plain] == [72, 72]


def beats(group, broker, channel, at, count=1, spacing=30_000, subscriptions=0):
    return ("beats", group, broker, channel, subscriptions, "", count, spacing), at, 0, "keyed"


CASES = {  # name: (batches, whether a run is held)
    # A removal seen in an earlier batch, then a run that starts before it: only the heartbeats after the
    # removal count, so the run's first heartbeat cannot stand for the others.
    # (A second channel keeps the group, and with it the removal's tombstone.)
    "run across an earlier removal": (
        [
            [
                beats("G1", "b1", 0, 0),
                beats("G1", "b1", 1, 90_000),
                (("leave", "G1", "b1", 0, "UNREGISTER"), 100_000, 0, "keyed"),
            ],
            [beats("G1", "b1", 0, 50_000, count=6), beats("G1", "b1", 1, 120_000)],
        ],
        False,
    ),
    # An update seen in an earlier batch is newer than the run's first heartbeats, which are ignored; held
    # anyway, the channel would look silent to the scan that another channel's heartbeat runs at 330 s.
    "run behind a newer update": (
        [
            [beats("G1", "b1", 0, 200_000)],
            [beats("G1", "b1", 0, 150_000, count=11), beats("G1", "b1", 1, 330_000)],
        ],
        False,
    ),
    # A group whose channel expires before its runs end: the engine judges an expiry at its own time before the
    # group's next event, so which of its events exist decides nothing and the runs are held.
    # A channel on the other broker subscribing U expires inside a run, a route of U follows.
    "route after an expiry inside a run": (
        [
            [
                beats("G1", "b2", 1, 0, subscriptions=3),
                beats("G1", "b1", 0, 100_000, count=9),
                (("route", "U", 2), 250_000, 0, "keyed"),
            ],
        ],
        True,
    ),
    # Two channels expire inside a run, the one on the later broker first.
    "two expiries inside a run": (
        [
            [beats("G1", "b2", 1, 0), beats("G1", "b1", 2, 20_000), beats("G1", "b1", 0, 100_000, count=11)],
        ],
        True,
    ),
    # Two expiries a minute apart inside a known channel's run (nothing else pending): cut apart, as each skipped
    # heartbeat's scan would cut them.
    "two expiries apart inside a refreshing run": (
        [
            [beats("G1", "b2", 1, 0), beats("G1", "b2", 2, 60_000), beats("G1", "b1", 0, 90_000)],
            [
                beats("G1", "b1", 0, 100_000, count=11, spacing=10_000),
                (*beats("G1", "b2", 0, 95_000)[:3], "raw json"),
                (*beats("G1", "b2", 0, 97_000)[:3], "raw json"),
            ],
        ],
        True,
    ),
    # An expiry inside a held run, then a join of another channel: the expiry is cut before the join, as a
    # skipped heartbeat's scan would cut it.
    "a join after an expiry inside a run": (
        [
            [beats("G1", "b1", 0, 0)],
            [
                beats("G1", "b1", 1, 30_000, count=7),
                beats("G1", "b2", 0, 50_000),
                (*beats("G1", "b2", 0, 60_000)[:3], "raw json"),
                beats("G1", "b2", 2, 200_000),
            ],
        ],
        True,
    ),
    # A known channel's run that does not only refresh it: a new client id on the channel (a join), a higher
    # sub_version (the table changes). Held, not taken as refreshes.
    "run of a new client on a known channel": (
        [
            [beats("G1", "b1", 0, 0)],
            [(("beats", "G1", "b1", 0, 0, "x", 4, 30_000), 30_000, 0, "keyed")],
        ],
        True,
    ),
    "run raising the sub_version": (
        [
            [beats("G1", "b1", 0, 0)],
            [beats("G1", "b1", 0, 30_000, count=4, subscriptions=2)],
        ],
        True,
    ),
    # Two runs of a group end at different times; a channel on the other broker expires between the ends.
    "runs ending apart, an expiry between": (
        [
            [beats("G1", "b2", 1, 0), beats("G1", "b1", 0, 0), beats("G1", "b1", 2, 0)],
            [beats("G1", "b1", 0, 10_000, count=4), beats("G1", "b1", 2, 10_000, count=7)],
        ],
        True,
    ),
    # The same runs without the expiring channel: the group's scan reaches the later end.
    "runs ending apart": (
        [
            [beats("G1", "b1", 0, 0), beats("G1", "b1", 2, 0)],
            [beats("G1", "b1", 0, 10_000, count=4), beats("G1", "b1", 2, 10_000, count=7)],
        ],
        True,
    ),
}


def test_cases_where_a_run_must_not_be_held_or_its_skipped_scans_would_show():
    for name, (batches_of_steps, held) in CASES.items():
        batches = [published(steps) for steps in batches_of_steps]
        folded, plain = run_shard(batches, fold=True), run_shard(batches, fold=False)
        assert [t[:4] for t in folded] == [t[:4] for t in plain], name
        assert (sum(t[4] for t in folded) < sum(t[4] for t in plain)) == held, name


def test_an_event_at_the_watermark_is_late_whether_alone_or_inside_a_run():
    """Late means at or before the batch's watermark (Spark's rule), counted per heartbeat of a run."""
    watermark = START + 200_000
    run = beats("G1", "b1", 0, 200_000 - 1, count=4, spacing=1)  # W - 1, W, W + 1, W + 2
    alone = [beats("G1", "b2", 1, 200_000), beats("G1", "b2", 2, 200_001)]
    rows = rows_of(published([run, *alone]), [0, 0])
    engine = ShardEngine.restore(None, ENGINE)
    events, late, _ = shard_events(as_runs(rows, fold=True), engine, watermark)
    assert late == {"consumer_channel": 3}
    assert sorted((e.event_time_ms, e.channel, e.held_until_ms) for e in events) == [
        (watermark + 1, "10.0.0.0:91", watermark + 2),
        (watermark + 1, "10.0.0.2:92", None),
        (watermark + 2, "10.0.0.0:91", None),
    ]


def test_lane_times_are_each_partitions_newest_channel_event_however_folded():
    g1 = zlib.crc32(b"G1") % 2
    g2_beats = beats("G2", "b2", 1, 10_000, count=2)
    steps = [
        beats("G1", "b1", 0, 0, count=5),  # on G1's partition, up to START + 120_000, as a run when folded
        (*g2_beats[:3], "other partition"),  # on the other one, up to START + 40_000
        (("route", "T", 4), 500_000, 0, "keyed"),  # not channel events: they move no lane
        (("report", "G1", 1, 0), 600_000, 0, "other partition"),
    ]
    expected = {f"rmq/{g1}": START + 120_000, f"rmq/{1 - g1}": START + 40_000}
    for fold in (True, False):
        assert lane_times(as_runs(rows_of(published(steps), [0, 0]), fold)) == expected


def test_a_poll_of_the_runs_view_in_the_batch_keeps_the_run_from_being_held():
    """The adapter hands the runs' planner a batch's polls as they are: a poll replaces its broker's view, so a run
    of that view is applied heartbeat by heartbeat; a poll of another broker changes nothing."""
    from streaming.domain.consumers.heartbeat_plan import HeartbeatRun
    from streaming.domain.consumers.membership import ChannelEvent
    from streaming.domain.consumers.polled_views import ConnectionPoll

    engine = ShardEngine.restore(None, ENGINE)
    beat = ChannelEvent.from_fields(1_000, "b1", "HEARTBEAT", "ch1", "c1", "G1", None, None, None, (), None)
    run = HeartbeatRun(beat, (1_000, 31_000, 61_000))
    assert engine.steady_runs([run], []) == [True]
    assert engine.steady_runs([run], [ConnectionPoll(40_000, "b2", "G1", 30_000, (), ())]) == [True]
    assert engine.steady_runs([run], [ConnectionPoll(40_000, "b1", "G1", 30_000, (), ())]) == [False]
