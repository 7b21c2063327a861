"""Fixtures shared by every tier; tiers are marked by folder (see tests/README.md).

Real components only: the Kafka broker is the project's own ``LocalKafkaBroker`` and Spark is the
project's session factory. Both start lazily, once per test session, and only when a test asks; a
component that cannot start is an error, never a skip.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

TIER_BY_FOLDER = {
    "unit": None,
    "jvm": "jvm",
    "spark": "spark",
    "integration": "integration",
    "observability": "observability",
    "rocketmq": "rocketmq",
    "spark_cluster": "spark_cluster",
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        folder = Path(str(item.fspath)).parent.name
        marker = TIER_BY_FOLDER.get(folder)
        if marker:
            item.add_marker(marker)


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A real single-node Kafka broker on 127.0.0.1 (free ports), stopped by PID at session end."""
    from localenv.kafka_broker import LocalKafkaBroker

    broker = LocalKafkaBroker(tmp_path_factory.mktemp("kafka"))
    info = broker.start()
    try:
        yield info
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def rocketmq_clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str], object]]:
    """``get(line)``: the session's local RocketMQ cluster of line ``"5"`` or ``"4.9"`` (name server, broker-a,
    broker-b on free 127.0.0.1 ports, with the test-speed options), started on first use, stopped by PID at
    session end."""
    from localenv.rocketmq_cluster import TEST_SPEED, LocalRocketMQCluster

    clusters: dict[str, LocalRocketMQCluster] = {}

    def get(line: str) -> LocalRocketMQCluster:
        if line not in clusters:
            cluster = LocalRocketMQCluster(
                line, tmp_path_factory.mktemp(f"rocketmq-{line}"), test_speed=TEST_SPEED, stop_grace_s=5.0
            )
            clusters[line] = cluster
            cluster.start()
        return clusters[line]

    try:
        yield get
    finally:
        for cluster in clusters.values():
            cluster.stop()


@pytest.fixture(scope="session")
def rocketmq_cluster(request: pytest.FixtureRequest, rocketmq_clusters: Callable[[str], object]) -> object:
    """The local RocketMQ cluster of the line given by indirect parametrisation (default ``"5"``):
    ``@pytest.mark.parametrize("rocketmq_cluster", ["5", "4.9"], indirect=True)``."""
    return rocketmq_clusters(getattr(request, "param", "5"))


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A local Spark standalone cluster (``localenv.spark_cluster``: a master and two 1-core workers on free
    127.0.0.1 ports), started on first use, stopped by PID at session end."""
    from localenv.spark_cluster import LocalSparkCluster

    cluster = LocalSparkCluster(tmp_path_factory.mktemp("spark-cluster"), stop_grace_s=5.0)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A local Spark session from the project's factory (Delta, Kafka connector, RocksDB state)."""
    from streaming.job.spark_session import SparkSettings, build_spark_session

    # Every test checkpoints under pytest's temporary directory, so the session writes checkpoint files as
    # the job does for a local checkpoint root.
    session = build_spark_session(
        SparkSettings(
            app_name="rrm-tests",
            local_dir=str(tmp_path_factory.mktemp("spark-local")),
            checkpoint_root=str(tmp_path_factory.getbasetemp()),
        )
    )
    try:
        yield session
    finally:
        session.stop()
