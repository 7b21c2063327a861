"""The Alertmanager inhibition rules beside the alert rules, checked by amtool and exercised by a real Alertmanager.

A duplicate client ID holds back its group's orphaned and double-owned queue alerts, flapping members their
group's rebalance storm; the same alerts of another group still go out. The alerts are posted with amtool, with
the labels the rules give them (``alerts.ALERTS``), and read back with amtool as Alertmanager judged them.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from connectors.jvm_artifacts import PROJECT_ROOT
from connectors.processes import free_port, port_is_open
from dashboards import alerts
from tests.support.go_tools import BIN, go_bin

AMTOOL, ALERTMANAGER = BIN / "amtool", BIN / "alertmanager"
CONFIG = PROJECT_ROOT / "dashboards" / "prometheus" / "alertmanager.yml"
BY_NAME = {a.name: a for a in alerts.ALERTS}
SEVERITY_RANK = {s: i for i, s in enumerate(reversed(alerts.SEVERITIES))}


def _tools() -> None:
    go_bin()  # built, or the build `make test` started in the background waited for
    if not AMTOOL.exists() or not ALERTMANAGER.exists():
        pytest.fail(f"{BIN} has no amtool or alertmanager: run scripts/install_observability_tools.sh")


def test_amtool_checks_the_config():
    _tools()
    result = subprocess.run([str(AMTOOL), "check-config", str(CONFIG)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{len(alerts.INHIBITIONS)} inhibit rules" in result.stdout


def test_every_inhibition_names_real_alerts_and_never_holds_back_a_more_severe_one():
    for rule in alerts.INHIBITIONS:
        source = BY_NAME[rule.source]
        assert rule.targets and rule.source not in rule.targets
        for target in rule.targets:
            assert SEVERITY_RANK[BY_NAME[target].severity] <= SEVERITY_RANK[source.severity], (rule.source, target)
            # the labels compared exist on both sides (the rules' `by` clauses keep them)
            kept = f"by ({', '.join(rule.equal)}"
            assert kept in BY_NAME[target].expr and kept in source.expr, (target, rule.equal)


@pytest.fixture
def alertmanager(tmp_path: Path):
    _tools()
    port = free_port()
    process = subprocess.Popen(
        [
            str(ALERTMANAGER),
            f"--config.file={CONFIG}",
            f"--storage.path={tmp_path}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--cluster.listen-address=",
        ],
        stdout=subprocess.DEVNULL,
        stderr=(tmp_path / "alertmanager.log").open("w"),
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120  # a busy machine starts it slowly
        while not (port_is_open(port) and _ready(url)):
            assert process.poll() is None, (tmp_path / "alertmanager.log").read_text()
            assert time.monotonic() < deadline, "alertmanager did not start"
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def _amtool(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(AMTOOL), f"--alertmanager.url={url}", "--timeout=20s", *args], capture_output=True, text=True, timeout=60
    )


def _post(url: str, cluster: str, name: str, **labels: str) -> tuple[str, ...]:
    pairs = {"alertname": name, "severity": BY_NAME[name].severity, "cluster": cluster, **labels}
    result = _amtool(url, "alert", "add", *(f"{k}={v}" for k, v in pairs.items()))
    assert result.returncode == 0, result.stderr
    return tuple(sorted(pairs.items()))


def _states(url: str, count: int) -> dict[tuple[str, ...], str]:
    """Each alert's labels -> its state once Alertmanager holds ``count`` alerts and has judged them."""
    deadline = time.monotonic() + 30
    while True:
        result = _amtool(url, "alert", "query", "--inhibited", "--active", "-o", "json")
        assert result.returncode == 0, result.stderr
        states = {tuple(sorted(a["labels"].items())): a["status"]["state"] for a in json.loads(result.stdout or "[]")}
        if len(states) == count and "unprocessed" not in states.values():
            return states
        assert time.monotonic() < deadline, states
        time.sleep(0.2)


def test_a_duplicate_client_id_holds_back_its_groups_queue_alerts_and_flapping_its_storm(alertmanager):
    dup, orphaned, double = (
        alerts.ANOMALY_ALERTS[k].name for k in ("DUPLICATE_CLIENT_ID", "ORPHANED_QUEUES", "DOUBLE_OWNED_QUEUES")
    )
    confirmed = alerts.PROGRESS_ALERTS["ORPHAN_CONFIRMED"].name
    flapping, storm = (alerts.ANOMALY_ALERTS[k].name for k in ("FLAPPING_MEMBERS", "REBALANCE_STORM"))
    posted = {
        "dup": _post(alertmanager, "east", dup, consumer_group="ledger"),
        "orphaned": _post(alertmanager, "east", orphaned, consumer_group="ledger", topic="orders"),
        "double": _post(alertmanager, "east", double, consumer_group="ledger", topic="orders"),
        "confirmed": _post(alertmanager, "east", confirmed, consumer_group="ledger", topic="orders"),
        "other group's orphans": _post(alertmanager, "east", orphaned, consumer_group="billing", topic="orders"),
        "other cluster's orphans": _post(alertmanager, "west", orphaned, consumer_group="ledger", topic="orders"),
        "flapping": _post(alertmanager, "east", flapping, consumer_group="cache"),
        "storm": _post(alertmanager, "east", storm, consumer_group="cache"),
        "other group's storm": _post(alertmanager, "east", storm, consumer_group="mailer"),
    }
    states = _states(alertmanager, len(posted))
    assert {name: states[labels] for name, labels in posted.items()} == {
        "dup": "active",
        "orphaned": "suppressed",
        "double": "suppressed",
        "confirmed": "suppressed",
        "other group's orphans": "active",
        "other cluster's orphans": "active",  # west's ledger group is not east's
        "flapping": "active",
        "storm": "suppressed",
        "other group's storm": "active",
    }
