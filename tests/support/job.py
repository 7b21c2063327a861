"""Running the real job against the session broker in tests: publish events, process what is there, read Delta."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from connectors.kafka_topics import create_topics
from streaming.config import SparkConfig, load_config
from streaming.contract.events import DEFAULT_TOPICS, TOPIC_OPTIONS, event_time_headers
from streaming.job.runner import MonitorJob
from tests.support.spark_cds import jvm_options
from tests.support.table_template import seed_tables

# Spark and Delta sized for the tests' few rows: half the job's shuffle partitions (pinned into a root's
# checkpoints, so every run of a root uses one value) and no auto compaction (a table property, set when a
# table is created, so the table template follows it). Tests whose subject is compaction, maintenance or
# what other readers see keep the job's defaults (``job_env(..., sized_for_tests=False)``).
TEST_SHUFFLE_PARTITIONS = 2
TEST_SIZED = {
    "RRM__SPARK__SHUFFLE_PARTITIONS": str(TEST_SHUFFLE_PARTITIONS),
    "RRM__DELTA__AUTO_COMPACT": "false",
}

# Every Spark JVM the tests start compiles with C1 only: their inputs are a few hundred rows, so C2's
# compilations of Spark's generated code cost more CPU than they save (one test file's JVMs: 14-18 % fewer
# CPU seconds). Not a setting of the job's: it changes where the CPU goes, never a result. C1 alone would also
# shrink the code cache from 240 MiB to 48 MiB, which a session's generated classes fill ("Out of space in
# CodeCache"), so the cache keeps its usual size.
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"
# And they run Spark's expressions interpreted: a test's batches are a few rows each, and most of a batch's CPU
# is planning and compiling generated code (a profile of one test file: analysis, optimisation and code
# generation in 59 % of the JVM's samples, compilation alone 17 %). Interpreted and generated code answer the
# same (Spark's own suites run both); `demo --rocketmq`, run as a user runs it, keeps code generation.
# Side by side, two job test files: 151 -> 134 CPU s.
TEST_SPARK_CONF = {f"spark.{role}.extraJavaOptions": TEST_JVM_OPTIONS for role in ("driver", "executor")} | {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}


def test_spark_conf() -> dict[str, str]:
    """``TEST_SPARK_CONF``, its JVMs mapping the class-data-sharing archive once the suite has made it
    (``tests.support.spark_cds``): asked for each JVM at its start, since the archive appears while the suite runs."""
    cds = jvm_options()
    if not cds:
        return dict(TEST_SPARK_CONF)
    java_options = {f"spark.{role}.extraJavaOptions": f"{TEST_JVM_OPTIONS} {cds}" for role in ("driver", "executor")}
    return TEST_SPARK_CONF | java_options


@contextmanager
def job_shuffle_partitions(spark) -> Iterator[None]:
    """The job's default shuffle partition count on the tests' session (which has ``TEST_SHUFFLE_PARTITIONS``)
    for a block, for the tests that keep the job's defaults without running it."""
    key = "spark.sql.shuffle.partitions"
    before = spark.conf.get(key)
    spark.conf.set(key, str(SparkConfig().shuffle_partitions))
    try:
        yield
    finally:
        spark.conf.set(key, before)


def publish(bootstrap: str, events: Iterable[Mapping[str, Any] | tuple[str, bytes]], topics: Mapping[str, str]) -> None:
    """Events as dicts (topic from their type, with the event-time header) or (event_type, raw bytes) for bad
    input (no header)."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    try:
        for event in events:
            if isinstance(event, tuple):
                event_type, raw = event
                producer.send(topics[event_type], raw)
            else:
                raw = json.dumps(event).encode()
                producer.send(topics[event["type"]], raw, headers=event_time_headers(event))
        producer.flush(30)
    finally:
        producer.close()


def job_config(bootstrap: str, root: Path, prefix: str, **options: Any):
    """``job_env``'s settings (``options`` as there) loaded as the job's configuration, and the topics."""
    base, topics = job_env(bootstrap, root, prefix, **options)
    return load_config(None, env=base), topics


def job_env(
    bootstrap: str,
    root: Path,
    prefix: str,
    *,
    sized_for_tests: bool = True,
    tables_from_template: bool = True,
    client_options: Mapping[str, Any] | None = None,
    **env: str,
) -> tuple[dict[str, str], dict[str, str]]:
    """The tests' job settings as ``RRM__`` environment overrides, and the topics (created) by event type.

    ``sized_for_tests``: ``TEST_SIZED`` (else the job's defaults). ``tables_from_template``: the root's Delta
    tables copied from the session's template for these settings (``table_template``) before any job starts
    on it, else the job creates them; a configuration file beside these overrides must not change [delta].
    ``client_options``: kafka-python's settings (security) for creating the topics.
    """
    topics = {t: f"{prefix}.{name}" for t, name in DEFAULT_TOPICS.items()}
    create_topics(bootstrap, topics.values(), **dict(client_options or {}))
    base = {
        "RRM__KAFKA__BOOTSTRAP_SERVERS": bootstrap,
        "RRM__PATHS__DELTA_ROOT": str(root / "delta"),
        "RRM__PATHS__CHECKPOINT_ROOT": str(root / "checkpoints"),
        "RRM__METRICS__ENABLED": "false",
        "RRM__MEMBERSHIP__SHARDS": "2",
        "RRM__INGEST__WATERMARK_DELAY": '"0 seconds"',
        **{f"RRM__KAFKA__TOPICS__{t.upper()}": name for t, name in topics.items() if TOPIC_OPTIONS[t] == t},
        **{f"RRM__SPARK__CONF__{key}": value for key, value in test_spark_conf().items()},
        **(TEST_SIZED if sized_for_tests else {}),
        **env,
    }
    if tables_from_template:
        config = load_config(None, env=base)
        seed_tables(config.paths.delta_root, config)
    return base, topics


def run_available(spark, config) -> MonitorJob:
    """Process everything in Kafka now with the job's real queries, on the test session; the job is stopped
    after (``finish``), its queries, progress and metrics left to read."""
    job = MonitorJob(config, available_now=True)
    job.start()
    finish(job)
    return job


def finish(job: MonitorJob) -> None:
    """Wait for an ``available_now`` job's queries, then stop it: its progress listener leaves the session,
    which would otherwise call every listener a test run ever registered at each micro-batch of every later
    query (Python callbacks rebuilding each progress event over Py4J)."""
    try:
        job.await_available()
    finally:
        job.stop()


def read(spark, config, table: str) -> list[dict[str, Any]]:
    return [
        r.asDict(recursive=True)
        for r in spark.read.format("delta").load(str(Path(config.paths.delta_root).resolve() / table)).collect()
    ]
