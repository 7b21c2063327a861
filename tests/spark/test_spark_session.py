"""The session factory's JVM settings, checked where they matter: in the running driver."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.spark


def test_a_stop_during_a_python_batch_is_recognised_as_an_interrupt_even_with_a_long_traceback(spark):  # type: ignore[no-untyped-def]
    """Spark decides whether a failed ``foreachBatch`` was only interrupted by ``query.stop()`` with a regex
    over the Python error's whole text that recurses once per character. On the JVM's default 1 MB thread
    stack it overflowed at about 2,500 characters (a StackOverflowError at every clean stop of the job);
    the factory's ``-Xss`` makes room for tracebacks tens of thousands of characters long."""
    jvm = spark.sparkContext._jvm
    module = jvm.java.lang.Class.forName("org.apache.spark.sql.execution.streaming.runtime.StreamExecution$")
    stream_execution = module.getField("MODULE$").get(None)
    frames = "\tat org.apache.spark.sql.execution.SomeOperator.doExecute(SomeOperator.scala:123)\n" * 250
    message = (
        "py4j.protocol.Py4JJavaError: An error occurred while calling o123.save.\n"
        f": org.apache.spark.SparkException: Job aborted.\n{frames}"
        "Caused by: java.lang.InterruptedException\n"
    )
    assert len(message) > 20_000
    assert stream_execution.PROXY_ERROR().findFirstMatchIn(message).isDefined()


def test_local_checkpoints_are_written_through_the_filesystem_api():  # type: ignore[no-untyped-def]
    """ "auto" picks Hadoop's FileSystem API for a local checkpoint root only; "spark" and [spark.conf] win."""
    from streaming.job.runtime.spark_session import (
        CHECKPOINT_FILE_MANAGER_KEY,
        FILESYSTEM_CHECKPOINT_FILE_MANAGER,
        SparkSettings,
        spark_conf,
    )

    def manager(**settings: object) -> str | None:
        return spark_conf(SparkSettings(**settings)).get(CHECKPOINT_FILE_MANAGER_KEY)  # type: ignore[arg-type]

    for local in (".run/checkpoints", "/var/lib/rrm/checkpoints", "file:///var/lib/rrm/checkpoints"):
        assert manager(checkpoint_root=local) == FILESYSTEM_CHECKPOINT_FILE_MANAGER, local
    for remote in (
        "hdfs://nn:8020/rrm/checkpoints",
        "s3a://bucket/rrm/checkpoints",
        "abfss://c@a.dfs.core.windows.net/x",
    ):
        assert manager(checkpoint_root=remote) is None, remote
    assert manager() is None  # no checkpoint root given: Spark's choice
    assert manager(checkpoint_root="/tmp/c", checkpoint_file_manager="spark") is None
    custom = {CHECKPOINT_FILE_MANAGER_KEY: "com.example.Manager"}
    assert manager(checkpoint_root="/tmp/c", extra_conf=custom) == "com.example.Manager"


def test_the_test_session_checkpoints_as_the_job_does_locally(spark):  # type: ignore[no-untyped-def]
    """The suite's streaming queries (restarts, crashes) run with the checkpoint writes a local job uses."""
    from streaming.job.runtime.spark_session import CHECKPOINT_FILE_MANAGER_KEY, FILESYSTEM_CHECKPOINT_FILE_MANAGER

    assert spark.conf.get(CHECKPOINT_FILE_MANAGER_KEY) == FILESYSTEM_CHECKPOINT_FILE_MANAGER


def test_routine_delta_warnings_are_quieted_and_the_rest_still_warn(spark):  # type: ignore[no-untyped-def]
    from streaming.job.runtime.spark_session import QUIETED_LOGGERS

    log_manager = spark.sparkContext._jvm.org.apache.logging.log4j.LogManager
    for logger, level in QUIETED_LOGGERS.items():
        assert log_manager.getLogger(logger).getLevel().toString() == level
    assert log_manager.getRootLogger().getLevel().toString() == "WARN"
    # (the DAGScheduler is quieted by a job's stop: ``MonitorJob.stop_queries``)
    assert log_manager.getLogger("org.apache.spark.scheduler.TaskSetManager").getLevel().toString() == "WARN"


