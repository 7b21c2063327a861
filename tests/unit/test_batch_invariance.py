"""The engine's history is a function of its input, not of how the input was cut into micro-batches.

The same event stream goes through ``ShardEngine.apply`` (snapshotted and restored between calls, as in Spark) all
at once, one event per call, in calls of a few events and at random cuts, each call's watermark the newest event of
the calls before it (less a delay) and each lane's newest channel event passed as the job passes it; every run ends
with the same empty call at the same watermark. The outcomes must be the same: every membership change,
generation, expected assignment, episode transition, group summary and progress row. Not compared call by call:
``BrokerViewState`` (a current table's upsert: only the last per view is kept by the table; one superseded within
its own call is dropped there) and ``ProgressSummary`` (one per sampled group and call: compared as the last per
group); the engine reads no processing-time clock, so there is none to vary. Why and what holds it:
``docs/design/batch-invariance.md``.

Inputs: the scripted operations of ``streaming.app.simulation.operations`` (rolling restart, crash loops, a membership
that never settles, scaling, a flipping subscription table), the simulator's ``mixed`` scenario with its members'
reports and consume progress, the valid events of the job-scenarios test, a channel expiring 80 s before a join
with calls ending at every event in between, and generated two-group fleets (heartbeats, silences, leaves, polls,
reports, routes) cut anywhere.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streaming.app.simulation import operations as op
from streaming.app.simulation.fleet import Simulation, build_scenario
from streaming.contract.tables import Table
from streaming.domain.consumers.engine_settings import EngineSettings
from streaming.domain.consumers.outcomes import EpisodeRestored
from streaming.domain.consumers.shard_engine import ShardEngine
from tests.support.engine import TableModel, typed
from tests.support.events import BASE, channel_event, hb, report, route
from tests.support.job_scenarios import progress_events, run1_events, run2_events

START_MS = 1_700_000_000_000
# Events of one millisecond: routes first, then channel events and polls, then the rest (the job's order).
_RANK = {"topic_route": 0, "consumer_channel": 1, "consumer_connections": 1}


def ordered(events: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events in the order the job applies a batch's: event time, then type (stable otherwise)."""
    return sorted(events, key=lambda e: (int(e["event_time"]), _RANK.get(e["type"], 2)))


def lane(event: dict[str, Any]) -> str:
    """The Kafka partition a channel event would be read from: its group's, of two."""
    return f"consumer-events/{zlib.crc32(event['group'].encode()) % 2}"


def run(
    events: Sequence[dict[str, Any]], cuts: Sequence[int], engine_settings: EngineSettings, delay_ms: int
) -> dict[str, list[str]]:
    """``events`` applied in calls ending at each index of ``cuts``, then one empty call at the last event's time;
    the tables as a reader sees them after it (``TableModel``)."""
    snapshot: dict[str, Any] | None = None
    model = TableModel()
    newest = None
    bounds = [0, *sorted({c for c in cuts if 0 < c < len(events)}), len(events)]
    calls = [events[a:b] for a, b in zip(bounds, bounds[1:], strict=False)] + [[]]
    for i, call in enumerate(calls):
        engine = ShardEngine.restore(json.loads(json.dumps(snapshot)) if snapshot else None, engine_settings)
        final = i == len(calls) - 1
        watermark = int(events[-1]["event_time"]) if final else (0 if newest is None else newest - delay_ms)
        lanes: dict[str, int] = {}
        for e in call:
            if e["type"] == "consumer_channel":
                lanes[lane(e)] = max(int(e["event_time"]), lanes.get(lane(e), 0))
        model.apply(engine.apply(typed(call), watermark, lanes))
        snapshot = engine.snapshot()
        times = [int(e["event_time"]) for e in call]
        newest = max([*times, *([] if newest is None else [newest])], default=None)
    return model.tables()


