"""Poll runs change nothing a reader sees: the consumer state function gives the same tables and state with them.

The JVM stage (``heartbeat_runs``, tested against this contract in ``tests/spark/test_heartbeat_runs.py``) folds a
broker's identical polls of a group in a Spark partition into one row carrying every poll's time and offset; the
state function (``consumer.events.shard_events``) counts late polls one by one and applies the polls
``poll_runs.plan_polls`` keeps: all of them, or the first, the last and enough between to keep the view fresh.

Proven on random shards: two groups polled on two brokers, their connection lists changing now and then (a member
gone, a new client id), at gaps inside and past the staleness (30 s), with now and then a heartbeat-fed view, a
report, a route or a consume-progress sample in between; published on the group's partition or the other one;
batches cut anywhere, each with the watermark 20 s behind the previous batches' newest event. After every batch
the tables as the sink leaves them (``TableModel``: a view's last state row of a batch wins) and the engine's
snapshot (as what it means, ``decoded_snapshot``: a poll the engine noted without reading its group is in the
times, not the text) must equal those of the same batches given one row per poll, each applied in full
(``EveryPollInFull``). Why:
``docs/design/poll-runs.md``.
"""

from __future__ import annotations

import json
import struct
import zlib

from hypothesis import example, given, settings
from hypothesis import strategies as st

from streaming.domain.consumers.engine_settings import EngineSettings
from streaming.domain.consumers.shard_engine import ShardEngine
from streaming.job.consumer.events import EVENT_COLUMNS, lane_times, shard_events
from streaming.job.consumer.heartbeat_runs import RUN
from tests.support.engine import EveryPollInFull, TableModel, decoded_snapshot, typed

START = 1_700_000_000_000
DELAY_MS = 20_000
STALE_AFTER_MS = 30_000
ENGINE = EngineSettings(storm_threshold=3, flapping_threshold=2, storm_coalesce_ms=1_000)
SUBS = [{"topic": "T", "expression": "*", "sub_version": 1}]

action_strategy = st.one_of(
    st.tuples(
        st.just("polls"),
        st.sampled_from(("G1", "G2")),
        st.sampled_from(("b1", "b2")),
        st.sampled_from((3, 3, 3, 2, 1, 0)),  # members listed: mostly all three, now and then fewer
        st.sampled_from(("", "", "", "x")),  # client id suffix: now and then new clients on the channels
        st.integers(1, 9),  # how many polls
        st.sampled_from((5_000, 10_000, 10_000, 10_000, 20_000, 30_000, 31_000, 45_000)),  # their spacing
    ),
    st.tuples(st.just("beat"), st.sampled_from(("G1", "G2")), st.integers(0, 2)),
    st.tuples(st.just("route"), st.integers(1, 4)),
    st.tuples(st.just("report"), st.sampled_from(("G1", "G2")), st.integers(0, 2), st.integers(0, 3)),
    st.tuples(st.just("progress"), st.sampled_from(("G1", "G2")), st.integers(0, 50)),
)
step_strategy = st.tuples(
    action_strategy,
    st.integers(-60_000, 60_000),  # where the action starts, relative to the clock: sometimes in the past
    st.integers(0, 40_000),  # how far the clock then moves
    st.sampled_from(("keyed", "keyed", "keyed", "other partition")),
)


def poll(t, group, broker, members, suffix):
    connections = [
        {"channel": f"10.0.0.{m}:9{broker[-1]}", "client_id": f"{group}-c{m}{suffix}", "subscriptions": SUBS}
        for m in range(members)
    ]
    event = {"type": "consumer_connections", "schema_version": 1, "event_time": t, "broker": broker, "group": group}
    return {**event, "stale_after_ms": STALE_AFTER_MS, "subscriptions": SUBS, "connections": connections}


