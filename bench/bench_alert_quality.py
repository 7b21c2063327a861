"""Benchmark (not a test): do the alerts page for incidents only? Benign operations and incidents through the real
job, a real Prometheus evaluating the real rule file; per alert precision, recall and time to fire.

Run: ``.venv/bin/python -m bench.bench_alert_quality [--speed 1 --sending-s 300 --restart-after-s 900
--idle-s 1500]`` -> prints a table and writes ``bench/results/alert_quality.json``. Every case plays at once in
its own namespace (its group, topics and brokers carry the case's name), so one job run and one Prometheus judge
them all; the producers stop sending after ``--sending-s``, the job restarts once ``--restart-after-s`` later.
Event time runs at wall speed and the rule file is the real one; ``--speed N`` compresses event time and divides
the fleet alerts' ``for`` by N, valid only while the job keeps up (``achieved_speed``): see
``docs/design/alert-quality.md``.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from bench.common import machine, measured_at, write_results
from dashboards import alerts
from dashboards.generate import to_yaml
from streaming.app.simulation import operations as op
from streaming.app.simulation.fleet import ALL_UNAVAILABLE, AVOIDED, Simulation, build_scenario
from streaming.contract.events import EventType
from streaming.domain.anomaly_catalogue import CATALOGUE
from streaming.domain.progress.verdict import QueueState
from streaming.domain.vocabulary import AnomalyKind

RESULTS = Path(__file__).parent / "results" / "alert_quality.json"
# The alerts on the job's own health: their expressions read wall-clock rates and timestamps, so their ``for``
# stays as written; every other alert reads what the job concluded in event time.
WALL_CLOCK_ALERTS = alerts.JOB_HEALTH
JOB = "job"  # what an alert without a group, topic or broker label is attributed to


class Source(Protocol):
    def events_until(self, until_ms: int) -> list[dict[str, Any]]: ...


# -- cases ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    """One benign operation or incident, played in its own namespace ``name`` (no ``-`` inside: see ``owner``)."""

    name: str
    benign: bool
    description: str
    source: Callable[[int, int], Source]  # (start_ms, horizon_ms: event time it runs for at least) -> its events
    # The incident's ground truth, read from its source at the end: the (alert, group or broker) pairs that must
    # fire. A benign case expects nothing.
    expected: Callable[[Source], set[tuple[str, str]]] = field(default=lambda _s: set())


def _rename(value: str, ns: str) -> str:
    return f"{ns}-{value}"


def namespaced(event: dict[str, Any], ns: str) -> dict[str, Any]:
    """A scripted event with its topics and brokers prefixed by ``ns`` (its group is named by the script)."""
    event = dict(event)
    if "broker" in event:
        event["broker"] = _rename(event["broker"], ns)
    if event["type"] == EventType.TOPIC_ROUTE:
        event["topic"] = _rename(event["topic"], ns)
        event["brokers"] = [dict(b, broker=_rename(b["broker"], ns)) for b in event["brokers"]]
    subs = lambda items: [dict(s, topic=_rename(s["topic"], ns)) for s in items]  # noqa: E731
    if event.get("subscriptions") is not None:
        event["subscriptions"] = subs(event["subscriptions"])
    if event["type"] == EventType.CONSUMER_CONNECTIONS:
        event["connections"] = [dict(c, subscriptions=subs(c["subscriptions"])) for c in event["connections"]]
    return event


class ScriptSource:
    """A scripted operation's events (``operations``), shifted to start at ``start_ms`` and namespaced."""

    def __init__(self, events: list[dict[str, Any]], start_ms: int, ns: str) -> None:
        self.events = [dict(namespaced(e, ns), event_time=e["event_time"] + start_ms) for e in events]
        self.index = 0

    def events_until(self, until_ms: int) -> list[dict[str, Any]]:
        start = self.index
        while self.index < len(self.events) and self.events[self.index]["event_time"] < until_ms:
            self.index += 1
        return self.events[start : self.index]


