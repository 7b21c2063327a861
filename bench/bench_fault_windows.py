"""Benchmark (not a test): the fault-windows query's stateful stage, keyed by shard of producers vs by pair.

Run: ``.venv/bin/python -m bench.bench_fault_windows [--producers 200 --brokers 8 --sends 13 --batches 5]``
-> prints a table and writes ``bench/results/fault_windows.json``. Every (producer, broker) pair has reduced sends
in every batch, read by ``availableNow`` runs into a no-op sink: the job's query (state keyed by
``[producers] state_shards``) against the same state function keyed per pair, and a no-op function keyed each
way (the operator's own price); ``sustained`` leaves out the first batch.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import tempfile
from pathlib import Path

from bench.common import machine, measured_at, write_results

RESULTS = Path(__file__).parent / "results" / "fault_windows.json"
BASE = 1_700_000_000_000
BATCH_SPAN_MS = 2_500_000  # a batch's sends span about 30 min of event time; windows end inside the next


def batch_rows(batch: int, producers: int, brokers: int, sends: int) -> list[tuple]:
    rng = random.Random(batch)
    t0 = BASE + batch * BATCH_SPAN_MS
    rows = []
    for p in range(producers):
        for b in range(brokers):
            for j in range(sends):
                latency = rng.randint(600, 4000) if j % 2 else rng.randint(1, 40)
                time_ms = t0 + j * 150_000 + rng.randrange(100)
                offset = batch * 1_000_000 + len(rows)
                rows.append(
                    (
                        f"10.1.{p // 250}.{p % 250}@9#1",
                        "PG",
                        f"broker-{b}",
                        time_ms,
                        latency,
                        "OK",
                        "V4_9_8",
                        "rocketmq-4",
                        0,
                        offset,
                        batch,
                    )
                )
    return rows


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--producers", type=int, default=200)
    parser.add_argument("--brokers", type=int, default=8)
    parser.add_argument("--sends", type=int, default=13, help="reduced sends per pair and batch")
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument("--results", type=Path, default=RESULTS, help=f"where to write the JSON (default {RESULTS})")
    return parser.parse_args()


def query_variants(spark, config, updates: str) -> dict:  # type: ignore[no-untyped-def]
    """Name -> a function building the variant's stream over the fault updates at ``updates``."""
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.state import GroupStateTimeout

    from bench.bench_job import noop_state_function
    from streaming.job import fault_query

    settings = config.fault_settings

    def keyed_by_pair(function):  # type: ignore[no-untyped-def]
        def build():  # type: ignore[no-untyped-def]
            stream = (
                fault_query.fault_updates_stream(spark, updates)
                .withColumn("event_time", F.timestamp_millis("event_time_ms"))
                .withWatermark("event_time", config.ingest.watermark_delay)
            )
            return stream.groupBy("producer_id", "broker").applyInPandasWithState(
                function,
                fault_query.OUTPUT_SCHEMA,
                fault_query.STATE_SCHEMA,
                "append",
                GroupStateTimeout.EventTimeTimeout,
            )

        return build

    def keyed_by_shard(function):  # type: ignore[no-untyped-def]
        def build():  # type: ignore[no-untyped-def]
            return fault_query.build_fault_stream(
                spark, updates, config.ingest.watermark_delay, settings, config.producers.state_shards, function
            )

        return build

    noop = noop_state_function()
    return {
        "monitor": keyed_by_shard(None),  # the job's own state function
        "per_pair": keyed_by_pair(fault_query.make_state_function(settings)),
        "floor_per_shard": keyed_by_shard(noop),
        "floor_per_pair": keyed_by_pair(noop),
    }


def run_batches(spark, variants: dict, updates: str, work: Path, args: argparse.Namespace) -> dict[str, list[dict]]:  # type: ignore[no-untyped-def]
    """Append each batch of fault updates, then run every variant over it; the progress of their batches
    with input, by variant."""
    from streaming.job.send_query import FAULT_UPDATES_DDL

    progress: dict[str, list[dict]] = {name: [] for name in variants}
    spark.createDataFrame([], FAULT_UPDATES_DDL).write.format("delta").save(updates)
    for batch in range(args.batches):
        rows = batch_rows(batch, args.producers, args.brokers, args.sends)
        frame = spark.createDataFrame(rows, FAULT_UPDATES_DDL).coalesce(2)
        frame.write.format("delta").mode("append").save(updates)
        for name, build in variants.items():
            query = (
                build()
                .writeStream.format("noop")
                .option("checkpointLocation", str(work / "ckpt" / name))
                .trigger(availableNow=True)
                .start()
            )
            query.awaitTermination()
            progress[name] += [q for q in query.recentProgress if q["numInputRows"] > 0]
    return progress


def summarize(progress: dict[str, list[dict]]) -> dict[str, dict]:
    """Each variant's batch times, and its medians over the batches after the first."""
    results = {}
    for name, batches in progress.items():
        later = batches[1:]
        figures = {
            "batches": len(batches),
            "rows_per_batch": statistics.median(b["numInputRows"] for b in batches),
            "batch_ms": [b["durationMs"]["triggerExecution"] for b in batches],
        }
        if later:
            figures["sustained_median_batch_ms"] = statistics.median(b["durationMs"]["triggerExecution"] for b in later)
            figures["sustained_median_state_updates_ms"] = statistics.median(
                b["stateOperators"][0]["allUpdatesTimeMs"] for b in later
            )
        results[name] = figures
    return results


def compare_and_print(results: dict[str, dict]) -> None:
    """Add each variant's speedup against ``per_pair`` and print the table."""
    reference = results["per_pair"].get("sustained_median_batch_ms")
    for name, figures in results.items():
        line = f"{name:16} median sustained batch {figures.get('sustained_median_batch_ms')} ms"
        if reference and figures.get("sustained_median_batch_ms"):
            figures["speedup_vs_per_pair"] = round(reference / figures["sustained_median_batch_ms"], 2)
            line += f" (x{figures['speedup_vs_per_pair']} vs per_pair)"
        print(line + f", batches {figures['batch_ms']}")


def main() -> None:
    args = parse_args()

    from streaming.config import load_config
    from streaming.job.spark_session import SparkSettings, build_spark_session

    work = Path(tempfile.mkdtemp(prefix="rrm-bench-faults-"))
    try:
        spark = build_spark_session(SparkSettings(app_name="rrm-bench-faults", checkpoint_root=str(work)))
        config = load_config(None, env={"RRM__PRODUCERS__SEND_LATENCY_FAULT_ENABLE": "true"})
        updates = str(work / "_send_fault_updates")
        progress = run_batches(spark, query_variants(spark, config, updates), updates, work, args)
        results = summarize(progress)
        compare_and_print(results)
        write_results(
            args.results,
            {
                "machine": machine(),
                "measured_at": measured_at(),
                "input": {
                    "producers": args.producers,
                    "brokers": args.brokers,
                    "sends_per_pair": args.sends,
                    "batches": args.batches,
                    "state_shards": config.producers.state_shards,
                },
                "results": results,
            },
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
