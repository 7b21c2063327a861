"""``demo --rocketmq``, run briefly as a user runs it: what its script did on the real cluster is in the monitor's
Delta tables, and no process it started outlives it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from connectors.delta_reader import MonitorTables, rows
from connectors.kafka_broker import free_port, pid_alive

pytestmark = pytest.mark.rocketmq

ROOT = Path(__file__).parents[2]
REMOVALS = ("LEAVE", "EXPIRED", "VANISHED")


def started_pids(output: str) -> set[int]:
    """Every PID the demo printed for a process it started (not those it found running and left so)."""
    pids = set()
    for line in output.splitlines():
        if line.startswith("[demo]") and "already running" not in line:
            for single, first, second in re.findall(r"\bpid (\d+)|\bpids (\d+), (\d+)", line):
                pids |= {int(p) for p in (single, first, second) if p}
    return pids


def one(pattern: str, output: str) -> tuple[str, ...]:
    found = re.findall(pattern, output)
    assert len(found) == 1, f"{pattern!r}: {found}\n{output[-3000:]}"
    return found[0]


def test_rocketmq_demo_reports_its_script_and_stops_every_process(tmp_path):
    process = subprocess.Popen(
        [sys.executable, "-m", "streaming.cli", "demo", "--rocketmq", "--duration", "90", "--no-live",
         "--metrics-port", str(free_port())],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    output, _ = process.communicate(timeout=1500)
    (tmp_path / "demo.log").write_text(output)
    assert process.returncode == 0, output[-3000:]

    # Every process it started is gone: consumers, collector, Spark's JVM, and the cluster and Kafka unless it
    # found them running.
    pids = started_pids(output)
    assert len(pids) >= 12, f"too few PIDs printed: {sorted(pids)}\n{output[-3000:]}"
    deadline = time.monotonic() + 30  # Spark's JVM ends with the Python process that ran it
    while (alive := {p for p in pids if pid_alive(p)}) and time.monotonic() < deadline:
        time.sleep(1)
    assert not alive, f"still running after the demo: {sorted(alive)}"

    twin, ledger = one(r"duplicate client ID: two consumers with client id (\S+) joined (\S+) ", output)
    newcomer, audit, extra_topic = one(r"inconsistent subscription: (\S+) joined (\S+) subscribing (\S+) too", output)
    orders, crashed = one(r"crash: SIGKILL consumer \S+ of (\S+), client id (\S+) ", output)
    joined, scaled = one(r"scale-out: client id (\S+) joined (\S+) ", output)
    assert scaled == orders

    tables = MonitorTables(one(r"Delta tables : (\S+)", output))
    episodes = rows(tables.sql('SELECT "group", topic, anomaly, details FROM anomaly_episodes'))
    by_kind: dict[str, set[str]] = {}
    for episode in episodes:
        by_kind.setdefault(episode["anomaly"], set()).add(episode["group"])
    assert by_kind.get("DUPLICATE_CLIENT_ID") == {ledger}, episodes
    assert twin in json.dumps([json.loads(e["details"]) for e in episodes if e["anomaly"] == "DUPLICATE_CLIENT_ID"])
    inconsistent = [e for e in episodes if e["anomaly"] == "INCONSISTENT_SUBSCRIPTION"]
    assert {(e["group"], e["topic"]) for e in inconsistent} == {(audit, extra_topic)}, episodes
    assert all(json.loads(e["details"])["subscribers"] == [newcomer] for e in inconsistent), inconsistent

    changes = rows(tables.sql('SELECT "group", broker, change, client_id FROM membership_changes'))
    removed = {r["broker"] for r in changes if r["client_id"] == crashed and r["change"] in REMOVALS}
    assert removed == {"broker-a", "broker-b"}, [r for r in changes if r["client_id"] == crashed]
    assert {r["group"] for r in changes if r["client_id"] == joined and r["change"] == "JOIN"} == {orders}, changes
    # Nobody else left: the consumers the script did not crash stayed members until the demo stopped.
    assert {r["client_id"] for r in changes if r["change"] in REMOVALS} == {crashed}, changes
