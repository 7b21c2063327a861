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
