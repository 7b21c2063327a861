"""The smoke pipeline: JSON events through the local Kafka broker into Delta, exactly once.

It proves the toolchain end to end (kafka-python producer -> Kafka -> Spark's Kafka source in a streaming
query -> ``foreachBatch`` -> Delta with ``txnAppId``/``txnVersion`` -> read back) and is what
``rebalance-monitor smoke`` runs. The real demo (``rebalance-monitor demo``) builds on the same pieces.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from streaming.job.delta.exactly_once import append_idempotent, checkpoint_app_id

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

EVENT_SCHEMA_DDL = "seq INT, kind STRING, payload STRING"


@dataclass(frozen=True)
class SmokeResult:
    produced: list[dict[str, object]]
    read_back: list[dict[str, object]]

    @property
    def equal(self) -> bool:
        return sorted(self.produced, key=lambda e: e["seq"]) == self.read_back  # type: ignore[arg-type, return-value]


def produce_events(bootstrap_servers: str, topic: str, count: int) -> list[dict[str, object]]:
    from kafka import KafkaProducer

    events: list[dict[str, object]] = [
        {"seq": n, "kind": "SMOKE", "payload": f"event-{n}-\u00fc"} for n in range(count)
    ]
    producer = KafkaProducer(bootstrap_servers=bootstrap_servers, acks="all")
    try:
        for event in events:
            producer.send(topic, key=str(event["seq"]).encode(), value=json.dumps(event).encode()).get(30)
    finally:
        producer.close()
    return events


def start_kafka_to_delta(
    session: SparkSession, bootstrap_servers: str, topic: str, table: str, checkpoint: str, available_now: bool = True
) -> StreamingQuery:
    """A streaming query parsing the topic's JSON into ``table``, exactly once per micro-batch."""
    from pyspark.sql import functions as F

    app_id = checkpoint_app_id(checkpoint)
    source = (
        session.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
    )
    parsed = source.select(F.from_json(F.col("value").cast("string"), EVENT_SCHEMA_DDL).alias("e")).select("e.*")

    def write_batch(batch, batch_id: int) -> None:  # type: ignore[no-untyped-def]
        append_idempotent(batch, table, app_id, batch_id)

    writer = parsed.writeStream.foreachBatch(write_batch).option("checkpointLocation", checkpoint)
    writer = writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime="2 seconds")
    return writer.start()


def read_table(session: SparkSession, table: str) -> list[dict[str, object]]:
    return [row.asDict() for row in session.read.format("delta").load(table).orderBy("seq").collect()]


def run_smoke(
    session: SparkSession, bootstrap_servers: str, work_dir: Path, topic: str = "rrm.smoke", count: int = 20
) -> SmokeResult:
    from connectors.kafka_topics import create_topics

    create_topics(bootstrap_servers, [topic])
    produced = produce_events(bootstrap_servers, topic, count)
    table = str(work_dir / "smoke_events")
    query = start_kafka_to_delta(session, bootstrap_servers, topic, table, str(work_dir / "checkpoint"))
    query.awaitTermination()
    return SmokeResult(produced, read_table(session, table))
