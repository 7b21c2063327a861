"""Kafka over SASL_SSL (SCRAM-SHA-512 over TLS) for every component that reads or publishes.

One secure broker for the module (``LocalKafkaBroker(secure=True)``: its certificate made by ``keytool``, its
SCRAM users by Kafka's storage tool). ``simulate`` publishes and the job reads through it with the credentials
and the PEM trust store of ``[kafka.options]``; the collector publishes with the same options; the client agent
publishes with them from its ``rrm.agent.config.file``. With a wrong password each says, in one line naming
itself, that Kafka refused it, and no password is printed.
"""

from __future__ import annotations

import contextlib
import io
import json
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from connectors.processes import free_port
from connectors.rocketmq_collector import CollectorProcess
from localenv.kafka_broker import BrokerInfo, LocalKafkaBroker
from localenv.rocketmq_cluster import READY_TOPIC
from streaming.app.cli import main
from streaming.config import load_config
from streaming.job.runner import MonitorJob
from streaming.job.runtime.supervision import KafkaRefused
from tests.support.job import job_env, read, run_available
from tests.support.kafka_records import KafkaRecords
from tests.support.rocketmq_client import ClientProcess

WRONG = "not-the-password-7"
POLL_MS = 2_000


@pytest.fixture(scope="module")
def secure_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerInfo]:
    """The broker as a user starts it (``rebalance-monitor kafka start --secure``), stopped by PID at the end."""
    home = tmp_path_factory.mktemp("kafka-sasl-ssl")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["kafka", "start", "--secure", "--home", str(home)]) == 0
    try:
        info = LocalKafkaBroker(home).info()
        assert info is not None and info.listener is not None
        client = info.listener.directory / "client.toml"
        assert f"password included: {client}" in printed.getvalue(), printed.getvalue()
        assert info.listener.client_password() not in printed.getvalue()
        assert client.stat().st_mode & 0o077 == 0  # only its owner reads the password
        yield info
    finally:
        assert main(["kafka", "stop", "--home", str(home)]) == 0


def options_env(options: dict[str, str]) -> dict[str, str]:
    """``[kafka.options]`` as ``RRM__`` variables (Kafka options take "_" for ".")."""
    return {f"RRM__KAFKA__OPTIONS__{key.upper().replace('.', '_')}": value for key, value in options.items()}


def read_back(info: BrokerInfo, topics: Iterable[str], timeout_s: float = 60.0) -> list[dict[str, Any]]:
    """Every record of ``topics`` through the secure listener: polled until some came and a poll brings no more
    (the first polls of a new connection may come back empty while TLS and SCRAM are negotiated)."""
    assert info.listener is not None
    records = KafkaRecords(info.bootstrap_servers, topics, **info.listener.kafka_python_options())
    deadline, seen = time.monotonic() + timeout_s, -1
    try:
        while time.monotonic() < deadline:
            found = records.poll()
            if found and len(found) == seen:
                return found
            seen = len(found)
        return records.records
    finally:
        records.close()


def secrets_of(info: BrokerInfo) -> tuple[str, str]:
    assert info.listener is not None
    return info.listener.client_password(), WRONG


