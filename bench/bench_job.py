"""Benchmark (not a test): the job's two paths beside parse-only baselines, in one run on one machine.

Run: ``.venv/bin/python -m bench.bench_job [--paths send-result|heartbeat] [--sends N] [--groups N --members N]``
-> prints a table and writes ``bench/results/job.json`` (``--results FILE`` elsewhere). Both sides read every
record with ``availableNow`` at the job's batch size; rates are input rows over summed batch time, ``sustained``
leaves out the warm-up batch, and ``cpu_ratio`` (CPU per event, from /proc) is the steadier figure on a shared
machine. The variants (``--without-runs``, ``--stateful-floor``) and latest figures: ``bench/README.md``.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
from pathlib import Path

from bench.common import machine, measured_at, write_results
from bench.job_workload import heartbeats, produce, sends
from tests.support.process_cpu import tree_cpu_seconds

RESULTS = Path(__file__).parent / "results" / "job.json"


def cpu_clock(spark):  # type: ignore[no-untyped-def]
    """A function returning the Spark JVM's process-tree CPU seconds so far."""
    pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    return lambda: tree_cpu_seconds(pid) or 0.0


def timed(clock, run, *args):  # type: ignore[no-untyped-def]
    before = clock()
    result = run(*args)
    result["cpu_s"] = round(clock() - before, 2)
    return result


def measure(query, warm_rows: int = 0) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """Rate and batch times of a finished query: over all batches, and ``sustained`` over the batches that
    start after the first ``warm_rows`` input rows (JIT warm-up, and for heartbeats the first round, in which
    the whole fleet joins: a one-off at start-up, not the load the job sustains)."""
    progress = [p for p in query.recentProgress if p["numInputRows"] > 0]
    figures = _rate([(p["numInputRows"], p["durationMs"]["triggerExecution"]) for p in progress])
    later, seen = [], 0
    for p in progress:
        if seen >= warm_rows:
            later.append(p)
        seen += p["numInputRows"]
    if later:
        figures["sustained"] = _rate([(p["numInputRows"], p["durationMs"]["triggerExecution"]) for p in later])
        # Where a sustained batch's time goes: Spark's phases (addBatch is the sink, and with it the
        # stateful operator) and the state store's own update and commit times.
        phases: dict[str, list[float]] = {}
        for p in later:
            for name, ms in p["durationMs"].items():
                phases.setdefault(name, []).append(ms)
            for op in p.get("stateOperators", []):
                for name in ("allUpdatesTimeMs", "allRemovalsTimeMs", "commitTimeMs"):
                    phases.setdefault(f"state.{name}", []).append(op.get(name, 0))
        figures["sustained"]["median_phase_ms"] = {k: statistics.median(v) for k, v in sorted(phases.items())}
    return figures


def _rate(batches: list[tuple[int, int]]) -> dict[str, float]:
    rows = sum(n for n, _ in batches)
    durations = [ms for _, ms in batches]
    return {
        "rows": rows,
        "batches": len(durations),
        "events_per_s": round(rows / (sum(durations) / 1000), 1),
        "median_batch_ms": statistics.median(durations),
        "max_batch_ms": max(durations),
    }


def baseline(spark, bootstrap: str, topic: str, max_offsets: int, schema: str, warm_rows: int):  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as F

    stream = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", max_offsets)
        .load()
    )
    parsed = stream.select(F.from_json(F.col("value").cast("string"), schema).alias("e")).select("e.*")
    query = parsed.writeStream.format("noop").trigger(availableNow=True).start()
    query.awaitTermination()
    return measure(query, warm_rows)


SEND_SCHEMA = (
    "type STRING, schema_version INT, event_time BIGINT, producer_id STRING, producer_group STRING, "
    "topic STRING, broker STRING, queue_id INT, latency_ms BIGINT, outcome STRING, client_version STRING"
)
BEAT_SCHEMA = (
    "type STRING, schema_version INT, event_time BIGINT, broker STRING, kind STRING, channel STRING, "
    "client_id STRING, `group` STRING, subscriptions ARRAY<STRUCT<topic: STRING, expression: STRING, "
    "sub_version: BIGINT>>"
)


