"""Kafka stopped for 60 s in the middle of a run and started again: the running job recovers by itself and its
Delta tables equal those of an uninterrupted run. The broker is the test's own, so stopping it harms no one.

Both runs read the same records in batches of ``MAX_OFFSETS`` records (the same batches, hence the same
watermarks), small enough that most of the input is still unread when Kafka stops after the first commits:
the queries can only finish by reading from the restarted broker."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import BinaryIO

from connectors.processes import free_port
from localenv.kafka_broker import LocalKafkaBroker, create_topics
from streaming.contract.events import DEFAULT_TOPICS
from tests.support.driver_kills import BASE, ROOT, TABLES, config_file, run_job, workload
from tests.support.job import publish, read

OUTAGE_S = 60
KAFKA_QUERIES = ("consumer", "send-ingest")
MAX_OFFSETS = 15


def _commits(root: Path, query: str) -> int:
    commits = root / "checkpoints" / query / "commits"
    return len([p for p in commits.iterdir() if p.name.isdigit()]) if commits.exists() else 0


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


def _run_uninterrupted(tmp_path: Path, bootstrap: str, prefix: str) -> None:
    """Publish the first half of the crash test's fleet and run the job over it without an outage."""
    topics = {t: f"{prefix}.{name.split('.', 1)[1]}" for t, name in DEFAULT_TOPICS.items()}
    create_topics(bootstrap, topics.values())
    # The first half of the crash test's fleet, in small batches: most of it is unread when Kafka stops.
    publish(bootstrap, [e for e in workload() if isinstance(e, tuple) or e["event_time"] < BASE + 150_000], topics)
    whole = config_file(tmp_path / "whole.toml", bootstrap, prefix, tmp_path / "uninterrupted")
    _set_max_offsets(whole)
    run_job(whole)


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


def test_kafka_down_for_a_minute_then_back_loses_and_repeats_nothing(spark, tmp_path):
    home, port, controller_port = tmp_path / "kafka", free_port(), free_port()
    broker = LocalKafkaBroker(home, port=port, controller_port=controller_port)
    bootstrap = broker.start().bootstrap_servers
    job = None
    try:
        prefix = "outage"
        _run_uninterrupted(tmp_path, bootstrap, prefix)

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
        time.sleep(OUTAGE_S)
        assert job.poll() is None, "the job exited while Kafka was down"
        before = {q: _commits(outage_root, q) for q in KAFKA_QUERIES}
        broker = LocalKafkaBroker(home, port=port, controller_port=controller_port)
        broker.start()
        # Recovered by itself: both Kafka-reading queries commit new batches without anyone restarting the job.
        _wait_until_committing_again(outage_root, before, tmp_path / "job.log")
        assert job.poll() is None

        job.send_signal(signal.SIGTERM)
        assert job.wait(timeout=120) == 0
        run_job(config)  # whatever the stopped job had not read yet, from the same checkpoints
    finally:
        if job is not None and job.poll() is None:
            job.kill()
        broker.stop()

    _assert_same_tables(spark, tmp_path / "uninterrupted", outage_root)
