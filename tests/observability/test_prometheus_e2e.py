"""A real Prometheus scrapes the running job while a simulated incident plays: alerts fire, dashboards have data.

Kafka (the session broker), the real job (Spark, Delta, its metrics endpoint) and a real Prometheus from the
Debian package on 127.0.0.1, scraping the driver every two seconds and evaluating the project's alert rules. The
``mixed`` scenario plays (duplicate client IDs, inconsistent subscriptions, diverging views, a rebalance storm,
a slow broker, consume progress) plus a trickle of records the contract rejects, and beside it, each in its own
namespace, the alert-quality harness's CI subset of benign operations (``bench/bench_alert_quality.py``: a
5-member rolling restart, a broker restart). Everything is checked through Prometheus' HTTP API only: the
incidents' alerts fire (recall 1.0), the benign operations' never (precision 1.0; what they raise by design for
less than the real ``for`` is the bench's, see ``TRANSIENT``), the monitor's own alerts stay silent, and every
PromQL query of every dashboard panel -- with its variables resolved the way Grafana resolves them, and
``$__rate_interval`` = 1m -- returns data.

The rules are a copy of ``dashboards/prometheus/alerts.yml`` with every ``for:`` shortened to a few seconds,
for this test only: the simulated fleet runs up to 20 times faster than wall time, and the ``for:`` durations
themselves are proven by ``promtool test rules`` (``test_alert_rules.py``). Nothing here asserts a duration.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from bench.bench_alert_quality import AlertLog, Case, FleetSource, fleet_truth, owner, score, suite, who
from connectors import job_health
from connectors.emitter import EventEmitter
from connectors.job_health import JobAlert
from connectors.processes import free_port
from dashboards import alerts, panels
from dashboards.generate import to_yaml
from localenv.prometheus_server import LocalPrometheus, ScrapeTarget
from streaming.app.demo import processed_ms
from streaming.job.runner import MonitorJob
from tests.support.job import job_config, read

# The fleet runs SPEED simulated seconds per wall second, but never more than LEAD_MS ahead of what the consumer
# query has processed (as the demo paces it): a slow machine slows the fleet instead of growing the batches. So a
# micro-batch covers at most LEAD_MS (and the watermark delay) of simulated time, far less than the storm's
# (70-455 s) and the flapping member's (70-660 s) episodes stay open: each is open in several batches' metrics.
SPEED = 20.0
LEAD_MS = 90_000
OVERALL_TIMEOUT_S = 480  # generous: Spark's first batches on a busy 2-core machine are slow
MIXED = Case(
    "mixed",
    False,
    "every consumer-side scenario and a slow broker",
    lambda t, _h: FleetSource("mixed", t, "mixed"),
    fleet_truth,
)
BENIGN = tuple(c for c in suite(ci=True) if c.benign)
BENIGN_NAMES = {c.name for c in BENIGN}
# Event time the benign operations need played (the rolling restart ends at 190 s, the broker is back at 120 s
# and lists every member by 150 s), and a minute more (3 s of ``for`` at SPEED), before none of their alerts may
# fire.
BENIGN_PLAYED_MS = 250_000
# What a benign operation raises for a moment by design, shorter than the alert's real ``for`` (the bench, with the
# real ``for``, judges whether they page): a broker that restarts is a stale view for up to 40 s and lists fewer
# members than the other broker until each has heartbeat again; a member replaced on both brokers 5 ms apart can be
# cut between two micro-batches. With every ``for`` at 3 s (60 s of fleet time) they would fire here.
TRANSIENT = {
    ("brokerrestart", f"{alerts.PREFIX}BrokerViewStale"),
    ("brokerrestart", f"{alerts.PREFIX}DivergingBrokerViews"),
    ("rr5", f"{alerts.PREFIX}DivergingBrokerViews"),
}
# Not waited for here: the group whose members all die at 120 s needs 400 s and more of event time (the broker's
# expiry, a progress sample, the backlog); the bench scores it.
OFFLINE = f"{alerts.PREFIX}OfflineGroupBacklog"
# (alert, the group / broker / query it names): each injected fault, alerted on the group or broker it broke
EXPECTED_FIRING = {
    (f"{alerts.PREFIX}{name}", who)
    for name, who in (
        ("OrphanedQueues", "mixed-ledger-containers"),
        ("DoubleOwnedQueues", "mixed-ledger-containers"),
        ("DuplicateClientIds", "mixed-ledger-containers"),
        ("InconsistentSubscriptions", "mixed-mailer-mixed-subs"),
        ("DivergingBrokerViews", "mixed-risk-split-view"),
        ("RebalanceStorm", "mixed-cache-flapping"),
        ("FlappingMembers", "mixed-cache-flapping"),
        ("BrokerAvoidedByMostProducers", "mixed-broker-b"),
        ("DeadLettersRising", "consumer"),
    )
}
# Never fires here: nothing reaches the label cap.
NEVER_FIRING = {f"{alerts.PREFIX}LabelCapReached"}
# Not firing at the end, while the job runs and is scraped. (Checked at the end only: with ``for:`` cut to
# seconds, one scrape timing out or one slow batch on a busy machine would fire them for a moment; their
# real durations are proven by promtool.)
NOT_FIRING_AT_THE_END = {f"{alerts.PREFIX}Down", f"{alerts.PREFIX}Stale"}


def shortened_rules(path: Path) -> Path:
    rules = alerts.rule_file()
    for group in rules["groups"]:
        for rule in group["rules"]:
            rule["for"] = "3s"  # test-only: see the module docstring
    path.write_text(to_yaml(rules) + "\n")
    return path


class Incident:
    """The job, the simulator feeding it, and Prometheus scraping it."""

    def __init__(self, kafka_broker, root: Path) -> None:
        self.metrics_port = free_port()
        self.config, self.topics = job_config(
            kafka_broker.bootstrap_servers,
            root,
            "obs",
            RRM__METRICS__ENABLED="true",
            RRM__METRICS__PORT=str(self.metrics_port),
            RRM__SPARK__TRIGGER_INTERVAL='"2 seconds"',
            RRM__INGEST__WATERMARK_DELAY='"10 seconds"',
            # the simulated fleet's event time runs ahead of the Kafka timestamps: do not reject it as future
            RRM__INGEST__MAX_FUTURE_SKEW_MS="86400000",
        )
        self.bootstrap = kafka_broker.bootstrap_servers
        self.emitter = EventEmitter(self.bootstrap, self.topics)
        self.rejected = EventEmitter(self.bootstrap, self.topics, validate=False)  # what the contract rejects
        self.start_ms = self.simulated_ms = 0
        self.last_tick = 0.0
        self.sources: dict = {}  # the fleet and the benign operations start at the first tick, once everything runs
        self.log = AlertLog()  # every alert Prometheus reported at a tick
        self.job = MonitorJob(self.config)
        self.prometheus = LocalPrometheus(
            root / "prometheus",
            [ScrapeTarget(alerts.MONITOR_JOB, f"127.0.0.1:{self.metrics_port}")],
            [shortened_rules(root / "alerts-short-for.yml")],
            scrape_interval="2s",
        )

    def tick(self) -> None:
        """Play the fleet on (paced: see ``SPEED``), a few rejected records, and refresh the job's metrics."""
        now = time.monotonic()
        if not self.sources:
            self.start_ms = self.simulated_ms = int(time.time() * 1000)
            self.last_tick = now
            horizon_ms = int(OVERALL_TIMEOUT_S * 2 * SPEED * 1000)  # the benign groups' members stay to the end
            self.sources = {c.name: c.source(self.start_ms, horizon_ms) for c in (MIXED, *BENIGN)}
        advance = int((now - self.last_tick) * SPEED * 1000)
        paced = max(processed_ms(self.job, ("consumer",)), self.start_ms) + LEAD_MS
        self.simulated_ms = max(self.simulated_ms, min(self.simulated_ms + advance, paced))
        self.last_tick = now
        for source in self.sources.values():
            self.emitter.emit_all(source.events_until(self.simulated_ms))
        self.emitter.flush()
        for _ in range(5):
            self.rejected.emit({"type": "consumer_channel", "schema_version": 1})  # no group, client, broker...
        self.rejected.flush()
        self.job.refresh_job_metrics()
        self.job.raise_if_failed()
        self.log.poll(self.prometheus.alerts())

    def stop(self) -> None:
        self.emitter.close()
        self.rejected.close()
        self.prometheus.stop()
        self.job.stop()  # the session is the test session's (``spark`` fixture): the job leaves it running


