"""The job's driver SIGKILLed at seeded moments, restarted after each, its Delta tables compared with a reference.

Shared by the integration test (a few kill points) and ``bench.driver_kills`` (twenty): one fixed fleet
workload in Kafka, processed once uninterrupted (the reference) and once by ``rebalance-monitor run
--available-now`` processes killed at planned moments and restarted from the same checkpoints until one drains
the input. Moments are planned by phase and triggered by what the run itself writes (offsets, commits, Delta
versions), so each phase is hit however fast the machine is, and a seed names the plan that failed. The bench
runs every step as a process (``run_with_kills``); the test takes its reference and drain run in its own Spark
session (``run_kill_plan``'s ``drain``, ``tests.support.kill_workload``).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from streaming.contract.events import DEFAULT_TOPICS, TOPIC_OPTIONS
from streaming.job.runner import QUERY_NAMES
from tests.support.process_cpu import processes_cpu_seconds

BASE = 1_700_000_000_000
ROOT = Path(__file__).parents[2]
# The tables the crash test has always compared; ``streaming.contract.tables.TABLES`` adds the brokers' views.
TABLES = (
    "membership_changes",
    "group_snapshots",
    "expected_assignments",
    "current_assignment",
    "anomaly_episodes",
    "anomalies_current",
    "group_status_current",
    "fault_windows",
    "producer_broker_status_current",
    "broker_status_current",
    "send_latency_minutes",
    "dead_letters",
)

# startup: JVM start, table checks, queries starting (timed from the spawn, as a fraction of the reference's
# start-up); first-batch: the restored state's first batch (after the run's first write of any kind);
# mid-batch: inside a batch past each query's first of the run (after its offsets are written: the query has
# committed a batch in this run, the first-batch phase covers a run's first); after-delta-commit: a table's Delta commit done,
# the batch's other writes or its checkpoint commit not yet; between-batches: right after a checkpoint commit.
PHASES = ("startup", "first-batch", "mid-batch", "after-delta-commit", "between-batches")
POLL_S = 0.05


def workload():
    """Six consumer groups over 330 s of fleet time (one member expires), five producers' sends, two bad
    records: every table gets rows."""
    rng = random.Random(7)
    events = [
        {
            "type": "topic_route",
            "schema_version": 1,
            "event_time": BASE,
            "topic": t,
            "brokers": [
                {"broker": b, "read_queue_nums": 4, "write_queue_nums": 4, "perm": 6} for b in ("broker-a", "broker-b")
            ],
        }
        for t in ("T1", "T2")
    ]
    for t in range(0, 330_000, 30_000):
        for g in range(6):
            for c in range(4 if g % 3 else 3):
                if g == 4 and c == 3 and t > 200_000:
                    continue  # a member that goes silent and expires
                cid = "172.17.0.1@1" if (g == 5 and c < 2) else f"10.0.{g}.{c}@{c}#9"
                events.append(
                    {
                        "type": "consumer_channel",
                        "schema_version": 1,
                        "event_time": BASE + t + c,
                        "broker": "broker-a",
                        "kind": "HEARTBEAT",
                        "channel": f"10.9.{g}.{c}:4000",
                        "client_id": cid,
                        "group": f"G{g}",
                        "subscriptions": [{"topic": "T1" if g % 2 else "T2", "expression": "*", "sub_version": 1}],
                    }
                )
        for p in range(5):
            for _ in range(10):
                latency = rng.choice([3, 8, 20, 600, 1200, 2500, 16000]) if rng.random() < 0.2 else rng.randint(1, 40)
                events.append(
                    {
                        "type": "send_result",
                        "schema_version": 1,
                        "event_time": BASE + t + rng.randint(0, 29_999),
                        "producer_id": f"P{p}",
                        "producer_group": "PG",
                        "topic": "T1",
                        "broker": rng.choice(["broker-a", "broker-b"]),
                        "queue_id": 0,
                        "latency_ms": latency,
                        "outcome": "OK" if rng.random() > 0.03 else "TIMEOUT",
                        "client_version": "V4_9_8" if p % 2 else "5.3.3",
                        "send_latency_fault_enable": True,
                    }
                )
    events.sort(key=lambda e: e["event_time"])
    return events + [("consumer_channel", b"{broken"), ("send_result", b'{"type": "send_result"}')]


def _topics_toml(prefix: str) -> str:
    """``[kafka.topics]``: every type's default topic under ``prefix`` (``rocketmq.x`` becomes ``<prefix>.x``)."""
    return "\n".join(
        f'{t} = "{prefix}.{name.split(".", 1)[1]}"' for t, name in DEFAULT_TOPICS.items() if TOPIC_OPTIONS[t] == t
    )


