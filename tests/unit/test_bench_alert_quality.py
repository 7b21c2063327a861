"""The alert-quality harness's pure parts: the polled operations, the namespacing, the rules' ``for``, the score."""

from __future__ import annotations

import re
from pathlib import Path

from bench.bench_alert_quality import (
    JOB,
    WALL_CLOCK_ALERTS,
    AlertLog,
    Case,
    FleetSource,
    ScriptSource,
    compressed_rules,
    fleet_truth,
    namespaced,
    score,
    seconds,
    suite,
)
from dashboards.alerts import PREFIX
from streaming.app.simulation import operations as op


def _members(polls: list[dict], broker: str) -> dict[int, int]:
    return {e["event_time"] - e["event_time"] % 1000: len(e["connections"]) for e in polls if e.get("broker") == broker}


def test_a_restarted_broker_is_not_polled_while_down_and_then_lists_members_as_they_heartbeat():
    script = op.steady_group(4, "g", until_ms=420_000)
    polls = script.polls(poll_ms=10_000, outages=op.Outages(brokers={"broker-a": (300_000, 360_000)}))
    a, b = _members(polls, "broker-a"), _members(polls, "broker-b")
    assert [t for t in range(300_000, 360_000, 10_000) if t in a] == []
    assert a[290_000] == 4 and b[330_000] == 4  # the other broker answers throughout
    # member i heartbeats at i * 997 ms into each 30 s round: at 360 s only member 0 has beaten again
    assert (a[360_000], a[370_000]) == (1, 4)


