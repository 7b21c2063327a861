"""Benchmark (not a test): the fault outputs' Delta writes in send-ingest's batch, and when the broker gauges are set.

Run: ``.venv/bin/python -m bench.bench_fault_sink [--producers 200 --brokers 8 --changing 40 --batches 12]``
-> prints a line per batch and writes ``bench/results/fault_sink.json``. The real writes (``outputs.FaultOutputs``,
given the fault replay's outcomes as send-ingest gives them) with a ``MetricsState`` on batches shaped as
the fault replay emits them: the first batch a status row for every (producer, broker) pair, then rows for
``--changing`` producers' pairs and a window opened for each. Per batch: wall and Spark JVM CPU seconds of the
writes, seconds from their start to the broker gauges being set, and the Delta commits they made
(``_delta_log`` entries); ``sustained`` leaves out the first two batches.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import machine, measured_at, write_results

RESULTS = Path(__file__).parent / "results" / "fault_sink.json"
BASE = 1_700_000_000_000
TABLES = ("fault_windows", "producer_broker_status_current", "broker_status_current")


def batch_outcomes(batch: int, producers: int, brokers: int, changing: int) -> list[Any]:
    """A batch of the fault replay's outcomes: every pair's status in the first, ``changing`` producers' after,
    a window opened for each pair that becomes unavailable."""
    from streaming.domain.faults.outcomes import FaultWindowChanged, PairStatus
    from streaming.domain.faults.windows import FaultWindowEpisode, WindowStatus

    rng = random.Random(batch)
    t = BASE + batch * 10_000
    chosen = range(producers) if batch == 0 else rng.sample(range(producers), changing)
    outcomes: list[Any] = []
    for p in chosen:
        for b in range(brokers):
            until = t + rng.choice((0, 0, 30_000, 60_000))
            outcomes.append(PairStatus(f"p{p}", "PG", f"broker-{b}", "rocketmq-5", until, 700, t, True, t))
            if batch and until > t:
                episode = FaultWindowEpisode(
                    WindowStatus.OPENED, f"p{p}", f"broker-{b}", t, t, until, None, 700, 2, "SLOW", False, "rocketmq-5"
                )
                outcomes.append(FaultWindowChanged(episode, "PG"))
    return outcomes


def commits(root: Path) -> int:
    return sum(len(list((root / t / "_delta_log").glob("*.json"))) for t in TABLES)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--producers", type=int, default=200)
    parser.add_argument("--brokers", type=int, default=8)
    parser.add_argument("--changing", type=int, default=40, help="producers with new rows per batch")
    parser.add_argument("--batches", type=int, default=12)
    parser.add_argument("--results", type=Path, default=RESULTS)
    return parser.parse_args()


def timed_metrics() -> Any:
    """A ``MetricsState`` noting in ``gauges_at`` when the batch's broker gauges were first set."""
    from connectors.metrics import Metrics, MetricSpec, MetricsState

    class Timed(MetricsState):
        """Records when the batch's broker gauges were first set."""

        gauges_at: float | None = None

        def set_gauge(self, metric: MetricSpec, labels: tuple[str, ...], value: float) -> None:
            if metric is Metrics.BROKER_PRODUCERS_AVOIDING and self.gauges_at is None:
                self.gauges_at = time.perf_counter()
            super().set_gauge(metric, labels, value)

    return Timed()


def run_batches(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every batch through the real writes on new tables: per batch its rows, wall and JVM CPU seconds, seconds
    to the broker gauges, and Delta commits."""
    from bench.bench_job import cpu_clock
    from streaming.job.delta import outputs
    from streaming.job.delta.sinks import DeltaTables, run_concurrently
    from streaming.job.runtime.spark_session import build_spark_session

    spark = build_spark_session()
    clock = cpu_clock(spark)
    root = Path(tempfile.mkdtemp(prefix="bench-fault-sink-"))
    tables = DeltaTables(spark, root)
    tables.ensure_all(list(TABLES))
    metrics = timed_metrics()
    fault_outputs = outputs.FaultOutputs(tables, "bench", metrics)
    per_batch: list[dict[str, Any]] = []
    try:
        for batch_id in range(args.batches):
            rows = batch_outcomes(batch_id, args.producers, args.brokers, args.changing)
            metrics.gauges_at = None
            before_commits, before_cpu, start = commits(root), clock(), time.perf_counter()
            run_concurrently(fault_outputs.writes(spark, rows, batch_id))
            wall, cpu = time.perf_counter() - start, clock() - before_cpu
            to_gauges = (metrics.gauges_at or float("nan")) - start
            made = commits(root) - before_commits
            per_batch.append(
                {"rows": len(rows), "wall_s": wall, "cpu_s": cpu, "to_gauges_s": to_gauges, "commits": made}
            )
            print(
                f"batch {batch_id:3} rows {len(rows):5} wall {wall:6.2f} s cpu {cpu:6.2f} s "
                f"gauges after {to_gauges:6.2f} s commits {made}"
            )
    finally:
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)
    return per_batch


def main() -> None:
    args = parse_args()
    per_batch = run_batches(args)
    sustained = per_batch[2:]
    summary = {
        key: round(statistics.median(b[key] for b in sustained), 3) for key in ("wall_s", "cpu_s", "to_gauges_s")
    }
    summary["commits_per_batch"] = statistics.median(b["commits"] for b in sustained)
    print("sustained median: " + ", ".join(f"{k} {v}" for k, v in summary.items()))
    write_results(
        args.results,
        {
            "machine": machine() | {"load": os.getloadavg()},
            "measured_at": measured_at(),
            "input": {k: v for k, v in vars(args).items() if k != "results"},
            "sustained_median": summary,
            "batches": [{k: round(v, 3) for k, v in b.items()} for b in per_batch],
        },
    )


if __name__ == "__main__":
    main()