def config_file(path: Path, bootstrap: str, prefix: str, root: Path, max_offsets: int = 60) -> Path:
    """The job's configuration: the topics of ``prefix``, tables and checkpoints under ``root``, batches of
    ``max_offsets`` records (the same for every run compared, so the batches and their watermarks match)."""
    path.write_text(f"""
[kafka]
bootstrap_servers = "{bootstrap}"
max_offsets_per_trigger = {max_offsets}
[kafka.topics]
{_topics_toml(prefix)}
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


def run_job(config: Path) -> None:
    """Run the job on ``config`` until it has processed the input; a non-zero exit raises."""
    run_monitored(config, None)


# -- watching a run --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Progress:
    """What the job has written so far: batches planned (offsets) and committed per query, Delta versions."""

    offsets: dict[str, int]
    commits: dict[str, int]
    delta_versions: int

    @classmethod
    def of(cls, root: Path) -> Progress:
        def count(folder: Path, suffix: str = "") -> int:
            try:
                return sum(1 for n in os.listdir(folder) if n.endswith(suffix) and n[: len(n) - len(suffix)].isdigit())
            except (FileNotFoundError, NotADirectoryError):  # not there yet, or a file (the storage check's)
                return 0

        checkpoints, delta = root / "checkpoints", root / "delta"
        tables = os.listdir(delta) if delta.exists() else []
        return cls(
            {q: count(checkpoints / q / "offsets") for q in QUERY_NAMES},
            {q: count(checkpoints / q / "commits") for q in QUERY_NAMES},
            sum(count(delta / t / "_delta_log", ".json") for t in tables),
        )

    def in_flight(self) -> list[str]:
        """Queries with a planned batch not yet committed."""
        return [q for q in QUERY_NAMES if self.offsets[q] > self.commits[q]]


@dataclass(frozen=True)
class KillPoint:
    """When to kill: ``nth`` event of the phase's kind in this run (new offsets file past each query's first for
    mid-batch, Delta version
    for after-delta-commit, commit file for between-batches; first write of any kind for first-batch), then
    ``delay_s``; for startup, ``delay_s`` after the spawn."""

    phase: str
    nth: int
    delay_s: float


def plan_kills(kills: int, seed: int, startup_s: float, batch_s: float) -> list[KillPoint]:
    """``kills`` points, every phase once before any repeats (in a seeded order), at seeded counts and delays:
    startup kills inside the reference run's start-up, mid-batch ones inside a typical batch."""
    rng = random.Random(seed)
    phases: list[str] = []
    while len(phases) < kills:
        phases += rng.sample(PHASES, len(PHASES))
    plan = []
    for phase in phases[:kills]:
        if phase == "startup":
            plan.append(KillPoint(phase, 0, round(rng.uniform(0.15, 0.9) * startup_s, 2)))
        elif phase == "first-batch":
            plan.append(KillPoint(phase, 1, round(rng.uniform(0.0, 0.5) * batch_s, 2)))
        elif phase == "mid-batch":
            plan.append(KillPoint(phase, rng.randint(1, 2), round(rng.uniform(0.1, 0.7) * batch_s, 2)))
        elif phase == "after-delta-commit":
            plan.append(KillPoint(phase, rng.randint(1, 4), 0.0))
        else:
            plan.append(KillPoint(phase, rng.randint(1, 2), 0.0))
    return plan


@dataclass
class RunRecord:
    """One process's run: killed or drained, when, what it had done, its process tree's CPU seconds."""

    point: dict[str, Any] | None
    killed: bool
    wall_s: float
    cpu_s: float
    first_write_s: float | None  # from the spawn to its first offsets, commit or Delta version
    commits_in_run: int
    delta_versions_in_run: int
    in_flight_at_kill: list[str] = field(default_factory=list)
    orphans: list[int] = field(default_factory=list)

    @property
    def observed(self) -> str | None:
        """Where the kill landed, as the files show it: before this run wrote anything (start-up, restore),
        with a batch planned and not committed, or with every planned batch committed."""
        if not self.killed:
            return None
        if self.first_write_s is None or self.first_write_s > self.wall_s:
            return "before-first-write"
        return "batch-in-flight" if self.in_flight_at_kill else "between-batches"


