"""Running the real job against the session broker in tests: publish events, process what is there, read Delta."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from localenv.kafka_broker import create_topics
from streaming.config import load_config
from streaming.contract.events import DEFAULT_TOPICS, TOPIC_OPTIONS
from streaming.job.runner import MonitorJob


def publish(bootstrap: str, events: Iterable[Mapping[str, Any] | tuple[str, bytes]], topics: Mapping[str, str]) -> None:
    """Events as dicts (topic from their type) or (event_type, raw bytes) for bad input."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    try:
        for event in events:
            if isinstance(event, tuple):
                event_type, raw = event
            else:
                event_type, raw = event["type"], json.dumps(event).encode()
            producer.send(topics[event_type], raw)
        producer.flush(30)
    finally:
        producer.close()


def job_config(bootstrap: str, root: Path, prefix: str, **env: str):
    base, topics = job_env(bootstrap, root, prefix, **env)
    return load_config(None, env=base), topics


def job_env(bootstrap: str, root: Path, prefix: str, **env: str) -> tuple[dict[str, str], dict[str, str]]:
    """The tests' job settings as ``RRM__`` environment overrides, and the topics (created) by event type."""
    topics = {t: f"{prefix}.{name}" for t, name in DEFAULT_TOPICS.items()}
    create_topics(bootstrap, topics.values())
    base = {
        "RRM__KAFKA__BOOTSTRAP_SERVERS": bootstrap,
        "RRM__PATHS__DELTA_ROOT": str(root / "delta"),
        "RRM__PATHS__CHECKPOINT_ROOT": str(root / "checkpoints"),
        "RRM__METRICS__ENABLED": "false",
        "RRM__MEMBERSHIP__SHARDS": "2",
        "RRM__INGEST__WATERMARK_DELAY": '"0 seconds"',
        **{f"RRM__KAFKA__TOPICS__{t.upper()}": name for t, name in topics.items() if TOPIC_OPTIONS[t] == t},
        **env,
    }
    return base, topics


def run_available(spark, config) -> MonitorJob:
    """Process everything in Kafka now with the job's real queries, on the test session."""
    job = MonitorJob(config, available_now=True)
    job.start()
    job.await_available()
    return job


def read(spark, config, table: str) -> list[dict[str, Any]]:
    return [
        r.asDict(recursive=True)
        for r in spark.read.format("delta").load(str(Path(config.paths.delta_root).resolve() / table)).collect()
    ]
