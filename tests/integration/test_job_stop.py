"""Stopping the running job: each query's micro-batch in progress commits before the query stops, unless a
second signal says not to wait; a session that was running before the job started is left running."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from streaming.job.runner import MonitorJob
from tests.support.job import job_config, publish

BASE = 1_700_000_000_000


def batch_ids(directory: Path) -> list[int]:
    return sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit()) if directory.is_dir() else []


def heartbeats(groups: int, members: int, rounds: int) -> list[dict]:
    events = [
        {
            "type": "topic_route",
            "schema_version": 1,
            "event_time": BASE,
            "topic": "T",
            "brokers": [{"broker": "broker-a", "read_queue_nums": 8, "write_queue_nums": 8, "perm": 6}],
        }
    ]
    for r in range(rounds):
        for g in range(groups):
            for m in range(members):
                events.append(
                    {
                        "type": "consumer_channel",
                        "schema_version": 1,
                        "event_time": BASE + r * 30_000 + m,
                        "broker": "broker-a",
                        "kind": "HEARTBEAT",
                        "channel": f"10.1.{g}.{m}:4000",
                        "client_id": f"10.1.{g}.{m}@1",
                        "group": f"G{g}",
                        "subscriptions": [{"topic": "T", "expression": "*", "sub_version": 1}],
                    }
                )
    return events


@pytest.mark.parametrize("hurry", [False, True], ids=["waits-for-the-batch", "second-signal-does-not-wait"])
def test_a_stop_in_the_middle_of_a_batch_lets_it_commit_first_unless_hurried(kafka_broker, spark, tmp_path, hurry):
    config, topics = job_config(
        kafka_broker.bootstrap_servers,
        tmp_path,
        f"stop-{hurry}",
        RRM__SPARK__TRIGGER_INTERVAL='"1 second"',
        RRM__KAFKA__MAX_OFFSETS_PER_TRIGGER="2000",
    )
    publish(kafka_broker.bootstrap_servers, heartbeats(groups=40, members=5, rounds=20), topics)
    checkpoint = Path(config.paths.checkpoint_root).resolve() / "consumer"
    listeners = len(spark._jsparkSession.streams().listListeners())
    job = MonitorJob(config)
    job.start()
    try:
        # Catch the consumer query with a batch planned (its offsets written) and not yet committed.
        deadline = time.monotonic() + 300
        while True:
            planned, committed = batch_ids(checkpoint / "offsets"), batch_ids(checkpoint / "commits")
            if planned and planned[-1] not in committed and job.queries["consumer"].status["isTriggerActive"]:
                running = planned[-1]
                break
            assert time.monotonic() < deadline, "the consumer query never ran a batch"
            time.sleep(0.01)
        second_signal = threading.Event()
        if hurry:
            second_signal.set()
        job.stop_queries(grace_s=300, hurry=second_signal)
    finally:
        job.stop()
    # Waiting, the batch commits before the query stops; hurried, it is interrupted (and replayed on restart).
    assert (running in batch_ids(checkpoint / "commits")) is not hurry
    assert not any(query.isActive for query in job.queries.values())
    assert all(query.exception() is None for query in job.queries.values())
    # The session was running before the job started: it is the caller's, left running without the job's listener.
    assert spark.range(3).count() == 3
    assert len(spark._jsparkSession.streams().listListeners()) == listeners
