"""Kafka stopped for 20 s in the middle of a run and started again: the running job recovers by itself and its
Delta tables equal those of an uninterrupted run. The broker is the test's own, so stopping it harms no one.

Both runs read the same records in batches of ``MAX_OFFSETS`` records (the same batches, hence the same
watermarks), small enough that most of the input is still unread when Kafka stops after the first commits:
the queries can only finish by reading from the restarted broker. While Kafka is down, a query cannot plan a
batch (that needs the partitions' latest offsets): each waits inside the Kafka source's offset lookup, and
none of its lookups fails within the outage (its first would time out after 60 s), so no query fails and the
job goes on once Kafka is back. The uninterrupted run and the one that reads what the stopped job left run in
the tests' Spark session."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import BinaryIO

from connectors.processes import free_port
from localenv.kafka_broker import LocalKafkaBroker, create_topics
from streaming.config import load_config
from streaming.contract.events import DEFAULT_TOPICS
from tests.support.driver_kills import BASE, ROOT, TABLES, config_file, workload
from tests.support.job import publish, read, run_available

OUTAGE_S = 20
# Batches planned from offsets Kafka gave before it stopped are on disk this long after it stopped.
PLANNED_SETTLE_S = 2
KAFKA_QUERIES = ("consumer", "send-ingest")
MAX_OFFSETS = 15


def _entries(root: Path, query: str, log: str) -> int:
    folder = root / "checkpoints" / query / log
    return len([p for p in folder.iterdir() if p.name.isdigit()]) if folder.exists() else 0


def _commits(root: Path, query: str) -> int:
    return _entries(root, query, "commits")


def _planned(root: Path, query: str) -> int:
    """The query's batches planned so far (its offsets log), committed or not."""
    return _entries(root, query, "offsets")


def _set_max_offsets(config: Path) -> None:
    text = config.read_text()
    config.write_text(text.replace("max_offsets_per_trigger = 60", f"max_offsets_per_trigger = {MAX_OFFSETS}"))


def _rows(spark, root: Path, table: str) -> list[str]:
    """The table's rows without ``batch_id``: the fault rows are written by send-ingest's batches, which follow
    its trigger, and a running job and an available-now run meet it at different moments; the rows themselves
    must not differ."""
    return sorted(
        repr(sorted((k, v) for k, v in r.items() if k != "batch_id")) for r in read(spark, _Paths(root), table)
    )


class _Paths:
    def __init__(self, root: Path) -> None:
        self.paths = type("paths", (), {"delta_root": str(root / "delta")})


def _wait(condition, what: str, timeout_s: float = 600.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.5)


def _run_uninterrupted(spark, tmp_path: Path, bootstrap: str, prefix: str) -> None:  # type: ignore[no-untyped-def]
    """Publish the first half of the crash test's fleet and run the job over it without an outage, in the tests'
    Spark session."""
    topics = {t: f"{prefix}.{name.split('.', 1)[1]}" for t, name in DEFAULT_TOPICS.items()}
    create_topics(bootstrap, topics.values())
    # The first half of the crash test's fleet, in small batches: most of it is unread when Kafka stops.
    publish(bootstrap, [e for e in workload() if isinstance(e, tuple) or e["event_time"] < BASE + 150_000], topics)
    whole = config_file(tmp_path / "whole.toml", bootstrap, prefix, tmp_path / "uninterrupted")
    _set_max_offsets(whole)
    run_available(spark, load_config(whole))


def _outage_config(tmp_path: Path, bootstrap: str, prefix: str, outage_root: Path) -> Path:
    """The running job's config: the same batches, a trigger every second, restarts backing off 8 s at most."""
    config = config_file(tmp_path / "outage.toml", bootstrap, prefix, outage_root)
    _set_max_offsets(config)
    with config.open("a") as extra:
        extra.write('[spark]\ntrigger_interval = "1 second"\n[supervision]\nrestart_backoff_max_seconds = 8\n')
    return config


def _start_job(config: Path, log: BinaryIO) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "streaming.cli", "run", "--config", str(config)],
        cwd=ROOT,
        start_new_session=True,
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def _wait_until_committing_again(outage_root: Path, before: dict[str, int], log_path: Path) -> None:
    """Both Kafka-reading queries commit new batches; a timeout's message ends with the job's log."""
    try:
        _wait(lambda: all(_commits(outage_root, q) > n for q, n in before.items()), "the queries commit again")
    except AssertionError as error:
        raise AssertionError(f"{error}; the job's log ends:\n{log_path.read_text()[-4000:]}") from None


def _assert_same_tables(spark, uninterrupted: Path, outage_root: Path) -> None:  # type: ignore[no-untyped-def]
    for table in TABLES:
        expected = _rows(spark, uninterrupted, table)
        actual = _rows(spark, outage_root, table)
        assert actual == expected, f"{table}: {len(actual)} rows after the outage vs {len(expected)} uninterrupted"
    assert _rows(spark, uninterrupted, "membership_changes")


def test_kafka_down_under_the_running_job_then_back_loses_and_repeats_nothing(spark, tmp_path):
    home, port, controller_port = tmp_path / "kafka", free_port(), free_port()
    broker = LocalKafkaBroker(home, port=port, controller_port=controller_port)
    bootstrap = broker.start().bootstrap_servers
    job = None
    try:
        prefix = "outage"
        _run_uninterrupted(spark, tmp_path, bootstrap, prefix)

        outage_root = tmp_path / "outage"
        config = _outage_config(tmp_path, bootstrap, prefix, outage_root)
        log = (tmp_path / "job.log").open("wb")
        job = _start_job(config, log)
        _wait(
            lambda: _commits(outage_root, "consumer") >= 1 and _commits(outage_root, "send-ingest") >= 1,
            "the job has committed a batch of each Kafka query",
        )

        broker.stop()
        unread = {q: _commits(tmp_path / "uninterrupted", q) - _commits(outage_root, q) for q in KAFKA_QUERIES}
        assert all(n >= 2 for n in unread.values()), f"too little left to read when Kafka stopped: {unread}"
        time.sleep(PLANNED_SETTLE_S)
        planned = {q: _planned(outage_root, q) for q in KAFKA_QUERIES}
        time.sleep(OUTAGE_S - PLANNED_SETTLE_S)
        assert job.poll() is None, "the job exited while Kafka was down"
        # The outage stopped the job's reading: with input left, no query planned a batch while Kafka was down.
        assert {q: _planned(outage_root, q) for q in KAFKA_QUERIES} == planned, "a batch was planned without Kafka"
        before = {q: _commits(outage_root, q) for q in KAFKA_QUERIES}
        broker = LocalKafkaBroker(home, port=port, controller_port=controller_port)
        broker.start()
        # Recovered by itself: both Kafka-reading queries commit new batches without anyone restarting the job.
        _wait_until_committing_again(outage_root, before, tmp_path / "job.log")
        assert job.poll() is None

        job.send_signal(signal.SIGTERM)
        assert job.wait(timeout=120) == 0
        # Whatever the stopped job had not read yet, from the same checkpoints, in the tests' Spark session.
        run_available(spark, load_config(config))
    finally:
        if job is not None and job.poll() is None:
            job.kill()
        broker.stop()

    _assert_same_tables(spark, tmp_path / "uninterrupted", outage_root)
