"""A call decodes only the groups it touches, and that changes nothing: the same outcomes, call by call, and the same
snapshots as a call that decodes every group first (the engine before ``encoded_states``).

Each input goes through two engines call by call, both restored from the JSON of the previous call's snapshot (as
the state store keeps it): one as the job runs it (a group's state stays its stored text until the call reads it,
``ShardEngine._advance_all`` passes over a group whose noted times fall after the call's clock, ``_touch`` notes an
unchanged poll of it with its times, ``_repolled`` moves the times of a view the call read when the poll that settled
it comes again), one that reads every group's state and progress before it applies anything and applies every poll
in full.
The snapshots are compared as what they mean (``decoded_snapshot``: a view polled again unchanged is in the times
noted, not in the text). Inputs with groups idle while others change: the simulator's ``mixed`` fleet with reports
and consume progress, scripted operations polled by a collector with outages (views turning stale and fresh),
several groups in one shard, cut into calls at generated places, and a steady polled fleet whose views a heartbeat,
a member leaving or a removal changes between unchanged polls. The steady fleet also goes through the job's rows
(``shard_events``: a poll of a digest the shard noted is not parsed, ``NotedPoll``), compared with the engine that
decodes every group and is given every poll parsed.
Why: ``docs/design/state-snapshots.md``, "Groups a batch does not touch".
"""

from __future__ import annotations

import dataclasses
import json
import struct
import zlib
from collections.abc import Sequence
from functools import cache
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from streaming.app.simulation import operations as op
from streaming.app.simulation.fleet import Simulation, build_scenario
from streaming.domain.consumers.encoded_states import EncodedStates
from streaming.domain.consumers.engine_settings import EngineSettings
from streaming.domain.consumers.outcomes import BrokerViewChanged, BrokerViewState, MembershipChange
from streaming.domain.consumers.polled_views import ConnectionPoll, NotedPoll, text_digest
from streaming.domain.consumers.shard import Shard
from streaming.domain.consumers.shard_engine import ShardEngine
from streaming.domain.vocabulary import ChangeKind
from streaming.job.consumer.events import CHANNEL_FIELDS, EVENT_COLUMNS, lane_times, shard_events
from streaming.job.consumer.heartbeat_runs import RUN
from streaming.job.consumer.query import _apply_isolating_poison, _as_job_rows
from streaming.job.ingest.poison import PROCESSING_ERROR
from streaming.job.runtime import state_blob
from tests.support.engine import EveryPollInFull, decoded_snapshot, read_everything, typed

START_MS = 1_700_000_000_000
_RANK = {"topic_route": 0, "consumer_channel": 1, "consumer_connections": 1}
SETTINGS = EngineSettings(storm_window_ms=120_000, flapping_window_ms=120_000, storm_threshold=3)


