"""The spark_cluster tier's standalone cluster and S3 server: each started on first use, stopped by PID when the
tier's last test is done."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

BUCKET = "rrm"


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


@pytest.fixture(scope="package")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """The project's S3-compatible server (``localenv.s3_server``: s3proxy in memory on a free 127.0.0.1 port)
    with a bucket ``rrm``, started on first use, stopped by PID at the end of this tier."""
    from localenv.s3_server import LocalS3Server

    server = LocalS3Server(tmp_path_factory.mktemp("s3-server"))
    info = server.start()
    try:
        info.create_bucket(BUCKET)
        yield info
    finally:
        server.stop()
