"""Benchmark (not a test): the fixed price of one exactly-once Delta append, as the job's sinks pay it.

Run: ``.venv/bin/python -m bench.bench_delta_commit [--commits 12] [--checkpoint-interval N] [--conf KEY=VALUE ...]``
-> prints CPU and wall seconds per append of a one-row frame to ``send_latency_minutes`` (txnAppId/txnVersion, the
session the job uses): the median, and the mean and the slowest, which carry the Delta checkpoint the table writes
every ``--checkpoint-interval`` commits (the table's ``delta.checkpointInterval``, by default the job's
``[delta] append_checkpoint_interval``; run ``--commits`` past it to see one); and the Spark stages of one append.

Why it matters: every micro-batch of the job ends in a few such appends, and their cost does not depend on
the batch's size, so it bounds how close a path can come to the parse-only baseline at a given
``maxOffsetsPerTrigger``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from datetime import datetime

from streaming.config import DeltaConfig


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--commits", type=int, default=12)
    parser.add_argument(
        "--checkpoint-interval",
        type=int,
        default=DeltaConfig().append_checkpoint_interval,
        help="delta.checkpointInterval of the table (default: the job's append_checkpoint_interval)",
    )
    parser.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an extra Spark setting to try, e.g. spark.databricks.delta.snapshotPartitions=1",
    )
    args = parser.parse_args()

    from pyspark.sql import functions as F

    from bench.bench_job import cpu_clock
    from streaming.contract.tables import TABLES
    from streaming.job.delta.sinks import DeltaTables
    from streaming.job.runtime.spark_session import SparkSettings, build_spark_session

    extra = dict(setting.split("=", 1) for setting in args.conf)
    spark = build_spark_session(SparkSettings(app_name="rrm-bench-delta-commit", extra_conf=extra))
    clock = cpu_clock(spark)
    with tempfile.TemporaryDirectory(prefix="rrm-bench-delta-") as root:
        tables = DeltaTables(spark, root, append_checkpoint_interval=args.checkpoint_interval)
        tables.ensure_all(["send_latency_minutes"])
        row = ("b", "PG", datetime(2026, 1, 1), 1, 0, 5, 5, [50], [1])
        ddl = TABLES["send_latency_minutes"].schema_ddl.replace(", batch_id BIGINT", "")
        frame = spark.createDataFrame([row], ddl)
        tracker = spark.sparkContext.statusTracker()
        cpu, wall, stages = [], [], []
        for batch_id in range(args.commits):
            spark.sparkContext.setJobGroup(f"append-{batch_id}", "one append")
            before_cpu, before_wall = clock(), time.perf_counter()
            numbered = frame.withColumn("batch_id", F.lit(batch_id).cast("bigint"))
            tables.append("send_latency_minutes", numbered, "bench", batch_id)
            cpu.append(clock() - before_cpu)
            wall.append(time.perf_counter() - before_wall)
            if batch_id == args.commits // 2:
                for job in sorted(tracker.getJobIdsForGroup(f"append-{batch_id}")):
                    info = tracker.getJobInfo(job)
                    for stage_id in info.stageIds if info else ():
                        stage = tracker.getStageInfo(stage_id)
                        if stage:
                            stages.append(f"{stage.name} ({stage.numTasks} tasks)")
        steady_cpu, steady_wall = cpu[2:], wall[2:]  # the first appends also warm the JIT up
        median_cpu, median_wall = statistics.median(steady_cpu), statistics.median(steady_wall)
    print(f"one-row append: median {median_cpu:.2f} CPU s, {median_wall:.2f} s wall")
    print(
        f"  mean {statistics.mean(steady_cpu):.2f} CPU s, {statistics.mean(steady_wall):.2f} s wall; slowest "
        f"{max(steady_wall):.2f} s wall (appends 3-{args.commits})"
    )
    print("stages of one append:\n  " + "\n  ".join(stages))


if __name__ == "__main__":
    main()