def script_case(
    name: str,
    description: str,
    build: Callable[[str], op.Script],
    polled: dict | None = None,
    expected: Callable[[Source], set[tuple[str, str]]] | None = None,
) -> Case:
    """A scripted operation, benign unless ``expected`` (its ground truth: what must fire); ``polled``: rendered as
    a collector's polls (``Script.polls`` keywords)."""

    def source(start_ms: int, horizon_ms: int) -> Source:
        script = build(name)
        script.until_ms = max(script.until_ms, horizon_ms)  # its members stay to the end of the run
        events = script.events() if polled is None else script.polls(**polled)
        return ScriptSource(events, start_ms, name)

    if expected is not None:
        return Case(name, False, description, source, expected)
    return Case(name, True, description, source)


class FleetSource:
    """A named simulator scenario (``streaming.app.simulation.fleet``) in namespace ``ns``; ``sends`` off stops its
    producers."""

    def __init__(self, scenario: str, start_ms: int, ns: str, consume_rates: dict[str, float] | None = None) -> None:
        built = build_scenario(scenario, namespace=ns)
        built.consume_rates.update({_rename(g, ns): r for g, r in (consume_rates or {}).items()})
        self.simulation = Simulation(built, start_ms, assignment_reports=built.reports)
        self.sending = True

    def events_until(self, until_ms: int) -> list[dict[str, Any]]:
        self.simulation.sends_per_tick = None if self.sending else 0
        return self.simulation.events_until(until_ms)


def fleet_truth(source: Source, progress: bool = True) -> set[tuple[str, str]]:
    """What the scenario's ground truth says must alert: its anomaly episodes, avoided brokers, producers with no
    broker available (a fleet-wide alert, without labels: the job's), and (``progress``) the consume progress facts
    at its last sample (confirmed orphans, stuck holders, hidden consumers, double holders, slow queues; a group
    offline with a backlog is an anomaly episode of the scenario's)."""
    assert isinstance(source, FleetSource)
    scenario = source.simulation.scenario
    out: set[tuple[str, str]] = set()
    for who, kind in scenario.expected:
        if kind == AVOIDED:
            out.add((alerts.PREFIX + "BrokerAvoidedByMostProducers", who))
        elif kind == ALL_UNAVAILABLE:
            out.add((alerts.PREFIX + "ProducerAllBrokersUnavailable", JOB))
        else:
            name = CATALOGUE[AnomalyKind(kind)].alert_name
            if name is not None:
                out.add((name, who))
    if not progress:
        return out
    facts = source.simulation.progress.facts()
    # orphans of a group with no member, or with members subscribing different topics, are that anomaly's
    inconsistent = {g for g, kind in scenario.expected if kind == AnomalyKind.INCONSISTENT_SUBSCRIPTION}
    out |= {
        (alerts.PROGRESS_ALERTS[QueueState.ORPHAN_CONFIRMED].name, g)
        for g, _ in facts.orphans
        if g not in facts.offline and g not in inconsistent
    }
    out |= {(alerts.PREFIX + "ProgressStuckHolder", g) for g, _ in facts.stuck}
    for state, found in (
        (QueueState.HIDDEN_CONSUMER, facts.hidden),
        (QueueState.DOUBLE_OWNED, facts.double),
        (QueueState.SLOW, facts.slow),
        (QueueState.REWIND, facts.rewound),  # shown while the window still holds a sample before the reset
    ):
        out |= {(alerts.PROGRESS_ALERTS[state].name, g) for g, _ in found}
    return out


def fleet_case(name: str, scenario: str, description: str, **knobs: Any) -> Case:
    return Case(
        name, False, description, lambda start_ms, _horizon: FleetSource(scenario, start_ms, name, **knobs), fleet_truth
    )


COLLECTOR_RESTART = {"outages": op.Outages(collector=(300_000, 345_000))}  # no poll for 45 s
# A broker the collector cannot reach for 15 minutes: its polled views stale far beyond BrokerViewStale's `for`.
UNREACHABLE = {"outages": op.Outages(brokers={"broker-a": (300_000, 1_200_000)})}