@pytest.fixture(scope="module")
def incident(kafka_broker, spark, tmp_path_factory):
    running = Incident(kafka_broker, tmp_path_factory.mktemp("observability-e2e"))
    try:
        running.job.start()
        running.prometheus.start()
        yield running
    finally:
        running.stop()


def wait_for(incident: Incident, what, done) -> None:
    """Tick until ``done()``; ``what()`` says what is still missing when it gives up."""
    deadline = time.monotonic() + OVERALL_TIMEOUT_S
    while True:
        incident.tick()
        if done():
            return
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for {what()}")
        time.sleep(1.0)


def test_the_incident_fires_the_expected_alerts_and_not_the_monitors_own(incident):
    cases = (MIXED, *BENIGN)

    def truth() -> set[tuple[str, str]]:
        """What must fire: the incidents' anomaly episodes and avoided broker, and the rejected trickle's alert.
        (The simulator's consume-progress facts are the bench's to score: some are transient, a crashed member's
        queues confirmed orphaned until the broker expires it, and with every ``for`` at 3 s those fire too.)"""
        incidents = {e for e in fleet_truth(incident.sources["mixed"], progress=False) if e[0] != OFFLINE}
        return incidents | {(f"{alerts.PREFIX}DeadLettersRising", "consumer")}

    def fired() -> set[tuple[str, str]]:
        return {(f.alert, who(f.labels)) for f in incident.log.fired()}

    def all_fired() -> bool:
        played = incident.simulated_ms - incident.start_ms >= BENIGN_PLAYED_MS
        return played and EXPECTED_FIRING | truth() <= fired()

    def missing() -> str:
        probes = ("rmqmon_dead_letters_total", "rmqmon_input_rows_total", "rmqmon_broker_producers_avoiding_ratio")
        found = {p: [(r["metric"], r["value"][1]) for r in incident.prometheus.query(p)] for p in probes}
        played_s = (incident.simulated_ms - incident.start_ms) / 1000
        return f"alerts {(EXPECTED_FIRING | truth()) - fired()} after {played_s:.0f} s (fired: {fired()}; {found})"

    wait_for(incident, missing, all_fired)
    assert [t["health"] for t in incident.prometheus.targets_health()] == ["up"]
    firing_now = {a["labels"]["alertname"] for a in incident.prometheus.alerts() if a["state"] == "firing"}
    assert not NOT_FIRING_AT_THE_END & firing_now, firing_now
    fired_or_pending = {name for name, _ in incident.log.seen}
    assert not NEVER_FIRING & fired_or_pending, incident.log.seen
    # The harness's CI subset, scored as the bench scores the whole suite: the incidents' alerts all fired (recall),
    # and no alert naming a benign operation's group, topic or broker did (precision; the job's own alerts are
    # judged above, the incidents' other alerts are the bench's).
    assert EXPECTED_FIRING == truth()
    expected = truth() - {(f"{alerts.PREFIX}DeadLettersRising", "consumer")}
    judged = AlertLog()
    judged.seen = {
        key: f
        for key, f in incident.log.seen.items()
        if (owner(f.labels, cases) in BENIGN_NAMES and (owner(f.labels, cases), f.alert) not in TRANSIENT)
        or (f.alert, who(f.labels)) in expected
    }
    result = score(cases, expected, judged, {}, 2.0)
    assert {c: result["false_by_case"][c] for c in BENIGN_NAMES} == {c: [] for c in BENIGN_NAMES}, result["alerts"]
    assert (result["precision"], result["recall"]) == (1.0, 1.0), result["alerts"]