def parse_args() -> tuple[argparse.Namespace, set[str]]:
    """The command line, and the set of paths it chose."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--sends", type=int, default=2_000_000)
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--members", type=int, default=20)
    parser.add_argument(
        "--rounds", type=int, default=None, help="heartbeat rounds (default: enough for 4 sustained heartbeat batches)"
    )
    parser.add_argument(
        "--max-offsets",
        type=int,
        default=None,
        help="maxOffsetsPerTrigger of both sides on the send path (default: the job's own default)",
    )
    parser.add_argument(
        "--heartbeat-max-offsets",
        type=int,
        default=None,
        help="maxOffsetsPerTrigger on the heartbeat path (default: the job's own default, as on the send path; "
        "groups x members x 2 + 4 is one heartbeat round per batch)",
    )
    parser.add_argument(
        "--without-runs",
        action="store_true",
        help="also run the heartbeat path with every heartbeat a row of its own (no heartbeat runs), beside the job",
    )
    parser.add_argument(
        "--paths", default="send-result,heartbeat", help="comma-separated: send-result, heartbeat (default both)"
    )
    parser.add_argument(
        "--stateful-floor",
        action="store_true",
        help="also run the heartbeat query with a state function that does nothing (same Kafka source, ingest, "
        "sharding, state store and sink), between the path and the second baseline: the part of the ratio no "
        "engine code can win back; then again with all but 1 record in THINNED_EVERY dropped before the operator "
        "(what the operator costs per batch whatever it carries)",
    )
    parser.add_argument(
        "--cold-monitor",
        action="store_true",
        help="skip the monitor's unmeasured warm-up pass (then only its first batch is left out of `sustained`)",
    )
    parser.add_argument(
        "--master",
        default="local[2]",
        help="Spark master of both sides (default local[2]); e.g. the spark:// URL of `rebalance-monitor "
        "spark-cluster start`. On a cluster cpu_s counts the driver's process tree only, not the executors'",
    )
    parser.add_argument("--results", type=Path, default=RESULTS, help=f"where to write the JSON (default {RESULTS})")
    args = parser.parse_args()
    chosen = {p.strip() for p in args.paths.split(",") if p.strip()}
    unknown = chosen - {"send-result", "heartbeat"}
    if unknown:
        parser.error(f"unknown path(s): {', '.join(sorted(unknown))}")
    return args, chosen


def resolve_sizes(args: argparse.Namespace) -> tuple[int, int]:
    """Fill in ``--max-offsets`` and ``--rounds`` where left to their defaults; returns the heartbeat path's
    maxOffsetsPerTrigger and the records of one heartbeat round."""
    from streaming.config import KafkaConfig

    if args.max_offsets is None:
        args.max_offsets = KafkaConfig().max_offsets_per_trigger
    per_round = args.groups * args.members * 2
    beat_offsets = args.heartbeat_max_offsets or args.max_offsets
    if args.rounds is None:  # the first round is the warm-up (the fleet joining), then 4 whole batches
        args.rounds = 1 + -(-4 * beat_offsets // per_round)
    return beat_offsets, per_round


def job_env(bootstrap: str, work: Path) -> dict[str, str]:
    """The job's configuration, as environment variables, for the bench's topics and directories."""
    return {
        "RRM__KAFKA__BOOTSTRAP_SERVERS": bootstrap,
        "RRM__KAFKA__TOPICS__SEND_RESULT": "bench.sends",
        "RRM__KAFKA__TOPICS__CONSUMER_CHANNEL": "bench.channels",
        "RRM__KAFKA__TOPICS__TOPIC_ROUTE": "bench.routes",
        "RRM__KAFKA__TOPICS__REPORTED_ASSIGNMENT": "bench.reports",
        "RRM__KAFKA__TOPICS__CONSUME_PROGRESS": "bench.progress",
        "RRM__PATHS__DELTA_ROOT": str(work / "delta"),
        "RRM__PATHS__CHECKPOINT_ROOT": str(work / "ckpt"),
        "RRM__METRICS__ENABLED": "false",
        "RRM__INGEST__WATERMARK_DELAY": '"1 minute"',
        # Producers with sendLatencyFaultEnable: their 1% slow sends open fault windows, so the reduction
        # keeps them and the fault-window replay has work (RocketMQ's default, false, would leave it idle).
        "RRM__PRODUCERS__SEND_LATENCY_FAULT_ENABLE": "true",
    }


def warm_up_path(spark, env: dict[str, str], work: Path, path: str, runner: str, warm_rows: int) -> None:  # type: ignore[no-untyped-def]
    """One unmeasured pass of the path: without it the monitor's sustained batches were its second to fourth in
    the JVM, its parser, reducer and Delta appends still JIT-cold (a one-row append's median CPU fell from 0.57
    to 0.25 s over its first 140 appends in one JVM), while the baseline's code had already run twice over."""
    from streaming.config import load_config
    from streaming.job.runner import MonitorJob

    warm_env = {
        **env,
        "RRM__PATHS__DELTA_ROOT": str(work / path / "warm-up" / "delta"),
        "RRM__PATHS__CHECKPOINT_ROOT": str(work / path / "warm-up" / "ckpt"),
    }
    warm_job = MonitorJob(load_config(None, env=warm_env), available_now=True)
    warm_job.session = spark
    run_path(warm_job, runner, warm_rows)
    shutil.rmtree(work / path / "warm-up", ignore_errors=True)