def run_monitored(
    config: Path, point: KillPoint | None, timeout_s: float = 3600, env: Mapping[str, str] | None = None
) -> RunRecord:
    """Run ``rebalance-monitor run --available-now`` on ``config`` (overridden by the ``RRM__`` settings of
    ``env``, if any) and kill its process tree at ``point`` (``None``: let it drain the input; a non-zero exit
    raises with the log's end)."""
    root = _root_of(config, env)
    log_path = config.parent / f"{config.stem}.log"
    started = time.monotonic()
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "streaming.app.cli", "run", "--config", str(config), "--available-now"],
            cwd=ROOT,
            env=None if env is None else {**os.environ, **env},
            start_new_session=True,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    before = Progress.of(root)
    first_write_s, fire_at, cpu_s, last_cpu_sample = None, None, 0.0, 0.0
    try:
        while True:
            now = time.monotonic()
            if now - last_cpu_sample >= 1.0:
                cpu_s, last_cpu_sample = max(cpu_s, processes_cpu_seconds(_process_tree(process.pid))), now
            if process.poll() is not None:
                after = Progress.of(root)
                if process.returncode != 0:
                    raise AssertionError(f"the job exited with {process.returncode}:\n{log_path.read_text()[-3000:]}")
                return RunRecord(
                    None if point is None else asdict(point),
                    False,
                    round(now - started, 2),
                    round(cpu_s, 2),
                    first_write_s,
                    _commits(after) - _commits(before),
                    after.delta_versions - before.delta_versions,
                )
            assert now - started < timeout_s, f"the job ran longer than {timeout_s} s"
            progress = Progress.of(root)
            if first_write_s is None and progress != before:
                first_write_s = round(now - started, 2)
            if point is not None and fire_at is None and _reached(point, before, progress):
                fire_at = (started if point.phase == "startup" else now) + point.delay_s
            if fire_at is not None and now >= fire_at:
                at_kill = Progress.of(root)
                pids = _process_tree(process.pid)
                cpu_s = max(cpu_s, processes_cpu_seconds(pids))
                orphans = kill_tree(process, pids)
                return RunRecord(
                    asdict(point),
                    True,
                    round(time.monotonic() - started, 2),
                    round(cpu_s, 2),
                    first_write_s,
                    _commits(at_kill) - _commits(before),
                    at_kill.delta_versions - before.delta_versions,
                    at_kill.in_flight(),
                    orphans,
                )
            time.sleep(POLL_S)
    finally:
        if process.poll() is None:
            kill_tree(process, _process_tree(process.pid))


def _root_of(config: Path, env: Mapping[str, str] | None = None) -> Path:
    """The folder holding the run's ``delta`` and ``checkpoints``: from ``env``'s override, else the file."""
    if env is not None and "RRM__PATHS__DELTA_ROOT" in env:
        return Path(env["RRM__PATHS__DELTA_ROOT"]).parent
    for line in config.read_text().splitlines():
        if line.startswith("delta_root"):
            return Path(line.split("=", 1)[1].strip().strip('"')).parent
    raise ValueError(f"no delta_root in {config}")


def _commits(progress: Progress) -> int:
    return sum(progress.commits.values())


def _reached(point: KillPoint, before: Progress, now: Progress) -> bool:
    def new(kind: str) -> int:
        return sum(getattr(now, kind)[q] - getattr(before, kind)[q] for q in QUERY_NAMES)

    if point.phase == "startup":
        return True
    if point.phase == "first-batch":
        return now != before
    if point.phase == "mid-batch":  # a query's first new offsets of the run follow no commit of the run
        return sum(max(0, now.offsets[q] - before.offsets[q] - 1) for q in QUERY_NAMES) >= point.nth
    if point.phase == "after-delta-commit":
        return now.delta_versions - before.delta_versions >= point.nth
    if point.phase == "between-batches":
        return new("commits") >= point.nth
    raise ValueError(f"unknown phase {point.phase!r}")


# -- the process tree --------------------------------------------------------------------------------------


def _stat(pid: int) -> list[str] | None:
    """Fields of ``/proc/PID/stat`` from the state on (index 0 = state), or None once the process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None


def _process_tree(pid: int) -> list[int]:
    """``pid`` and every living descendant (the Spark JVM, Spark's Python daemon and its workers)."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (fields := _stat(int(name))) is not None:
            children.setdefault(int(fields[1]), []).append(int(name))
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo += children.get(current, [])
    return tree


def kill_tree(process: subprocess.Popen, pids: list[int]) -> list[int]:
    """SIGKILL the driver, every process of its tree and their process groups (Spark's Python daemon makes a
    group of its own; a worker forked meanwhile is in it), by PID; the PIDs still alive 10 s later."""
    groups = set()
    for pid in pids:
        try:
            groups.add(os.getpgid(pid))
        except ProcessLookupError:
            pass
    groups &= set(pids)  # only groups led by a process of this tree
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for group in groups:
        try:
            os.killpg(group, signal.SIGKILL)
        except ProcessLookupError:
            pass
    process.wait()
    deadline = time.monotonic() + 10
    while True:
        alive = [p for p in pids if (fields := _stat(p)) is not None and fields[0] != "Z"]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.1)


