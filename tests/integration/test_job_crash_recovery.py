"""SIGKILL in the middle of a run, then a restart: the Delta tables equal those of an uninterrupted run."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.support.job import publish, read

BASE = 1_700_000_000_000
ROOT = Path(__file__).parents[2]
TABLES = ("membership_changes", "group_snapshots", "expected_assignments", "current_assignment", "anomaly_episodes",
          "anomalies_current", "group_status_current", "fault_windows", "producer_broker_status_current", "broker_status_current",
          "send_latency_minutes", "dead_letters")  # fmt: skip


def workload():
    rng = random.Random(7)
    events = [{"type": "topic_route", "schema_version": 1, "event_time": BASE, "topic": t,
               "brokers": [{"broker": b, "read_queue_nums": 4, "write_queue_nums": 4, "perm": 6} for b in ("broker-a", "broker-b")]}
              for t in ("T1", "T2")]  # fmt: skip
    for t in range(0, 330_000, 30_000):
        for g in range(6):
            for c in range(4 if g % 3 else 3):
                if g == 4 and c == 3 and t > 200_000:
                    continue  # a member that goes silent and expires
                cid = "172.17.0.1@1" if (g == 5 and c < 2) else f"10.0.{g}.{c}@{c}#9"
                events.append({"type": "consumer_channel", "schema_version": 1, "event_time": BASE + t + c, "broker": "broker-a",
                               "kind": "HEARTBEAT", "channel": f"10.9.{g}.{c}:4000", "client_id": cid, "group": f"G{g}",
                               "subscriptions": [{"topic": "T1" if g % 2 else "T2", "expression": "*", "sub_version": 1}]})  # fmt: skip
        for p in range(5):
            for _ in range(10):
                latency = rng.choice([3, 8, 20, 600, 1200, 2500, 16000]) if rng.random() < 0.2 else rng.randint(1, 40)
                events.append({"type": "send_result", "schema_version": 1, "event_time": BASE + t + rng.randint(0, 29_999),
                               "producer_id": f"P{p}", "producer_group": "PG", "topic": "T1", "broker": rng.choice(["broker-a", "broker-b"]),
                               "queue_id": 0, "latency_ms": latency, "outcome": "OK" if rng.random() > 0.03 else "TIMEOUT",
                               "client_version": "V4_9_8" if p % 2 else "5.3.3", "send_latency_fault_enable": True})  # fmt: skip
    events.sort(key=lambda e: e["event_time"])
    return events + [("consumer_channel", b"{broken"), ("send_result", b'{"type": "send_result"}')]


def config_file(path: Path, bootstrap: str, prefix: str, root: Path) -> Path:
    path.write_text(f"""
[kafka]
bootstrap_servers = "{bootstrap}"
max_offsets_per_trigger = 60
[kafka.topics]
consumer_channel = "{prefix}.consumer-channels"
reported_assignment = "{prefix}.reported-assignments"
topic_route = "{prefix}.topic-routes"
send_result = "{prefix}.send-results"
[paths]
delta_root = "{root / "delta"}"
checkpoint_root = "{root / "checkpoints"}"
[ingest]
watermark_delay = "0 seconds"
[membership]
shards = 2
[metrics]
enabled = false
""")
    return path


def run_job(config: Path, kill_after_commits: int | None = None) -> int:
    process = subprocess.Popen([sys.executable, "-m", "streaming.cli", "run", "--config", str(config), "--available-now"],
                               cwd=ROOT, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    if kill_after_commits is None:
        _, err = process.communicate(timeout=900)
        assert process.returncode == 0, err.decode()[-3000:]
        return 0
    commits = Path(str(config.parent / "interrupted" / "checkpoints" / "consumer" / "commits"))
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and process.poll() is None:
        if commits.exists() and len([p for p in commits.iterdir() if p.name.isdigit()]) >= kill_after_commits:
            os.killpg(process.pid, signal.SIGKILL)  # the driver and its JVM die mid-run, like a lost machine
            process.wait()
            return -9
        time.sleep(0.2)
    raise AssertionError("the job finished before it could be killed; lower kill_after_commits")


def table_rows(spark, root: Path, table: str) -> list[str]:
    class Cfg:
        class paths:  # noqa: N801 - mimics MonitorConfig.paths
            delta_root = str(root / "delta")

    return sorted(repr(sorted(r.items())) for r in read(spark, Cfg, table))


def test_kill_minus_nine_and_restart_equals_an_uninterrupted_run(kafka_broker, spark, tmp_path):
    from localenv.kafka_broker import create_topics
    from streaming.contract.events import DEFAULT_TOPICS

    prefix = "crash"
    topics = {t: f"{prefix}.{name.split('.', 1)[1]}" for t, name in DEFAULT_TOPICS.items()}
    create_topics(kafka_broker.bootstrap_servers, topics.values())
    publish(kafka_broker.bootstrap_servers, workload(), topics)

    whole = config_file(tmp_path / "whole.toml", kafka_broker.bootstrap_servers, prefix, tmp_path / "uninterrupted")
    crash = config_file(tmp_path / "crash.toml", kafka_broker.bootstrap_servers, prefix, tmp_path / "interrupted")
    run_job(whole)
    assert run_job(crash, kill_after_commits=2) == -9
    run_job(crash)  # restart: resumes from the checkpoints, replays the interrupted batch

    for table in TABLES:
        expected = table_rows(spark, tmp_path / "uninterrupted", table)
        actual = table_rows(spark, tmp_path / "interrupted", table)
        assert actual == expected, f"{table}: {len(actual)} rows after crash+restart vs {len(expected)} uninterrupted"
    assert table_rows(spark, tmp_path / "uninterrupted", "fault_windows")
    assert table_rows(spark, tmp_path / "uninterrupted", "anomaly_episodes")
    assert table_rows(spark, tmp_path / "uninterrupted", "group_status_current")
