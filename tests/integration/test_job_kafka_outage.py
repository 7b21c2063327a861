"""Kafka stopped for 60 s in the middle of a run and started again: the running job recovers by itself and its
Delta tables equal those of an uninterrupted run. The broker is the test's own, so stopping it harms no one."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from connectors.kafka_broker import LocalKafkaBroker, create_topics, free_port
from streaming.contract.events import DEFAULT_TOPICS
from tests.integration.test_job_crash_recovery import BASE, ROOT, TABLES, config_file, run_job, table_rows, workload
from tests.support.job import publish

OUTAGE_S = 60


def _commits(root: Path, query: str) -> int:
    commits = root / "checkpoints" / query / "commits"
    return len([p for p in commits.iterdir() if p.name.isdigit()]) if commits.exists() else 0


def _wait(condition, what: str, timeout_s: float = 600.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.5)


def test_kafka_down_for_a_minute_then_back_loses_and_repeats_nothing(spark, tmp_path):
    home, port, controller_port = tmp_path / "kafka", free_port(), free_port()
    broker = LocalKafkaBroker(home, port=port, controller_port=controller_port)
    bootstrap = broker.start().bootstrap_servers
    job = None
    try:
        prefix = "outage"
        topics = {t: f"{prefix}.{name.split('.', 1)[1]}" for t, name in DEFAULT_TOPICS.items()}
        create_topics(bootstrap, topics.values())
        # The first half of the crash test's fleet: enough batches to stop Kafka in the middle of the run.
        publish(bootstrap, [e for e in workload() if isinstance(e, tuple) or e["event_time"] < BASE + 150_000], topics)
        run_job(config_file(tmp_path / "whole.toml", bootstrap, prefix, tmp_path / "uninterrupted"))

        outage_root = tmp_path / "outage"
        config = config_file(tmp_path / "outage.toml", bootstrap, prefix, outage_root)
        with config.open("a") as extra:
            extra.write('[spark]\ntrigger_interval = "1 second"\n[supervision]\nrestart_backoff_max_seconds = 8\n')
        log = (tmp_path / "job.log").open("wb")
        job = subprocess.Popen([sys.executable, "-m", "streaming.cli", "run", "--config", str(config)], cwd=ROOT,
                               start_new_session=True, stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
        _wait(lambda: _commits(outage_root, "consumer") >= 2, "the job has committed two consumer batches")

        broker.stop()
        time.sleep(OUTAGE_S)
        assert job.poll() is None, "the job exited while Kafka was down"
        before = {q: _commits(outage_root, q) for q in ("consumer", "send-ingest")}
        broker = LocalKafkaBroker(home, port=port, controller_port=controller_port)
        broker.start()
        # Recovered by itself: both Kafka-reading queries commit new batches without anyone restarting the job.
        _wait(lambda: all(_commits(outage_root, q) > n for q, n in before.items()), "the queries commit again")
        assert job.poll() is None

        job.send_signal(signal.SIGTERM)
        assert job.wait(timeout=120) == 0
        run_job(config)  # whatever the stopped job had not read yet, from the same checkpoints
    finally:
        if job is not None and job.poll() is None:
            job.kill()
        broker.stop()

    for table in TABLES:
        expected = table_rows(spark, tmp_path / "uninterrupted", table)
        actual = table_rows(spark, outage_root, table)
        assert actual == expected, f"{table}: {len(actual)} rows after the outage vs {len(expected)} uninterrupted"
    assert table_rows(spark, tmp_path / "uninterrupted", "membership_changes")