def same_however_cut(
    events: list[dict[str, Any]], engine_settings: EngineSettings, delay_ms: int = 0
) -> dict[str, list[str]]:
    whole = run(events, [], engine_settings, delay_ms)
    assert run(events, list(range(1, len(events))), engine_settings, delay_ms) == whole  # one event a call
    assert run(events, list(range(7, len(events), 7)), engine_settings, delay_ms) == whole  # seven a call
    return whole


SCRIPTS: dict[str, Callable[[], op.Script]] = {
    "rolling-restart": lambda: op.rolling_restart(5),
    "crash-loop-same-id": lambda: op.crash_loop(3, same_id=True, crashes=6),
    "crash-loop-new-ids": lambda: op.crash_loop(3, same_id=False, crashes=6),
    "never-settling": lambda: op.never_settling(3, count=6),
    "scale-out": lambda: op.scale(3, 6),
    "scale-in": lambda: op.scale(6, 3),
    "inconsistent-subscription": lambda: op.inconsistent_subscription(3, until_ms=300_000),
}


@pytest.mark.parametrize("name", SCRIPTS)
def test_a_scripted_operation_has_the_same_history_however_it_is_batched(name):
    events = ordered(SCRIPTS[name]().events())
    whole = same_however_cut(events, EngineSettings(storm_window_ms=120_000, flapping_window_ms=120_000))
    assert whole.get(Table.GROUP_SNAPSHOTS)  # there is a history to compare


@settings(max_examples=25, deadline=None, derandomize=True)
@given(st.lists(st.integers(1, 10_000), max_size=12))
def test_a_crash_loop_cut_anywhere_has_the_same_history(cuts):
    events = ordered(op.crash_loop(3, same_id=True, crashes=4).events())
    engine_settings = EngineSettings(storm_window_ms=120_000, flapping_window_ms=120_000, storm_threshold=3)
    whole = run(events, [], engine_settings, 0)
    assert run(events, [c % len(events) for c in cuts], engine_settings, 0) == whole
    assert any("REBALANCE_STORM" in r for r in whole[Table.ANOMALY_EPISODES])  # the storm's episode is compared


def test_the_mixed_simulation_with_reports_and_progress_has_the_same_history_however_it_is_batched():
    scenario = build_scenario("mixed", 1)
    simulation = Simulation(scenario, START_MS, 1, sends_per_second=0, assignment_reports=True)
    events = ordered(e for e in simulation.events_until(START_MS + 150_000) if e["type"] != "send_result")
    whole = same_however_cut(events, EngineSettings(), delay_ms=10_000)
    kinds = {Table.GROUP_SNAPSHOTS, Table.ANOMALY_EPISODES, Table.CONSUME_PROGRESS, Table.MEMBERSHIP_CHANGES}
    assert kinds <= set(whole)


def test_the_job_scenarios_input_has_the_same_history_however_it_is_batched():
    valid = [e for e in run1_events() + progress_events() + run2_events() if isinstance(e, dict)]
    events = ordered(valid)
    whole = same_however_cut(events, EngineSettings())
    generations = [r for r in whole[Table.GROUP_SNAPSHOTS] if json.loads(r)["group"] == "G-sub"]
    assert len(generations) >= 2  # the subscription change is a generation of its own


