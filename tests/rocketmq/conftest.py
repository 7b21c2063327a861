"""The rocketmq tier's clusters: started on first use, stopped by PID when the tier's last test is done, so no
broker outlives the tier (an idle broker still takes a sixth of a core)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest


@pytest.fixture(scope="package")
def rocketmq_clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str], object]]:
    """``get(line)``: the session's local RocketMQ cluster of line ``"5"`` or ``"4.9"`` (name server, broker-a,
    broker-b on free 127.0.0.1 ports, with the test-speed options), started on first use, stopped by PID at
    the end of this tier."""
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


@pytest.fixture(scope="package")
def rocketmq_cluster(request: pytest.FixtureRequest, rocketmq_clusters: Callable[[str], object]) -> object:
    """The local RocketMQ cluster of the line given by indirect parametrisation (default ``"5"``):
    ``@pytest.mark.parametrize("rocketmq_cluster", ["5", "4.9"], indirect=True)``."""
    return rocketmq_clusters(getattr(request, "param", "5"))
