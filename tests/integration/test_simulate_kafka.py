"""``rebalance-monitor simulate`` into a real Kafka broker: the topics of the config, the contract's keys,
exactly the events the file mode writes for the same arguments, the future-skew cap, clear failures, and the
topics ``--create-topics`` makes with the contract's settings (the route topic compacted, ``docs/deploy.md``).
"""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter

from connectors.emitter import KEY_FIELD
from connectors.kafka_topics import create_topics, missing_topics
from connectors.processes import free_port
from streaming.app.cli import main

TYPES = ("consumer_channel", "reported_assignment", "topic_route", "send_result", "consume_progress")


def config_file(tmp_path, bootstrap: str, max_future_skew_ms: int = 300_000) -> tuple[str, dict[str, str]]:
    run = uuid.uuid4().hex[:8]
    topics = {t: f"sim-{run}.{t}" for t in TYPES}
    text = f'[kafka]\nbootstrap_servers = "{bootstrap}"\n[kafka.topics]\n'
    text += "".join(f'{t} = "{name}"\n' for t, name in topics.items())
    text += f"[ingest]\nmax_future_skew_ms = {max_future_skew_ms}\n"
    path = tmp_path / f"{run}.toml"
    path.write_text(text)
    return str(path), topics


def read_topics(bootstrap: str, topics: dict[str, str]) -> list[tuple[str, str | None, dict]]:
    """Every record of the topics as (topic, key, event)."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(
        *topics.values(), bootstrap_servers=bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=3000
    )
    try:
        return [(r.topic, r.key.decode() if r.key else None, json.loads(r.value)) for r in consumer]
    finally:
        consumer.close()


def replicas(bootstrap: str, topics) -> dict[str, list[int]]:
    """Per topic: the number of replicas of each of its partitions."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        described = admin.describe_topics(list(topics))
    finally:
        admin.close()
    return {d["topic"]: [len(p["replicas"]) for p in d["partitions"]] for d in described}


def settings(bootstrap: str, topics) -> dict[str, dict[str, str]]:
    """Per topic: its cleanup policy and retention as the broker describes them."""
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource, ConfigResourceType

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        responses = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, t) for t in topics])
    finally:
        admin.close()
    wanted = ("cleanup.policy", "retention.ms")
    return {
        resource[3]: {entry[0]: entry[1] for entry in resource[4] if entry[0] in wanted}
        for response in responses
        for resource in response.resources
    }


def test_kafka_holds_exactly_the_events_of_the_file_mode_on_the_config_s_topics_with_contract_keys(
    kafka_broker, tmp_path, capsys
):
    config, topics = config_file(tmp_path, kafka_broker.bootstrap_servers)
    create_topics(kafka_broker.bootstrap_servers, topics.values(), partitions=2)
    start = str(int(time.time() * 1000) - 3_600_000)  # an hour ago: fleet time may run fast up to now
    args = ["--scenario", "slow-broker", "--start", start, "--fleet-seconds", "240", "--seed", "5"]
    assert main(["simulate", "--config", config, "--speed", "1000", *args]) == 0
    out = capsys.readouterr().out
    assert "expect: broker broker-b avoided by producers" in out and "stopped:" in out
    assert main(["simulate", "--output", str(tmp_path / "same.jsonl"), *args]) == 0
    expected = [json.loads(line) for line in (tmp_path / "same.jsonl").read_text().splitlines()]

    records = read_topics(kafka_broker.bootstrap_servers, topics)
    as_published = Counter((topic, key, json.dumps(event, sort_keys=True)) for topic, key, event in records)
    as_written = Counter(
        (topics[e["type"]], str(e[KEY_FIELD[e["type"]]]), json.dumps(e, sort_keys=True)) for e in expected
    )
    assert as_published == as_written
    assert {topic for topic, _, _ in records} == {
        topics["consumer_channel"],
        topics["topic_route"],
        topics["send_result"],
        topics["consume_progress"],
    }