def test_a_restarted_collector_polls_no_broker():
    polls = op.steady_group(2, "g", until_ms=200_000).polls(outages=op.Outages(collector=(50_000, 100_000)))
    times = {e["event_time"] // 10_000 * 10_000 for e in polls if e["type"] == "consumer_connections"}
    assert times == set(range(0, 200_000, 10_000)) - set(range(50_000, 100_000, 10_000))


def test_a_subscription_rollout_replaces_members_with_one_topic_more_and_an_expansion_changes_routes_twice():
    rollout = op.subscription_rollout(3, "g")
    assert [life.topics for life in rollout.lives] == [("orders",)] * 3 + [("orders", "payments")] * 3
    routes = [e for e in op.queue_expansion(2, "g").events() if e["type"] == "topic_route"]
    assert [[b["read_queue_nums"] for b in r["brokers"]] for r in routes] == [[8, 8], [16, 8], [16, 16]]


def test_a_scripted_case_is_shifted_and_namespaced():
    poll = op.steady_group(1, "ns").polls()[1]
    renamed = namespaced(poll, "ns")
    assert renamed["broker"] == "ns-broker-a" and renamed["subscriptions"][0]["topic"] == "ns-orders"
    assert renamed["connections"][0]["subscriptions"][0]["topic"] == "ns-orders"
    source = ScriptSource(op.steady_group(1, "ns").events(), 1_000_000, "ns")
    first = source.events_until(1_000_001)
    assert first[0]["event_time"] == 1_000_000 and first[0]["topic"] == "ns-orders"
    assert source.events_until(1_000_001) == []  # each event is handed once


def test_event_time_alerts_have_their_for_divided_and_the_jobs_own_keep_theirs(tmp_path: Path):
    fors = compressed_rules(tmp_path / "rules.yml", 4.0)
    text = (tmp_path / "rules.yml").read_text()
    written = dict(re.findall(r'- alert: (\w+)\n.*?\n\s+for: "([^"]+)"', text, re.S))
    assert fors["RocketMQMonitorRebalanceStorm"] == 75.0 and written["RocketMQMonitorRebalanceStorm"] == "75000ms"
    assert fors["RocketMQMonitorStale"] == 300.0 and written["RocketMQMonitorStale"] == "5m"
    assert WALL_CLOCK_ALERTS <= set(written)
    assert seconds("1h2m3s500ms") == 3723.5


def _alert(name: str, state: str, group: str | None = None, active: str = "2026-01-01T00:00:00.123456789Z") -> dict:
    labels = {"alertname": name, "severity": "warning"} | ({"consumer_group": group} if group else {})
    return {"labels": labels, "state": state, "activeAt": active}


def test_the_score_counts_benign_and_unexpected_firings_false_and_unfired_expectations_missed():
    cases = tuple(Case(n, n == "rr5", "", lambda _t, _h, n=n: ScriptSource([], 0, n)) for n in ("rr5", "dup"))
    log = AlertLog()
    log.poll([_alert("Dup", "firing", "dup-g"), _alert("Orphaned", "pending", "rr5")])
    log.poll([_alert("Dup", "firing", "dup-g"), _alert("Orphaned", "firing", "rr5"), _alert("Down", "firing")])
    log.poll([_alert("Dup", "firing", "dup-g")])
    log.poll([_alert("Dup", "firing", "dup-g"), _alert("Orphaned", "firing", "rr5")])
    result = score(cases, {("Dup", "dup-g"), ("Storm", "dup-g")}, log, {"Dup": 10.0}, 1.0)
    assert result["alerts"]["Dup"] | {"time_to_fire_s": 0} == {
        "true": ["dup-g"],
        "false": [],
        "missed": [],
        "precision": 1.0,
        "recall": 1.0,
        "firing_episodes": 1,
        "for_s": 10.0,
        "time_to_fire_s": 0,
        "bound_s": 12.0,
        "within_bound": False,  # activeAt is in 2026: the poll came far later
    }
    assert result["alerts"]["Orphaned"]["false"] == ["rr5: rr5"]
    assert result["alerts"]["Orphaned"]["firing_episodes"] == 2
    assert result["alerts"]["Storm"]["missed"] == ["dup-g"] and result["alerts"]["Storm"]["recall"] == 0.0
    assert result["false_by_case"] == {"rr5": ["Orphaned"], "dup": [], JOB: ["Down"]}
    assert (result["precision"], result["recall"]) == (round(1 / 3, 3), 0.5)
    assert result["exactly_once"] and result["incident_firings_with_more_than_one_episode"] == 0  # Dup: once
    log.poll([])
    log.poll([_alert("Dup", "firing", "dup-g")])  # resolved, then firing again: a second page
    again = score(cases, {("Dup", "dup-g")}, log, {}, 1.0)
    assert not again["exactly_once"] and again["incident_firings_with_more_than_one_episode"] == 1


def test_the_bench_scenarios_ground_truth_names_every_alert_they_must_fire():
    """The simulator's own ground truth after 20 minutes of each scenario played alone by the bench: a member on
    another strategy (its report differs, queues doubly held and unheld), a slow group and a hidden consumer, every
    broker failing, an offset reset; and the unreachable broker's case expects its stale views' alert."""
    p = PREFIX

    def truth(case: str, scenario: str) -> set[tuple[str, str]]:
        source = FleetSource(scenario, 0, case)
        source.events_until(1_200_000)
        return fleet_truth(source)

    assert truth("mismatch", "strategy-mismatch") == {
        (p + name, "mismatch-ledger-mismatch")
        for name in ("AssignmentMismatch", "ProgressOrphanConfirmed", "ProgressDoubleOwned")
    }
    assert truth("progfaults", "progress-faults") == {
        (p + "AssignmentMismatch", "progfaults-search-hidden"),
        (p + "ProgressHiddenConsumer", "progfaults-search-hidden"),
        (p + "ProgressSlow", "progfaults-report-slow"),
        (p + "ProgressRewind", "progfaults-ledger-rewind"),
    }
    assert truth("allbrokers", "all-brokers-down") == {
        (p + "BrokerAvoidedByMostProducers", "allbrokers-broker-a"),
        (p + "BrokerAvoidedByMostProducers", "allbrokers-broker-b"),
        (p + "ProducerAllBrokersUnavailable", JOB),
    }
    (stale,) = [c for c in suite() if c.name == "viewstale"]
    assert not stale.benign and stale.expected(stale.source(0, 1_800_000)) == {
        (p + "BrokerViewStale", "viewstale-broker-a")
    }
