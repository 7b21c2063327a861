"""One catalogue per anomaly kind: its severity, alert and runbook anchor are written there and nowhere else.

The domain's findings, the alert rules, the runbook's index and docs/tables.md all read
``streaming/domain/anomaly_catalogue.py``; these tests fail when any kind's severity, alert name or runbook anchor
is written in a second place of the code or the runbook, or when one of them disagrees with the catalogue.
"""

from __future__ import annotations

import ast
import inspect
import re
import shlex
from pathlib import Path

import pytest

from dashboards import alerts
from dashboards.alerts import PROGRESS_ALERTS
from dashboards.generate import INDEX_BEGIN, INDEX_END, runbook_index
from streaming.app.cli import build_parser
from streaming.contract.tables import TABLES
from streaming.domain.anomaly_catalogue import CATALOGUE
from streaming.domain.consumers.episodes import Finding
from streaming.domain.vocabulary import AnomalyKind, Severity
from tests.support.runbook import confirm_commands

ROOT = Path(__file__).parents[2]
CATALOGUE_FILE = ROOT / "streaming" / "domain" / "anomaly_catalogue.py"
SOURCES = sorted(
    p for d in ("streaming", "dashboards", "connectors", "localenv", "bench") for p in (ROOT / d).rglob("*.py")
)
RUNBOOK = (ROOT / "docs" / "runbook.md").read_text()
# Where Severity's members may be named: the catalogue (anomaly kinds), the vocabulary (the words), and the
# consume-progress rule table (queue states, which are not anomaly kinds).
SEVERITY_WRITERS = {CATALOGUE_FILE, ROOT / "streaming" / "domain" / "vocabulary.py"}
SEVERITY_WRITERS.add(ROOT / "streaming" / "domain" / "progress" / "verdict.py")


def _strings(path: Path) -> list[str]:
    return [
        n.value
        for n in ast.walk(ast.parse(path.read_text()))
        if isinstance(n, ast.Constant) and isinstance(n.value, str)
    ]


def test_every_kind_has_one_entry_and_an_alert_exactly_when_it_is_not_info():
    assert list(CATALOGUE) == list(AnomalyKind) and all(k == spec.kind for k, spec in CATALOGUE.items())
    for spec in CATALOGUE.values():
        assert (spec.alert is None) == (spec.severity == Severity.INFO), spec.kind
        assert spec.meaning and spec.anchor


def test_a_finding_has_no_severity_of_its_own():
    assert "severity" not in inspect.signature(Finding).parameters
    assert Finding("G", "", AnomalyKind.DOUBLE_OWNED_QUEUES, "s").severity == CATALOGUE["DOUBLE_OWNED_QUEUES"].severity


@pytest.mark.parametrize("kind", [k for k, s in CATALOGUE.items() if s.alert], ids=str)
def test_a_kinds_alert_name_and_anchor_are_written_only_in_the_catalogue(kind):
    spec = CATALOGUE[kind]
    assert spec.alert is not None
    words = {spec.alert.name, spec.alert_name, spec.anchor}
    writers = [p.relative_to(ROOT).as_posix() for p in SOURCES if words & set(_strings(p))]
    assert writers == [CATALOGUE_FILE.relative_to(ROOT).as_posix()]


@pytest.mark.parametrize("kind", list(CATALOGUE), ids=str)
def test_the_runbook_has_one_section_for_the_kind_and_states_no_severity_of_its_own(kind):
    spec = CATALOGUE[kind]
    headings = [line for line in RUNBOOK.splitlines() if line.startswith("#")]
    ids = [re.sub(r"[^a-z0-9 _-]", "", h.lstrip("#").strip().lower()).replace(" ", "-") for h in headings]
    assert ids.count(spec.anchor) == 1, spec.anchor
    section = RUNBOOK.split(headings[ids.index(spec.anchor)], 1)[1].split("\n#", 1)[0]
    assert "**Severity**" not in section and "everity" not in section.split("\n\n", 2)[1][:40]


ALERT_SECTIONS = [s.alert_name for s in CATALOGUE.values() if s.alert_name] + [a.name for a in PROGRESS_ALERTS.values()]


@pytest.mark.parametrize("alert", ALERT_SECTIONS)
def test_an_alerts_runbook_section_names_commands_that_confirm_it_and_the_cli_takes_them(alert):
    commands = confirm_commands(alert)
    assert any(c.startswith("mqadmin ") for c in commands), commands
    assert any(c.startswith("query ") for c in commands), commands
    for command in commands:
        if command.startswith("query "):
            build_parser().parse_args(shlex.split(command))  # exits (fails) on an option the CLI does not have


def test_the_runbook_index_is_the_catalogues():
    block = RUNBOOK[RUNBOOK.index(INDEX_BEGIN) : RUNBOOK.index(INDEX_END) + len(INDEX_END)]
    assert block == runbook_index()
    for spec in CATALOGUE.values():
        assert f"| `{spec.kind}` | {spec.severity} |" in block


def test_the_alert_rules_take_every_kinds_alert_from_the_catalogue():
    by_name = {a.name: a for a in alerts.ALERTS}
    for kind, spec in CATALOGUE.items():
        if spec.alert is None:
            assert not [a for a in alerts.ALERTS if f'anomaly="{kind}"' in a.expr], kind
            continue
        alert = by_name[spec.alert_name]
        assert alert is alerts.ANOMALY_ALERTS[kind]
        assert (alert.severity, alert.expr, alert.for_, alert.anchor) == (
            spec.severity.value,
            spec.alert.expr,
            spec.alert.for_,
            spec.anchor,
        )


def test_severity_members_are_named_only_where_severities_are_defined():
    """Severity.CRITICAL / WARNING / INFO appear in the catalogue, the vocabulary and the queue-state rule table
    only: a finding, an episode or an alert of an anomaly kind cannot carry a severity of its own."""
    named = []
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "Severity":
                if path not in SEVERITY_WRITERS:
                    named.append(f"{path.relative_to(ROOT)}:{node.lineno} Severity.{node.attr}")
    assert named == []


def test_the_tables_doc_lists_every_kind_with_the_catalogues_severity():
    description = TABLES["anomaly_episodes"].description
    for kind, spec in CATALOGUE.items():
        assert f"{kind} ({spec.severity}: {spec.meaning})" in description
