"""Kafka stopped in the middle of a run and started again: the running job recovers by itself and its Delta
tables equal those of an uninterrupted run. The broker is the test's own, so stopping it harms no one.

Both runs read the same records in batches of ``MAX_OFFSETS`` records (the same batches, hence the same
watermarks), small enough that most of the input is still unread when Kafka stops after the first commits:
the queries can only finish by reading from the restarted broker. While Kafka is down, a query cannot plan a
batch (that needs the partitions' latest offsets): each waits inside the Kafka source's offset lookup, and
none of its lookups fails within the outage (its first would time out after 60 s), so no query fails and the
job goes on once Kafka is back. Every run is in the tests' Spark session: the uninterrupted one, the job Kafka
stops under (``MonitorJob.run``, the loop of ``rebalance-monitor run``, with its query supervision) and the
one that reads what the stopped job left.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from connectors.processes import free_port
from localenv.kafka_broker import LocalKafkaBroker
from streaming.config import load_config
from streaming.job.runner import MonitorJob
from tests.support.driver_kills import BASE, TABLES, workload
from tests.support.job import job_env, publish, read, run_available

PREFIX = "outage"
KAFKA_QUERIES = ("consumer", "send-ingest")
MAX_OFFSETS = 15
# The driver-kill fleet's first three heartbeat rounds (0-60 s of its 330 s) and their sends: 5 batches of the
# consumer query and 11 of send-ingest, so each has at least 2 left when Kafka stops after its first commit (Kafka
# stops at the slower query's first commit; the faster may have committed 3 by then and still has 2 left).
# Every batch is read twice (the uninterrupted run, then the outage run and its drain): a round more costs 6.
WORKLOAD_MS = 90_000
# Batches planned from offsets Kafka gave before it stopped are on disk this long after it stopped.
PLANNED_SETTLE_S = 2
# How long Kafka stays down after that. A query with input left plans its next batch one trigger (1 s) after
# its last one ended: a window of three times the longest batch the job took before the stop (plus the
# trigger) is one in which a job that could still read would have planned batches, on a fast machine as on a
# loaded one. At least MIN_WINDOW_S; at most MAX_WINDOW_S, so that with the broker's stop and restart the
# outage stays well inside the Kafka source's first offset-lookup timeout (60 s).
MIN_WINDOW_S = 8.0
MAX_WINDOW_S = 30.0
BATCHES_PER_WINDOW = 3


def _entries(root: Path, query: str, log: str) -> dict[int, float]:
    """The batch ids in one of the query's checkpoint logs, with the time each entry was written."""
    folder = root / "checkpoints" / query / log
    if not folder.exists():
        return {}
    return {int(p.name): p.stat().st_mtime for p in folder.iterdir() if p.name.isdigit()}


def _commits(root: Path, query: str) -> int:
    return len(_entries(root, query, "commits"))


def _planned(root: Path, query: str) -> int:
    """The query's batches planned so far (its offsets log), committed or not."""
    return len(_entries(root, query, "offsets"))


def _longest_batch_s(root: Path) -> float:
    """The longest any committed batch of the Kafka queries took, from its planning to its commit."""
    spans = [0.0]
    for query in KAFKA_QUERIES:
        planned = _entries(root, query, "offsets")
        spans += [t - planned[b] for b, t in _entries(root, query, "commits").items() if b in planned]
    return max(spans)


def _settings(bootstrap: str, root: Path, **extra: str):  # type: ignore[no-untyped-def]
    """The job's configuration for a run with its tables and checkpoints under ``root`` (the same batches and
    Spark settings for every run compared), and the topics by event type."""
    env, topics = job_env(bootstrap, root, PREFIX, RRM__KAFKA__MAX_OFFSETS_PER_TRIGGER=str(MAX_OFFSETS), **extra)
    return load_config(None, env=env), topics


def _rows(spark, config, table: str) -> list[str]:  # type: ignore[no-untyped-def]
    """The table's rows without ``batch_id``: the fault rows are written by send-ingest's batches, which follow
    its trigger, and a running job and an available-now run meet it at different moments; the rows themselves
    must not differ."""
    return sorted(repr(sorted((k, v) for k, v in r.items() if k != "batch_id")) for r in read(spark, config, table))


