"""History queries: ``rebalance-monitor query`` (delta-rs and DuckDB, no JVM) vs the same query through Spark.

Each side is a whole process, as an operator runs it, on the same tables, in turn per run: the command
itself, and this module's ``--spark`` mode, which answers the same query with the project's Spark session
factory (a small local session, as the command used to) and waits for its JVM to exit so that the JVM's CPU
is counted. Both answers must be the same rows. Wall and CPU seconds (user + system of the process and
its children) per run, medians, and the ratio Spark / command; results in ``bench/results/history-query.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SLOW_BROKER = "slow-broker-broker-b"  # the demo's and the fleet's slow broker


def command(query: str, root: str) -> list[str]:
    extra = {"anomalies": [], "faults": ["--broker", SLOW_BROKER]}[query]
    return [sys.executable, "-m", "streaming.app.cli", "query", query, *extra, "--delta-root", root, "--json"]


def spark_answer(query: str, root: str) -> list[dict]:
    """The query as Spark answers it: the same filters and order as ``rebalance-monitor query``."""
    from pyspark.sql import functions as F

    from streaming.job.runtime.spark_session import SparkSettings, build_spark_session

    spark = build_spark_session(SparkSettings(master="local[1]", app_name="rrm-query"))
    jvm = spark.sparkContext._gateway.proc  # type: ignore[attr-defined]
    try:
        if query == "anomalies":
            frame = spark.read.format("delta").load(f"{root}/anomaly_episodes")
            order = ["event_time_ms", "group", "topic", "anomaly", "status", "episode_id"]
        else:
            frame = spark.read.format("delta").load(f"{root}/fault_windows").where(F.col("broker") == SLOW_BROKER)
            order = ["event_time_ms", "broker", "producer_id", "status", "window_start_ms"]
        return [r.asDict(recursive=True) for r in frame.orderBy(*order).collect()]
    finally:
        spark.stop()
        jvm.stdin.close()  # the gateway JVM exits at the end of its input
        jvm.wait()


def timed(argv: list[str]) -> tuple[float, float, str]:
    """(wall s, CPU s of the process and the children it waited for, standard output)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    result = subprocess.run(
        argv, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, check=False
    )
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode:
        raise SystemExit(f"{' '.join(argv)} failed:\n{result.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, result.stdout


def median_of(runs: list[dict], side: str, what: str) -> float:
    return round(statistics.median(r[side][what] for r in runs), 3)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delta-root", default=".run/delta", help="the monitor's tables (default .run/delta)")
    parser.add_argument("--queries", nargs="+", default=["anomalies", "faults"], choices=["anomalies", "faults"])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--results", default=str(ROOT / "bench" / "results" / "history-query.json"))
    parser.add_argument("--spark", choices=["anomalies", "faults"], help=argparse.SUPPRESS)  # one Spark answer
    args = parser.parse_args(argv)
    root = str(Path(args.delta_root).resolve())
    if args.spark:
        print(json.dumps(spark_answer(args.spark, root), default=str))
        return 0
    results = {"delta_root": root, "runs": args.runs, "queries": {}}
    for query in args.queries:
        runs = []
        for run in range(args.runs + 1):  # the first pair warms the page cache, not counted
            sides = {}
            for side, argv_ in (
                ("command", command(query, root)),
                ("spark", [sys.executable, "-m", "bench.bench_history_query", "--spark", query, "--delta-root", root]),
            ):
                wall, cpu, out = timed(argv_)
                sides[side] = {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "rows": json.loads(out)}
            same = json.dumps(sides["command"].pop("rows"), sort_keys=True) == json.dumps(
                sides["spark"].pop("rows"), sort_keys=True, default=str
            )
            if not same:
                raise SystemExit(f"query {query}: the command and Spark gave different rows")
            if run:
                runs.append(sides)
                print(f"{query} run {run}: command {sides['command']}, spark {sides['spark']}", flush=True)
        summary = {
            f"{side}_{what}_median": median_of(runs, side, what)
            for side in ("command", "spark")
            for what in ("wall_s", "cpu_s")
        }
        for what in ("wall", "cpu"):
            ratio = summary[f"spark_{what}_s_median"] / summary[f"command_{what}_s_median"]
            summary[f"{what}_ratio_spark_over_command"] = round(ratio, 1)
        results["queries"][query] = {"summary": summary, "runs": runs}
        print(f"{query}: {summary}", flush=True)
    Path(args.results).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