def test_a_change_where_input_stops_is_reported_at_once_and_a_later_one_of_its_window_amends_it():
    """A duplicate client id joins at 1 s and the input stops: the call that brought it writes its generation
    and its episode, though no later event passes its coalescing window. Another channel joining 0.5 s later in
    the next call amends that cut; the tables then are those of both calls' input applied at once."""
    first = [route(0), hb(0, "ch1", "c1"), hb(1000, "ch2", "c1")]
    later = [hb(1500, "ch3", "c3")]
    engine = ShardEngine.restore(None, EngineSettings())
    model = TableModel()
    model.apply(engine.apply(typed(first), BASE))
    stopped = model.tables()
    snapshots = [json.loads(r) for r in stopped[Table.GROUP_SNAPSHOTS]]
    assert sorted((s["generation"], s["event_time_ms"], s["cid_all"]) for s in snapshots) == [
        (1, BASE, ["c1"]),
        (2, BASE + 1000, ["c1", "c1"]),  # a window (1 s) after the first: a generation of its own
    ]
    (opened,) = [json.loads(r) for r in stopped[Table.ANOMALY_EPISODES] if "DUPLICATE_CLIENT_ID" in r]
    assert (opened["anomaly"], opened["status"], opened["event_time_ms"]) == (
        "DUPLICATE_CLIENT_ID",
        "OPENED",
        BASE + 1000,
    )
    assert opened["episode_id"] in [json.loads(r)["episode_id"] for r in stopped[Table.ANOMALIES_CURRENT]]

    engine = ShardEngine.restore(json.loads(json.dumps(engine.snapshot())), EngineSettings())
    model.apply(engine.apply(typed(later), BASE + 1000))
    whole = TableModel()
    whole.apply(ShardEngine.restore(None, EngineSettings()).apply(typed(first + later), BASE))
    assert model.tables() == whole.tables()
    (amended,) = [json.loads(r) for r in model.tables()[Table.GROUP_SNAPSHOTS] if json.loads(r)["generation"] == 2]
    assert amended["event_time_ms"] == BASE + 1500
    assert sorted(amended["cid_all"]) == ["c1", "c1", "c3"]


def test_an_episode_a_cut_closed_where_a_call_ended_is_restored_when_the_amended_cut_keeps_it():
    """A duplicate client ID's second channel unregisters as a call ends: the cut there closes the episode. The
    channel registers again 0.5 s later, in the next call: the amended cut finds the episode as it was, so its
    current row is written back as it was before (``EpisodeRestored``) and its history has no close."""
    first = [route(0), hb(0, "ch1", "c1"), hb(0, "ch2", "c1"), hb(5000, "ch1", "c1"), hb(5000, "ch2", "c1")]
    first.append(channel_event("UNREGISTER", 10_000, "ch2", "c1"))
    later = [hb(10_500, "ch2", "c1")]
    engine = ShardEngine.restore(None, EngineSettings())
    model = TableModel()
    model.apply(engine.apply(typed(first), BASE))
    assert any('"CLOSED"' in r and "DUPLICATE_CLIENT_ID" in r for r in model.tables()[Table.ANOMALY_EPISODES])
    assert not any("DUPLICATE_CLIENT_ID" in r for r in model.tables().get(Table.ANOMALIES_CURRENT, []))
    engine = ShardEngine.restore(json.loads(json.dumps(engine.snapshot())), EngineSettings())
    amending = engine.apply(typed(later), BASE + 5000)
    assert any(type(o) is EpisodeRestored for o in amending)
    model.apply(amending)
    whole = TableModel()
    whole.apply(ShardEngine.restore(None, EngineSettings()).apply(typed(first + later), BASE))
    assert model.tables() == whole.tables()
    (episode,) = [json.loads(r) for r in model.tables()[Table.ANOMALIES_CURRENT] if "DUPLICATE_CLIENT_ID" in r]
    assert (episode["opened_at_ms"], episode["event_time_ms"]) == (BASE, BASE)  # as before the cut that closed it
    closes = [r for r in model.tables()[Table.ANOMALY_EPISODES] if '"CLOSED"' in r and "DUPLICATE_CLIENT_ID" in r]
    assert not closes


def _expiry_then_join() -> list[dict[str, Any]]:
    """Group G (one lane): c1 falls silent after 0 s and expires at 120.001 s, c3 joins at 200 s, nothing of G
    between; group H (the other lane) heartbeats every 10 s, so calls can end anywhere in between."""
    events = [route(0), hb(0, "ch1", "c1"), hb(0, "ch2", "c2"), hb(90_000, "ch2", "c2")]
    events += [hb(200_000, "ch3", "c3"), hb(200_000, "ch2", "c2")]
    events += [hb(t, "hh", "h1", group="H") for t in range(0, 240_001, 10_000)]
    return ordered(events)


