"""Benchmark (not a test): a stateful Python operator's price per micro-batch before it does any work.

Run: ``.venv/bin/python -m bench.bench_python_runner [--rounds 3 --batches 12 --partitions 4]``
-> prints a table and writes ``bench/results/python_runner.json``. The smallest stateful query (8 records a batch,
``applyInPandasWithState`` with an event-time timeout, a no-op state function) with the job's worker settings
(Unix domain sockets, a frozen imported heap) against Spark's defaults (loopback TCP, no freeze), each in a
process of its own: median batch time and the state operator's update and timeout-pass times.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.common import machine, measured_at, write_results

RESULTS = Path(__file__).parent / "results" / "python_runner.json"
VARIANTS = ("job", "spark_defaults")
WARM_BATCHES = 3
BASE = 1_700_000_000_000


def write_batches(source: Path, batches: int) -> None:
    """One file of 8 records per batch under ``source``."""
    source.mkdir()
    for batch in range(batches):
        lines = [json.dumps({"k": key, "t": BASE + batch * 60_000 + key}) for key in range(8)]
        (source / f"{batch:05d}.json").write_text("\n".join(lines) + "\n")


def noop_timeout_function(freeze: bool):  # type: ignore[no-untyped-def]
    """A state function that reads its rows, keeps one value with an event-time timeout, and emits its key; with
    ``freeze``, it freezes its worker's imported heap as the job's functions do."""
    import pandas as pd

    def state_function(key, frames, state):  # type: ignore[no-untyped-def]
        if freeze:
            from streaming.job.runtime.python_worker import freeze_imported_heap

            freeze_imported_heap()
        for _ in frames:
            pass
        if state.hasTimedOut:
            state.remove()
        else:
            state.update((1,))
            state.setTimeoutTimestamp(state.getCurrentWatermarkMs() + 10**9)
        yield pd.DataFrame({"k": [key[0]]})

    return state_function


def sustained_figures(query) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """Medians over a finished query's batches with input, after the ``WARM_BATCHES`` first."""
    progress = [p for p in query.recentProgress if p["numInputRows"] > 0][WARM_BATCHES:]
    operators = [p["stateOperators"][0] for p in progress]
    return {
        "batches": len(progress),
        "median_batch_ms": statistics.median(p["durationMs"]["triggerExecution"] for p in progress),
        "median_updates_ms": statistics.median(op["allUpdatesTimeMs"] for op in operators),
        "median_timeout_pass_ms": statistics.median(op["allRemovalsTimeMs"] for op in operators),
    }


def run_variant(variant: str, batches: int, partitions: int) -> dict[str, float]:
    """One variant in this process: the query over ``batches`` files; medians of the sustained batches."""
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.state import GroupStateTimeout

    from streaming.job.runtime.spark_session import SparkSettings, build_spark_session

    work = Path(tempfile.mkdtemp(prefix="rrm-bench-runner-"))
    extra = {"spark.python.unix.domain.socket.enabled": "false"} if variant == "spark_defaults" else {}
    spark = build_spark_session(
        SparkSettings(
            app_name=f"rrm-bench-runner-{variant}",
            shuffle_partitions=partitions,
            checkpoint_root=str(work),
            extra_conf=extra,
        )
    )
    try:
        source = work / "in"
        write_batches(source, batches)
        state_function = noop_timeout_function(variant == "job")
        records = spark.readStream.schema("k INT, t BIGINT").option("maxFilesPerTrigger", 1).json(str(source))
        records = records.withColumn("ts", F.timestamp_millis("t")).withWatermark("ts", "2 minutes")
        out = records.groupBy("k").applyInPandasWithState(
            state_function, "k INT", "n INT", "append", GroupStateTimeout.EventTimeTimeout
        )
        query = (
            out.writeStream.format("noop")
            .option("checkpointLocation", str(work / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        return sustained_figures(query)
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batches", type=int, default=12)
    parser.add_argument("--partitions", type=int, default=4, help="shuffle partitions (the job's default is 4)")
    parser.add_argument("--results", type=Path, default=RESULTS, help=f"where to write the JSON (default {RESULTS})")
    parser.add_argument("--variant", choices=VARIANTS, help=argparse.SUPPRESS)  # one run, in a child process
    args = parser.parse_args()
    if args.batches <= WARM_BATCHES:
        parser.error(f"--batches must exceed the {WARM_BATCHES} warm-up batches")
    return args


def run_child(variant: str, args: argparse.Namespace) -> dict[str, float]:
    """One variant's run in a child process of its own."""
    child = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.bench_python_runner",
            "--variant",
            variant,
            "--batches",
            str(args.batches),
            "--partitions",
            str(args.partitions),
        ],
        cwd=Path(__file__).parent.parent,
        capture_output=True,
        text=True,
        env=os.environ.copy(),
    )
    if child.returncode != 0:
        raise SystemExit(f"{variant} failed:\n{child.stderr[-3000:]}")
    result: dict[str, float] = json.loads(child.stdout.strip().splitlines()[-1])
    return result


def summarize(runs: dict[str, list[dict[str, float]]]) -> dict[str, dict[str, object]]:
    """Each variant's runs and the median of each figure over them."""
    results: dict[str, dict[str, object]] = {}
    for variant, variant_runs in runs.items():
        results[variant] = {
            "runs": variant_runs,
            **{
                f"{name}_median": statistics.median(r[name] for r in variant_runs)
                for name in ("median_batch_ms", "median_updates_ms", "median_timeout_pass_ms")
            },
        }
    return results


def print_table(results: dict[str, dict[str, object]], ratio: float) -> None:
    for variant in VARIANTS:
        r = results[variant]
        print(
            f"{variant:15} batch {r['median_batch_ms_median']:7.1f} ms"
            f" | rows' runners {r['median_updates_ms_median']:6.1f} ms"
            f" | timeout pass {r['median_timeout_pass_ms_median']:6.1f} ms"
        )
    print(f"spark_defaults / job batch time: {ratio}")


def main() -> None:
    args = parse_args()
    if args.variant:
        print(json.dumps(run_variant(args.variant, args.batches, args.partitions)))
        return

    runs: dict[str, list[dict[str, float]]] = {variant: [] for variant in VARIANTS}
    for _ in range(args.rounds):
        for variant in VARIANTS:
            runs[variant].append(run_child(variant, args))
    results = summarize(runs)
    job, default = results["job"], results["spark_defaults"]
    ratio = round(float(default["median_batch_ms_median"]) / float(job["median_batch_ms_median"]), 2)  # type: ignore[arg-type]
    report = {
        "machine": machine(),
        "measured_at": measured_at(),
        "input": {
            "rounds": args.rounds,
            "batches": args.batches,
            "records_per_batch": 8,
            "partitions": args.partitions,
        },
        "results": results,
        "speedup_of_job_settings": ratio,
    }
    write_results(args.results, report)
    print_table(results, ratio)


if __name__ == "__main__":
    main()