def published(steps):
    """(event, key, how) in publication order."""
    out, clock = [], START
    for action, start, advance, how in steps:
        t, kind = clock + start, action[0]
        if kind == "polls":
            _, group, broker, members, suffix, count, spacing = action
            out += [(poll(t + k * spacing, group, broker, members, suffix), group, how) for k in range(count)]
        elif kind == "beat":
            _, group, channel = action
            event = {"type": "consumer_channel", "schema_version": 1, "event_time": t, "broker": "b3"}
            event |= {"kind": "HEARTBEAT", "channel": f"10.0.1.{channel}:93", "client_id": f"{group}-h{channel}"}
            out.append(({**event, "group": group, "subscriptions": SUBS}, group, how))
        elif kind == "route":
            brokers = [{"broker": b, "read_queue_nums": action[1], "write_queue_nums": 4, "perm": 6} for b in ("b1",)]
            out.append(
                (
                    {"type": "topic_route", "schema_version": 1, "event_time": t, "topic": "T", "brokers": brokers},
                    "T",
                    how,
                )
            )
        elif kind == "report":
            _, group, member, queue = action
            event = {"type": "reported_assignment", "schema_version": 1, "event_time": t, "group": group}
            event |= {"client_id": f"{group}-c{member}", "topic": "T", "queues": [{"broker": "b1", "queue_id": queue}]}
            out.append((event, group, how))
        else:
            _, group, lag = action
            queues = [{"topic": "T", "queue_id": 0, "broker_offset": 1_000, "consumer_offset": 1_000 - lag}]
            event = {"type": "consume_progress", "schema_version": 1, "event_time": t, "group": group, "broker": "b1"}
            out.append(({**event, "queues": queues}, group, how))
        clock += advance
    return out


def rows_of(batch, first_offsets):
    """One row per record, as ``shard_input`` gives them: typed heartbeats as fields, the rest as the JSON of their
    fields (a poll's without its time) beside their raw value."""
    rows = []
    for event, key, how in batch:
        home = zlib.crc32(key.encode()) % 2
        partition = home if how != "other partition" else 1 - home
        offset = first_offsets[partition]
        first_offsets[partition] += 1
        row = dict.fromkeys(EVENT_COLUMNS)
        row.update(event_time_ms=event["event_time"], event_type=event["type"], kafka_topic="rmq")
        row.update(kafka_partition=partition, kafka_offset=offset)
        if event["type"] == "consumer_channel":
            row.update({f"c_{f}": event.get(f) for f in ("broker", "kind", "channel", "client_id", "group")})
            row["c_subscriptions"] = json.dumps(event["subscriptions"])
        else:
            row["raw_value"] = json.dumps(event)
            fields = {k: v for k, v in event.items() if k != "event_time" or event["type"] != "consumer_connections"}
            row["typed_json"] = json.dumps(fields)
        rows.append(row)
    return rows


def as_runs(rows, fold):
    """What the JVM stage hands on: with ``fold``, each partition's identical polls as one row (a poll seen once as
    it was, a run with its first poll's raw value); without, every row as it was."""
    out, runs = [], {}
    for row in rows:
        if not (fold and row["event_type"] == "consumer_connections"):
            out.append(dict(row, **{RUN: None}))
            continue
        runs.setdefault((row["typed_json"], row["kafka_partition"]), []).append(row)
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
    """Per batch: the tables after it, the late counts, the snapshot (decoded), how many events were applied, and the
    groups the batch left as their text."""
    snapshot, seen_max, trace, model = None, 0, [], TableModel()
    offsets = [0, 0]
    for batch in batches:
        watermark = max(seen_max - DELAY_MS, 0)
        engine = (ShardEngine if fold else EveryPollInFull).restore(snapshot, ENGINE)
        columns = as_runs(rows_of(batch, offsets), fold)
        events, late, _ = shard_events(columns, engine, watermark)
        model.apply(engine.apply(typed(events), watermark, lane_times(columns)))
        kept = {g for g in engine.groups if hasattr(engine.groups, "encoded") and engine.groups.encoded(g)}
        snapshot = json.loads(json.dumps(engine.snapshot()))
        trace.append((model.tables(), late, decoded_snapshot(snapshot, ENGINE), len(events), kept))
        seen_max = max([seen_max, *(e["event_time"] for e, _, _ in batch)])
    return trace


# A run of a view whose earlier batch polled it later than the run's first polls: those are late (ignored), the
# first one after the view's last poll joins a member; skipping it would put the join at a later poll.
BEHIND_THE_VIEW = [
    (("polls", "G1", "b2", 2, "", 6, 30_000), 0, 40_000, "keyed"),
    (("polls", "G1", "b2", 3, "", 4, 10_000), 100_000, 0, "keyed"),
]


def batches_of(steps, cuts):
    events = published(steps)
    bounds = sorted({0, *(c % len(events) for c in cuts), len(events)})
    return [events[a:b] for a, b in zip(bounds, bounds[1:], strict=False) if b > a]


