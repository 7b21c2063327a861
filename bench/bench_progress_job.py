"""Benchmark (not a test): what consume progress adds to the job's consumer query, per sample row.

Run: ``.venv/bin/python -m bench.bench_progress_job [--groups 1000 --members 10 --rounds 10 --pairs 2]``
-> prints a table and writes ``bench/results/job_progress.json``. The same heartbeats (and routes) go through the
consumer query twice, once with the consume-progress topic empty and once with a sample per group and broker
every 30 s in it (a row per queue), alternately after an unmeasured warm-up pass; the difference in the Spark
JVM's CPU seconds over the progress rows is the added CPU per sample row.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
from pathlib import Path

from bench.bench_job import cpu_clock, job_env, run_path, timed
from bench.common import machine, measured_at, write_results
from bench.job_workload import heartbeats, produce, progress_samples

RESULTS = Path(__file__).parent / "results" / "job_progress.json"
QUEUES = 8  # per broker, as job_workload's routes have them


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--members", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=10, help="30 s heartbeat rounds, each with a progress sample")
    parser.add_argument("--pairs", type=int, default=2, help="measured runs of each side, alternating")
    parser.add_argument("--results", type=Path, default=RESULTS, help=f"where to write the JSON (default {RESULTS})")
    return parser.parse_args()


def run_side(spark, env: dict[str, str], work: Path, name: str, progress_topic: str) -> dict:  # type: ignore[no-untyped-def]
    """One consumer-query run over every record, on fresh tables and checkpoints; its figures and CPU seconds."""
    from streaming.config import load_config
    from streaming.job.runner import MonitorJob

    side_env = {
        **env,
        "RRM__KAFKA__TOPICS__CONSUME_PROGRESS": progress_topic,
        "RRM__PATHS__DELTA_ROOT": str(work / name / "delta"),
        "RRM__PATHS__CHECKPOINT_ROOT": str(work / name / "ckpt"),
    }
    job = MonitorJob(load_config(None, env=side_env), available_now=True)
    job.session = spark
    try:
        return timed(cpu_clock(spark), run_path, job, "consumer", 0)
    finally:
        shutil.rmtree(work / name, ignore_errors=True)


def main() -> None:
    args = parse_args()

    from connectors.kafka_topics import create_topics
    from localenv.kafka_broker import LocalKafkaBroker
    from streaming.job.runtime.spark_session import SparkSettings, build_spark_session

    work = Path(tempfile.mkdtemp(prefix="rrm-bench-progress-"))
    broker = LocalKafkaBroker(work / "kafka")
    info = broker.start()
    try:
        topics = ["bench.channels", "bench.routes", "bench.reports", "bench.progress", "bench.no-progress"]
        create_topics(info.bootstrap_servers, topics, partitions=2)
        n_beats = produce(info.bootstrap_servers, "bench.channels", heartbeats(args.groups, args.members, args.rounds))
        n_samples = produce(
            info.bootstrap_servers, "bench.progress", progress_samples(args.groups, args.rounds, QUEUES)
        )
        sample_rows = n_samples * QUEUES
        spark = build_spark_session(SparkSettings(app_name="rrm-bench-progress", checkpoint_root=str(work)))
        env = job_env(info.bootstrap_servers, work)
        run_side(spark, env, work, "warm-up", "bench.progress")
        runs: dict[str, list[dict]] = {"without": [], "with": []}
        for i in range(args.pairs):
            runs["without"].append(run_side(spark, env, work, f"without-{i}", "bench.no-progress"))
            runs["with"].append(run_side(spark, env, work, f"with-{i}", "bench.progress"))
        cpu = {side: statistics.median(r["cpu_s"] for r in found) for side, found in runs.items()}
        batch_s = {side: sum(r["rows"] / r["events_per_s"] for r in found) / len(found) for side, found in runs.items()}
        added_cpu = cpu["with"] - cpu["without"]
        summary = {
            "cpu_s_without": round(cpu["without"], 2),
            "cpu_s_with": round(cpu["with"], 2),
            "cpu_ratio": round(cpu["with"] / cpu["without"], 3),
            "batch_s_without": round(batch_s["without"], 1),
            "batch_s_with": round(batch_s["with"], 1),
            "added_cpu_s": round(added_cpu, 2),
            "added_cpu_us_per_sample_row": round(added_cpu / sample_rows * 1e6, 1),
            "added_cpu_ms_per_sample_event": round(added_cpu / n_samples * 1e3, 2),
        }
        print(
            f"consumer query, {n_beats:,} heartbeats: without progress {summary['cpu_s_without']} CPU s, with "
            f"{n_samples:,} samples ({sample_rows:,} queue rows) {summary['cpu_s_with']} CPU s "
            f"(x{summary['cpu_ratio']}): {summary['added_cpu_us_per_sample_row']} us per sample row"
        )
        write_results(
            args.results,
            {
                "machine": machine(),
                "measured_at": measured_at(),
                "command": "python -m bench.bench_progress_job "
                f"--groups {args.groups} --members {args.members} --rounds {args.rounds} --pairs {args.pairs}",
                "input": {
                    "groups": args.groups,
                    "members": args.members,
                    "brokers": 2,
                    "queues_per_broker": QUEUES,
                    "rounds": args.rounds,
                    "heartbeat_records": n_beats,
                    "progress_events": n_samples,
                    "progress_queue_rows": sample_rows,
                },
                "summary": summary,
                "runs": runs,
            },
        )
    finally:
        from pyspark.sql import SparkSession

        if (active := SparkSession.getActiveSession()) is not None:
            active.stop()
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
