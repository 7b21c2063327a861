"""Benchmark (not a test): send-ingest on a send-result topic of many partitions, its appends written as one
file per table and batch (the job: ``append_idempotent`` with the batch's row counts) against one file per
partition (Delta's default layout, what the job did before), in turn.

Run: ``.venv/bin/python -m bench.bench_write_layout [--partitions 16 --sends 2000000 --rounds 3]``
-> prints a line per run and writes ``bench/results/write_layout.json``.

Each run is a new checkpoint and new tables of its own on the same topic, ``availableNow``, batches of the job's
default 500,000 sends, without the fault replay (its few rows a batch are built on the driver, whatever the topic's
partitions); one unreported run first warms the JVM up. Reported per layout: the median of the runs' sustained
median batch times (each run's first batch left out), and the data files each run's ``send_latency_minutes``
gathered (the table send-ingest appends every batch).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from bench.common import machine, measured_at, write_results

RESULTS = Path(__file__).parent / "results" / "write_layout.json"
TOPIC = "bench.sends"
LAYOUTS = ("one_file_per_batch", "file_per_partition")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--partitions", type=int, default=16)
    parser.add_argument("--sends", type=int, default=2_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--results", type=Path, default=RESULTS)
    return parser.parse_args()


def partition_layout(_rows: int, _rows_per_task: int = 0) -> int:
    return 1 << 30  # a coalesce to more partitions than the frame has leaves it as it is


def run_once(spark, ingest, faults, root: Path) -> tuple[float, dict[str, int]]:  # type: ignore[no-untyped-def]
    """One send-ingest run on new tables and checkpoint under ``root``: its sustained median batch time, and
    the data files its ``send_latency_minutes`` gathered."""
    from bench.bench_job import measure
    from streaming.job.delta.sinks import DeltaTables
    from streaming.job.ingest.classify import contracts_for
    from streaming.job.sends.query import start_send_ingest

    tables = DeltaTables(spark, root / "delta")
    tables.ensure_all(["send_latency_minutes", "dead_letters"])
    query = start_send_ingest(
        spark,
        tables,
        ingest,
        contracts_for(("send_result",)),
        faults,
        str(root / "checkpoint"),
        "bench",
        None,
        available_now=True,
    )
    query.awaitTermination()
    median = measure(query, 1)["sustained"]["median_batch_ms"]
    counts = {t: len(list((root / "delta" / t).glob("*.parquet"))) for t in ("send_latency_minutes",)}
    return median, counts


def run_rounds(
    bootstrap: str, work: str, rounds: int
) -> tuple[dict[str, list[float]], dict[str, list[dict[str, int]]]]:
    """Every layout in turn, ``rounds`` times, after one unreported warm-up run; batch medians and file
    counts by layout."""
    from streaming.domain.faults.settings import FaultSettings
    from streaming.domain.faults.tolerance import ROCKETMQ_4
    from streaming.job.delta import exactly_once as delta_sink
    from streaming.job.ingest.classify import IngestSettings
    from streaming.job.runtime.spark_session import SparkSettings, build_spark_session

    job_write_tasks = delta_sink.write_tasks
    # One table, the 4.9 one (floor 550 ms, its thresholds the buckets), for every producer.
    faults = FaultSettings((ROCKETMQ_4,), ROCKETMQ_4.name, (), send_latency_fault_enable=True)
    batch_ms: dict[str, list[float]] = {layout: [] for layout in LAYOUTS}
    files: dict[str, list[dict[str, int]]] = {layout: [] for layout in LAYOUTS}
    spark = build_spark_session(SparkSettings(app_name="rrm-bench-write-layout", checkpoint_root=work))
    ingest = IngestSettings(bootstrap, {TOPIC: "send_result"}, max_offsets_per_trigger=500_000)
    try:
        for round_ in range(-1, rounds):  # round -1 warms the JVM up and is not reported
            for layout in LAYOUTS if round_ >= 0 else LAYOUTS[:1]:
                delta_sink.write_tasks = job_write_tasks if layout == LAYOUTS[0] else partition_layout
                median, counts = run_once(spark, ingest, faults, Path(work) / f"{layout}-{round_}")
                if round_ < 0:
                    continue
                batch_ms[layout].append(median)
                files[layout].append(counts)
                print(f"round {round_} {layout:20} sustained median batch {median:.0f} ms, files {counts}", flush=True)
    finally:
        delta_sink.write_tasks = job_write_tasks
    return batch_ms, files


def main() -> None:
    args = parse_args()

    from bench.job_workload import produce, sends
    from connectors.kafka_topics import create_topics
    from localenv.kafka_broker import LocalKafkaBroker

    with tempfile.TemporaryDirectory(prefix="rrm-bench-layout-") as work:
        broker = LocalKafkaBroker(Path(work) / "kafka")
        info = broker.start()
        try:
            create_topics(info.bootstrap_servers, [TOPIC], partitions=args.partitions)
            produce(info.bootstrap_servers, TOPIC, sends(args.sends))
            batch_ms, files = run_rounds(info.bootstrap_servers, work, args.rounds)
        finally:
            broker.stop()

    medians = {layout: statistics.median(values) for layout, values in batch_ms.items()}
    ratio = medians[LAYOUTS[1]] / medians[LAYOUTS[0]]
    print(
        f"one file per batch {medians[LAYOUTS[0]]:.0f} ms vs a file per partition {medians[LAYOUTS[1]]:.0f} ms: "
        f"{ratio:.2f}x"
    )
    write_results(
        args.results,
        {
            "machine": machine(),
            "measured_at": measured_at(),
            "input": {
                "sends": args.sends,
                "partitions": args.partitions,
                "rounds": args.rounds,
                "max_offsets_per_trigger": 500_000,
            },
            "results": {
                layout: {"median_batch_ms": medians[layout], "runs_ms": batch_ms[layout], "data_files": files[layout]}
                for layout in LAYOUTS
            },
            "speedup": round(ratio, 2),
        },
    )


if __name__ == "__main__":
    main()
