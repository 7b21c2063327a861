"""Benchmark (not a test): the consumer query's Delta sink with its writes run together vs one after the other.

Run: ``.venv/bin/python -m bench.bench_consumer_sink [--groups 50 --members 4 --changing 5 --batches 16]``
-> prints a table and writes ``bench/results/consumer_sink.json``. The real sink on the rows the real engine
emits (every batch some groups gain or lose a duplicate client ID, so every table is written), its appends and
current-table overwrites run together (each with its own txn ids) against the same writes one after the other,
in turn per batch in one session; ``sustained`` leaves out the first two batches.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import machine, measured_at, write_results

RESULTS = Path(__file__).parent / "results" / "consumer_sink.json"
BASE = 1_700_000_000_000


def _channel(t: int, kind: str, group: str, channel: str, client_id: str) -> dict[str, Any]:
    event = {
        "type": "consumer_channel",
        "schema_version": 1,
        "event_time": t,
        "broker": "broker-a",
        "kind": kind,
        "channel": channel,
        "client_id": client_id,
        "group": group,
    }
    if kind == "HEARTBEAT":
        event["subscriptions"] = [{"topic": "orders", "expression": "*", "sub_version": 1}]
    return event


def engine_batches(groups: int, members: int, changing: int, batches: int) -> list[list[tuple[str, dict]]]:
    """Each batch's typed rows ``(kind, row)``, as the consumer query's state function emits them."""
    from streaming.domain.consumers.engine_settings import EngineSettings
    from streaming.domain.consumers.shard_engine import ShardEngine
    from streaming.job.consumer.events import parsed_event
    from streaming.job.delta.table_rows import table_rows

    engine = ShardEngine.restore(None, EngineSettings())
    route = {
        "type": "topic_route",
        "schema_version": 1,
        "event_time": BASE,
        "topic": "orders",
        "brokers": [
            {"broker": b, "read_queue_nums": 8, "write_queue_nums": 8, "perm": 6} for b in ("broker-a", "broker-b")
        ],
    }
    out = []
    for batch in range(batches):
        t = BASE + batch * 1_000  # within the channel expiry: nobody expires
        if batch == 0:
            events = [route] + [
                _channel(t, "HEARTBEAT", f"g{g}", f"10.0.{g}.{m}:1", f"10.0.{g}.{m}@1")
                for g in range(groups)
                for m in range(members)
            ]
        else:
            # the duplicate joins in odd batches and leaves in even ones, in a different set of groups each time
            first = ((batch - 1) // 2 * changing) % groups
            kind = "HEARTBEAT" if batch % 2 else "UNREGISTER"
            events = [
                _channel(t, kind, f"g{g % groups}", f"10.9.{g % groups}.0:1", f"10.0.{g % groups}.0@1")
                for g in range(first, first + changing)
            ]
        out.append(table_rows(engine.apply([parsed_event(e["type"], e) for e in events], t - 60_000)))
    return out


def in_sequence(writes: list[Callable[[], None]]) -> None:
    """In place of ``run_concurrently``: the batch's writes one after the other."""
    for write in writes:
        write()


def fleet_arguments(results: Path) -> argparse.ArgumentParser:
    """The options of ``engine_batches``' fleet, and where the results go (default ``results``)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--groups", type=int, default=50)
    parser.add_argument("--members", type=int, default=4)
    parser.add_argument("--changing", type=int, default=5, help="groups with a change per batch")
    parser.add_argument("--batches", type=int, default=16)
    parser.add_argument("--results", type=Path, default=results, help=f"where to write the JSON (default {results})")
    return parser


def run_batches(spark, sinks: dict, variants: dict, rows: list) -> dict[str, list[float]]:  # type: ignore[no-untyped-def]
    """Every batch through each variant's sink, in alternating order; seconds per batch, by variant."""
    from streaming.job.delta import outputs
    from streaming.job.delta.bus import output_rows, output_schema

    seconds: dict[str, list[float]] = {name: [] for name in variants}
    for batch_id, batch_rows in enumerate(rows):
        frame = spark.createDataFrame(output_rows(batch_rows), output_schema())
        # alternate which variant goes first, so neither always runs right after the other's writes
        order = list(variants) if batch_id % 2 == 0 else list(reversed(variants))
        for name in order:
            outputs.run_concurrently = variants[name]
            start = time.perf_counter()
            sinks[name](frame, batch_id)
            seconds[name].append(time.perf_counter() - start)
        tables_written = sorted({t for t, _ in batch_rows})
        print(
            f"batch {batch_id:3} rows {len(batch_rows):5} "
            + " ".join(f"{n} {seconds[n][-1]:6.2f} s" for n in variants)
            + f"  {tables_written}"
        )
    return seconds


def summarize(seconds: dict[str, list[float]]) -> dict[str, Any]:
    """Each variant's batch times and sustained median and mean, and the ratio of the two medians."""
    results: dict[str, Any] = {}
    for name, values in seconds.items():
        sustained = values[2:]
        results[name] = {
            "batch_s": [round(v, 3) for v in values],
            "sustained_median_s": round(statistics.median(sustained), 3),
            "sustained_mean_s": round(statistics.mean(sustained), 3),
        }
    ratio = results["writes_in_sequence"]["sustained_median_s"] / results["monitor"]["sustained_median_s"]
    results["in_sequence_over_monitor"] = round(ratio, 2)
    print(
        f"sustained median: monitor {results['monitor']['sustained_median_s']} s, writes in sequence "
        f"{results['writes_in_sequence']['sustained_median_s']} s (ratio {ratio:.2f})"
    )
    return results


def main() -> None:
    args = fleet_arguments(RESULTS).parse_args()

    from streaming.job.delta import outputs
    from streaming.job.delta.sinks import DeltaTables, run_concurrently
    from streaming.job.runtime.spark_session import build_spark_session

    rows = engine_batches(args.groups, args.members, args.changing, args.batches)
    spark = build_spark_session()
    root = Path(tempfile.mkdtemp(prefix="bench-consumer-sink-"))
    variants = {"monitor": run_concurrently, "writes_in_sequence": in_sequence}
    sinks = {}
    for name in variants:
        tables = DeltaTables(spark, root / name)
        tables.ensure_all()
        sinks[name] = outputs.consumer_sink(tables, f"bench-{name}", None)
    try:
        seconds = run_batches(spark, sinks, variants, rows)
    finally:
        outputs.run_concurrently = run_concurrently
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)

    results = summarize(seconds)
    write_results(
        args.results,
        {
            "machine": machine(),
            "measured_at": measured_at(),
            "input": vars(args) | {"results": str(args.results), "rows_per_batch": [len(r) for r in rows]},
            "results": results,
        },
    )


if __name__ == "__main__":
    main()
