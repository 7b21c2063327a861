"""Benchmark (not a test): the send-result path's JVM pass over one batch, without Kafka or Delta.

Run: ``.venv/bin/python -m bench.bench_send_pass [--sends 500000] [--rounds 3] [--clusters N]`` -> prints, per
round, the median seconds of ``from_json`` alone, the job's ingest then the reduction (``classify``, ``send_batch``,
``reduce_in_partitions``), the one pass send-ingest runs (``reduce_kafka_batch``) on a frame as ``foreachBatch``
hands it over, and the same pass on a copied frame. The records are ``bench_job``'s sends cached in two
partitions, so the figures are the CPU work per batch apart from the broker and the writes; with ``--clusters N``
they are contract version 2 sends naming N RocketMQ clusters in turn, the same producers and brokers in each.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime

FLOORS = {"rocketmq-4": 550, "rocketmq-5": 550}
BUCKETS = [50, 100, 550, 1000, 2000, 3000, 15000]
SEND_SCHEMA = (
    "type STRING, schema_version INT, event_time BIGINT, producer_id STRING, producer_group STRING, topic STRING, "
    "broker STRING, queue_id INT, latency_ms BIGINT, outcome STRING, client_version STRING"
)


def median_seconds(run: Callable[[], object], times: int) -> tuple[float, list[float]]:
    """The median of ``times`` runs after one unmeasured run, and every run's seconds."""
    run()
    seconds = []
    for _ in range(times):
        start = time.perf_counter()
        run()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds), seconds


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sends", type=int, default=500_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--times", type=int, default=5, help="measured runs per side and round")
    parser.add_argument("--clusters", type=int, default=0, help="v2 sends naming this many clusters (0: v1 sends)")
    return parser.parse_args()


def cached_records(spark, n: int, clusters: int = 0):  # type: ignore[no-untyped-def]
    """``bench_job``'s first ``n`` sends as Kafka rows, cached in two partitions; with ``clusters``, as version 2
    sends of that many clusters in turn."""
    import json

    from bench.job_workload import sends

    def value(i: int, raw: bytes) -> bytes:
        if not clusters:
            return raw
        return json.dumps({**json.loads(raw), "schema_version": 2, "cluster": f"cluster-{i % clusters}"}).encode()

    stamp = datetime.now(tz=UTC)
    rows = [(value(i, raw), "bench.sends", i % 2, i // 2, stamp) for i, (_, raw) in enumerate(sends(n))]
    records = spark.createDataFrame(
        rows, "value BINARY, topic STRING, partition INT, offset BIGINT, timestamp TIMESTAMP"
    )
    records = records.repartition(2, "partition").cache()
    records.count()
    return records


def as_foreach_batch(spark, records):  # type: ignore[no-untyped-def]
    """A micro-batch as foreachBatch gives it: a LogicalRDD over the rows of the plan that read them."""
    from pyspark.sql import DataFrame

    cached = records._jdf
    return DataFrame(
        spark._jsparkSession.internalCreateDataFrame(cached.queryExecution().toRdd(), cached.schema(), False), spark
    )


def measured_sides(spark, records) -> tuple[tuple[str, Callable[[], None]], ...]:  # type: ignore[no-untyped-def]
    """The label and run of each compared side over ``records``."""
    from pyspark.sql import functions as F

    from streaming.job.ingest.classify import IngestSettings, classify, contracts_for, strict_events_spec
    from streaming.job.sends.query import fault_table_template, send_batch
    from streaming.job.sends.reduce import reduce_in_partitions, reduce_kafka_batch, summarize

    contracts = contracts_for(("send_result",))
    ingest = IngestSettings("unused:9092", {"bench.sends": "send_result"})
    template = fault_table_template(spark, [], "rocketmq-4", True, FLOORS)
    spec = strict_events_spec(contracts)
    assert spec is not None

    def parse_only() -> None:
        parsed = records.select(F.from_json(F.col("value").cast("string"), SEND_SCHEMA).alias("e")).select("e.*")
        parsed.write.format("noop").mode("overwrite").save()

    def classify_then_reduce() -> None:
        batch = send_batch(classify(records, contracts, ingest), [], "rocketmq-4", True, FLOORS)
        summarize(reduce_in_partitions(batch, BUCKETS, 1))

    batch = as_foreach_batch(spark, records)
    # A projection of every column keeps the rows but plans as `Scan ExistingRDD`, which copies each one.
    copied_first = batch.select("*")

    def one_pass() -> None:
        summarize(reduce_kafka_batch(batch, spec, ingest, template, BUCKETS, 1))

    def one_pass_copied_first() -> None:
        summarize(reduce_kafka_batch(copied_first, spec, ingest, template, BUCKETS, 1))

    return (
        ("from_json", parse_only),
        ("classify, then reduce", classify_then_reduce),
        ("one pass from Kafka rows", one_pass),
        ("one pass, rows copied first", one_pass_copied_first),
    )


def main() -> None:
    args = parse_args()

    from streaming.job.runtime.spark_session import SparkSettings, build_spark_session

    spark = build_spark_session(SparkSettings(app_name="rrm-bench-send-pass"))
    sides = measured_sides(spark, cached_records(spark, args.sends, args.clusters))
    print(
        f"{args.sends} sends ({args.clusters or 'no'} clusters named), median of {args.times} runs per side and round"
    )
    for round_ in range(args.rounds):
        for name, run in sides:
            median, seconds = median_seconds(run, args.times)
            print(f"round {round_}  {name:28} {median:.3f} s  {[round(s, 2) for s in seconds]}", flush=True)


if __name__ == "__main__":
    main()