def _wait(condition: Callable[[], bool], what: str, job_over: threading.Event, timeout_s: float = 600.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert not job_over.is_set(), f"the job stopped before {what}"
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.5)


class _Outage:
    """What the test does to Kafka while the job runs, in a thread beside the job's loop (which needs the main
    thread for its signal handlers): stop the broker after both Kafka queries' first commits, check that
    nothing is planned while it is down, start it again, wait until both commit again. The job's loop stops
    once ``done`` is set; an assertion that failed here is ``error``."""

    def __init__(self, broker: LocalKafkaBroker, restart: Callable[[], LocalKafkaBroker], root: Path, total: dict):
        self.broker, self.restart, self.root, self.total = broker, restart, root, total
        self.done, self.job_over = threading.Event(), threading.Event()
        self.error: BaseException | None = None
        self.window_s = 0.0

    def run(self) -> None:
        try:
            self._script()
        except BaseException as error:  # noqa: BLE001 - re-raised in the test's thread
            self.error = error
        finally:
            self.done.set()

    def _script(self) -> None:
        root, over = self.root, self.job_over
        _wait(lambda: all(_commits(root, q) >= 1 for q in KAFKA_QUERIES), "each Kafka query has committed", over)
        self.broker.stop()
        unread = {q: self.total[q] - _commits(root, q) for q in KAFKA_QUERIES}
        assert all(n >= 2 for n in unread.values()), f"too little left to read when Kafka stopped: {unread}"
        time.sleep(PLANNED_SETTLE_S)
        planned = {q: _planned(root, q) for q in KAFKA_QUERIES}
        self.window_s = min(MAX_WINDOW_S, max(MIN_WINDOW_S, BATCHES_PER_WINDOW * (_longest_batch_s(root) + 1)))
        time.sleep(self.window_s)
        assert not over.is_set(), "the job stopped while Kafka was down"
        # The outage stopped the job's reading: with input left, no query planned a batch while Kafka was down.
        assert {q: _planned(root, q) for q in KAFKA_QUERIES} == planned, "a batch was planned without Kafka"
        before = {q: _commits(root, q) for q in KAFKA_QUERIES}
        self.broker = self.restart()
        # Recovered by itself: both Kafka-reading queries commit new batches without anyone restarting the job.
        _wait(lambda: all(_commits(root, q) > n for q, n in before.items()), "the queries commit again", over)


def test_kafka_down_under_the_running_job_then_back_loses_and_repeats_nothing(spark, tmp_path):
    home, port, controller_port = tmp_path / "kafka", free_port(), free_port()

    def start_broker() -> LocalKafkaBroker:
        broker = LocalKafkaBroker(home, port=port, controller_port=controller_port)
        broker.start()
        return broker

    broker = start_broker()
    bootstrap = f"127.0.0.1:{port}"
    try:
        uninterrupted, topics = _settings(bootstrap, tmp_path / "uninterrupted")
        publish(
            bootstrap, [e for e in workload() if isinstance(e, tuple) or e["event_time"] < BASE + WORKLOAD_MS], topics
        )
        run_available(spark, uninterrupted)
        total = {q: _commits(tmp_path / "uninterrupted", q) for q in KAFKA_QUERIES}

        outage_root = tmp_path / "outage"
        # A trigger every second; a query that failed would be restarted after 8 s at most.
        config, _ = _settings(
            bootstrap,
            outage_root,
            RRM__SPARK__TRIGGER_INTERVAL='"1 second"',
            RRM__SUPERVISION__RESTART_BACKOFF_MAX_SECONDS="8",
        )
        outage = _Outage(broker, start_broker, outage_root, total)
        script = threading.Thread(target=outage.run, daemon=True)
        script.start()
        try:
            code = MonitorJob(config).run(on_tick=lambda _job: outage.done.is_set())
        finally:
            outage.job_over.set()
            script.join(timeout=120)
            broker = outage.broker
        if outage.error is not None:
            raise outage.error
        assert code == 0
        # Whatever the stopped job had not read yet, from the same checkpoints.
        run_available(spark, config)
    finally:
        broker.stop()

    for table in TABLES:
        expected, actual = _rows(spark, uninterrupted, table), _rows(spark, config, table)
        assert actual == expected, f"{table}: {len(actual)} rows after the outage vs {len(expected)} uninterrupted"
    assert _rows(spark, uninterrupted, "membership_changes")
