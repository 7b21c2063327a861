"""The local RocketMQ cluster: both lines start with two routable brokers, one broker stops and starts alone,
and the CLI starts, reports and stops a cluster by PID."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from connectors.processes import pid_alive
from localenv.rocketmq_clients import ClientProcess
from localenv.rocketmq_cluster import BROKER_NAMES, LocalRocketMQCluster

LINES = ["5", "4.9"]


@pytest.mark.parametrize("rocketmq_cluster", LINES, indirect=True)
def test_both_brokers_are_masters_of_the_cluster_and_a_topic_routes_to_both(rocketmq_cluster):
    cluster: LocalRocketMQCluster = rocketmq_cluster
    info = cluster.info()
    assert cluster.masters() == {name: info.broker_addr(name) for name in BROKER_NAMES}

    cluster.create_topic("cluster-test-topic", 4)

    assert cluster.route("cluster-test-topic") == {
        name: {"read_queue_nums": 4, "write_queue_nums": 4, "perm": 6} for name in BROKER_NAMES
    }


@pytest.mark.parametrize("rocketmq_cluster", LINES, indirect=True)
def test_one_broker_stops_and_starts_alone(rocketmq_cluster, tmp_path):
    cluster: LocalRocketMQCluster = rocketmq_cluster
    before = cluster.info()
    # A store with messages (commit log, consume queues, index files) is what a restart has to load.
    cluster.create_topic("restart-test-topic", 2)
    producer = ClientProcess(
        cluster.line,
        "producer",
        tmp_path / "producer",
        namesrv=cluster.namesrv_addr,
        group="restart-test-producer",
        topic="restart-test-topic",
        instance_name="restart-test",
        rate=200,
        count=40,
    )
    try:
        producer.start(120)
        assert producer.wait_for(lambda line: line["kind"] == "sent", 120)["sends_ok"] == 40
    finally:
        producer.stop()

    cluster.stop_broker("broker-b")
    assert not pid_alive(before.brokers["broker-b"].pid)
    assert cluster.running_brokers() == ["broker-a"]
    # The name server drops a broker whose connection closed asynchronously (5.x batches unregistrations).
    deadline = time.monotonic() + 60
    while "broker-b" in cluster.masters() and time.monotonic() < deadline:
        time.sleep(1)
    assert cluster.masters() == {"broker-a": before.broker_addr("broker-a")}

    cluster.start_broker("broker-b")
    after = cluster.info()
    assert after.brokers["broker-b"].pid != before.brokers["broker-b"].pid
    assert after.brokers["broker-a"] == before.brokers["broker-a"]
    assert cluster.masters() == {name: after.broker_addr(name) for name in BROKER_NAMES}
    assert set(cluster.route("restart-test-topic")) == set(BROKER_NAMES)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "streaming.app.cli", "rocketmq", *args],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=300,
    )


def test_cli_starts_reports_and_stops_a_cluster_by_pid(tmp_path):
    home = str(tmp_path / "cluster")

    started = _cli("start", "--line", "4.9", "--home", home)
    assert started.returncode == 0, started.stderr
    info = LocalRocketMQCluster("4.9", home).info()
    pids = [info.namesrv.pid, *(p.pid for p in info.brokers.values())]
    try:
        assert f"name server {info.namesrv_addr}" in started.stdout
        status = _cli("status", "--line", "4.9", "--home", home)
        assert status.returncode == 0
        assert "broker-a" in status.stdout and "broker-b" in status.stdout and "DOWN" not in status.stdout
    finally:
        stopped = _cli("stop", "--line", "4.9", "--home", home)
    assert stopped.returncode == 0 and "stopped" in stopped.stdout
    assert not any(pid_alive(pid) for pid in pids)
    assert _cli("status", "--line", "4.9", "--home", home).returncode == 3