def floor_runs(clock, job, warm_rows: int, args: argparse.Namespace) -> dict[str, tuple[str, dict]]:  # type: ignore[no-untyped-def]
    """The heartbeat path's optional floors: result key -> (label, figures)."""
    floors = {}
    if args.without_runs:
        without = timed(clock, run_without_runs, job, warm_rows)
        floors["without_runs"] = ("every heartbeat a row (no runs)", without)
    if args.stateful_floor:
        floors["stateful_floor"] = ("no-op state function", timed(clock, run_stateful_floor, job, warm_rows))
        floors["stateful_floor_thinned"] = (
            f"the same, 1 record in {THINNED_EVERY} reaching it",
            timed(clock, run_stateful_floor, job, warm_rows, True),
        )
    return floors


def compare_path(  # type: ignore[no-untyped-def]
    spark, bootstrap: str, env: dict[str, str], work: Path, side: tuple, args: argparse.Namespace
) -> tuple[dict, str]:
    """Baseline, path (and floors), baseline again for one path, after warm-up passes; the path's results entry
    and its table line."""
    from streaming.config import load_config
    from streaming.job.runner import MonitorJob

    path, topic, schema, runner, warm_rows, max_offsets = side
    env["RRM__KAFKA__MAX_OFFSETS_PER_TRIGGER"] = str(max_offsets)
    env["RRM__PATHS__DELTA_ROOT"] = str(work / path / "delta")
    env["RRM__PATHS__CHECKPOINT_ROOT"] = str(work / path / "ckpt")
    job = MonitorJob(load_config(None, env=env), available_now=True)
    job.session = spark
    clock = cpu_clock(spark)
    reads = (spark, bootstrap, topic, max_offsets, schema, warm_rows)
    # One unmeasured baseline pass first: in a fresh JVM the first measured baseline ran its batches
    # JIT-cold (median batch 2.98 s against 1.73 s for the second run), which lowered the reference
    # and flattered the ratio; the monitor's own warm-up is its first batch, left out of `sustained`.
    baseline(*reads)
    if not args.cold_monitor:
        warm_up_path(spark, env, work, path, runner, warm_rows)
    first = timed(clock, baseline, *reads)
    ours = timed(clock, run_path, job, runner, warm_rows)
    floors = floor_runs(clock, job, warm_rows, args) if path == "heartbeat" else {}
    second = timed(clock, baseline, *reads)
    return path_result(path, first, ours, second, floors)