def test_simulate_publishes_and_the_job_reads_through_sasl_ssl(secure_kafka, spark, tmp_path, capsys):
    listener = secure_kafka.listener
    assert listener is not None
    env, topics = job_env(
        secure_kafka.bootstrap_servers,
        tmp_path / "right",
        "sec",
        client_options=listener.kafka_python_options(),
        **options_env(listener.client_options()),
    )
    config = load_config(None, env=env)
    assert listener.client_password() not in repr(config) + str(config.kafka.options)
    prefix = "RRM__KAFKA__TOPICS__"
    topic_lines = [
        f"{k.removeprefix(prefix).lower()} = {json.dumps(v)}" for k, v in env.items() if k.startswith(prefix)
    ]
    # The client settings the CLI wrote for the broker ([kafka] bootstrap_servers and [kafka.options]), and the topics.
    client = (listener.directory / "client.toml").read_text()
    right, wrong = tmp_path / "right.toml", tmp_path / "wrong.toml"
    right.write_text(client + "[kafka.topics]\n" + "\n".join(topic_lines) + "\n")
    wrong.write_text(right.read_text().replace(listener.client_password(), WRONG))
    start = str(int(time.time() * 1000) - 60_000)
    run = ["simulate", "--scenario", "steady", "--fleet-seconds", "5", "--progress-interval", "0", "--start", start]
    run += ["--speed", "100"]  # 26 events: a handful for one AvailableNow run

    assert main([*run, "--config", str(wrong)]) == 1
    refused = capsys.readouterr().err.strip()
    assert len(refused.splitlines()) == 1 and refused.startswith("rebalance-monitor simulate: Kafka at"), refused
    assert "refused the producer's authentication" in refused and "SaslAuthenticate" in refused, refused
    assert main([*run, "--config", str(right)]) == 0
    printed = capsys.readouterr()
    assert all(secret not in printed.out + printed.err for secret in secrets_of(secure_kafka))

    published = read_back(secure_kafka, topics.values())
    groups = {e["group"] for e in published if e["type"] == "consumer_channel"}
    assert groups, published[:3]

    job = run_available(spark, config)
    assert sum(p["numInputRows"] for q in job.queries.values() for p in q.recentProgress) == len(published)
    assigned = {r["group"] for r in read(spark, config, "current_assignment")}
    assert assigned and assigned <= groups, (assigned, groups)

    # A wrong password ends the job at once, run to what is available or kept running under its supervisor.
    for mode in ("available-now", "supervised"):
        refused_env, _ = job_env(
            secure_kafka.bootstrap_servers,
            tmp_path / mode,
            "sec",
            client_options=listener.kafka_python_options(),
            **options_env(listener.client_options(WRONG)),
        )
        job = MonitorJob(load_config(None, env=refused_env), available_now=mode == "available-now")
        with pytest.raises(KafkaRefused) as error:
            if mode == "supervised":
                job.run(duration_s=300)  # stops the job when it ends, as it does on a signal
            else:
                try:
                    job.start()
                    job.await_available()
                finally:
                    job.stop()
        line = str(error.value)
        assert len(line.splitlines()) == 1 and line.startswith("job: Kafka refused the job's query"), (mode, line)
        assert "SaslAuthenticationException" in line, line
        assert all(secret not in line for secret in secrets_of(secure_kafka))


