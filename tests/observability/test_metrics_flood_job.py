"""5,000 distinct consumer group names through Kafka, Spark and the job's sinks: the metrics stay capped.

``test_metrics_cardinality.py`` measures the metrics state alone at several sizes; this is the same flood
through the real job (one heartbeat per group), read back through the collector and the exposition format.
"""

from __future__ import annotations

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from connectors.metrics import new_registry
from tests.support.events import hb, route
from tests.support.job import job_config, publish, run_available

GROUPS = 5_000
CAP = 50  # [metrics] label_value_cap for this run: small, so the flood is a hundred times over it


def test_flood_through_the_job(kafka_broker, spark, tmp_path):
    config, topics = job_config(
        kafka_broker.bootstrap_servers, tmp_path, "flood", RRM__METRICS__LABEL_VALUE_CAP=str(CAP)
    )
    events = [route(0, "T", brokers=(("broker-a", 4),))]
    events += [
        hb(1_000 + i % 1_000, f"10.{i // 65_536}.{i // 256 % 256}.{i % 256}:1", f"c{i}", f"flood-{i:06d}")
        for i in range(GROUPS)
    ]
    publish(kafka_broker.bootstrap_servers, events, topics)
    job = run_available(spark, config)  # queries finished; the session is the test session's, left running
    families = list(text_string_to_metric_families(generate_latest(new_registry(job.metrics)).decode()))
    groups_per_metric: dict[str, set[str]] = {}
    dropped: dict[str, float] = {}
    for family in families:
        for sample in family.samples:
            if "consumer_group" in sample.labels:
                groups_per_metric.setdefault(family.name, set()).add(sample.labels["consumer_group"])
            if family.name == "rmqmon_label_values_dropped" and sample.name.endswith("_total"):
                dropped[sample.labels["metric"]] = sample.value
    members = groups_per_metric["rmqmon_group_members"]
    assert len(members) == CAP  # the first CAP groups are exported, every one of them
    assert all(name.startswith("flood-") for name in members)
    for name, groups in groups_per_metric.items():
        assert len(groups) <= CAP, name
    # Every other group was counted, not exported: at least once per single-series per-group metric.
    assert dropped["rmqmon_group_members"] >= GROUPS - CAP
    # Each per-group metric of the catalogue that the engine fills is present, capped like the rest.
    assert {"rmqmon_group_generation", "rmqmon_group_queues", "rmqmon_group_rebalances"} <= set(groups_per_metric)
    # Memory: the metrics state holds at most CAP groups per metric, whatever the flood (the tables are its memory).
    with job.metrics.lock:
        for table in (*job.metrics.gauges.values(), *job.metrics.counters.values()):
            assert len({labels[:2] for labels in table if labels}) <= CAP  # (cluster, group) pairs
        assert all(len(index) <= CAP for index in job.metrics._index.values())
