"""The real job on scripted consumer-side event streams with known answers (Kafka -> Spark -> Delta)."""

from __future__ import annotations

import json

from tests.support.events import hb, route
from tests.support.job import job_config, publish, read, run_available


def test_duplicate_client_id_scenario_names_orphaned_and_double_owned_queues(kafka_broker, spark, tmp_path):
    config, topics = job_config(kafka_broker.bootstrap_servers, tmp_path, "dup")
    publish(
        kafka_broker.bootstrap_servers,
        [
            route(0),
            hb(1_000, "10.1.0.1:40000", "172.17.0.1@1"),  # two containers, PID 1 behind one bridge IP
            hb(1_000, "10.1.0.2:40000", "172.17.0.1@1"),
            hb(1_000, "10.1.0.3:40000", "10.0.0.9@5#77"),
        ],
        topics,
    )
    run_available(spark, config)
    episodes = {
        r["anomaly"]: json.loads(r["details"])
        for r in read(spark, config, "anomaly_episodes")
        if r["status"] == "OPENED"
    }
    assert {"ORPHANED_QUEUES", "DOUBLE_OWNED_QUEUES", "DUPLICATE_CLIENT_ID"} <= set(episodes)
    assert [(q["broker"], q["queue_id"]) for q in episodes["ORPHANED_QUEUES"]["queues"]] == [
        ("broker-b", 2),
        ("broker-b", 3),
    ]
    assert [(q["broker"], q["queue_id"]) for q in episodes["DOUBLE_OWNED_QUEUES"]["queues"]] == [
        ("broker-a", 3),
        ("broker-b", 0),
        ("broker-b", 1),
    ]
    current = {
        r["client_id"]: sorted((q["broker"], q["queue_id"]) for q in r["queues"])
        for r in read(spark, config, "current_assignment")
    }
    assert current == {
        "10.0.0.9@5#77": [("broker-a", 0), ("broker-a", 1), ("broker-a", 2)],
        "172.17.0.1@1": [("broker-a", 3), ("broker-b", 0), ("broker-b", 1)],
    }
    assert {r["anomaly"] for r in read(spark, config, "anomalies_current")} >= {
        "ORPHANED_QUEUES",
        "DUPLICATE_CLIENT_ID",
    }