def test_the_health_command_finds_what_prometheus_fires_on_the_jobs_own_health(incident, spark):
    """``rebalance-monitor health`` reads the running job's page over a window in which only rejected records
    arrive: it names the consumer query's dead letters (reasons as the dead_letters table has them), as Prometheus
    fires DeadLettersRising for it, and nothing else of the job's own health, as Prometheus fires nothing else."""
    url = f"http://127.0.0.1:{incident.metrics_port}/metrics"
    incident.job.refresh_job_metrics()  # what the job's own loop does between batches (``tick``)
    first = job_health.scrape(url)
    for _ in range(4):  # the fleet paused: a trickle of rejected records only, read by the 2 s trigger
        for _ in range(5):
            incident.rejected.emit({"type": "consumer_channel", "schema_version": 1})
        incident.rejected.flush()
        time.sleep(2.0)
        incident.job.refresh_job_metrics()
    time.sleep(3.0)
    incident.job.refresh_job_metrics()
    health = job_health.judge(job_health.scrape(url), first)
    firing = {
        (a["labels"]["alertname"], a["labels"].get("query", ""))
        for a in incident.prometheus.alerts()
        if a["state"] == "firing" and a["labels"]["alertname"] in set(JobAlert) - {JobAlert.VIEW_STALE}
    }
    found = {(f.alert.value, f.subject) for f in health.findings if f.alert != JobAlert.VIEW_STALE}
    assert found == firing == {(JobAlert.DEAD_LETTERS.value, "consumer")}, (health, firing)
    (consumer,) = [q for q in health.queries if q.query == "consumer"]
    recorded = {r["reason"] for r in read(spark, incident.config, "dead_letters")}
    assert consumer.dead_letters and set(consumer.dead_letters) <= recorded, (consumer, recorded)