# -- the whole experiment --------------------------------------------------------------------------------------


def table_rows(spark, root: Path, table: str) -> list[str]:
    from tests.support.job import read

    class Paths:
        class paths:  # noqa: N801 - read() takes a config's ``paths``
            delta_root = str(root / "delta")

    return sorted(repr(sorted(r.items())) for r in read(spark, Paths, table))


def compare_tables(
    spark,
    reference: Path,
    interrupted: Path,
    tables: tuple[str, ...],
    reference_rows: Callable[[str], list[str]] | None = None,
) -> dict[str, dict[str, Any]]:
    """Per table: equal or not, row counts, and the rows only one side has (with their multiplicity). The
    reference's rows are read from ``reference``, or taken from ``reference_rows(table)`` when given."""
    verdicts = {}
    for table in tables:
        expected = Counter(reference_rows(table) if reference_rows else table_rows(spark, reference, table))
        actual = Counter(table_rows(spark, interrupted, table))
        missing, extra = expected - actual, actual - expected
        verdicts[table] = {
            "equal": not missing and not extra,
            "rows": sum(expected.values()),
            "rows_after_kills": sum(actual.values()),
            "missing": sorted(missing.elements())[:20],
            "extra": sorted(extra.elements())[:20],
        }
    return verdicts


@dataclass
class KillsOutcome:
    reference: RunRecord
    plan: list[KillPoint]
    runs: list[RunRecord]
    tables: dict[str, dict[str, Any]]

    @property
    def kills(self) -> list[RunRecord]:
        return [r for r in self.runs if r.killed]

    def unequal(self) -> dict[str, dict[str, Any]]:
        return {t: v for t, v in self.tables.items() if not v["equal"]}


def batch_length_s(run_s: float, commits: int) -> float:
    """A rough length of one batch from a run's time past its start-up and its commits: two queries run side by
    side (consumer and send-ingest), their commits counted together."""
    return max(0.5, 2 * run_s / max(1, commits))


def run_kill_plan(
    crash: Path,
    plan: list[KillPoint],
    on_run: Callable[[RunRecord], None] = lambda run: None,
    env: Mapping[str, str] | None = None,
    drain: Callable[[], None] | None = None,
) -> list[RunRecord]:
    """A run of ``crash`` (and ``env``) killed at each point of ``plan``, each restarted from the checkpoints the
    one before left, then a restart that drains the input: a process like the others, or ``drain()`` when given.
    Returns the processes' records; ``on_run`` sees each as it ends."""
    runs: list[RunRecord] = []
    for point in plan:
        runs.append(run_monitored(crash, point, env=env))
        on_run(runs[-1])
        if not runs[-1].killed:
            return runs  # drained before this kill point: the rest of the plan has nothing left to interrupt
    if drain is not None:
        drain()
    else:
        runs.append(run_monitored(crash, None, env=env))
        on_run(runs[-1])
    return runs


def run_with_kills(
    compare: Callable[[Path, Path], dict[str, dict[str, Any]]],
    workdir: Path,
    bootstrap: str,
    prefix: str,
    kills: int,
    seed: int,
    max_offsets: int,
    on_run: Callable[[RunRecord], None] = lambda run: None,
) -> KillsOutcome:
    """The reference run, then the ``seed``'s ``kills`` points each followed by a restart from the same
    checkpoints, then a run that drains the input; ``on_run`` sees each run's record as it ends, and
    ``compare(reference_root, interrupted_root)`` judges the tables. The workload must already be in the
    ``prefix`` topics."""
    whole = config_file(workdir / "whole.toml", bootstrap, prefix, workdir / "uninterrupted", max_offsets)
    reference = run_monitored(whole, None)
    on_run(reference)
    startup_s = reference.first_write_s or 10.0
    batch_s = batch_length_s(reference.wall_s - startup_s, reference.commits_in_run)
    plan = plan_kills(kills, seed, startup_s, batch_s)
    crash = config_file(workdir / "crash.toml", bootstrap, prefix, workdir / "interrupted", max_offsets)
    runs = run_kill_plan(crash, plan, on_run)
    return KillsOutcome(reference, plan, runs, compare(workdir / "uninterrupted", workdir / "interrupted"))