def test_fleet_time_never_runs_past_the_monitor_s_future_skew_limit(kafka_broker, tmp_path, capsys):
    config, topics = config_file(tmp_path, kafka_broker.bootstrap_servers, max_future_skew_ms=90_000)
    create_topics(kafka_broker.bootstrap_servers, topics.values())
    began = int(time.time() * 1000)
    assert main(["simulate", "--config", config, "--scenario", "steady", "--speed", "1000", "--duration", "3"]) == 0
    ended = int(time.time() * 1000)
    out = capsys.readouterr().out
    times = [event["event_time"] for _, _, event in read_topics(kafka_broker.bootstrap_servers, topics)]
    # At 1,000x the fleet would be ~50 min ahead after 3 s; the cap holds it 60 s inside the 90 s limit. The
    # simulator stamps a tick's sends up to 5 s into the tick, hence that slack.
    assert min(times) >= began
    assert max(times) < ended + 90_000 - 60_000 + 5_000
    assert max(times) >= began + 20_000  # it did run ahead, up to the cap
    assert "future-skew limit" in out


def test_missing_topics_and_an_unreachable_broker_are_one_clear_line(kafka_broker, tmp_path, capsys):
    config, topics = config_file(tmp_path, kafka_broker.bootstrap_servers)
    assert main(["simulate", "--config", config, "--fleet-seconds", "10"]) == 1
    err = capsys.readouterr().err.strip()
    assert "do not exist" in err and topics["send_result"] in err and len(err.splitlines()) == 1

    # more replicas than the cluster has brokers: the broker's refusal, in one line, and nothing published
    create = ["simulate", "--config", config, "--fleet-seconds", "10", "--create-topics"]
    assert main([*create, "--replication-factor", "2"]) == 1
    err = capsys.readouterr().err.strip()
    assert "replication factor 2" in err and "InvalidReplicationFactor" in err and len(err.splitlines()) == 1, err
    assert set(missing_topics(kafka_broker.bootstrap_servers, topics.values())) == set(topics.values())

    # --create-topics creates them, one replica per broker by default (this cluster has one), and the run goes
    # through
    start = str(int(time.time() * 1000) - 60_000)
    assert main([*create, "--start", start, "--speed", "100"]) == 0
    assert read_topics(kafka_broker.bootstrap_servers, topics)
    assert replicas(kafka_broker.bootstrap_servers, topics.values()) == {topic: [1, 1] for topic in topics.values()}
    # with the contract's settings for the types the config puts on them: routes compacted, the rest a week
    described = settings(kafka_broker.bootstrap_servers, topics.values())
    assert described.pop(topics["topic_route"])["cleanup.policy"] == "compact"
    week = {"cleanup.policy": "delete", "retention.ms": "604800000"}
    assert described == {topic: week for t, topic in topics.items() if t != "topic_route"}

    nobody = f"127.0.0.1:{free_port()}"
    code = main(
        [
            "simulate",
            "--bootstrap-servers",
            nobody,
            "--fleet-seconds",
            "10",
            "--producer-option",
            "request_timeout_ms=2000",
        ]
    )
    err = capsys.readouterr().err.strip()
    assert code == 1
    assert "cannot publish to Kafka" in err and len(err.splitlines()) == 1, err


def test_the_config_s_kafka_options_reach_the_producer_and_the_command_line_wins(kafka_broker, tmp_path, capsys):
    """The broker's listener is PLAINTEXT: a config that asks for SASL cannot publish, which shows that its
    [kafka.options] reach kafka-python; --producer-option security_protocol=PLAINTEXT overrides it."""
    config, topics = config_file(tmp_path, kafka_broker.bootstrap_servers)
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required username=\\"u\\" password=\\"p\\";'
    with open(config, "a") as extra:
        extra.write(
            f'[kafka.options]\n"security.protocol" = "SASL_PLAINTEXT"\n"sasl.mechanism" = "PLAIN"\n'
            f'"sasl.jaas.config" = "{jaas}"\n"request.timeout.ms" = "3000"\n"fetch.max.bytes" = "1048576"\n'
        )
    create_topics(kafka_broker.bootstrap_servers, topics.values(), partitions=1)
    run = [
        "simulate",
        "--config",
        config,
        "--fleet-seconds",
        "10",
        "--start",
        str(int(time.time() * 1000) - 60_000),
        "--speed",
        "100",
    ]

    assert main(run) == 1
    captured = capsys.readouterr()
    assert "cannot publish to Kafka" in captured.err and len(captured.err.strip().splitlines()) == 1, captured.err
    assert "not used for publishing (they tune the monitor's consumer): fetch.max.bytes" in captured.out
    assert read_topics(kafka_broker.bootstrap_servers, topics) == []

    assert main([*run, "--producer-option", "security_protocol=PLAINTEXT"]) == 0
    assert read_topics(kafka_broker.bootstrap_servers, topics)
