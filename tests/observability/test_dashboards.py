"""The Grafana dashboards: generated from code and committed, linted by Grafana's dashboard-linter, complete.

Every dashboard passes ``dashboard-linter lint --strict`` with no ``.lint`` exceptions; a control shows the
linter does reject a broken dashboard. Independently of the linter: stable unique uids, the ``${datasource}``
variable of type prometheus, ``label_values`` variables, a unit and a description on every panel,
``$__rate_interval`` in every rate/increase, and only catalogue metrics (counters only ever rated).
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
from pathlib import Path

import pytest

from connectors.jvm_artifacts import PROJECT_ROOT
from connectors.metrics import BY_NAME
from dashboards import panels
from dashboards.alerts import rule_file
from dashboards.generate import files
from streaming.domain.anomaly_catalogue import RECORDED_ONLY
from tests.support.go_tools import BIN, go_bin

from .promql_names import families

LINTER = BIN / "dashboard-linter"
GRAFANA_DIR = PROJECT_ROOT / "dashboards" / "grafana"
DASHBOARDS = {name: build() for name, build in panels.DASHBOARDS.items()}


def _lint(path: Path) -> subprocess.CompletedProcess[str]:
    go_bin()  # built, or the build `make test` started in the background waited for
    assert LINTER.exists(), f"{LINTER} missing: run scripts/install_observability_tools.sh"
    return subprocess.run(
        [str(LINTER), "lint", "--strict", "--verbose", path.name],
        cwd=path.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_committed_files_equal_what_the_generator_writes():
    for relative, text in files().items():
        path = PROJECT_ROOT / "dashboards" / relative
        assert path.exists() and path.read_text() == text, f"{relative} is stale: run python -m dashboards.generate"
    assert {p.name for p in GRAFANA_DIR.glob("*.json")} == {f"{n}.json" for n in panels.DASHBOARDS}


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_dashboard_linter_passes(name):
    assert not (GRAFANA_DIR / ".lint").exists(), "no lint exceptions are needed; justify any you add here"
    result = _lint(GRAFANA_DIR / f"{name}.json")
    assert result.returncode == 0, result.stdout + result.stderr


def test_dashboard_linter_rejects_a_broken_dashboard(tmp_path):
    """Control: a panel without a unit and a rate over a fixed range fail the same linter run."""
    broken = copy.deepcopy(DASHBOARDS["overview"])
    panel = next(p for p in broken["panels"] if p["targets"] and "rate(" in p["targets"][0]["expr"])
    panel["fieldConfig"]["defaults"].pop("unit")
    panel["targets"][0]["expr"] = panel["targets"][0]["expr"].replace("$__rate_interval", "5m")
    (tmp_path / "broken.json").write_text(json.dumps(broken))
    result = _lint(tmp_path / "broken.json")
    assert result.returncode != 0
    assert "units" in result.stdout and "$__rate_interval" in result.stdout, result.stdout


def test_uids_are_stable_and_unique():
    uids = [d["uid"] for d in DASHBOARDS.values()]
    assert uids == ["rmqmon-overview", "rmqmon-group", "rmqmon-brokers", "rmqmon-health"]


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_variables(name):
    variables = {v["name"]: v for v in DASHBOARDS[name]["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    for variable in variables.values():
        if variable["type"] == "query":
            assert variable["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
            assert re.fullmatch(r"label_values\(rmqmon_\w+(\{.*\})?, \w+\)", variable["query"]["query"])
            assert families(variable["query"]["query"]) <= set(BY_NAME)
    expected = {
        "overview": {"cluster"},
        "group-drilldown": {"cluster", "consumer_group", "topic"},
        "broker-faults": {"cluster", "broker"},
        "monitor-health": {"query"},
    }[name]
    assert set(variables) == {"datasource", "job", "instance"} | expected


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_panels_have_units_descriptions_and_sound_queries(name):
    for panel in DASHBOARDS[name]["panels"]:
        where = f"{name} / {panel['title']}"
        assert panel["description"], where
        assert panel["fieldConfig"]["defaults"]["unit"], where
        assert panel["datasource"]["uid"] == "${datasource}", where
        for target in panel["targets"]:
            expr = target["expr"]
            used = families(expr)
            assert used or re.match(r"max\(up\{", expr), f"{where}: reads no monitor metric"  # or Prometheus' up
            assert used <= set(BY_NAME), f"{where}: {used - set(BY_NAME)}"
            fleet = {m for m in used if BY_NAME[m].labels[:1] == ("cluster",)}
            if fleet:  # a series naming a group or broker is filtered by the dashboard's cluster variable
                assert 'cluster=~"$cluster"' in expr, f"{where}: {fleet} not filtered by cluster"
            for function, window in re.findall(r"\b(rate|irate|increase)\([^\[]*\[([^\]]+)\]", expr):
                assert window == "$__rate_interval", f"{where}: {function} over [{window}]"
            for function, metric in re.findall(r"\b(rate|irate|increase)\((rmqmon_[a-z0-9_]+)", expr):
                base = metric.removesuffix("_bucket").removesuffix("_count").removesuffix("_sum")
                assert BY_NAME[base].type in ("counter", "histogram"), f"{where}: {function}() over a gauge"
            for metric in re.findall(r"\b(rmqmon_[a-z0-9_]+_total)\b", expr):
                assert re.search(rf"\b(rate|irate|increase)\({metric}\b", expr), f"{where}: raw counter {metric}"


def test_the_group_drilldown_has_a_consume_progress_row_per_group_and_topic():
    """Lag, max time lag and queues by state side by side, each per (group, topic) of the chosen variables."""
    metrics = (
        "rmqmon_group_progress_lag",
        "rmqmon_group_progress_max_time_lag_seconds",
        "rmqmon_group_progress_queues",
    )
    row = [p for p in DASHBOARDS["group-drilldown"]["panels"] if families(p["targets"][0]["expr"]) & set(metrics)]
    assert [families(p["targets"][0]["expr"]) for p in row] == [{m} for m in metrics]
    assert len({p["gridPos"]["y"] for p in row}) == 1 and sum(p["gridPos"]["w"] for p in row) == 24
    for panel in row:
        expr = panel["targets"][0]["expr"]
        assert "by (cluster, consumer_group, topic" in expr and 'consumer_group=~"$consumer_group"' in expr
        assert 'topic=~"$topic"' in expr
    assert [p["fieldConfig"]["defaults"]["unit"] for p in row] == ["none", "s", "none"]


def test_the_overview_opens_on_open_anomalies_firing_alerts_and_coverage():
    """The first row: a table of the groups with an alerting open anomaly, each linking to its group dashboard;
    the monitor's own alerts firing or pending; what the answers rest on (stale broker views, the oldest broker
    poll, the job's freshness and its Kafka backlog), each value in its own unit."""
    panels = DASHBOARDS["overview"]["panels"]
    first_row = [p for p in panels if p["gridPos"]["y"] == 0]
    assert [p["type"] for p in first_row] == ["table", "alertlist", "stat"]
    assert sum(p["gridPos"]["w"] for p in first_row) == 24

    table, alerts, coverage = first_row
    (target,) = table["targets"]
    assert target["format"] == "table" and target["instant"]
    assert "by (cluster, consumer_group, anomaly)" in target["expr"] and families(target["expr"]) == {
        "rmqmon_group_open_anomalies"
    }
    for kind in RECORDED_ONLY:
        assert kind in target["expr"], "recorded-only kinds are left out"
    (link,) = table["fieldConfig"]["defaults"]["links"]
    group_uid = DASHBOARDS["group-drilldown"]["uid"]
    assert link["url"].startswith(f"/d/{group_uid}?var-consumer_group=${{__data.fields.consumer_group}}")

    rule_names = {r["alert"] for g in rule_file()["groups"] for r in g["rules"]}
    prefix = alerts["options"]["alertName"]
    assert rule_names and all(name.startswith(prefix) for name in rule_names)
    assert alerts["options"]["stateFilter"]["firing"] and not alerts["options"]["stateFilter"]["normal"]

    shown = [families(t["expr"]) for t in coverage["targets"]]
    assert shown == [
        {"rmqmon_broker_stale_group_views"},
        {"rmqmon_broker_last_poll_timestamp_seconds"},
        {"rmqmon_last_batch_timestamp_seconds"},
        {"rmqmon_kafka_offsets_behind"},
    ]
    units = {o["matcher"]["options"]: o["properties"][0]["value"] for o in coverage["fieldConfig"]["overrides"]}
    assert units == {"A": "none", "B": "s", "C": "s", "D": "none"}
