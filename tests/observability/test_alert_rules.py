"""The alert rules: promtool checks and unit-tests them; every alert is complete, linked and tested both ways.

Consume progress: an alert for exactly the queue states whose severity alerts, each silent on the benign groups
(idle, an OK group whose lag drains, NOT_OWNED_MODEL, unjudged queues, a rebalance's rewind).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from connectors.metrics import BY_NAME
from dashboards import alerts
from dashboards.generate import files, to_yaml
from localenv.prometheus_server import PROMTOOL
from streaming.domain.anomaly_catalogue import KEEP_FIRING_FOR
from streaming.domain.progress.verdict import QueueState, severity_of
from streaming.domain.vocabulary import AnomalyKind, Severity

from .promql_names import families

ROOT = Path(__file__).parents[2]
RULES_DIR = ROOT / "dashboards" / "prometheus"
RUNBOOK = ROOT / "docs" / "runbook.md"


def _promtool(*args: str, cwd: Path = RULES_DIR) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL.exists(), f"{PROMTOOL} missing: run scripts/install_observability_tools.sh"
    return subprocess.run([str(PROMTOOL), *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_promtool_check_rules_passes():
    result = _promtool("check", "rules", "alerts.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(alerts.ALERTS)} rules found" in result.stdout


def test_promtool_test_rules_passes():
    result = _promtool("test", "rules", "alerts_test.yml")
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_tests_catch_a_wrong_expectation(tmp_path):
    """Control: the same tests with one firing case expecting nothing fail, so the cases really are checked."""
    shutil.copy(RULES_DIR / "alerts.yml", tmp_path / "alerts.yml")
    suite = alerts.test_file()
    firing = next(t for t in suite["tests"] if t["alert_rule_test"][0]["exp_alerts"])
    firing["alert_rule_test"][0]["exp_alerts"] = []
    suite["tests"] = [firing]
    (tmp_path / "alerts_test.yml").write_text(to_yaml(suite) + "\n")
    result = _promtool("test", "rules", "alerts_test.yml", cwd=tmp_path)
    assert result.returncode != 0, result.stdout


def test_runbook_urls_are_built_on_the_base_given():
    base = "https://git.example.org/team/monitor/-/blob/main/docs/runbook.md"
    rules = files(base)["prometheus/alerts.yml"]
    urls = re.findall(r"runbook_url: \"([^\"]+)\"", rules)
    assert len(urls) == len(alerts.ALERTS) and all(u.startswith(base + "#rocketmqmonitor") for u in urls)
    assert alerts.RUNBOOK_URL_BASE not in rules


def test_scripted_operations_feed_the_engines_series_and_a_rolling_restart_pages_nobody():
    """The rolling-restart cases carry the series the engine and the job's metric mapping export for the restart
    (members, generations, the deploy episode), not pinned zeroes; each group alert is checked silent at every
    minute of it, and the crash loops fire the storm and flapping alerts."""
    cases = alerts.scripted_cases()
    restart = [c for c in cases if c.title.startswith("rolling restart of 50 members")]
    assert {c.alert for c in restart} == {a.name for a in alerts.GROUP_ALERTS} and not any(c.fired for c in restart)
    series = restart[0].series
    deploy = next(v for k, v in series.items() if 'anomaly="ROLLING_DEPLOY"' in k)
    generations = next(v for k, v in series.items() if k.startswith("rmqmon_group_rebalances_total"))
    assert " 1x" in f" {deploy}" and generations.count(" ") > 20  # the deploy recorded, one generation per step
    assert len(restart[0].also_at) >= 30
    fired = {c.alert for c in cases if c.fired}
    incidents = (
        AnomalyKind.REBALANCE_STORM,
        AnomalyKind.FLAPPING_MEMBERS,
        AnomalyKind.INCONSISTENT_SUBSCRIPTION,
        AnomalyKind.OBSERVED_DOUBLE_HOLDING,
        AnomalyKind.OBSERVED_UNHELD_QUEUES,
    )
    assert fired == {alerts.NAME[k] for k in incidents}


def test_clients_reporting_stale_holdings_page_as_observed_and_not_as_predicted():
    """A client that reports an old route's share (one queue held twice, one by nobody, as the clients report it)
    fires the observed double-holding and unheld alerts on the engine's series, through a job restart, and never
    the allocation's orphaned or double-owned queue alerts."""
    cases = alerts.scripted_cases()
    stale = [c for c in cases if "stale holdings" in c.title]
    fired = {c.alert for c in stale if c.fired}
    observed = (AnomalyKind.OBSERVED_DOUBLE_HOLDING, AnomalyKind.OBSERVED_UNHELD_QUEUES)
    assert fired == {alerts.NAME[k] for k in observed}
    predicted = [
        c
        for c in stale
        if c.alert in {alerts.NAME[AnomalyKind.ORPHANED_QUEUES], alerts.NAME[AnomalyKind.DOUBLE_OWNED_QUEUES]}
    ]
    assert len(predicted) == 2 and not any(c.fired for c in predicted) and all(len(c.also_at) >= 10 for c in predicted)
    assert {c.alert for c in stale if "restarted for 90 s" in c.title} == {alerts.NAME[k] for k in observed}


