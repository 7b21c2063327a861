"""``docs/deploy.md`` states what the code does: the topic layout is the one ``simulate --create-topics`` creates
(``events.TOPIC_CONFIGS``, the contract's topics and keys), every option it names is in ``conf/monitor.toml``, the
collector's calls are the ones its sources count, the scrape job is the one the alerts select, the ``--version``
example is what the command prints, and the sizing figures are those of ``bench/results/``."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

from dashboards.alerts import MONITOR_JOB
from streaming.app.versions import version_text
from streaming.contract.events import DEFAULT_TOPICS, KEY_FIELDS, topic_configs

ROOT = Path(__file__).parents[2]
PAGE = (ROOT / "docs" / "deploy.md").read_text()
CONF = tomllib.loads((ROOT / "conf" / "monitor.toml").read_text())
# The collector's sources name each admin call once, where they count it.
RPC_CALL = re.compile(r'counters\.rpc\("([a-z_]+)"\)')


def section(title: str) -> str:
    start = PAGE.index(title)
    end = PAGE.find("\n#", start + len(title))
    return PAGE[start : end if end >= 0 else len(PAGE)]


def table(text: str, header: str) -> list[list[str]]:
    """The rows of the markdown table whose header line starts with ``header``, cells stripped of backticks."""
    lines = text[text.index(header) :].splitlines()
    rows = []
    for line in lines[2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows


def ticked(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def test_the_topic_layout_is_what_create_topics_creates_on_the_contract_s_topics_and_keys():
    rows = table(section("### Topics"), "| topic |")
    stated = {}
    for topic_cell, types_cell, key_cell, settings_cell in rows:
        (topic,), types, (key,) = ticked(topic_cell), ticked(types_cell), ticked(key_cell)
        for event_type in types:
            assert DEFAULT_TOPICS[event_type] == topic, event_type
            assert KEY_FIELDS[event_type] == key, event_type
        stated[topic] = dict(setting.split("=", 1) for setting in ticked(settings_cell))
    assert {t for cell in rows for t in ticked(cell[1])} == set(DEFAULT_TOPICS)
    assert stated == topic_configs(DEFAULT_TOPICS)
    assert stated["rocketmq.topic-routes"] == {"cleanup.policy": "compact"}


def test_every_option_the_page_names_is_in_the_reference_configuration():
    named = re.findall(r"`\[([a-z_.]+)\] ([a-z_]+)(?: = [^`]+)?`", PAGE)
    named += [
        (s, k) for s, rest in re.findall(r"`\[([a-z_]+)\] [a-z_]+`((?:, `[a-z_]+`)+)", PAGE) for k in ticked(rest)
    ]
    assert len(named) >= 15
    for section_name, key in named:
        options = CONF
        for part in section_name.split("."):
            options = options[part]
        assert key in options, f"[{section_name}] {key}"


def test_the_collector_s_calls_are_the_ones_its_sources_count():
    sources = ROOT / "jvm" / "collector" / "src" / "main" / "java"
    counted = {m for path in sources.rglob("*.java") for m in RPC_CALL.findall(path.read_text())}
    rows = table(section("### Permissions"), "| call |")
    assert {ticked(r[0])[0] for r in rows} == counted
    assert all(re.fullmatch(r"`GET_[A-Z_]+` \(\d+\)", r[1]) for r in rows), rows


def test_the_scrape_job_and_the_version_lines_are_the_code_s():
    assert f'`up{{job="{MONITOR_JOB}"}}`' in section("### Metrics endpoints")
    example = section("## Upgrading").split("```text\n", 1)[1].split("```", 1)[0]
    assert example.strip() == version_text("rebalance-monitor")


def test_the_sizing_figures_are_the_benchmarks_recorded_ones():
    sizing = section("## Sizing")
    (run,) = json.loads((ROOT / "bench" / "results" / "latency.json").read_text())["runs"]
    fresh = run["phases"]["fresh"]
    overall = fresh["latency"]["overall"]["to_metric_s"]
    assert f"{fresh['job_cpu_s']:,.0f} CPU s over a {fresh['wall_s']:,.0f} s phase" in sizing
    assert f"consumer batches {fresh['batches_s']['consumer']['p50']:.1f} s median" in sizing
    assert f"send-ingest {fresh['batches_s']['send-ingest']['p50']:.1f} s" in sizing
    assert f"{overall['p50']:.1f} s median, {overall['p95']:.1f} s p95" in sizing
    files = [name for row in table(sizing, "| load |") for name in ticked(row[-1])]
    assert len(files) >= 6 and all((ROOT / "bench" / "results" / name).is_file() for name in files), files
