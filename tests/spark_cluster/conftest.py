"""The spark_cluster tier's standalone cluster: started on first use, stopped by PID when the tier's last test
is done."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="package")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A local Spark standalone cluster (``localenv.spark_cluster``: a master and two 1-core workers on free
    127.0.0.1 ports), started on first use, stopped by PID at the end of this tier."""
    from localenv.spark_cluster import LocalSparkCluster

    cluster = LocalSparkCluster(tmp_path_factory.mktemp("spark-cluster"), stop_grace_s=5.0)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()