def test_a_subscription_rollout_pages_nobody_and_an_inconsistent_subscription_pages_as_itself():
    """The rollout's series (the others' shares of the new topic go to nobody until its last member runs it) are
    silent for every group alert; a member that never subscribes fires InconsistentSubscriptions and never
    OrphanedQueues, on the engine's series."""
    cases = alerts.scripted_cases()
    rollout = [c for c in cases if c.title.startswith("subscription rolled out to 5 members")]
    assert {c.alert for c in rollout} == {a.name for a in alerts.GROUP_ALERTS} and not any(c.fired for c in rollout)
    # the rollout really leaves members not subscribing the new topic, and opens (then closes) the episode
    (episode,) = [v for k, v in rollout[0].series.items() if 'anomaly="INCONSISTENT_SUBSCRIPTION"' in k]
    (non_subscribing,) = [v for k, v in rollout[0].series.items() if "non_subscribing" in k and "payments" in k]
    assert " 1x" in episode and any(part[0] not in "0_" for part in non_subscribing.split())
    orphans = [c for c in cases if c.alert == alerts.NAME[AnomalyKind.ORPHANED_QUEUES] and "subscription" in c.title]
    assert orphans and not any(c.fired for c in orphans) and all(len(c.also_at) >= 10 for c in orphans)


def test_every_incident_fires_once_through_a_job_restart():
    """Every alert on what the job concluded has keep_firing_for; the restart cases feed the series a restart
    produces (a staleness marker, then none for 90 s) and expect the alert firing at every evaluation across it."""
    health = ("Stale", "ConsumerInputSilent", "QueryRestarting", "Down", "DeadLettersRising", "LabelCapReached")
    assert alerts.JOB_HEALTH == {alerts.PREFIX + n for n in health}
    assert all(a.keep_firing_for == KEEP_FIRING_FOR for a in alerts.ALERTS if a.name not in alerts.JOB_HEALTH)
    restarts = [c for c in (*alerts.CASES, *alerts.scripted_cases()) if "restarted for 90 s" in c.title]
    named = {alerts.NAME[AnomalyKind.ORPHANED_QUEUES], alerts.NAME[AnomalyKind.REBALANCE_STORM]}
    assert {c.alert for c in restarts} >= named
    for case in restarts:
        assert case.fired and len(case.also_at) >= 10, case.title
        assert any("stale _x5" in v for v in case.series.values()), case.title


def test_committed_rule_files_are_generated():
    generated = files()
    for name in ("prometheus/alerts.yml", "prometheus/alerts_test.yml", "prometheus/alertmanager.yml"):
        assert (ROOT / "dashboards" / name).read_text() == generated[name], (
            f"run python -m dashboards.generate ({name})"
        )


def _seconds(duration: str) -> int:
    value, unit = re.fullmatch(r"(\d+)([smh])", duration).groups()
    return int(value) * {"s": 1, "m": 60, "h": 3600}[unit]


def _anchors(markdown: str) -> set[str]:
    """GitHub-style heading ids."""
    ids = set()
    for line in markdown.splitlines():
        if line.startswith("#"):
            text = line.lstrip("#").strip().lower()
            ids.add(re.sub(r"[^a-z0-9 _-]", "", text).replace(" ", "-"))
    return ids


@pytest.mark.parametrize("alert", alerts.ALERTS, ids=lambda a: a.name)
def test_alert_is_complete_and_linked(alert):
    rule = alert.rule()
    assert re.fullmatch(rf"{alerts.PREFIX}[A-Z][A-Za-z]+", alert.name)
    assert rule["labels"]["severity"] in alerts.SEVERITIES
    assert _seconds(rule["for"]) >= 60, "for: must outlast RocketMQ's 20 s rebalance transients"
    annotations = rule["annotations"]
    assert annotations["summary"] and annotations["description"]
    url = annotations["runbook_url"]
    assert url.startswith(alerts.RUNBOOK_URL_BASE + "#") and url.startswith("https://")
    assert url.split("#", 1)[1] in _anchors(RUNBOOK.read_text()), f"no section for {url} in docs/runbook.md"


@pytest.mark.parametrize("alert", alerts.ALERTS, ids=lambda a: a.name)
def test_alert_reads_only_catalogue_metrics_and_never_rates_a_gauge(alert):
    used = families(alert.expr)
    assert used, alert.expr
    assert used <= set(BY_NAME), f"not in connectors/metrics.py: {used - set(BY_NAME)}"
    for function, name in re.findall(r"\b(rate|irate|increase)\((rmqmon_[a-z0-9_]+)", alert.expr):
        assert BY_NAME[name].type == "counter", f"{function}() over {name}, a {BY_NAME[name].type}"
    assert "rocketmq_" not in alert.expr


@pytest.mark.parametrize("alert", alerts.ALERTS, ids=lambda a: a.name)
def test_every_alert_has_a_firing_and_a_silent_case(alert):
    cases = [c for c in (*alerts.CASES, *alerts.scripted_cases()) if c.alert == alert.name]
    assert any(c.fired for c in cases), f"{alert.name}: no firing case"
    assert any(not c.fired for c in cases), f"{alert.name}: no not-firing case"


def test_exactly_the_progress_states_whose_severity_alerts_have_an_alert_of_that_severity():
    alerting = {s for s in QueueState if severity_of(s) in (Severity.CRITICAL, Severity.WARNING)}
    assert set(alerts.PROGRESS_ALERTS) == alerting
    for state, alert in alerts.PROGRESS_ALERTS.items():
        assert alert.severity == severity_of(state).value, state
        assert f'state="{state}"' in alert.expr and f"--state {state}" in alert.description
    silent = {f'state="{s}"' for s in QueueState if s not in alerting}
    assert not [a.name for a in alerts.ALERTS for s in silent if s in a.expr]


@pytest.mark.parametrize("title", sorted(alerts.BENIGN_PROGRESS))
def test_every_progress_alert_has_a_silent_case_on_each_benign_group(title):
    names = {a.name for a in (*alerts.PROGRESS_ALERTS.values(), alerts.OFFLINE_GROUP_BACKLOG)}
    covered = {c.alert for c in alerts.CASES if c.title.startswith(title) and not c.fired}
    assert covered == names
