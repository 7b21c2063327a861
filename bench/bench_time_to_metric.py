"""Benchmark (not a test): how soon a consumer batch's changes reach the metrics, set before or after its writes.

Run: ``.venv/bin/python -m bench.bench_time_to_metric [--groups 50 --members 4 --changing 5 --batches 16]``
-> prints a table and writes ``bench/results/time_to_metric.json``. The real consumer sink on the rows the real
engine emits, as the job runs it (metrics set as soon as the stateful stage's rows are collected) against the
same sink with the metrics held back until its writes end, in turn per batch: time from the sink's call to the
metrics and to its return, wall and driver CPU; ``sustained`` leaves out the first two batches.
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.bench_consumer_sink import engine_batches, fleet_arguments
from bench.common import machine, measured_at, write_results

RESULTS = Path(__file__).parent / "results" / "time_to_metric.json"


Variants = dict[str, tuple[Callable[[Any, Any], None], Callable[[list[Callable[[], None]]], None]]]


def timing_variants(set_at: list[float]) -> Variants:
    """Name -> (metrics function, writes runner) patched into ``outputs``: the job's order, and the metrics held
    back until the writes end; both note in ``set_at`` when the metrics were set."""
    from streaming.job.delta import outputs
    from streaming.job.delta.sinks import run_concurrently

    apply_metrics = outputs.apply_consumer_metrics

    def timed_apply(metrics: Any, records: Any) -> None:
        apply_metrics(metrics, records)
        set_at.append(time.perf_counter())

    held: list[Callable[[], None]] = []

    def held_apply(metrics: Any, records: Any) -> None:
        held.append(lambda: timed_apply(metrics, records))

    def writes_then_metrics(writes: list[Callable[[], None]]) -> None:
        run_concurrently(writes)
        for apply in held:
            apply()
        held.clear()

    return {
        "metrics_first": (timed_apply, run_concurrently),
        "metrics_after_writes": (held_apply, writes_then_metrics),
    }


def run_batches(
    spark, sinks: dict, variants: Variants, rows: list, set_at: list[float]
) -> dict[str, dict[str, list[float]]]:  # type: ignore[no-untyped-def]
    """Every batch through each variant's sink, in alternating order; seconds to the metrics, to the sink's
    return, and driver CPU, by variant."""
    from streaming.job.delta import outputs
    from streaming.job.delta.bus import output_rows, output_schema

    measured: dict[str, dict[str, list[float]]] = {n: {"metric_s": [], "batch_s": [], "cpu_s": []} for n in variants}
    for batch_id, batch_rows in enumerate(rows):
        frame = spark.createDataFrame(output_rows(batch_rows), output_schema())
        order = list(variants) if batch_id % 2 == 0 else list(reversed(variants))
        for name in order:
            outputs.apply_consumer_metrics, outputs.run_concurrently = variants[name]
            set_at.clear()
            start, cpu = time.perf_counter(), time.process_time()
            sinks[name](frame, batch_id)
            m = measured[name]
            m["batch_s"].append(time.perf_counter() - start)
            m["cpu_s"].append(time.process_time() - cpu)
            m["metric_s"].append(set_at[0] - start)
        print(
            f"batch {batch_id:3} rows {len(batch_rows):5} "
            + " ".join(
                f"{n}: metric {measured[n]['metric_s'][-1]:5.2f} s of {measured[n]['batch_s'][-1]:5.2f} s"
                for n in variants
            )
        )
    return measured


def summarize(measured: dict[str, dict[str, list[float]]]) -> dict[str, Any]:
    """The per-batch figures, their sustained medians, and the ratios of the job's order over the other."""
    results: dict[str, Any] = {}
    for name, m in measured.items():
        results[name] = {key: [round(v, 3) for v in values] for key, values in m.items()}
        for key, values in m.items():
            results[name][f"sustained_median_{key}"] = round(statistics.median(values[2:]), 3)
    first, after = results["metrics_first"], results["metrics_after_writes"]
    results["time_to_metric_first_over_after_writes"] = round(
        first["sustained_median_metric_s"] / after["sustained_median_metric_s"], 3
    )
    results["batch_wall_first_over_after_writes"] = round(
        first["sustained_median_batch_s"] / after["sustained_median_batch_s"], 3
    )
    results["driver_cpu_first_over_after_writes"] = round(
        first["sustained_median_cpu_s"] / after["sustained_median_cpu_s"], 3
    )
    return results


def print_summary(results: dict[str, Any]) -> None:
    first, after = results["metrics_first"], results["metrics_after_writes"]
    print(
        f"sustained median time to metric: metrics first {first['sustained_median_metric_s']} s, after the writes "
        f"{after['sustained_median_metric_s']} s (ratio {results['time_to_metric_first_over_after_writes']}); "
        f"batch {first['sustained_median_batch_s']} vs {after['sustained_median_batch_s']} s"
    )


def main() -> None:
    args = fleet_arguments(RESULTS).parse_args()

    from connectors.metrics import MetricsState
    from streaming.job.delta import outputs
    from streaming.job.delta.sinks import DeltaTables
    from streaming.job.runtime.spark_session import build_spark_session

    job_order = outputs.apply_consumer_metrics, outputs.run_concurrently
    set_at: list[float] = []
    variants = timing_variants(set_at)
    rows = engine_batches(args.groups, args.members, args.changing, args.batches)
    spark = build_spark_session()
    root = Path(tempfile.mkdtemp(prefix="bench-time-to-metric-"))
    sinks = {}
    for name in variants:
        tables = DeltaTables(spark, root / name)
        tables.ensure_all()
        sinks[name] = outputs.consumer_sink(tables, f"bench-{name}", MetricsState())
    try:
        measured = run_batches(spark, sinks, variants, rows, set_at)
    finally:
        outputs.apply_consumer_metrics, outputs.run_concurrently = job_order
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)

    results = summarize(measured)
    print_summary(results)
    write_results(
        args.results,
        {
            "machine": machine() | {"load_average": os.getloadavg()},
            "measured_at": measured_at(),
            "input": vars(args) | {"results": str(args.results), "rows_per_batch": [len(r) for r in rows]},
            "results": results,
        },
    )


if __name__ == "__main__":
    main()
