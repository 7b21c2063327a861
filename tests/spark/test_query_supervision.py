"""A failed streaming query is restarted from its checkpoint with a doubling backoff; too many failures in a
row end the job. Real Spark queries that fail in their sink, supervised as the job supervises its own."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from streaming.config import SupervisionConfig
from streaming.job.runtime.supervision import QueryFailedRepeatedly, QuerySupervisor


def test_backoff_doubles_up_to_the_maximum():
    supervisor = QuerySupervisor(SupervisionConfig(2, 30, 10), lambda name: None, lambda name: None)
    assert [supervisor.backoff_s(n) for n in range(1, 7)] == [2, 4, 8, 16, 30, 30]


def _start(spark, checkpoint: Path, failing: Path, seen: Path):
    """A query over the rate source whose sink raises while ``failing`` exists and otherwise records batches."""

    def sink(frame, batch_id):
        if failing.exists():
            raise RuntimeError(f"sink unavailable ({failing.name})")
        (seen / str(batch_id)).write_text(str(frame.count()))

    stream = spark.readStream.format("rate").option("rowsPerSecond", 5).load()
    return (
        stream.writeStream.queryName("supervised")
        .option("checkpointLocation", str(checkpoint))
        .foreachBatch(sink)
        .trigger(processingTime="500 milliseconds")
        .start()
    )


def _supervise_until(supervisor, queries, done, timeout_s=120.0):
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, "the supervised query did not reach the expected state"
        supervisor.check(queries, time.monotonic())
        time.sleep(0.2)


def _supervised(spark, tmp_path, policy):
    """A supervised query whose sink fails until the ``failing`` file is removed; the supervisor and its records."""
    failing, seen = tmp_path / "failing", tmp_path / "seen"
    seen.mkdir()
    failing.touch()
    queries: dict[str, object] = {}
    restarts: list[str] = []

    def restart(name):
        queries[name] = _start(spark, tmp_path / "checkpoint", failing, seen)

    restart("supervised")
    return QuerySupervisor(policy, restart, restarts.append), queries, restarts, failing, seen


def test_a_failed_query_restarts_from_its_checkpoint_and_counts(spark, tmp_path):
    supervisor, queries, restarts, failing, seen = _supervised(spark, tmp_path, SupervisionConfig(1, 2, 10))
    try:
        _supervise_until(supervisor, queries, lambda: len(restarts) >= 2)  # failed, restarted, failed again
        failing.unlink()
        _supervise_until(supervisor, queries, lambda: len(list(seen.iterdir())) >= 2)
        query = queries["supervised"]
        assert query.isActive and query.exception() is None
        assert restarts == ["supervised"] * len(restarts)
        # The checkpoint carried the failed batch over: the first batch that succeeded resumed its id.
        assert min(int(p.name) for p in seen.iterdir()) == 0
    finally:
        for query in queries.values():
            query.stop()


def test_a_query_failing_too_often_in_a_row_ends_the_job(spark, tmp_path):
    supervisor, queries, restarts, _, seen = _supervised(spark, tmp_path, SupervisionConfig(1, 1, 3))
    try:
        with pytest.raises(QueryFailedRepeatedly, match=r"supervised failed 3 times in a row; .*sink unavailable"):
            _supervise_until(supervisor, queries, lambda: False)
        assert restarts == ["supervised", "supervised"]
        assert not list(seen.iterdir())
    finally:
        for query in queries.values():
            query.stop()