def suite(ci: bool = False) -> tuple[Case, ...]:
    """The benign operations and the incidents; ``ci``: the few the CI subset plays beside the e2e's scenario."""
    # The CI subset starts its operations early (at 30 and 60 s of event time): the e2e's fleet must play them
    # within its budget; the suite's start after two minutes of steady heartbeats.
    start_ms = 30_000 if ci else 120_000
    outage = (60_000, 120_000) if ci else (300_000, 360_000)
    benign = [
        script_case(
            "rr5", "rolling restart of 5 members, one every 30 s", lambda g: op.rolling_restart(5, g, start_ms)
        ),
        script_case(
            "brokerrestart",
            "broker-a restarts (60 s without answers, then members reappear as they heartbeat), polled views",
            lambda g: op.steady_group(4, g),
            {"outages": op.Outages(brokers={"broker-a": outage})},
        ),
    ]
    if not ci:
        benign += [
            script_case("rr20", "rolling restart of 20 members, one every 30 s", lambda g: op.rolling_restart(20, g)),
            script_case("rr50", "rolling restart of 50 members, one every 30 s", lambda g: op.rolling_restart(50, g)),
            script_case("scaleout", "scale-out 4 -> 12, one member every 5 s", lambda g: op.scale(4, 12, g)),
            script_case("scalein", "scale-in 12 -> 4, one member every 5 s", lambda g: op.scale(12, 4, g)),
            script_case(
                "collectorrestart",
                "the collector restarts: no poll of either broker for 45 s",
                lambda g: op.steady_group(4, g),
                COLLECTOR_RESTART,
            ),
            script_case(
                "subrollout",
                "a new subscription (one topic more) rolled out member by member, 5 members, one every 30 s",
                lambda g: op.subscription_rollout(5, g),
            ),
            script_case(
                "expansion",
                "the topic's queues expanded 8 -> 16 on broker-a, broker-b a minute later",
                lambda g: op.queue_expansion(4, g),
            ),
        ]
    incidents = [
        fleet_case("dup", "duplicate-ids", "two containers present 172.17.0.1@1"),
        fleet_case("storm", "rebalance-storm", "short-lived members every 20 s, one member restarting every 40 s"),
    ]
    if not ci:
        incidents += [
            fleet_case("subs", "inconsistent-subscriptions", "one member does not subscribe payments"),
            fleet_case("split", "diverging-views", "broker-b never receives one member's heartbeats"),
            fleet_case("slowbroker", "slow-broker", "broker-b answers in 0.6-3 s"),
            fleet_case(
                "progress",
                "consume-progress",
                "a stuck holder, a group whose members all die while producers write, an idle orderly group",
            ),
            fleet_case("allbrokers", "all-brokers-down", "every broker fails every send after 60 s"),
            fleet_case(
                "mismatch",
                "strategy-mismatch",
                "one of four members allocates with AVG_BY_CIRCLE; running info reported, a backlog",
            ),
            fleet_case(
                "progfaults",
                "progress-faults",
                "a group consuming at half the write rate; a member whose running info lists none of its queues; "
                "a member's offsets reset 3,000 messages back",
            ),
            script_case(
                "viewstale",
                "the collector cannot reach broker-a for 15 minutes (polled views)",
                lambda g: op.steady_group(4, g),
                UNREACHABLE,
                lambda _s: {(alerts.PREFIX + "BrokerViewStale", "viewstale-broker-a")},
            ),
        ]
    return tuple(benign + incidents)


