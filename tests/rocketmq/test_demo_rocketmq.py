"""``demo --rocketmq``, run as a user runs it: what its script did on the real cluster is in the monitor's Delta
tables, and no process it started outlives it.

The job's batches take from seconds to minutes depending on the machine's load, so the test stops the demo as a user
would (Ctrl-C, SIGINT) once the tables show the script's last step, with ``--duration`` as the upper bound.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from connectors.delta_reader import MonitorTables, rows
from connectors.processes import free_port, pid_alive

pytestmark = pytest.mark.rocketmq

ROOT = Path(__file__).parents[2]
REMOVALS = ("LEAVE", "EXPIRED", "VANISHED")
DURATION_S = 600  # the demo stops by itself this long after its script started, at the latest


def started_pids(output: str) -> set[int]:
    """Every PID the demo printed for a process it started (not those it found running and left so)."""
    pids = set()
    for line in output.splitlines():
        if line.startswith("[demo]") and "already running" not in line:
            for single, first, second in re.findall(r"\bpid (\d+)|\bpids (\d+), (\d+)", line):
                pids |= {int(p) for p in (single, first, second) if p}
    return pids


def one(pattern: str, output: str) -> tuple[str, ...] | str:
    found = re.findall(pattern, output)
    assert len(found) == 1, f"{pattern!r}: {found}\n{output[-3000:]}"
    return found[0]


class Script:
    """What the demo said its script did, and what the monitor's tables say about it."""

    def __init__(self, output: str) -> None:
        self.twin, self.ledger = one(r"duplicate client ID: two consumers with client id (\S+) joined (\S+) ", output)
        self.newcomer, self.audit, self.own_topic, self.others_topic = one(
            r"inconsistent subscription: (\S+) joined (\S+) subscribing (\S+) instead of (\S+),", output
        )
        self.orders, self.crashed = one(r"crash: SIGKILL consumer \S+ of (\S+), client id (\S+) ", output)
        self.joined, self.scaled = one(r"scale-out: client id (\S+) joined (\S+) ", output)
        self.tables = MonitorTables(one(r"Delta tables: (\S+)", output))

    def episodes(self) -> list[dict[str, Any]]:
        return rows(self.tables.sql('SELECT "group", topic, anomaly, details FROM anomaly_episodes'))

    def changes(self) -> list[dict[str, Any]]:
        return rows(self.tables.sql('SELECT "group", broker, change, client_id FROM membership_changes'))

    def all_reported(self) -> bool:
        kinds = {(e["group"], e["anomaly"]) for e in self.episodes()}
        changes = self.changes()
        removed = {r["broker"] for r in changes if r["client_id"] == self.crashed and r["change"] in REMOVALS}
        return (
            {(self.ledger, "DUPLICATE_CLIENT_ID"), (self.audit, "INCONSISTENT_SUBSCRIPTION")} <= kinds
            and removed == {"broker-a", "broker-b"}
            and any(r["client_id"] == self.joined and r["change"] == "JOIN" for r in changes)
        )


def start_demo() -> subprocess.Popen:
    """``demo --rocketmq`` as a user starts it, its output piped."""
    return subprocess.Popen(
        [
            sys.executable,
            "-u",
            "-m",
            "streaming.app.cli",
            "demo",
            "--rocketmq",
            "--duration",
            str(DURATION_S),
            "--no-live",
            "--metrics-port",
            str(free_port()),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def interrupt_once_reported(process: subprocess.Popen, lines: list[str]) -> None:
    """Ctrl-C once the tables show the script's four steps (or the demo ended by itself)."""
    while process.poll() is None:
        time.sleep(5)
        output = "".join(lines)
        if "scale-out: client id" in output:
            try:
                if Script(output).all_reported():
                    break
            except Exception:  # noqa: BLE001 - a table not written yet: read again
                pass
    process.send_signal(signal.SIGINT)
    process.wait(timeout=600)


def assert_started_processes_gone(output: str) -> None:
    """Every process it started is gone: Kafka, the name server and brokers (unless found running), the
    collector, the consumers and Spark's JVM."""
    pids = started_pids(output)
    assert len(pids) >= 12, f"too few PIDs printed: {sorted(pids)}\n{output[-3000:]}"
    deadline = time.monotonic() + 30  # Spark's JVM ends with the Python process that ran it
    while (alive := {p for p in pids if pid_alive(p)}) and time.monotonic() < deadline:
        time.sleep(1)
    assert not alive, f"still running after the demo: {sorted(alive)}"


def assert_episodes(script: Script) -> None:
    """The duplicate client id in the ledger group; the newcomer's subscription the inconsistent one."""
    episodes = script.episodes()
    by_kind: dict[str, set[str]] = {}
    for episode in episodes:
        by_kind.setdefault(episode["anomaly"], set()).add(episode["group"])
    assert by_kind.get("DUPLICATE_CLIENT_ID") == {script.ledger}, episodes
    duplicates = [json.loads(e["details"]) for e in episodes if e["anomaly"] == "DUPLICATE_CLIENT_ID"]
    assert script.twin in json.dumps(duplicates), duplicates
    # Whichever members' subscriptions the brokers' tables held, the newcomer alone subscribes its topic, and is
    # the one member not subscribing the others'.
    inconsistent = [e for e in episodes if e["anomaly"] == "INCONSISTENT_SUBSCRIPTION"]
    assert inconsistent and {e["group"] for e in inconsistent} == {script.audit}, episodes
    for episode in inconsistent:
        details = json.loads(episode["details"])
        if episode["topic"] == script.own_topic:
            assert details["subscribers"] == [script.newcomer], episode
        else:
            assert (episode["topic"], details["non_subscribers"]) == (script.others_topic, [script.newcomer]), episode


def assert_membership_changes(script: Script) -> None:
    """The crashed client removed on both brokers, the scale-out's join, and no other member leaving."""
    changes = script.changes()
    removed = {r["broker"] for r in changes if r["client_id"] == script.crashed and r["change"] in REMOVALS}
    assert removed == {"broker-a", "broker-b"}, [r for r in changes if r["client_id"] == script.crashed]
    joins = {r["group"] for r in changes if r["client_id"] == script.joined and r["change"] == "JOIN"}
    assert joins == {script.orders}, changes
    # Nobody else left: the consumers the script did not crash stayed members until the demo was stopped.
    assert {r["client_id"] for r in changes if r["change"] in REMOVALS} == {script.crashed}, changes


def test_rocketmq_demo_reports_its_script_and_stops_every_process(tmp_path):
    process = start_demo()
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(process.stdout), daemon=True)  # type: ignore[arg-type]
    reader.start()
    try:
        interrupt_once_reported(process, lines)
    finally:
        if process.poll() is None:
            process.kill()  # only when the demo hangs: the assertions below then name what it left running
        reader.join(timeout=30)
    output = "".join(lines)
    (tmp_path / "demo.log").write_text(output)
    assert process.returncode == 0, output[-3000:]

    assert_started_processes_gone(output)
    script = Script(output)
    assert script.scaled == script.orders
    assert_episodes(script)
    assert_membership_changes(script)