def test_the_collector_publishes_through_sasl_ssl_and_names_a_refusal(secure_kafka, rocketmq_cluster, tmp_path):
    listener = secure_kafka.listener
    assert listener is not None
    topic = "sec.consumer-connections"
    from connectors.kafka_topics import create_topics

    create_topics(secure_kafka.bootstrap_servers, [topic], **listener.kafka_python_options())
    rocketmq_cluster.create_group("sec-g")
    base = {
        "RRM__KAFKA__BOOTSTRAP_SERVERS": secure_kafka.bootstrap_servers,
        "RRM__KAFKA__TOPICS__CONSUMER_CHANNEL": topic,
        "RRM__COLLECTOR__NAMESRV_ADDR": rocketmq_cluster.namesrv_addr,
        "RRM__COLLECTOR__POLL_INTERVAL_MS": str(POLL_MS),
        "RRM__COLLECTOR__INCLUDE_GROUPS": '["sec-*"]',
        "RRM__COLLECTOR__RUNNING_INFO_INTERVAL_MS": "0",
    }
    collectors = {
        name: CollectorProcess(
            load_config(env={**base, **options_env(listener.client_options(password))}),
            tmp_path / name,
            metrics_port=free_port(),
        )
        for name, password in (("right", None), ("wrong", WRONG))
    }
    counters, logs = {}, {}
    try:
        for collector in collectors.values():
            collector.start()
        for collector in collectors.values():
            collector.wait_polling()
            deadline = time.monotonic() + 60
            while collector.metrics().get("rmqcol_cycles_total", 0) < 2 and time.monotonic() < deadline:
                time.sleep(0.5)
            assert collector.running(), collector.log_text()[-2000:]
        for name, collector in collectors.items():
            counters[name], logs[name] = collector.metrics(), collector.log_text()
    finally:
        for collector in collectors.values():
            collector.stop()

    polls = read_back(secure_kafka, [topic])
    by_collector = {p["collector"] for p in polls if p["group"] == "sec-g"}
    assert len(by_collector) == 1, polls[:3]  # the right collector's polls only
    assert counters["right"].get('rmqcol_problems_total{kind="kafka_auth_failed"}', 0) == 0, counters["right"]
    assert counters["wrong"].get('rmqcol_problems_total{kind="kafka_auth_failed"}', 0) >= 1, counters["wrong"]
    refusals = [line for line in logs["wrong"].splitlines() if "refused the collector's authentication" in line]
    assert refusals and all(" collector: " in line for line in refusals), logs["wrong"][-2000:]
    stack = [line for line in logs["wrong"].splitlines() if line.lstrip().startswith(("at ", "Caused by"))]
    assert not stack, stack[:5]
    for text in logs.values():
        assert all(secret not in text for secret in secrets_of(secure_kafka))


def _agent_file(path: Path, info: BrokerInfo, password: str | None) -> Path:
    assert info.listener is not None
    options = info.listener.client_options(password)
    path.write_text("".join(f"rrm.agent.kafka.{k}={v.replace(chr(92), chr(92) * 2)}\n" for k, v in options.items()))
    return path


def test_the_agent_publishes_through_sasl_ssl_from_its_config_file(secure_kafka, rocketmq_cluster, tmp_path):
    listener = secure_kafka.listener
    assert listener is not None
    topic = "sec.send-results"
    from connectors.kafka_topics import create_topics

    create_topics(secure_kafka.bootstrap_servers, [topic], **listener.kafka_python_options())
    stopped = {}
    for name, password in (("right", None), ("wrong", WRONG)):
        agent = {
            "bootstrap.servers": secure_kafka.bootstrap_servers,
            "topic.send.results": topic,
            "config.file": str(_agent_file(tmp_path / f"{name}.properties", secure_kafka, password)),
        }
        producer = ClientProcess(
            "5",
            "producer",
            tmp_path / name,
            agent=agent,
            namesrv=rocketmq_cluster.namesrv_addr,
            group=f"sec_{name}_pg",
            topic=READY_TOPIC,
            instance_name=f"sec-{name}",
            rate=20,
            count=5,
        )
        with producer:
            producer.wait_for(lambda line: line["kind"] == "sent", 60)
            producer.stop()
            producer.wait_exit(10)
            stopped[name] = producer.last("stopped")
            assert all(secret not in " ".join(map(str, producer.command())) for secret in secrets_of(secure_kafka))
    right, wrong = stopped["right"], stopped["wrong"]
    assert right["agent"]["published"] >= 5 and right["agent"]["kafka_auth_refused"] == 0, right
    assert "agent_refusal" not in right, right
    assert wrong["sends_ok"] >= 5 and wrong["unexpected"] == 0, wrong  # the application's sends go on
    assert wrong["agent"]["published"] == 0 and wrong["agent"]["kafka_auth_refused"] >= 1, wrong
    refusal = wrong["agent_refusal"]
    assert refusal.startswith("rocketmq-rebalance-agent: Kafka at") and "\n" not in refusal, refusal
    assert "SaslAuthenticationException" in refusal and WRONG not in refusal, refusal

    events = read_back(secure_kafka, [topic])
    assert {e["producer_group"] for e in events} == {"sec_right_pg"}, events[:3]