def path_result(path: str, first: dict, ours: dict, second: dict, floors: dict) -> tuple[dict, str]:
    """One path's results entry (ratios against the mean of both baselines) and its table line."""
    reference = (first["events_per_s"] + second["events_per_s"]) / 2
    cpu_reference = (first["cpu_s"] + second["cpu_s"]) / 2
    result = {
        "monitor": ours,
        "baseline_runs": [first, second],
        "ratio": round(ours["events_per_s"] / reference, 3),
        "cpu_ratio": round(cpu_reference / ours["cpu_s"], 3),
    }
    line = (
        f"{path:12} monitor {ours['events_per_s']:>8.0f} ev/s (median batch {ours['median_batch_ms']} ms) | "
        f"parse-only {reference:>8.0f} ev/s | ratio {ours['events_per_s'] / reference:.2f} | "
        f"CPU {ours['cpu_s']:.1f} s vs {cpu_reference:.1f} s, ratio {cpu_reference / ours['cpu_s']:.2f}"
    )
    if all("sustained" in run for run in (first, ours, second)):
        sustained = ours["sustained"]["events_per_s"]
        sustained_reference = (first["sustained"]["events_per_s"] + second["sustained"]["events_per_s"]) / 2
        result["sustained_ratio"] = round(sustained / sustained_reference, 3)
        line += (
            f"\n{'':12} sustained {sustained:>6.0f} ev/s (median batch {ours['sustained']['median_batch_ms']}"
            f" ms) | parse-only {sustained_reference:>8.0f} ev/s | ratio {sustained / sustained_reference:.2f}"
        )
        for key, (label, floor) in floors.items():
            if "sustained" not in floor:
                continue
            floor_rate = floor["sustained"]["events_per_s"]
            result[key] = floor
            result[f"{key}_sustained_ratio"] = round(floor_rate / sustained_reference, 3)
            line += (
                f"\n{'':12} {label}: sustained {floor_rate:>6.0f} ev/s (median batch "
                f"{floor['sustained']['median_batch_ms']} ms) | ratio {floor_rate / sustained_reference:.2f}"
            )
    return result, line


def results_document(args: argparse.Namespace, n_sends: int, n_beats: int, beat_offsets: int, results: dict) -> dict:
    return {
        "machine": machine(),
        "master": args.master,
        "measured_at": measured_at(),
        "input": {
            "sends": n_sends,
            "heartbeat_records": n_beats,
            "groups": args.groups,
            "members": args.members,
            "rounds": args.rounds,
            "max_offsets_per_trigger": {"send-result": args.max_offsets, "heartbeat": beat_offsets},
        },
        "results": results,
    }


def main() -> None:
    args, chosen = parse_args()

    from connectors.kafka_topics import create_topics
    from localenv.kafka_broker import LocalKafkaBroker
    from streaming.job.runtime.spark_session import SparkSettings, build_spark_session

    beat_offsets, per_round = resolve_sizes(args)
    work = Path(tempfile.mkdtemp(prefix="rrm-bench-"))
    broker = LocalKafkaBroker(work / "kafka")
    info = broker.start()
    try:
        create_topics(
            info.bootstrap_servers,
            ["bench.sends", "bench.channels", "bench.routes", "bench.reports", "bench.progress"],
            partitions=2,
        )
        n_sends = produce(info.bootstrap_servers, "bench.sends", sends(args.sends)) if "send-result" in chosen else 0
        n_beats = (
            produce(info.bootstrap_servers, "bench.channels", heartbeats(args.groups, args.members, args.rounds))
            if "heartbeat" in chosen
            else 0
        )
        # Both sides checkpoint under `work`, as the job's own settings would have them written.
        spark = build_spark_session(SparkSettings(master=args.master, app_name="rrm-bench", checkpoint_root=str(work)))
        env = job_env(info.bootstrap_servers, work)
        results = {}
        # Side by side: baseline, path, baseline again (the mean of both baselines is the reference), after a
        # warm-up pass of the baseline.
        first_round = 4 + per_round  # the routes, then every member on both brokers
        for side in (
            ("send-result", "bench.sends", SEND_SCHEMA, "send", 1, args.max_offsets),  # skips the first batch
            ("heartbeat", "bench.channels", BEAT_SCHEMA, "consumer", first_round, beat_offsets),
        ):
            if side[0] not in chosen:
                continue
            results[side[0]], line = compare_path(spark, info.bootstrap_servers, env, work, side, args)
            print(line)
        write_results(args.results, results_document(args, n_sends, n_beats, beat_offsets, results))
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)  # the Kafka log and Delta tables: gigabytes per run


