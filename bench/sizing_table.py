"""The sizing curve in ``docs/deploy.md``, written from ``bench/results/sizing.json`` so the page cannot drift from it.

Run: ``.venv/bin/python -m bench.sizing_table`` after ``bench.bench_sizing``: replaces the block between the
``CURVE_BEGIN`` and ``CURVE_END`` lines of the page's sizing section with ``render``'s table of the points and
the job's cores and memory per 1,000 groups and per 1,000 sends/s (least squares over the points).
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "sizing.json"
PAGE = ROOT / "docs" / "deploy.md"
CURVE_BEGIN = "<!-- sizing curve: written by `python -m bench.sizing_table` from bench/results/sizing.json -->"
CURVE_END = "<!-- end of the sizing curve -->"
GIB = 2**30
MIB = 2**20
WIDTH = 115  # the page's prose lines


def memory_gib(entry: dict) -> float:
    """The job's peak memory: each role's processes at their largest sample, summed over the roles."""
    return sum(entry["peak_rss_bytes"]["summed_per_role"].values()) / GIB


def fit(points: list[tuple[float, float, float]]) -> tuple[float, float, float] | None:
    """Least squares of y = fixed + per_groups * x1 + per_sends * x2 over (x1, x2, y), or None when the points
    do not vary in both."""
    import numpy as np

    if len({p[0] for p in points}) < 2 or len({p[1] for p in points}) < 2:
        return None
    a = np.array([[1.0, x1, x2] for x1, x2, _ in points])
    solution, *_ = np.linalg.lstsq(a, np.array([y for *_, y in points]), rcond=None)
    fixed, per_groups, per_sends = (float(v) for v in solution)
    return fixed, per_groups, per_sends


def _pair(summary: dict, incidents: int) -> str:
    """p50 / p95 of the incidents that showed, and how many of them did."""
    shown = "–" if summary["p50"] is None else f"{summary['p50']:.1f} / {summary['p95']:.1f}"
    return f"{shown} ({summary['n']} of {incidents})"


def render(document: dict) -> str:
    """The block for the page: one row per point, then the curve."""
    rows = [
        "| groups | sends/s | trigger | window | job cores | peak memory, GiB (JVM + driver + workers) "
        "| incident to metric, p50 / p95 s (shown of incidents) | to Delta row, p50 / p95 s "
        "| input lag | Delta commits/min, MiB/min | load average (1 min) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for e in document["points"]:
        peaks = e["peak_rss_bytes"]["summed_per_role"]
        parts = " + ".join(f"{peaks[r] / GIB:.2f}" for r in ("spark_jvm", "driver_python", "python_workers"))
        latency = e["latency"]["overall"]
        shown = latency["incidents"]
        lag = e["input_lag"]
        load = f"{e['load_average_at_start'][0]:.1f} → {e['load_average_at_end'][0]:.1f}"
        rows.append(
            f"| {e['point']['groups']:,} | {e['point']['sends_per_second']:,} "
            f"| {e['job_settings']['trigger_interval']} | {e['window_s'] / 60:.0f} min "
            f"| {e['job_cores']:.2f} | {memory_gib(e):.2f} ({parts}) | {_pair(latency['to_metric_s'], shown)} "
            f"| {_pair(latency['to_delta_row_s'], shown)} "
            f"| {lag['verdict']} ({lag['second_half_slope_events_per_s']:+.0f}/s) "
            f"| {e['delta']['commits_per_min']:.0f}, {e['delta']['data_bytes_per_min'] / MIB:.1f} "
            f"| {load}{' (under load)' if e['under_load'] else ''} |"
        )
    grid = [(e["point"]["groups"] / 1000, e["point"]["sends_per_second"] / 1000, e) for e in document["points"]]
    cores = fit([(g, s, e["job_cores"]) for g, s, e in grid])
    memory = fit([(g, s, memory_gib(e)) for g, s, e in grid])
    if cores is None or memory is None:
        curve = (
            "The curve needs points at two fleet sizes and two send rates at least: "
            "`python -m bench.bench_sizing` without `--point` measures all six."
        )
    else:
        curve = (
            f"The curve (least squares over the points): per 1,000 groups {cores[1]:.2f} cores and "
            f"{memory[1]:.2f} GiB, per 1,000 sends/s {cores[2]:.2f} cores and {memory[2]:.2f} GiB, on top of "
            f"{cores[0]:.2f} cores and {memory[0]:.2f} GiB."
        )
    loaded = any(e["under_load"] for e in document["points"])
    note = (
        ". Points marked under load ran while other work held the machine: their cores and latencies are not "
        "the job's alone; re-measure them on a quiet machine:"
        if loaded
        else ""
    )
    cores_here = document["points"][0]["machine"]["cores"] if document["points"] else "?"
    intro = textwrap.fill(
        "Collector-shaped input (`bench.bench_sizing`: per poll cycle a poll of every group on every broker, "
        "reported assignments, routes and consume-progress samples at the collector's cadences), 10 members a "
        "group on 4 brokers, 200 producers, the job at `conf/monitor.toml`'s defaults but for its trigger "
        "interval (the one the point recommends: `[spark] trigger_interval`) on "
        f"{cores_here} cores{note or ':'}",
        WIDTH,
        break_on_hyphens=False,
    )
    return "\n".join(
        [
            CURVE_BEGIN,
            "",
            intro,
            "",
            *rows,
            "",
            textwrap.fill(curve, WIDTH, break_on_hyphens=False),
            "",
            CURVE_END,
        ]
    )


def write(page: Path = PAGE, results: Path = RESULTS) -> str:
    """The page with its curve block rewritten from ``results``."""
    text = page.read_text()
    start, end = text.index(CURVE_BEGIN), text.index(CURVE_END) + len(CURVE_END)
    return text[:start] + render(json.loads(results.read_text())) + text[end:]


def main() -> None:
    PAGE.write_text(write())
    print(f"written the sizing curve of {PAGE.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
