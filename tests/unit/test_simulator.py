"""The fleet simulator: deterministic, RocketMQ-shaped events, scenarios whose ``expected`` is the whole truth.

The scenarios' anomalies are checked here through the pure shard engine (fast; the same code the job runs
inside Spark), micro-batch by micro-batch; ``tests/integration/test_simulator_scenarios.py`` runs them
through the real job.
"""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from streaming.app.simulation.fleet import AVOIDED, HEARTBEAT_MS, SCENARIOS, Simulation, build_scenario
from streaming.contract.events import DEFAULT_TOPICS
from streaming.contract.validator import Rejection, validate_event
from streaming.domain.consumers.engine_settings import EngineSettings
from streaming.domain.consumers.membership import MembershipChange
from streaming.domain.consumers.outcomes import EpisodeTransition
from streaming.domain.consumers.shard_engine import ShardEngine
from tests.support.engine import typed

START = 1_700_000_000_000
CONSUMER_QUERY_TYPES = {
    "consumer_channel",
    "consumer_connections",
    "topic_route",
    "reported_assignment",
    "consume_progress",
}
ENGINE = EngineSettings(
    default_strategy="AVG", default_client_line="5", expiry_ms=120_000, storm_window_ms=300_000, storm_threshold=10
)


def consumer_anomalies(name: str, batch_ms: int, minutes: int = 7) -> tuple[set[tuple[str, str]], dict[str, list[int]]]:
    """The (group, anomaly) pairs reported, and each group's membership change times."""
    scenario = build_scenario(name)
    simulation = Simulation(scenario, START)
    engine = ShardEngine.restore(None, ENGINE)
    seen: set[tuple[str, str]] = set()
    changes: dict[str, list[int]] = {}
    for k in range(1, minutes * 60_000 // batch_ms + 1):
        # what the job's consumer query reads (send results are send-ingest's)
        events = [e for e in simulation.events_until(START + k * batch_ms) if e["type"] in CONSUMER_QUERY_TYPES]
        events.sort(key=lambda e: (e["event_time"], DEFAULT_TOPICS[e["type"]]))  # the job's order (default topics)
        for outcome in engine.apply(typed(events), START + (k - 1) * batch_ms):
            if isinstance(outcome, EpisodeTransition):
                seen.add((outcome.transition.episode.group, outcome.transition.episode.anomaly))
            elif isinstance(outcome, MembershipChange):
                changes.setdefault(outcome.group, []).append(outcome.event_time_ms)
        engine = ShardEngine.restore(engine.snapshot(), ENGINE)  # as the job stores it between batches
    return seen, changes


@pytest.mark.parametrize("batch_ms", [5_000, 60_000])
@pytest.mark.parametrize("name", SCENARIOS)
def test_the_engine_finds_exactly_the_expected_consumer_anomalies(name, batch_ms):
    found, changes = consumer_anomalies(name, batch_ms)
    expected = build_scenario(name).expected_anomalies
    assert expected <= found
    extra = found - expected
    assert not extra


def test_every_scenario_but_the_healthy_ones_injects_something():
    quiet = {n for n in SCENARIOS if not build_scenario(n).expected}
    # these show in the membership history instead (consume-progress's stuck and idle groups in their queues'
    # consume progress, its offline group as an anomaly)
    assert quiet == {"steady", "scale-out", "crash"}
    assert build_scenario("mixed").expected == set().union(*(build_scenario(n).expected for n in SCENARIOS))


def test_same_seed_same_events_and_another_seed_other_ids():
    def events(seed: int) -> list[dict]:
        return Simulation(build_scenario("mixed", seed), START, seed).events_until(START + 120_000)

    assert events(3) == events(3)
    ids = {e.get("client_id") for e in events(3)} - {None}
    assert ids != {e.get("client_id") for e in events(4)} - {None}


def test_every_event_satisfies_the_contract():
    simulation = Simulation(build_scenario("mixed", extra_groups=3), START)
    events = simulation.events_until(START + 600_000)
    assert Counter(e["type"] for e in events).keys() == {
        "consumer_channel",
        "topic_route",
        "send_result",
        "consume_progress",
    }
    import json

    for event in events:
        assert not isinstance(validate_event(json.dumps(event).encode(), START + 10**9), Rejection), event
    assert [e["event_time"] for e in events] == sorted(e["event_time"] for e in events)


def test_client_ids_follow_rocketmqs_formats():
    ids = {m.client_id for g in build_scenario("mixed").groups for m in g.members}
    assert "172.17.0.1@1" in ids  # containers: PID 1 behind the bridge IP (old format, pre 4.9.0)
    modern = ids - {"172.17.0.1@1"}
    assert modern and all(re.fullmatch(r"\d+\.\d+\.\d+\.\d+@\d+#\d+", c) for c in modern)  # IP@PID#nanotime


def test_members_heartbeat_every_broker_every_30_s_and_leave_with_unregister():
    scenario = build_scenario("rebalance-storm")
    events = Simulation(scenario, START).events_until(START + 120_000)
    steady = scenario.groups[0].members[0]
    beats = [e for e in events if e.get("client_id") == steady.client_id]
    assert Counter(e["broker"] for e in beats) == {"broker-a": 4, "broker-b": 4}
    assert {e["event_time"] - START for e in beats} == {0, HEARTBEAT_MS, 2 * HEARTBEAT_MS, 3 * HEARTBEAT_MS}
    short = scenario.groups[0].members[2]  # joins at 10 s, leaves at 20 s
    kinds = [(e["kind"], e["broker"], e["event_time"] - START) for e in events if e.get("client_id") == short.client_id]
    assert kinds == [
        ("HEARTBEAT", "broker-a", 10_000),
        ("HEARTBEAT", "broker-b", 10_000),
        ("UNREGISTER", "broker-a", 20_000),
        ("UNREGISTER", "broker-b", 20_000),
    ]


def test_a_crashed_member_just_goes_silent():
    scenario = build_scenario("crash")
    crashed = scenario.groups[0].members[2]
    events = Simulation(scenario, START).events_until(START + 300_000)
    mine = [e for e in events if e.get("client_id") == crashed.client_id]
    assert {e["kind"] for e in mine} == {"HEARTBEAT"} and max(e["event_time"] for e in mine) == START + 30_000


def test_diverging_views_hide_one_member_from_one_broker():
    scenario = build_scenario("diverging-views")
    hidden = scenario.groups[0].members[1]
    events = Simulation(scenario, START).events_until(START + 60_000)
    assert {e["broker"] for e in events if e.get("client_id") == hidden.client_id} == {"broker-a"}


def test_producers_see_slow_and_failing_brokers_as_configured():
    slow = Simulation(build_scenario("slow-broker"), START).events_until(START + 120_000)
    sends = [e for e in slow if e["type"] == "send_result"]
    assert all(600 <= e["latency_ms"] <= 3000 for e in sends if e["broker"] == "broker-b")
    assert all(e["latency_ms"] <= 40 and e["outcome"] == "OK" for e in sends if e["broker"] == "broker-a")
    down = Simulation(build_scenario("broker-outage"), START).events_until(START + 120_000)
    failed = {e["event_time"] - START >= 60_000 for e in down if e.get("outcome") == "TIMEOUT"}
    assert failed == {True}
    assert any(e.get("outcome") == "OK" and e["broker"] == "broker-b" for e in down)  # before the outage
    assert {b for b, kind in build_scenario("broker-outage").expected if kind == AVOIDED} == {"broker-b"}


def test_scale_knobs():
    scenario = build_scenario("steady", extra_groups=5, clients_per_group=3)
    assert len(scenario.groups) == 6 and all(len(g.members) == 3 for g in scenario.groups[1:])
    assert len({m.client_id for g in scenario.groups for m in g.members}) == 4 + 15
    # the scenario's own ids do not move when load is added
    assert scenario.groups[0] == build_scenario("steady").groups[0]
    simulation = Simulation(scenario, START, queues_per_broker=16, sends_per_second=2)
    events = simulation.events_until(START + 10_000)  # two ticks
    route = next(e for e in events if e["type"] == "topic_route")
    assert [b["read_queue_nums"] for b in route["brokers"]] == [16, 16]
    assert sum(e["type"] == "send_result" for e in events) == 4 * 2 * 10  # 4 producers, 2 ticks, 10 per tick


def test_namespaces_keep_scenarios_apart():
    a, b = build_scenario("slow-broker", namespace="a"), build_scenario("slow-broker", namespace="b")
    assert not a.group_names & b.group_names and not set(a.brokers) & set(b.brokers)
    assert a.expected == {("a-broker-b", AVOIDED)} and a.slow_brokers == {"a-broker-b": (600, 3000)}
    assert a.expected_avoided_brokers == {"a-broker-b"}


@pytest.mark.parametrize(
    "bad", [dict(name="nope"), dict(name="steady", extra_groups=-1), dict(name="steady", clients_per_group=0)]
)
def test_bad_knobs_are_refused(bad):
    with pytest.raises(ValueError):
        build_scenario(**bad)


def test_a_simulation_of_a_named_cluster_publishes_version_2_events_of_that_cluster():
    named = Simulation(build_scenario("mixed"), START, cluster="east").events_until(START + 60_000)
    plain = Simulation(build_scenario("mixed"), START).events_until(START + 60_000)
    assert len(named) == len(plain) and {e["type"] for e in named} >= {"consumer_channel", "topic_route", "send_result"}
    verdicts = [validate_event(json.dumps(e), e["event_time"] + 1) for e in named]
    assert {v.cluster() for v in verdicts if not isinstance(v, Rejection)} == {"east"}
    assert not [v for v in verdicts if isinstance(v, Rejection)]
    assert {validate_event(json.dumps(e)).cluster() for e in plain} == {"DefaultCluster"}  # type: ignore[union-attr]