def test_set_logger_levels_returns_the_levels_it_replaced(spark):  # type: ignore[no-untyped-def]
    from streaming.job.runtime.spark_session import set_logger_levels

    name = "rrm.tests.a.logger.nobody.else.sets"
    log_manager = spark.sparkContext._jvm.org.apache.logging.log4j.LogManager

    def level() -> str:
        return log_manager.getLogger(name).getLevel().toString()

    inherited = level()
    previous = set_logger_levels(spark, {name: "ERROR" if inherited != "ERROR" else "INFO"})
    assert previous == {name: inherited} and level() != inherited
    set_logger_levels(spark, previous)
    assert level() == inherited


def test_python_workers_reach_the_jvm_over_a_unix_domain_socket(spark):  # type: ignore[no-untyped-def]
    """A worker's sockets, read from /proc inside the worker: its connection to the JVM is a Unix domain socket
    (over loopback TCP, a stateful operator's runner waited ~40 ms per partition and batch)."""

    def sockets(frames):  # type: ignore[no-untyped-def]
        import os

        import pandas as pd

        for _ in frames:
            pass
        inodes = set()
        for fd in os.listdir("/proc/self/fd"):
            try:
                target = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])

        def table_inodes(path: str, column: int) -> set[str]:
            try:
                with open(path) as table:
                    return {
                        fields[column]
                        for fields in map(str.split, table.read().splitlines()[1:])
                        if len(fields) > column
                    }
            except FileNotFoundError:
                return set()

        unix = table_inodes("/proc/net/unix", 6)
        tcp = table_inodes("/proc/net/tcp", 9) | table_inodes("/proc/net/tcp6", 9)
        yield pd.DataFrame({"unix": [len(inodes & unix)], "tcp": [len(inodes & tcp)]})

    row = spark.range(1).mapInPandas(sockets, "unix INT, tcp INT").first()
    assert row["unix"] >= 1
    assert row["tcp"] == 0


@pytest.mark.parametrize(
    ("master", "elsewhere", "loopback"),
    [
        ("local[2]", False, False),
        ("local", False, False),
        ("local-cluster[2,1,1024]", True, False),
        ("spark://127.0.0.1:7077", True, True),
        ("spark://localhost:7077", True, True),
        ("spark://10.0.0.5:7077", True, False),
        ("spark://127.0.0.1:7077,10.0.0.5:7077", True, False),
        ("k8s://https://api.example:443", True, False),
        ("yarn", True, False),
    ],
)
def test_which_masters_get_the_zip_and_a_driver_on_loopback(master, elsewhere, loopback):  # type: ignore[no-untyped-def]
    from streaming.job.runtime.spark_session import SparkSettings, executors_elsewhere, on_loopback, spark_conf

    assert executors_elsewhere(master) is elsewhere
    assert on_loopback(master) is loopback
    conf = spark_conf(SparkSettings(master=master))
    on_127 = master.startswith("local") or loopback
    assert (conf.get("spark.driver.host") == "127.0.0.1") is on_127
    assert (conf.get("spark.driver.bindAddress") == "127.0.0.1") is on_127


def test_generated_classes_stay_compiled_beyond_spark_s_default_cache_of_100(spark):  # type: ignore[no-untyped-def]
    """More distinct generated classes than Spark's default cache holds (a literal is inlined into its query's
    code, so each of these queries compiles its own), then the oldest ones again: none is compiled anew."""
    counter = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()

    def run(n: int) -> None:  # planned and compiled on the driver, no job run
        spark.range(3).selectExpr(f"id * 7 + {1_000_003 + n} AS x")._jdf.queryExecution().executedPlan().execute()

    for n in range(110):
        run(n)
    compiled = counter.getCount()
    for n in range(10):  # the oldest: the first a cache of 100 would have evicted
        run(n)
    assert counter.getCount() == compiled


def test_the_session_gets_s3a_jars_and_settings_only_for_an_object_store():  # type: ignore[no-untyped-def]
    """hadoop-aws and its 686 MB SDK bundle go into ``spark.jars`` (which every executor fetches) only with
    ``[storage]`` for an object-store root, and with them the S3A settings."""
    from streaming.config import StorageConfig
    from streaming.job.runtime.spark_session import SparkSettings, spark_conf

    server = StorageConfig(endpoint="http://127.0.0.1:9000", path_style_access=True, allow_http=True)
    local = spark_conf(SparkSettings())
    remote = spark_conf(SparkSettings(storage=server))
    assert "hadoop-aws" not in local["spark.jars"] and not any(k.startswith("spark.hadoop.fs.s3a") for k in local)
    assert "/hadoop-aws-" in remote["spark.jars"] and "/bundle-" in remote["spark.jars"]
    assert remote["spark.hadoop.fs.s3a.endpoint"] == server.endpoint