def run_path(job, which: str, warm_rows: int) -> dict[str, float]:  # type: ignore[no-untyped-def]
    from pathlib import Path

    from streaming.job.delta.sinks import DeltaTables

    job.tables = DeltaTables(job.session, Path(job.config.paths.delta_root))
    job.tables.ensure_all()
    if which == "send":
        # send-ingest replays the reduced sends into fault windows in its own batches: their times include it.
        job._start_send_ingest()
        query = job.queries["send-ingest"]
    else:
        job._start_consumer_query()
        query = job.queries["consumer"]
    query.awaitTermination()
    return measure(query, warm_rows)


def run_without_runs(job, warm_rows: int) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """The heartbeat query as the job builds it, but without heartbeat runs: every heartbeat reaches the engine
    as a row of its own (what the job did before them)."""
    from unittest import mock

    from streaming.job.consumer import heartbeat_runs

    with mock.patch.object(heartbeat_runs, "compress", lambda sharded: sharded):
        job._start_consumer_query("consumer-without-runs")
    query = job.queries["consumer-without-runs"]
    query.awaitTermination()
    return measure(query, warm_rows)


def noop_state_function():  # type: ignore[no-untyped-def]
    """A state function that reads its rows, keeps one byte of state, asks for no timeout, emits nothing; it
    freezes its worker's imported heap as the job's functions do (``python_worker``)."""

    def process(key, frames, state):  # type: ignore[no-untyped-def]
        from streaming.job.delta.bus import output_frame
        from streaming.job.runtime.python_worker import freeze_imported_heap

        freeze_imported_heap()
        for _ in frames:
            pass
        state.update((b"x",))
        yield output_frame([])

    return process


THINNED_EVERY = 5000  # the thinned floor lets through the records whose Kafka offset is a multiple of this


def run_stateful_floor(job, warm_rows: int, thinned: bool = False) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """The heartbeat query as the job builds it, with ``noop_state_function`` in place of the engine; with
    ``thinned``, the rows are dropped before the stateful operator but for one in ``THINNED_EVERY`` (the
    query still reads, classifies and shards every record, and counts them all as input)."""
    from contextlib import nullcontext
    from unittest import mock

    from pyspark.sql import functions as F

    from streaming.job.consumer import query as consumer_query

    job_shard_input = consumer_query.shard_input

    def thinned_shard_input(classified, shards):  # type: ignore[no-untyped-def]
        # The condition reads the verdict (``reason``): a filter on the Kafka offset alone was pushed below
        # ingest by the optimizer, so the records it dropped were never parsed or validated (before
        # 2026-11-25 this floor measured a query that classified 1 record in 5,000).
        kept = F.when(F.col("reason").isNull(), F.col("kafka_offset") % THINNED_EVERY).otherwise(0) == 0
        return job_shard_input(classified, shards).where(kept)

    name = "consumer-floor-thinned" if thinned else "consumer-floor"
    with mock.patch.object(consumer_query, "shard_input", thinned_shard_input) if thinned else nullcontext():
        job._start_consumer_query(name, noop_state_function())
    query = job.queries[name]
    query.awaitTermination()
    return measure(query, warm_rows)


if __name__ == "__main__":
    main()