# -- the rules as the harness's Prometheus evaluates them ------------------------------------------------------
def seconds(duration: str) -> float:
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    return sum(float(n) * units[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", duration))


def compressed_rules(path: Path, speed: float) -> dict[str, float]:
    """The real rule file (at ``speed`` 1, as generated) with the event-time alerts' ``for`` divided by ``speed``;
    returns each alert's ``for`` (seconds, as evaluated)."""
    rules = alerts.rule_file()
    fors: dict[str, float] = {}
    for group in rules["groups"]:  # type: ignore[attr-defined]
        for rule in group["rules"]:
            wall = seconds(rule["for"])
            if rule["alert"] not in WALL_CLOCK_ALERTS and speed != 1:
                wall /= speed
                rule["for"] = f"{round(wall * 1000)}ms"
            fors[rule["alert"]] = wall
    path.write_text(to_yaml(rules) + "\n")
    return fors


# -- what fired -----------------------------------------------------------------------------------------------
def owner(labels: dict[str, str], cases: Iterable[Case]) -> str:
    """The case an alert is about: the namespace of its group, topic or broker label; else the job itself."""
    for key in ("consumer_group", "broker", "topic"):
        value = labels.get(key)
        if value is not None:
            return next((c.name for c in cases if value == c.name or value.startswith(c.name + "-")), value)
    return JOB


def who(labels: dict[str, str]) -> str:
    return labels.get("consumer_group") or labels.get("broker") or labels.get("query") or JOB


@dataclass
class Firing:
    """One alert's label set: when it went pending (Prometheus' activeAt) and was first seen firing, how often."""

    alert: str
    labels: dict[str, str]
    active_at: float
    fired_at: float | None = None
    episodes: int = 0


class AlertLog:
    """Every alert Prometheus reported while polled (``poll``), by alert name and labels."""

    def __init__(self) -> None:
        self.seen: dict[tuple[str, tuple[tuple[str, str], ...]], Firing] = {}
        self.firing_now: set[tuple[str, tuple[tuple[str, str], ...]]] = set()

    def poll(self, reported: list[dict[str, Any]]) -> None:
        now = time.time()
        firing: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
        for alert in reported:
            labels = {k: v for k, v in alert["labels"].items() if k not in ("severity", "alertname")}
            key = (alert["labels"]["alertname"], tuple(sorted(labels.items())))
            active_at = _epoch(alert["activeAt"])
            entry = self.seen.setdefault(key, Firing(key[0], labels, active_at))
            if alert["state"] == "firing":
                firing.add(key)
                if key not in self.firing_now:
                    entry.episodes += 1
                if entry.fired_at is None:
                    entry.active_at, entry.fired_at = active_at, now
        self.firing_now = firing

    def fired(self) -> list[Firing]:
        return [f for f in self.seen.values() if f.fired_at is not None]


def _epoch(stamp: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(re.sub(r"(\.\d{6})\d*", r"\1", stamp.replace("Z", "+00:00"))).timestamp()


def score(
    cases: tuple[Case, ...], expected: set[tuple[str, str]], log: AlertLog, fors: dict[str, float], eval_s: float
) -> dict[str, Any]:
    """Per alert: true and false firings, precision, recall, firing episodes, time to fire against its bound.

    A firing is true when its (alert, group or broker) is an incident's expectation; every other firing (a
    benign case's, a job-level alert's, an incident's alert it does not expect) is false."""
    fired = log.fired()
    names = sorted({a for a, _ in expected} | {f.alert for f in fired})
    per_alert: dict[str, Any] = {}
    for name in names:
        mine = [f for f in fired if f.alert == name]
        hits = {(name, who(f.labels)) for f in mine} & expected
        false = sorted({(owner(f.labels, cases), who(f.labels)) for f in mine if (name, who(f.labels)) not in expected})
        wanted = {e for e in expected if e[0] == name}
        to_fire = [f.fired_at - f.active_at for f in mine if f.fired_at is not None]
        bound = fors.get(name, 0.0) + 2 * eval_s
        per_alert[name] = {
            "true": sorted(w for _, w in hits),
            "false": [f"{case}: {w}" for case, w in false],
            "missed": sorted(w for _, w in wanted - hits),
            "precision": round(len(hits) / (len(hits) + len(false)), 3) if hits or false else None,
            "recall": round(len(hits) / len(wanted), 3) if wanted else None,
            "firing_episodes": max((f.episodes for f in mine), default=0),
            "for_s": fors.get(name),
            "time_to_fire_s": round(max(to_fire), 1) if to_fire else None,
            "bound_s": round(bound, 1),
            "within_bound": all(t <= bound for t in to_fire) if to_fire else None,
        }
    true = sum(len(a["true"]) for a in per_alert.values())
    false = sum(len(a["false"]) for a in per_alert.values())
    # the incidents' firings, each (alert, label set) seen firing in how many episodes
    episodes = [f.episodes for f in fired if (f.alert, who(f.labels)) in expected]
    return {
        "alerts": per_alert,
        "precision": round(true / (true + false), 3) if true + false else None,
        "recall": round(true / len(expected), 3) if expected else None,
        "exactly_once": bool(episodes) and set(episodes) == {1},
        "incident_firings_with_more_than_one_episode": sum(1 for n in episodes if n > 1),
        "false_by_case": {
            c.name: sorted(n for n, a in per_alert.items() for f in a["false"] if f.startswith(c.name + ":"))
            for c in cases
        }
        | {JOB: sorted(n for n, a in per_alert.items() for f in a["false"] if f.startswith(JOB + ":"))},
    }


# -- the run --------------------------------------------------------------------------------------------------
class Harness:
    """The job, Prometheus and every case's source, paced like the demo: event time runs ``speed`` times wall
    time but never more than ``lead_ms`` ahead of what the consumer query processed."""

    def __init__(
        self,
        job_factory: Callable[[], Any],
        prometheus: Any,
        cases: tuple[Case, ...],
        speed: float,
        lead_ms: int,
        emit: Callable[[list[dict[str, Any]]], None],
        horizon_ms: int,
    ) -> None:
        self.horizon_ms = horizon_ms
        self.job_factory, self.prometheus, self.cases, self.speed, self.lead_ms = (
            job_factory,
            prometheus,
            cases,
            speed,
            lead_ms,
        )
        self.emit = emit
        self.job = job_factory()
        self.sources: dict[str, Source] = {}
        self.log = AlertLog()
        self.start_ms = self.simulated_ms = 0
        self.last_tick = 0.0

    def tick(self) -> None:
        from streaming.app.demo import processed_ms

        now = time.monotonic()
        if not self.sources:
            self.start_ms = self.simulated_ms = int(time.time() * 1000)
            self.last_tick = now
            self.sources = {c.name: c.source(self.start_ms, self.horizon_ms) for c in self.cases}
        advance = int((now - self.last_tick) * self.speed * 1000)
        paced = max(processed_ms(self.job, ("consumer",)), self.start_ms) + self.lead_ms
        self.simulated_ms = max(self.simulated_ms, min(self.simulated_ms + advance, paced))
        self.last_tick = now
        for source in self.sources.values():
            self.emit(source.events_until(self.simulated_ms))
        self.job.refresh_job_metrics()
        self.job.raise_if_failed()
        self.log.poll(self.prometheus.alerts())

    def stop_sending(self) -> None:
        for source in self.sources.values():
            if isinstance(source, FleetSource):
                source.sending = False

    def restart_job(self) -> float:
        """Stop the job and start it again on its checkpoints; returns the seconds it took."""
        began = time.monotonic()
        self.job.stop()
        self.job = self.job_factory()
        self.job.start()
        return time.monotonic() - began

    def expected(self) -> set[tuple[str, str]]:
        return {e for c in self.cases for e in c.expected(self.sources[c.name])}


def _job_env(bootstrap: str, root: Path, metrics_port: int) -> tuple[dict[str, str], dict[str, str]]:
    from connectors.kafka_topics import create_topics
    from streaming.contract.events import DEFAULT_TOPICS, TOPIC_OPTIONS

    topics = {t: f"alertq.{name}" for t, name in DEFAULT_TOPICS.items()}
    create_topics(bootstrap, topics.values())
    env = {
        "RRM__KAFKA__BOOTSTRAP_SERVERS": bootstrap,
        "RRM__PATHS__DELTA_ROOT": str(root / "delta"),
        "RRM__PATHS__CHECKPOINT_ROOT": str(root / "checkpoints"),
        "RRM__METRICS__ENABLED": "true",
        "RRM__METRICS__PORT": str(metrics_port),
        "RRM__SPARK__TRIGGER_INTERVAL": '"2 seconds"',
        "RRM__SPARK__SHUFFLE_PARTITIONS": "2",
        "RRM__MEMBERSHIP__SHARDS": "2",
        "RRM__INGEST__WATERMARK_DELAY": '"10 seconds"',
        "RRM__INGEST__MAX_FUTURE_SKEW_MS": "86400000",  # event time runs ahead of the Kafka timestamps
        **{f"RRM__KAFKA__TOPICS__{t.upper()}": name for t, name in topics.items() if TOPIC_OPTIONS[t] == t},
    }
    return env, topics


def run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    from connectors.emitter import EventEmitter
    from connectors.processes import free_port
    from localenv.kafka_broker import LocalKafkaBroker
    from localenv.prometheus_server import LocalPrometheus, ScrapeTarget
    from streaming.config import load_config
    from streaming.job.runner import MonitorJob

    broker = LocalKafkaBroker(root / "kafka")
    bootstrap = broker.start().bootstrap_servers
    cases = suite()
    metrics_port = free_port()
    env, topics = _job_env(bootstrap, root, metrics_port)
    config = load_config(None, env=env)
    fors = compressed_rules(root / "alerts-compressed.yml", args.speed)
    prometheus = LocalPrometheus(
        root / "prometheus",
        [ScrapeTarget(alerts.MONITOR_JOB, f"127.0.0.1:{metrics_port}")],
        [root / "alerts-compressed.yml"],
        scrape_interval=f"{args.eval_s}s",
    )
    emitter = EventEmitter(bootstrap, topics)

    def emit(events: list[dict[str, Any]]) -> None:
        emitter.emit_all(events)
        emitter.flush()

    horizon_ms = int(
        (args.sending_s + args.restart_after_s + args.idle_s + 600) * args.speed * 1000
    )  # beyond the run, restart included
    harness = Harness(lambda: MonitorJob(config), prometheus, cases, args.speed, args.lead_s * 1000, emit, horizon_ms)
    began = time.monotonic()
    phases: dict[str, float] = {}
    try:
        harness.job.start()
        prometheus.start()
        _play(harness, args.sending_s)
        harness.stop_sending()
        _play(harness, args.restart_after_s)
        phases["job_restart_s"] = round(harness.restart_job(), 1)
        _play(harness, args.idle_s)
        phases["event_time_s"] = round((harness.simulated_ms - harness.start_ms) / 1000)
        played_s = time.time() - harness.start_ms / 1000
        phases["achieved_speed"] = round(phases["event_time_s"] / played_s, 2)
    finally:
        emitter.close()
        prometheus.stop()
        harness.job.stop()
        broker.stop()
    expected = harness.expected()
    result = score(cases, expected, harness.log, fors, args.eval_s)
    result |= {
        "cases": [{"name": c.name, "benign": c.benign, "description": c.description} for c in cases],
        "expected": sorted(f"{a}: {w}" for a, w in expected),
        "fired": [
            {
                "alert": f.alert,
                "labels": f.labels,
                "episodes": f.episodes,
                "time_to_fire_s": round(f.fired_at - f.active_at, 1),
            }
            for f in sorted(harness.log.fired(), key=lambda f: (f.alert, sorted(f.labels.items())))
            if f.fired_at is not None
        ],
        "run": {"wall_s": round(time.monotonic() - began), **phases},
    }
    return result


def _play(harness: Harness, seconds_: float) -> None:
    until = time.monotonic() + seconds_
    while time.monotonic() < until:
        harness.tick()
        time.sleep(0.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--speed", type=float, default=1.0, help="event-time seconds per wall second")
    parser.add_argument("--lead-s", type=int, default=90, help="event time at most this far ahead of processing")
    parser.add_argument("--eval-s", type=int, default=5, help="Prometheus' scrape and evaluation interval")
    parser.add_argument("--sending-s", type=float, default=300, help="wall seconds the producers send first")
    parser.add_argument("--restart-after-s", type=float, default=900, help="then idle this long, then a job restart")
    parser.add_argument("--idle-s", type=float, default=1500, help="wall seconds played after the restart")
    parser.add_argument("--work", help="keep Kafka, tables and Prometheus here (default: a temporary directory)")
    parser.add_argument("--results", default=str(RESULTS))
    args = parser.parse_args()
    if args.work:
        Path(args.work).mkdir(parents=True, exist_ok=True)
        result = run(args, Path(args.work))
    else:
        with tempfile.TemporaryDirectory(prefix="alert-quality-") as scratch:
            result = run(args, Path(scratch))
    document = {
        "command": " ".join(["python -m bench.bench_alert_quality", *sys.argv[1:]]),
        "measured_at": measured_at(),
        "machine": machine(),
        "load_average_at_end": os.getloadavg(),
        "speed": args.speed,
        "eval_interval_s": args.eval_s,
        **result,
    }
    write_results(Path(args.results), document)
    for name, a in document["alerts"].items():
        print(
            f"{name:48} precision {a['precision']}  recall {a['recall']}  fire {a['time_to_fire_s']} s "
            f"(bound {a['bound_s']})  false {a['false']}  missed {a['missed']}"
        )
    print(
        f"suite: precision {document['precision']} recall {document['recall']} exactly once "
        f"{document['exactly_once']}; run {document['run']}"
    )


if __name__ == "__main__":
    main()
