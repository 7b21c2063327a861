"""A call decodes only the groups it touches, and that changes nothing: the same outcomes, call by call, and the same
snapshots as a call that decodes every group first (the engine before ``encoded_states``).

Each input goes through two engines call by call, both restored from the JSON of the previous call's snapshot (as
the state store keeps it): one as the job runs it (a group's state stays its stored text until the call reads it,
``ShardEngine._advance_all`` passes over a group whose noted times fall after the call's clock), one that reads
every group's state and progress before it applies anything. Inputs with groups idle while others change: the
simulator's ``mixed`` fleet with reports and consume progress, and scripted operations polled by a collector with
outages (views turning stale and fresh), several groups in one shard, cut into calls at generated places.
Why: ``docs/design/state-snapshots.md``, "Groups a batch does not touch".
"""

from __future__ import annotations

import dataclasses
import json
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
from streaming.domain.consumers.shard_engine import ShardEngine
from tests.support.engine import typed

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


def read_everything(engine: ShardEngine) -> None:
    """Every group's state and progress decoded, as the engine did before it kept them as text."""
    for states in (engine.groups, engine.progress):
        for group in list(states):
            states[group]  # noqa: B018 (the read decodes it)


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
        eager = ShardEngine.restore(json.loads(json.dumps(eager_snapshot)) if eager_snapshot else None, SETTINGS)
        read_everything(eager)
        assert lazy.apply(typed(call), watermark, lanes) == eager.apply(typed(call), watermark, lanes)
        assert lazy.next_wakeup_ms() == eager.next_wakeup_ms()
        if isinstance(lazy.groups, EncodedStates):  # restored from a snapshot (the first call's is empty)
            untouched += sum(lazy.groups.encoded(g) is not None for g in lazy.groups)
            held += len(lazy.groups)
        lazy_snapshot, eager_snapshot = lazy.snapshot(), eager.snapshot()
        assert lazy_snapshot == eager_snapshot
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