def resolve_variables(incident: Incident, dashboard: dict) -> dict[str, str]:
    """Each query variable's values, as Grafana would list them, joined into the regex a multi-select sends."""
    values: dict[str, str] = {}
    for variable in dashboard["templating"]["list"]:
        if variable["type"] != "query":
            continue
        selector, label = re.fullmatch(r"label_values\((.+), (\w+)\)", variable["query"]["query"]).groups()
        selector = substitute(selector, values)
        found = sorted({r["metric"][label] for r in incident.prometheus.query(f"group by ({label}) ({selector})")})
        assert found, f"{dashboard['uid']}: variable {variable['name']} has no values ({selector})"
        values[variable["name"]] = "|".join(_regex_literal(v) for v in found)
    return values


def _regex_literal(value: str) -> str:
    """``value`` as a regex inside a PromQL string (a regex backslash is written ``\\\\`` there)."""
    return "".join("\\\\" + c if c in ".+*?()[]{}|^$\\" else c for c in value)


def substitute(expr: str, values: dict[str, str]) -> str:
    expr = expr.replace("$__rate_interval", "1m")
    for name in sorted(values, key=len, reverse=True):
        expr = expr.replace(f"${name}", values[name])
    return expr


def test_every_dashboard_query_returns_data(incident):
    queries = [
        (build()["uid"], panel["title"], target["expr"])
        for build in panels.DASHBOARDS.values()
        for panel in build()["panels"]
        for target in panel["targets"]
    ]
    empty: list[str] = []

    def all_have_data() -> bool:
        empty.clear()
        for name, build in panels.DASHBOARDS.items():
            dashboard = build()
            try:
                values = resolve_variables(incident, dashboard)
            except AssertionError as missing:
                empty.append(str(missing))
                continue
            for panel in dashboard["panels"]:
                for target in panel["targets"]:
                    expr = substitute(target["expr"], values)
                    if not incident.prometheus.query(expr):
                        empty.append(f"{name} / {panel['title']}: {expr}")
        return not empty

    wait_for(incident, lambda: f"data for {empty}", all_have_data)
    assert len(queries) > 30