def ordered(events: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(events, key=lambda e: (int(e["event_time"]), _RANK.get(e["type"], 2)))


@cache
def mixed_fleet() -> list[dict[str, Any]]:
    simulation = Simulation(build_scenario("mixed", 1), START_MS, 1, sends_per_second=0, assignment_reports=True)
    return ordered([e for e in simulation.events_until(START_MS + 100_000) if e["type"] != "send_result"])


@cache
def polled_groups() -> list[dict[str, Any]]:
    """Scripted operations as a collector polls them, each its own group of one shard, some with outages."""
    scripts = [
        (op.rolling_restart(4), op.Outages(brokers={"broker-a": (100_000, 160_000)})),
        (op.crash_loop(3, same_id=False, crashes=4), op.Outages(collector=(60_000, 120_000))),
        (op.steady_group(2, "g", until_ms=300_000), None),
        (op.scale(3, 5), None),
    ]
    events: list[dict[str, Any]] = []
    for i, (script, outages) in enumerate(scripts):
        renamed = dataclasses.replace(script, group=f"polled-{i}")
        events += renamed.polls(outages=outages) + [e for e in renamed.events() if e["type"] != "consumer_channel"]
    return ordered(events)


def calls(events: Sequence[dict[str, Any]], cuts: Sequence[int], delay_ms: int) -> list[tuple[list, int, dict]]:
    """``events`` cut at ``cuts`` into calls (events, watermark, lanes), then an empty call at the last event."""
    bounds = [0, *sorted({c % len(events) for c in cuts} - {0}), len(events)]
    out, newest = [], None
    for a, b in zip(bounds, bounds[1:], strict=False):
        call = list(events[a:b])
        lanes: dict[str, int] = {}
        for e in call:
            if e["type"] == "consumer_channel":
                lane = f"consumer-events/{zlib.crc32(e['group'].encode()) % 2}"
                lanes[lane] = max(int(e["event_time"]), lanes.get(lane, 0))
        out.append((call, 0 if newest is None else newest - delay_ms, lanes))
        newest = max([int(e["event_time"]) for e in call] + ([] if newest is None else [newest]))
    return out + [([], int(events[-1]["event_time"]), {})]


def same_outcomes_lazy_and_eager(
    events: Sequence[dict[str, Any]], cuts: Sequence[int], delay_ms: int
) -> tuple[int, int]:
    """Both engines call by call; returns how many of its groups the lazy one left undecoded, summed over the
    calls, and how many groups the calls held in all."""
    lazy_snapshot: dict[str, Any] | None = None
    eager_snapshot: dict[str, Any] | None = None
    untouched = held = 0
    for call, watermark, lanes in calls(events, cuts, delay_ms):
        lazy = ShardEngine.restore(json.loads(json.dumps(lazy_snapshot)) if lazy_snapshot else None, SETTINGS)
        eager = EveryPollInFull.restore(json.loads(json.dumps(eager_snapshot)) if eager_snapshot else None, SETTINGS)
        read_everything(eager)
        assert lazy.apply(typed(call), watermark, lanes) == eager.apply(typed(call), watermark, lanes)
        assert lazy.next_wakeup_ms() == eager.next_wakeup_ms()
        if isinstance(lazy.groups, EncodedStates):  # restored from a snapshot (the first call's is empty)
            untouched += sum(lazy.groups.encoded(g) is not None for g in lazy.groups)
            held += len(lazy.groups)
        lazy_snapshot, eager_snapshot = lazy.snapshot(), eager.snapshot()
        assert lazy_snapshot == eager_snapshot or decoded_snapshot(lazy_snapshot, SETTINGS) == eager_snapshot
    return untouched, held


@settings(max_examples=6, deadline=None, derandomize=True)
@given(st.lists(st.integers(1, 100_000), min_size=5, max_size=60))
def test_the_mixed_fleet_gives_the_same_outcomes_and_snapshots_decoding_only_what_a_call_touches(cuts):
    same_outcomes_lazy_and_eager(mixed_fleet(), cuts, delay_ms=10_000)


@settings(max_examples=6, deadline=None, derandomize=True)
@given(st.lists(st.integers(1, 100_000), min_size=5, max_size=60))
def test_polled_groups_with_outages_give_the_same_outcomes_and_snapshots_decoding_only_what_a_call_touches(cuts):
    same_outcomes_lazy_and_eager(polled_groups(), cuts, delay_ms=0)


def test_calls_of_a_few_events_leave_many_groups_undecoded():
    """Cut every three events, a call touches a group or two: many others stay text (else the comparisons above
    compare little). Measured: about half of the mixed fleet's, a quarter of the densely polled groups'."""
    for events, delay_ms in ((mixed_fleet(), 10_000), (polled_groups(), 0)):
        undecoded, held = same_outcomes_lazy_and_eager(events, range(3, len(events), 3), delay_ms)
        assert undecoded >= held // 5


def test_a_group_a_call_does_not_touch_keeps_its_stored_text():
    events = polled_groups()
    first, second = calls(events, [len(events) // 2], 0)[:2]
    engine = ShardEngine.restore(None, SETTINGS)
    engine.apply(typed(first[0]), first[1], first[2])
    stored = json.loads(json.dumps(engine.snapshot()))
    touched = {e["group"] for e in second[0] if "group" in e}
    idle = [g for g in stored["groups"] if g not in touched]
    engine = ShardEngine.restore(stored, SETTINGS)
    engine.apply([], first[1], {})  # a call without input, at the same watermark: nothing falls due
    after = engine.snapshot()
    assert after["groups"] == stored["groups"] and after["group_times"] == stored["group_times"]
    assert all(engine.groups.encoded(g) is not None for g in stored["groups"])  # type: ignore[attr-defined]
    assert idle or touched  # the input has groups to compare


STEADY_GROUPS, STEADY_BROKERS, CYCLE_MS = 3, ("b1", "b2"), 10_000
SUBS = [{"topic": "T", "expression": "*", "sub_version": 1}]


def poll(t: int, group: str, broker: str, members: int = 3) -> dict[str, Any]:
    connections = [
        {"channel": f"10.0.{group[-1]}.{m}:9{broker[-1]}", "client_id": f"{group}-c{m}", "subscriptions": SUBS}
        for m in range(members)
    ]
    event = {"type": "consumer_connections", "schema_version": 1, "event_time": t, "broker": broker, "group": group}
    return {**event, "stale_after_ms": 30_000, "subscriptions": SUBS, "connections": connections}


def heartbeat(t: int, group: str, broker: str, channel: str) -> dict[str, Any]:
    event = {"type": "consumer_channel", "schema_version": 1, "event_time": t, "broker": broker, "kind": "HEARTBEAT"}
    return {**event, "channel": channel, "client_id": f"{group}-h", "group": group, "subscriptions": SUBS}


def unregister(t: int, group: str, broker: str, member: int) -> dict[str, Any]:
    event = {"type": "consumer_channel", "schema_version": 1, "event_time": t, "broker": broker, "kind": "UNREGISTER"}
    channel = f"10.0.{group[-1]}.{member}:9{broker[-1]}"
    return {**event, "channel": channel, "client_id": f"{group}-c{member}", "group": group, "subscriptions": SUBS}


def steady_cycles(cycles: int, extra: dict[int, list[dict[str, Any]]]) -> list[list[dict[str, Any]]]:
    """A call per collector cycle, each polling every group on every broker (unchanged), with ``extra`` events in
    the calls they are keyed by."""
    out = []
    for n in range(cycles):
        t = START_MS + n * CYCLE_MS
        call = [poll(t + g, f"G{g}", b) for g in range(STEADY_GROUPS) for b in STEADY_BROKERS]
        out.append(ordered(call + extra.get(n, [])))
    return out


def progress(t: int, group: str, broker: str) -> dict[str, Any]:
    event = {"type": "consume_progress", "schema_version": 1, "event_time": t, "group": group, "broker": broker}
    return {**event, "queues": [{"topic": "T", "queue_id": 0, "broker_offset": 9, "consumer_offset": 4}]}


class CountedRepolls(ShardEngine):
    """The engine as the job runs it, counting the polls it applied without parsing them (``_repolled``)."""

    repolls = 0

    def _repolled(self, poll: Any, records: list[Any]) -> bool:
        taken = super()._repolled(poll, records)
        CountedRepolls.repolls += taken
        return taken


def lazy_and_eager(
    calls: list[list[dict[str, Any]]], engine: type[ShardEngine] = ShardEngine
) -> list[tuple[list[Any], set[str]]]:
    """Each call through both engines (outcomes and snapshots compared); per call the lazy one's outcomes and the
    groups it left as text."""
    lazy_snapshot: dict[str, Any] | None = None
    eager_snapshot: dict[str, Any] | None = None
    trace = []
    for call in calls:
        watermark = int(call[0]["event_time"]) - CYCLE_MS
        lazy = engine.restore(json.loads(json.dumps(lazy_snapshot)) if lazy_snapshot else None, SETTINGS)
        eager = EveryPollInFull.restore(json.loads(json.dumps(eager_snapshot)) if eager_snapshot else None, SETTINGS)
        read_everything(eager)
        outcomes = lazy.apply(typed(call), watermark, {})
        assert outcomes == eager.apply(typed(call), watermark, {})
        assert lazy.next_wakeup_ms() == eager.next_wakeup_ms()
        kept = {g for g in lazy.groups if isinstance(lazy.groups, EncodedStates) and lazy.groups.encoded(g)}
        lazy_snapshot, eager_snapshot = lazy.snapshot(), eager.snapshot()
        assert lazy_snapshot == eager_snapshot or decoded_snapshot(lazy_snapshot, SETTINGS) == eager_snapshot
        trace.append((outcomes, kept))
    return trace


def test_unchanged_polls_of_a_steady_fleet_leave_its_groups_encoded_call_after_call():
    """From the second call on (the first poll settled each view), every call's polls are noted with the groups'
    times: no group is decoded, each poll still writes its view's status row, and the view's staleness moves on
    (a view polled every cycle never turns stale, in either engine)."""
    trace = lazy_and_eager(steady_cycles(8, {}))
    groups = {f"G{g}" for g in range(STEADY_GROUPS)}
    assert all(kept == groups for _, kept in trace[2:])
    for outcomes, _ in trace[2:]:
        rows = [o for o in outcomes if type(o) is BrokerViewState]
        assert len(rows) == STEADY_GROUPS * len(STEADY_BROKERS)
        assert all(o.view.status.value == "FRESH" for o in rows)


def test_a_view_changed_between_unchanged_polls_is_polled_in_full():
    """A heartbeat on a polled broker adds a channel the next unchanged poll does not list (it vanishes); a member
    leaving (UNREGISTER) is back at the next poll (it joins); a poll a cycle late lets the views turn stale: each
    changes the view the unchanged poll is compared with, so that poll is applied in full, with the same outcomes."""
    extra = {
        3: [heartbeat(START_MS + 3 * CYCLE_MS + 5, "G0", "b1", "10.9.9.9:1")],
        5: [unregister(START_MS + 5 * CYCLE_MS + 5, "G1", "b2", 1)],
    }
    calls = steady_cycles(12, extra)
    trace = lazy_and_eager(calls[:7] + calls[10:])  # 40 s without polls: the views turn stale by the next ones
    changes = [o for outcomes, _ in trace[4:7] for o in outcomes if isinstance(o, MembershipChange)]
    assert {(c.group, c.change.value) for c in changes} >= {("G0", "VANISHED"), ("G1", "JOIN")}
    assert "G0" not in trace[4][1] and "G1" not in trace[6][1]  # decoded at the poll after the change
    stale = [o for o in trace[7][0] if type(o) is BrokerViewChanged and o.view.status.value == "STALE"]
    assert len(stale) == STEADY_GROUPS * len(STEADY_BROKERS)


def test_unchanged_polls_of_a_group_the_call_read_move_its_views_times_without_being_parsed():
    """A progress sample at the start of each call reads its group; that group's unchanged polls after it are then
    applied as the poll that settled each view left it (``_repolled``), with the outcomes and snapshots of the engine
    applying each in full, also when a heartbeat or a member leaving changed the view earlier in the call (the poll is
    then applied in full) and when the views turned stale during 40 s without polls."""
    extra = {n: [progress(START_MS + n * CYCLE_MS - 1, "G0", "b1")] for n in range(12)}
    extra[3].append(heartbeat(START_MS + 3 * CYCLE_MS - 1, "G0", "b1", "10.9.9.9:1"))  # before the call's polls
    extra[5].append(unregister(START_MS + 5 * CYCLE_MS - 1, "G0", "b2", 1))
    calls = steady_cycles(12, extra)
    CountedRepolls.repolls = 0
    trace = lazy_and_eager(calls[:7] + calls[10:], CountedRepolls)
    assert all("G0" not in kept for _, kept in trace[1:])
    changes = {
        (o.change.value, o.broker) for outcomes, _ in trace[3:6] for o in outcomes if isinstance(o, MembershipChange)
    }
    assert changes >= {("VANISHED", "b1"), ("JOIN", "b2")}  # the polls after a change, applied in full
    # G0's two views in the calls without a change before them or a view turned stale (and a few of the other
    # groups', read when a cut of the first call's joins fell due)
    assert CountedRepolls.repolls >= 2 * 5


def job_columns(call: list[dict[str, Any]], fold: bool = False) -> dict[str, list[Any]]:
    """A call's events as ``shard_input`` hands them on: heartbeats typed, any other event as the JSON of its fields
    (a poll's without its time) beside its raw value; with ``fold`` a view's identical polls as one run row."""
    rows: list[dict[str, Any]] = []
    runs: dict[str, list[dict[str, Any]]] = {}
    for offset, event in enumerate(call):
        row = dict.fromkeys((*EVENT_COLUMNS, RUN))
        row.update(event_time_ms=event["event_time"], event_type=event["type"], kafka_topic="rmq")
        row.update(kafka_partition=0, kafka_offset=offset)
        if event["type"] == "consumer_channel":
            row.update({f"c_{f}": event.get(f) for f in CHANNEL_FIELDS})
            row["c_subscriptions"] = json.dumps(event["subscriptions"])
        else:
            polled = event["type"] == "consumer_connections"
            row["raw_value"] = json.dumps(event)
            row["typed_json"] = json.dumps({k: v for k, v in event.items() if k != "event_time" or not polled})
            if fold and polled:
                runs.setdefault(row["typed_json"], []).append(row)
                continue
        rows.append(row)
    for members in runs.values():
        pairs = [v for r in members for v in (r["event_time_ms"], r["kafka_offset"])]
        packed = struct.pack(f"<{len(pairs)}q", *pairs) if len(members) > 1 else None
        rows.append(dict(members[0], **{RUN: packed}))
    return {name: [r[name] for r in rows] for name in (*EVENT_COLUMNS, RUN)}


def parsed_as_the_job(call: list[dict[str, Any]]) -> list[Any]:
    """A call's events each parsed, a poll with the digest of its text as ``shard_input`` gives it."""
    return [
        ConnectionPoll.from_json(e, text_digest(json.dumps({k: v for k, v in e.items() if k != "event_time"})))
        if e["type"] == "consumer_connections"
        else typed([e])[0]
        for e in call
    ]


def rows_and_eager(calls: list[list[dict[str, Any]]], fold: bool = False) -> list[tuple[list[Any], set[str], int]]:
    """Each call through the job's rows (the shard's engine as the job restores it, ``shard_events``) and through
    the engine decoding every group, given every poll parsed (with its text's digest); outcomes and snapshots
    compared. Per call: the
    outcomes, the groups the job's engine left as text and how many of its polls were not parsed."""
    job_snapshot: dict[str, Any] | None = None
    eager_snapshot: dict[str, Any] | None = None
    trace = []
    for call in calls:
        watermark = int(call[0]["event_time"]) - CYCLE_MS
        shard = Shard.restore(json.loads(json.dumps(job_snapshot)) if job_snapshot else None, SETTINGS)
        eager = EveryPollInFull.restore(json.loads(json.dumps(eager_snapshot)) if eager_snapshot else None, SETTINGS)
        read_everything(eager)
        columns = job_columns(call, fold)
        events, _, _ = shard_events(columns, shard, watermark)
        noted = sum(type(e) is NotedPoll for e in events)
        outcomes = [o for _, o in shard.apply(events, watermark, lane_times(columns))]
        assert outcomes == eager.apply(parsed_as_the_job(call), watermark, lane_times(columns))
        assert shard.next_wakeup_ms() == eager.next_wakeup_ms()
        (engine,) = shard.engines.values()
        kept = {g for g in engine.groups if isinstance(engine.groups, EncodedStates) and engine.groups.encoded(g)}
        job_snapshot, eager_snapshot = shard.snapshot(), eager.snapshot()
        (job_engine,) = job_snapshot["clusters"].values()
        assert job_engine == eager_snapshot or decoded_snapshot(job_engine, SETTINGS) == eager_snapshot
        trace.append((outcomes, kept, noted))
    return trace


def test_unchanged_polls_through_the_jobs_rows_are_not_parsed_and_change_nothing():
    """From the third call on every poll's digest is one the shard noted: none is parsed, no group decoded, and the
    outcomes and snapshots are those of the engine given every poll parsed (folded into runs or one row each)."""
    for fold in (False, True):
        calls = steady_cycles(8, {})
        if fold:  # two cycles a call: a view's two polls in one run
            calls = [calls[n] + calls[n + 1] for n in range(0, len(calls), 2)]
        trace = rows_and_eager(calls, fold)
        groups = {f"G{g}" for g in range(STEADY_GROUPS)}
        polls_per_call = STEADY_GROUPS * len(STEADY_BROKERS) * (2 if fold else 1)
        assert trace[0][2] == 0
        for outcomes, kept, noted in trace[2 if not fold else 1 :]:
            assert kept == groups and noted == polls_per_call
            states = [o for o in outcomes if type(o) is BrokerViewState]  # a view's latest of the call
            assert sorted((o.view.group, o.view.broker) for o in states) == sorted(
                (f"G{g}", b) for g in range(STEADY_GROUPS) for b in STEADY_BROKERS
            )


def test_noted_polls_whose_group_changed_or_falls_due_are_parsed_and_applied():
    """A poll listing other members (its digest is not noted: parsed), an unchanged poll after a heartbeat on its
    broker (noted, but the view changed: applied in full), an unchanged poll of a group whose heartbeat-fed channel
    expires by its time (noted, but the group's wake is due) and polls after a gap that lets the views turn stale:
    the same outcomes as the engine given every poll parsed."""
    extra = {
        1: [heartbeat(START_MS + CYCLE_MS + 5, "G2", "b3", "10.9.9.8:1")],
        3: [heartbeat(START_MS + 3 * CYCLE_MS + 5, "G0", "b1", "10.9.9.9:1")],
        5: [poll(START_MS + 5 * CYCLE_MS + 7, "G1", "b2", members=2)],
    }
    calls = steady_cycles(20, extra)
    trace = rows_and_eager(calls[:16] + calls[19:])  # 40 s without polls: the views turn stale by the next ones
    changes = [o for outcomes, _, _ in trace[4:7] for o in outcomes if isinstance(o, MembershipChange)]
    assert {(c.group, c.change.value) for c in changes} >= {("G0", "VANISHED"), ("G1", "VANISHED")}
    assert "G0" not in trace[4][1] and "G1" not in trace[5][1]  # decoded at the poll after the change
    # G2's heartbeat-fed channel (b3) expires by the poll 120 s after its heartbeat: that poll reads G2, the
    # call's others are only noted
    expired = [n for n, (outcomes, _, _) in enumerate(trace) for o in outcomes if type(o) is MembershipChange]
    expired = [n for n in expired if any(getattr(o, "change", None) == ChangeKind.EXPIRED for o in trace[n][0])]
    assert expired and expired[0] < 16 and "G2" not in trace[expired[0]][1]
    assert trace[expired[0]][2] >= (STEADY_GROUPS - 1) * len(STEADY_BROKERS)
    stale = [o for o in trace[16][0] if type(o) is BrokerViewChanged and o.view.status.value == "STALE"]
    assert len(stale) == STEADY_GROUPS * len(STEADY_BROKERS)


class _Stored:
    """A shard's ``GroupState`` holding a blob, as the state function's call for it sees it."""

    exists = True

    def __init__(self, blob: bytes) -> None:
        self.get = (blob,)


def test_a_poll_no_parser_takes_among_noted_polls_is_a_dead_letter_and_the_rest_applied():
    """A call of unchanged polls of noted views and one poll whose fields no parser takes (``stale_after_ms`` not a
    number): that record is dead-lettered (PROCESSING_ERROR) as before the polls were noted, the others applied."""
    calls = steady_cycles(3, {})
    snapshot = None
    for call in calls[:2]:
        shard = Shard.restore(snapshot, SETTINGS)
        columns = job_columns(call)
        shard.apply(shard_events(columns, shard, 0).events, 0, {})
        snapshot = json.loads(json.dumps(shard.snapshot()))
    broken = dict(poll(START_MS + 2 * CYCLE_MS + 9, "G9", "b1"), stale_after_ms="soon")
    columns = job_columns([*calls[2], broken])
    state = _Stored(state_blob.compress(snapshot, ("groups", "progress")))
    watermark = START_MS + CYCLE_MS
    shard = Shard.restore(snapshot, SETTINGS)
    assert sum(type(e) is NotedPoll for e in shard_events(columns, shard, watermark, range(len(calls[2]))).events)
    _, outcomes, letter_rows, origins = _apply_isolating_poison(0, columns, state, SETTINGS, watermark)
    rows = _as_job_rows(outcomes, 0, origins) + letter_rows
    letters = [r for t, r in rows if t == "dead_letters"]
    assert [(r["kafka_offset"], r["reason"]) for r in letters] == [(len(calls[2]), PROCESSING_ERROR)]
    assert letters[0]["raw_value"] == json.dumps(broken)
    views = [r for t, r in rows if t == "broker_views_current"]
    assert len(views) == STEADY_GROUPS * len(STEADY_BROKERS)
