"""Benchmark (not a test): an exactly-once append's time against the number of files in the table's _delta_log.

Run: ``.venv/bin/python -m bench.bench_delta_log [--files 0 100000 300000] [--appends 15]``
-> prints a table and writes ``bench/results/delta_log.json``.

A table keeps every commit's JSON and checksum in ``_delta_log`` for ``delta.logRetentionDuration`` (30 days by
default), and every commit lists that directory. This appends one row at a time (``append_idempotent``, as the
job does) to a local table whose log also holds ``--files`` expired entries (named to sort before every live
one, as older versions do), with Delta's default log store for local paths and with the job's
(``spark_session.LOCAL_LOG_STORE``), each in its own Spark session (the store is a session setting), one after
the other in the same run. Reported: the median append per log size and the ratio of the two stores.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import machine, measured_at

RESULTS = Path(__file__).parent / "results" / "delta_log.json"
DELTA_DEFAULT = "io.delta.storage.HDFSLogStore"


def measure(store: str, sizes: list[int], appends: int) -> dict[int, float]:
    """In this process: median seconds per append for each log size, with ``store`` for local paths."""
    from streaming.job.delta.exactly_once import append_idempotent
    from streaming.job.runtime.spark_session import SparkSettings, build_spark_session

    work = Path(tempfile.mkdtemp(prefix="bench-delta-log-"))
    spark = build_spark_session(
        SparkSettings(
            app_name="bench-delta-log", checkpoint_root=str(work), extra_conf={"spark.delta.logStore.file.impl": store}
        )
    )
    path = str(work / "table")
    row = spark.createDataFrame([(1, "a")], "x INT, y STRING")
    row.write.format("delta").option("delta.checkpointInterval", "10").save(path)
    batch_id = 0

    def median_append() -> float:
        nonlocal batch_id
        times = []
        for _ in range(appends):
            batch_id += 1
            started = time.perf_counter()
            append_idempotent(row, path, "bench", batch_id)
            times.append(time.perf_counter() - started)
        return statistics.median(times)

    median_append()  # warm-up: JIT, the first checkpoint
    log, made, medians = work / "table" / "_delta_log", 0, {}
    for size in sizes:
        for i in range(made, size):
            (log / f"-{i:020d}.json").touch()
        made = size
        medians[size] = median_append()
    spark.stop()
    return medians


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, nargs="+", default=[0, 100_000, 300_000], help="expired log files")
    parser.add_argument("--appends", type=int, default=15, help="appends per log size (default 15)")
    parser.add_argument("--results", type=Path, default=RESULTS, help=f"where to write the JSON (default {RESULTS})")
    parser.add_argument("--store", help=argparse.SUPPRESS)  # the child process: measure one store
    return parser.parse_args()


def run_child(store: str, args: argparse.Namespace) -> dict[int, float]:
    """``measure`` of one store, in a child process (the store is a session setting)."""
    child = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.bench_delta_log",
            "--store",
            store,
            "--appends",
            str(args.appends),
            "--files",
            *map(str, args.files),
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).parent.parent,
    )
    return {int(k): v for k, v in json.loads(child.stdout.strip().splitlines()[-1]).items()}


def compare(runs: dict[str, dict[int, float]], sizes: list[int]) -> list[dict[str, float]]:
    """Per log size, both stores' median appends and their ratio; printed as a table as well."""
    print(f"{'expired log files':>18} {'Delta default':>14} {'monitor':>10} {'ratio':>7}")
    rows = []
    for size in sizes:
        default, ours = runs["delta_default"][size], runs["monitor"][size]
        rows.append(
            {
                "expired_log_files": size,
                "delta_default_append_s": round(default, 4),
                "monitor_append_s": round(ours, 4),
                "default_over_monitor": round(default / ours, 2),
            }
        )
        print(f"{size:>18} {default * 1000:>11.0f} ms {ours * 1000:>7.0f} ms {default / ours:>7.2f}")
    return rows


def main() -> None:
    args = parse_args()
    if args.store:
        print(json.dumps(measure(args.store, args.files, args.appends)))
        return

    from streaming.job.runtime.spark_session import LOCAL_LOG_STORE

    runs = {}
    for name, store in (("delta_default", DELTA_DEFAULT), ("monitor", LOCAL_LOG_STORE)):
        runs[name] = run_child(store, args)
    rows = compare(runs, args.files)
    document = {
        "machine": machine(),
        "measured_at": measured_at(),
        "input": {
            "appends_per_size": args.appends,
            "store": {"delta_default": DELTA_DEFAULT, "monitor": LOCAL_LOG_STORE},
        },
        "results": rows,
    }
    args.results.write_text(json.dumps(document, indent=1) + "\n")
    print(f"wrote {args.results}")


if __name__ == "__main__":
    main()
