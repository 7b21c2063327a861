"""Rebalance storms and rolling deploys, through the pure engine over scripted group operations.

Each numbered case runs one ``streaming.app.simulation.operations`` script through ``ShardEngine.apply`` in 15 s
micro-batches (snapshotted and restored between them, as in Spark) and checks what the anomaly episodes and the
generations say: a deploy or a scaling is recorded, never a storm; a crash loop or a membership that never
settles is one storm; a flipping subscription table is the inconsistent subscription's, not a storm's.
"""

from __future__ import annotations

import json

import pytest

from streaming.app.simulation import operations as op
from streaming.domain.consumers.engine_settings import EngineSettings
from streaming.domain.consumers.outcomes import EpisodeTransition, GenerationSnapshot
from streaming.domain.consumers.shard_engine import ShardEngine
from tests.support.engine import typed


def run(script: op.Script, settings: EngineSettings | None = None) -> list:
    snapshot, out = None, []
    for events, watermark in op.batches(script.events(), script.until_ms):
        engine = ShardEngine.restore(snapshot, settings or EngineSettings())
        out += engine.apply(typed(events), watermark)
        snapshot = json.loads(json.dumps(engine.snapshot()))
    return out


def transitions(out: list, anomaly: str) -> list[tuple[str, int]]:
    return [
        (o.transition.status, o.transition.event_time_ms)
        for o in out
        if isinstance(o, EpisodeTransition) and o.transition.episode.anomaly == anomaly
    ]


def causes(out: list) -> list[str | None]:
    return [json.loads(o.details)["cause"] for o in out if isinstance(o, GenerationSnapshot)]


@pytest.mark.parametrize("members", [5, 10, 20, 50], ids=lambda n: f"case-{[5, 10, 20, 50].index(n) + 1}-{n}-members")
def test_cases_1_to_4_a_rolling_restart_is_a_deploy_recorded_never_a_storm(members):
    """A member unregisters every 30 s and its replacement (a new client id) joins 10 s later: 2 changes per
    member, 100 for 50 members, and none of them is a storm's. One ROLLING_DEPLOY episode (info) opens once two
    replacements have stayed 30 s, follows the deploy and closes once the window holds fewer than two replacements."""
    script = op.rolling_restart(members)
    out = run(script)
    assert transitions(out, "REBALANCE_STORM") == []
    assert transitions(out, "FLAPPING_MEMBERS") == []
    deploy = transitions(out, "ROLLING_DEPLOY")
    assert deploy[0][0] == "OPENED" and deploy[-1][0] == "CLOSED"
    assert [s for s, _ in deploy].count("OPENED") == 1
    last_change = 120_000 + (members - 1) * 30_000 + 10_000
    # opened once two replacements stayed 30 s: the second's join (160 s) + 30 s, at the next analysis
    assert 120_000 + 30_000 + 10_000 + 30_000 <= deploy[0][1] <= 120_000 + 3 * 30_000 + 10_000 + 15_000
    # closed once fewer than two replacements are left in the 5-minute window, and no later than its slide
    assert last_change + 300_000 - 60_000 < deploy[-1][1] <= last_change + 300_000 + 15_000
    opened = next(
        o.transition.episode for o in out if isinstance(o, EpisodeTransition) and o.transition.status == "OPENED"
    )
    assert opened.severity == "info" and opened.anomaly == "ROLLING_DEPLOY"
    # every generation of the deploy after it is recognised says so
    generations = causes(out)
    assert generations.count("ROLLING_DEPLOY") >= members - 2 and "REBALANCE_STORM" not in generations


def test_case_5_a_crash_loop_under_one_client_id_is_one_storm_naming_the_member():
    """The same member leaves and rejoins every 25 s (a pre-4.9 client in a container: PID 1): the membership
    returns to the same set again and again. One storm, naming it, and flapping; no deploy."""
    out = run(op.crash_loop(5, same_id=True))
    storm = transitions(out, "REBALANCE_STORM")
    assert [s for s, _ in storm].count("OPENED") == 1 and storm[-1][0] == "CLOSED"
    details = [
        json.loads(o.transition.episode.details_json)
        for o in out
        if isinstance(o, EpisodeTransition) and o.transition.episode.anomaly == "REBALANCE_STORM"
    ]
    assert set(details[0]["unconverged_by_subject"]) == {"10.1.0.0@100#1000000"}
    assert transitions(out, "FLAPPING_MEMBERS")[0][0] == "OPENED"
    assert transitions(out, "ROLLING_DEPLOY") == []


def test_case_6_a_crash_loop_under_new_client_ids_is_a_storm_that_flapping_cannot_see():
    """A 4.9+ client gets a new id at each restart: no member flaps, but each new process joins and leaves again
    (short-lived), so the group never converges: one storm episode, no deploy."""
    out = run(op.crash_loop(5, same_id=False))
    storm = transitions(out, "REBALANCE_STORM")
    assert [s for s, _ in storm].count("OPENED") == 1 and storm[-1][0] == "CLOSED"
    assert transitions(out, "FLAPPING_MEMBERS") == []
    assert transitions(out, "ROLLING_DEPLOY") == []
    assert "REBALANCE_STORM" in causes(out)


def test_case_7_membership_that_never_settles_is_a_storm():
    """A new member every 20 s that leaves 10 s later (an oscillating autoscaler): a storm, no deploy."""
    out = run(op.never_settling(5))
    assert [s for s, _ in transitions(out, "REBALANCE_STORM")].count("OPENED") == 1
    assert transitions(out, "ROLLING_DEPLOY") == []


@pytest.mark.parametrize("members, to", [(4, 12), (12, 4)], ids=["case-8-scale-out", "case-9-scale-in"])
def test_cases_8_and_9_scaling_is_neither_storm_nor_deploy(members, to):
    out = run(op.scale(members, to))
    assert transitions(out, "REBALANCE_STORM") == [] and transitions(out, "ROLLING_DEPLOY") == []
    assert max(o.members for o in out if isinstance(o, GenerationSnapshot)) == max(members, to)


def test_case_10_a_flipping_subscription_table_is_the_inconsistent_subscriptions_not_a_storm():
    """One member subscribes a topic less: the broker's table flips with each heartbeat, a generation at each
    flip (30 in 15 minutes), none counted for the storm; each flip's generation names its cause."""
    out = run(op.inconsistent_subscription(3))
    assert transitions(out, "REBALANCE_STORM") == []
    assert transitions(out, "INCONSISTENT_SUBSCRIPTION") == [("OPENED", 1_999)]
    generations = causes(out)
    assert len(generations) > 20  # the flips are generations (what clients do) ...
    assert generations[1:] == ["INCONSISTENT_SUBSCRIPTION"] * (len(generations) - 1)  # ... attributed to the cause


def test_case_11_the_threshold_counts_unconverged_changes_not_rebalances():
    """The crash loop of case 6 under a threshold its unconverged changes never exceed: no storm, while the
    rolling restart of 50 members (100 changes) stays silent at the default threshold (case 4)."""
    out = run(op.crash_loop(5, same_id=False), EngineSettings(storm_threshold=1_000))
    assert transitions(out, "REBALANCE_STORM") == []
