"""Foundation: JSON events produced with kafka-python reach a Delta table exactly once through Spark."""

from __future__ import annotations

import json

from connectors.kafka_topics import create_topics
from streaming.app.smoke import produce_events, read_table, start_kafka_to_delta


def test_events_round_trip_through_kafka_spark_and_delta(kafka_broker, spark, tmp_path):
    topic = "roundtrip.events"
    create_topics(kafka_broker.bootstrap_servers, [topic])
    produced = produce_events(kafka_broker.bootstrap_servers, topic, 50)

    table = str(tmp_path / "events")
    query = start_kafka_to_delta(spark, kafka_broker.bootstrap_servers, topic, table, str(tmp_path / "ckpt"))
    query.awaitTermination()

    assert read_table(spark, table) == produced
    # The append carried the query's txnAppId: Delta recorded it with the batch id as version.
    history = spark.sql(f"DESCRIBE HISTORY delta.`{table}`").collect()
    assert any(json.dumps(row.asDict(recursive=True), default=str).find("WRITE") >= 0 for row in history)


def test_replayed_batch_is_not_written_twice(kafka_broker, spark, tmp_path):
    """A replay of a batch id (what Spark does after a crash) is skipped by Delta's txn check."""
    from streaming.job.delta.exactly_once import append_idempotent

    table = str(tmp_path / "replay")
    rows = spark.createDataFrame([(1, "a"), (2, "b")], "seq INT, kind STRING")
    append_idempotent(rows, table, "app-1", 0)
    append_idempotent(rows, table, "app-1", 0)  # replay of batch 0
    append_idempotent(rows, table, "app-1", 1)  # the next batch
    append_idempotent(rows, table, "app-2", 0)  # a new checkpoint (new app id) writes again
    assert spark.read.format("delta").load(table).count() == 6


def test_restarted_query_resumes_from_its_checkpoint(kafka_broker, spark, tmp_path):
    topic = "roundtrip.restart"
    create_topics(kafka_broker.bootstrap_servers, [topic])
    table, checkpoint = str(tmp_path / "t"), str(tmp_path / "ckpt")
    first = produce_events(kafka_broker.bootstrap_servers, topic, 10)
    start_kafka_to_delta(spark, kafka_broker.bootstrap_servers, topic, table, checkpoint).awaitTermination()
    second = [dict(e, seq=int(e["seq"]) + 10) for e in first]
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap_servers)
    for event in second:
        producer.send(topic, json.dumps(event).encode()).get(30)
    producer.close()
    start_kafka_to_delta(spark, kafka_broker.bootstrap_servers, topic, table, checkpoint).awaitTermination()
    assert read_table(spark, table) == first + second