@settings(max_examples=150, deadline=None, derandomize=True)
@given(st.lists(step_strategy, min_size=1, max_size=25), st.lists(st.integers(0, 200), max_size=4))
@example(BEHIND_THE_VIEW, [6])
def test_poll_runs_give_every_batch_the_tables_and_state_of_one_row_per_poll(steps, cuts):
    batches = batches_of(steps, cuts)
    folded, plain = run_shard(batches, fold=True), run_shard(batches, fold=False)
    for got, expected in zip(folded, plain, strict=True):
        assert got[:3] == expected[:3]
        assert got[3] <= expected[3]  # never more polls to apply than arrived


def polls(group, broker, at, count, spacing=10_000, members=3):
    return ("polls", group, broker, members, "", count, spacing), at, 0, "keyed"


def test_a_steady_fleet_applies_a_poll_per_staleness_window_not_one_per_cycle():
    """Not only exact: two groups polled every 10 s on two brokers for three minutes apply the first and last poll of
    each view and one every 30 s between (the staleness), a third of the polls."""
    steps = [polls(g, b, 0, 19) for g in ("G1", "G2") for b in ("b1", "b2")]
    batches = batches_of(steps, [])
    folded, plain = run_shard(batches, fold=True), run_shard(batches, fold=False)
    assert [t[:3] for t in folded] == [t[:3] for t in plain]
    assert plain[0][3] == 4 * 19 and folded[0][3] == 4 * 7  # at 0, 30, 60, ... 180 s
    assert json.loads(plain[0][2]["groups"]["G1"])["membership"]["views"]["b1"]["poll"][0] == START + 180_000


CASES = {  # name: (batches, whether polls are skipped)
    # The other broker's view turns stale inside the run: a skipped poll would find it earlier than the next one.
    "another view turning stale inside the run": ([[polls("G1", "b2", 0, 1), polls("G1", "b1", 0, 9)]], False),
    # A gap past the staleness inside the run: the view turns stale and fresh again, poll by poll.
    "a gap past the staleness": ([[polls("G1", "b1", 0, 6, spacing=31_000)]], False),
    # A heartbeat-fed view in the group: its channels' expiry is found at the group's events.
    "a heartbeat-fed view": ([[(("beat", "G1", 0), 0, 0, "keyed"), polls("G1", "b1", 0, 5)]], False),
    # Two runs of one view (a member leaves in between): the view changes between them.
    "two runs of one view": ([[polls("G1", "b1", 0, 4), polls("G1", "b1", 40_000, 4, members=2)]], False),
    # Steady views, the other broker polled throughout: skipped.
    "both views steady": ([[polls("G1", "b1", 0, 7), polls("G1", "b2", 0, 7)]], True),
}


def test_cases_where_polls_must_not_be_skipped_or_their_absence_would_show():
    for name, (batches_of_steps, skipped) in CASES.items():
        batches = [published(steps) for steps in batches_of_steps]
        folded, plain = run_shard(batches, fold=True), run_shard(batches, fold=False)
        assert [t[:3] for t in folded] == [t[:3] for t in plain], name
        assert (sum(t[3] for t in folded) < sum(t[3] for t in plain)) == skipped, name


def test_a_steady_fleets_batches_after_the_first_leave_its_groups_as_their_text():
    """Across batches the fold cannot reach (a minute of polls each): a run's kept polls say what the poll that
    settled the view said, so they are noted with the group's times (``ShardEngine._touch``) and planned from them
    (``_first_settles``): from the second batch on no group is decoded, the tables and state still those of one row
    per poll (which, polled every 10 s and unchanged, leaves the groups as text too)."""
    steps = [polls(g, b, k * 60_000, 6) for k in range(4) for g in ("G1", "G2") for b in ("b1", "b2")]
    batches = [published(steps[4 * k : 4 * k + 4]) for k in range(4)]
    folded, plain = run_shard(batches, fold=True), run_shard(batches, fold=False)
    assert [t[:3] for t in folded] == [t[:3] for t in plain]
    assert all(t[4] == {"G1", "G2"} for t in folded[1:]) and all(t[4] == {"G1", "G2"} for t in plain[1:])
    assert folded[2][3] == 4 * 3 and plain[2][3] == 4 * 6  # a poll every staleness window, or every poll