@pytest.mark.parametrize("delay_ms", [0, 60_000])
def test_an_expiry_is_cut_at_its_own_time_wherever_a_call_ends(delay_ms):
    """The expiry and the join 80 s later are two generations whether or not a call ends between them: the expiry
    is judged at its own time before the group's next event, not folded into that event's cut. Every single
    boundary, and one event a call; with a watermark delay the end of a call may not reach the expiry at all."""
    events = _expiry_then_join()
    whole = run(events, [], EngineSettings(), delay_ms)
    generations = sorted(
        (s["generation"], s["event_time_ms"] - BASE, s["cid_all"])
        for s in map(json.loads, whole[Table.GROUP_SNAPSHOTS])
        if s["group"] == "G"
    )
    assert generations == [(1, 0, ["c1", "c2"]), (2, 120_001, ["c2"]), (3, 200_000, ["c2", "c3"])]
    for cut in range(1, len(events)):
        assert run(events, [cut], EngineSettings(), delay_ms) == whole, cut
    assert run(events, list(range(1, len(events))), EngineSettings(), delay_ms) == whole


def _poll(t: int, clients: Sequence[int], group: str) -> dict[str, Any]:
    subscriptions = [{"topic": "T", "expression": "*", "sub_version": 1}]
    connections = [
        {
            "channel": f"10.0.1.{c}:1",
            "client_id": f"{group}-p{c}",
            "language": "JAVA",
            "client_version": "479",
            "allocate_strategy": "AVG",
            "subscriptions": subscriptions,
        }
        for c in clients
    ]
    return {
        "type": "consumer_connections",
        "schema_version": 1,
        "event_time": BASE + t,
        "broker": "broker-b",
        "group": group,
        "stale_after_ms": 30_000,
        "collector": "collect-1",
        "message_model": "CLUSTERING",
        "consume_type": "CONSUME_PASSIVELY",
        "subscriptions": subscriptions,
        "connections": connections,
    }


_fleet_event = st.one_of(
    st.tuples(st.just("hb"), st.sampled_from("GH"), st.integers(0, 2)),
    st.tuples(st.just("leave"), st.sampled_from("GH"), st.integers(0, 2)),
    st.tuples(st.just("poll"), st.sampled_from("GH"), st.sets(st.integers(0, 1))),
    st.tuples(st.just("report"), st.sampled_from("GH"), st.integers(0, 2)),
    st.tuples(st.just("route"), st.just(""), st.integers(1, 4)),
)


def _fleet(steps: Sequence[tuple[tuple[Any, ...], int]]) -> list[dict[str, Any]]:
    out = [route(0)]
    for i, ((kind, group, what), seconds) in enumerate(steps):
        t = seconds * 5_000
        if kind == "hb":
            out.append(hb(t, f"ch{what}", f"{group}-c{what}", group=group))
        elif kind == "leave":
            out.append(channel_event("UNREGISTER", t, f"ch{what}", f"{group}-c{what}", group=group))
        elif kind == "poll":
            out.append(_poll(t + i, sorted(what), group))  # two polls of a view in one millisecond: no such
        elif kind == "report":
            out.append(report(t, f"{group}-c{what}", [("broker-a", what)], group=group))
        else:
            out.append(route(t, brokers=(("broker-a", what), ("broker-b", 4))))
    return ordered(out)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(
    st.lists(st.tuples(_fleet_event, st.integers(0, 160)), min_size=1, max_size=40),
    st.lists(st.integers(1, 1_000), max_size=4),
    st.sampled_from([0, 60_000]),
)
def test_two_groups_interleaved_have_the_same_history_wherever_calls_end(steps, cuts, delay_ms):
    """Two groups on two lanes, their heartbeats (silences past the expiry among them), leaves, polls of a third
    broker (views turning stale), reports and routes interleaved over ten minutes: the tables are the same in one
    call as cut into calls anywhere."""
    events = _fleet(steps)
    whole = run(events, [], EngineSettings(), delay_ms)
    assert run(events, [c % len(events) for c in cuts], EngineSettings(), delay_ms) == whole
