"""Benchmark (not a test): the send-result path's JVM pass over one batch, without Kafka or Delta.

Run: ``.venv/bin/python -m bench.bench_send_pass [--sends 500000] [--rounds 3]`` -> prints, per round, the median
seconds of

* ``from_json``: parsing the records into their fields and nothing else (what ``bench_job``'s baseline does
  after reading Kafka);
* ``classify, then reduce``: the job's ingest (``classify``), the send columns (``send_batch``) and the
  one-pass reduction over them (``reduce_in_partitions``);
* ``one pass from Kafka rows``: ``reduce_kafka_batch``, which send-ingest runs: the ingest fast path's reader
  and checks and the reduction in one pass per partition. Its input is a frame as a Python ``foreachBatch``
  hands over a micro-batch: a ``LogicalRDD`` over the rows of the plan that read them;
* ``one pass, rows copied first``: the same over the same frame planned as ``Scan ExistingRDD``, which copies
  every row before the pass reads it (what ``reduce_kafka_batch`` did before it read a ``LogicalRDD``'s rows
  directly).

The records are ``bench_job``'s sends (1 % slow), cached in two partitions as the Kafka source would give them,
so the figures are the CPU work per batch on this machine, apart from the broker and the writes.
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sends", type=int, default=500_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--times", type=int, default=5, help="measured runs per side and round")
    args = parser.parse_args()

    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    from bench.bench_job import sends
    from streaming.job.ingest import IngestSettings, classify, contracts_for, strict_events_spec
    from streaming.job.send_query import fault_table_template, send_batch
    from streaming.job.send_reduce import reduce_in_partitions, reduce_kafka_batch, summarize
    from streaming.job.spark_session import SparkSettings, build_spark_session

    spark = build_spark_session(SparkSettings(app_name="rrm-bench-send-pass"))
    stamp = datetime.now(tz=UTC)
    rows = [(value, "bench.sends", i % 2, i // 2, stamp) for i, (_, value) in enumerate(sends(args.sends))]
    records = spark.createDataFrame(
        rows, "value BINARY, topic STRING, partition INT, offset BIGINT, timestamp TIMESTAMP"
    )
    records = records.repartition(2, "partition").cache()
    records.count()
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

    # A micro-batch as foreachBatch gives it: a LogicalRDD over the rows of the plan that read them.
    cached = records._jdf
    batch = DataFrame(spark._jsparkSession.internalCreateDataFrame(cached.queryExecution().toRdd(), cached.schema(),
                                                                  False), spark)  # fmt: skip
    # A projection of every column keeps the rows but plans as `Scan ExistingRDD`, which copies each one.
    copied_first = batch.select("*")

    def one_pass() -> None:
        summarize(reduce_kafka_batch(batch, spec, ingest, template, BUCKETS, 1))

    def one_pass_copied_first() -> None:
        summarize(reduce_kafka_batch(copied_first, spec, ingest, template, BUCKETS, 1))

    sides = (
        ("from_json", parse_only),
        ("classify, then reduce", classify_then_reduce),
        ("one pass from Kafka rows", one_pass),
        ("one pass, rows copied first", one_pass_copied_first),
    )
    print(f"{args.sends} sends, median of {args.times} runs per side and round")
    for round_ in range(args.rounds):
        for name, run in sides:
            median, seconds = median_seconds(run, args.times)
            print(f"round {round_}  {name:28} {median:.3f} s  {[round(s, 2) for s in seconds]}", flush=True)


if __name__ == "__main__":
    main()
