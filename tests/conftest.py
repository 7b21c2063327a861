"""Fixtures shared by every tier; tiers are marked by folder (see tests/README.md).

Real components only: the Kafka broker is the project's own ``LocalKafkaBroker`` and Spark is the
project's session factory. Both start lazily, once per test session, and only when a test asks; a
component that cannot start is an error, never a skip.
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.process_cpu import machine_busy_seconds, tree_cpu_seconds

TIER_BY_FOLDER = {
    "unit": None,
    "jvm": "jvm",
    "spark": "spark",
    "integration": "integration",
    "observability": "observability",
    "rocketmq": "rocketmq",
    "spark_cluster": "spark_cluster",
}


# `make test` runs the suite on two pytest-xdist workers (`-n 2 --dist loadgroup`), each with a Kafka broker and a
# Spark session of its own, one half each. The tests of a half that mostly waits on clocks (RocketMQ's rebalance,
# heartbeat and poll intervals, the demo's wall-clock run, the Kafka outage) leave CPU to the other half, which
# keeps both cores busy on its own. Tests sharing a run made once per process (the kill workload, the simulated
# fleet) or a tier's real systems (the RocketMQ clusters, the Spark cluster) are in one half.
WAITING_HALF = "waits-on-clocks"
BUSY_HALF = "cpu-bound"
HALF_BY_FOLDER = {"rocketmq": WAITING_HALF, "jvm": WAITING_HALF, "observability": WAITING_HALF}
# Files in the other half than their folder's: one that waits on clocks, and one that balances the halves. In a
# fresh-clone run with the metrics flood (157 s, since cut to about two thirds) and the sizing bench's smoke test
# (129 s) in the busy half, the waiting half took 2,164 s and the busy half 2,641 s: both now run beside the waiting
# tests, which should leave the two halves near 2,350 s each. Neither shares a run made once per process.
HALF_BY_FILE = {
    "integration/test_job_kafka_outage.py": WAITING_HALF,
    "integration/test_bench_sizing_smoke.py": WAITING_HALF,
}


def suite_half(path: Path) -> str:
    """The half of the suite a test file runs in."""
    return HALF_BY_FILE.get(f"{path.parent.name}/{path.name}") or HALF_BY_FOLDER.get(path.parent.name, BUSY_HALF)


# Tests that run before the rest of their tier: they start every RocketMQ cluster they use themselves, and the
# tier's shared clusters, once its first tests have started them, run on to the tier's end (both lines' together
# take a quarter of a core idle). `demo --rocketmq` starts its own Kafka broker and cluster, as a user runs it; the
# access-control tests each start a cluster with ACL on. Run after the tier's first files, the tier's two clusters
# (two name servers, four brokers) would sit idle beside them for all of their run.
FIRST_IN_TIER = (
    "rocketmq/test_demo_rocketmq.py",
    "rocketmq/test_collector.py::test_calls_refused_by_access_control_are_logged_and_counted_as_acl_denied",
)


def _test_key(item: pytest.Item) -> str:
    path = Path(str(item.fspath))
    return f"{path.parent.name}/{path.name}::{item.name}"


def first_in_tier(items: list[pytest.Item]) -> list[pytest.Item]:
    """``items`` with the tests ``FIRST_IN_TIER`` names (a file, or a file and a test function) moved, in that
    order, just before the first other test of their folder; each keeps its own order otherwise."""
    moved = [item for entry in FIRST_IN_TIER for item in items if _named(item, entry)]
    ordered = [item for item in items if item not in moved]
    for item in reversed(moved):
        folder = Path(str(item.fspath)).parent.name
        at = next((n for n, other in enumerate(ordered) if Path(str(other.fspath)).parent.name == folder), None)
        ordered.insert(len(ordered) if at is None else at, item)
    return ordered


def _named(item: pytest.Item, entry: str) -> bool:
    key = _test_key(item)
    return key.startswith(entry + "::") or key.startswith(entry + "[") or key == entry


_archive_maker = None


def pytest_configure(config: pytest.Config) -> None:
    """The controller (not each xdist worker) starts making the Spark JVMs' class-data-sharing archive if this
    machine has none yet; the JVMs started after it exists use it (``tests/support/spark_cds.py``)."""
    global _archive_maker
    if not hasattr(config, "workerinput"):
        from tests.support.spark_cds import start_making

        _archive_maker = start_making()


def pytest_unconfigure(config: pytest.Config) -> None:
    from tests.support.spark_cds import finish_making

    finish_making(_archive_maker)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the xdist_group markers on a worker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items[:] = first_in_tier(items)
    for item in items:
        folder = Path(str(item.fspath)).parent.name
        marker = TIER_BY_FOLDER.get(folder)
        if marker:
            item.add_marker(marker)
        item.add_marker(pytest.mark.xdist_group(suite_half(Path(str(item.fspath)))))


# -- where the suite's time goes (printed at the end: the budget is in tests/README.md) ---------------------------

SLOWEST_FILES = 30
CPU_PROPERTY = "tree_cpu_s"  # a file's last test carries its file's CPU seconds to the controller (xdist)
_LAST_OF_ITS_FILE = pytest.StashKey[bool]()
_seconds_by_file: defaultdict[str, float] = defaultdict(float)
_cpu_by_file: defaultdict[str, float] = defaultdict(float)
_session_started = time.monotonic()
_tree_cpu_at_last_file_end = tree_cpu_seconds(os.getpid())


_busy_at_start = machine_busy_seconds()


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    item.stash[_LAST_OF_ITS_FILE] = nextitem is None or nextitem.path != item.path


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[pytest.TestReport]:
    """The last test of a file (in this process's run) reports the CPU seconds this process and every process below
    it (its Spark and Kafka JVMs, jobs, clients, their Python workers) spent since the previous file ended."""
    global _tree_cpu_at_last_file_end
    report = yield
    if call.when == "teardown" and item.stash.get(_LAST_OF_ITS_FILE, False) and _tree_cpu_at_last_file_end is not None:
        now = tree_cpu_seconds(os.getpid())
        if now is not None:
            report.user_properties.append((CPU_PROPERTY, now - _tree_cpu_at_last_file_end))
            _tree_cpu_at_last_file_end = now
    return report


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Every phase (set-up, call, tear-down) counts for its test's file, so shared fixtures land where used."""
    name = report.nodeid.split("::", 1)[0]
    _seconds_by_file[name] += report.duration
    _cpu_by_file[name] += sum(v for k, v in report.user_properties if k == CPU_PROPERTY)


def _wall_and_cpu_by(key: Callable[[Path], str]) -> dict[str, tuple[float, float]]:
    """The test files' wall and CPU seconds summed by ``key`` of each file's path (its tier, its half)."""
    summed: defaultdict[str, tuple[float, float]] = defaultdict(lambda: (0.0, 0.0))
    for name, seconds in _seconds_by_file.items():
        group = key(Path(name))
        wall, cpu = summed[group]
        summed[group] = (wall + seconds, cpu + _cpu_by_file[name])
    return summed


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _seconds_by_file:
        return
    wall = time.monotonic() - _session_started
    terminalreporter.section(
        f"the {SLOWEST_FILES} slowest test files (set-up, call and tear-down; wall and CPU seconds of their processes)"
    )
    for name, seconds in sorted(_seconds_by_file.items(), key=lambda kv: -kv[1])[:SLOWEST_FILES]:
        terminalreporter.write_line(f"{seconds:8.1f} s {_cpu_by_file[name]:8.1f} CPU s  {name}")
    costly = sorted(_cpu_by_file.items(), key=lambda kv: -kv[1])[:SLOWEST_FILES]
    terminalreporter.write_line("most CPU: " + ", ".join(f"{Path(n).name} {s:.0f}" for n, s in costly))
    by_tier = _wall_and_cpu_by(lambda path: path.parent.name)
    terminalreporter.write_line(
        "tiers' CPU: " + ", ".join(f"{t} {c:.0f} s" for t, (_, c) in sorted(by_tier.items(), key=lambda kv: -kv[1][1]))
    )
    tiers = ", ".join(f"{t} {w:.0f} s" for t, (w, _) in sorted(by_tier.items(), key=lambda kv: -kv[1][0]))
    terminalreporter.write_line(f"tiers: {tiers}")
    by_half = _wall_and_cpu_by(suite_half)
    terminalreporter.write_line(
        "halves: " + ", ".join(f"{half} {w:.0f} s ({c:.0f} CPU s)" for half, (w, c) in by_half.items())
    )
    busy_now = machine_busy_seconds()
    if busy_now is not None and _busy_at_start is not None:
        busy = busy_now - _busy_at_start
        terminalreporter.write_line(
            f"machine CPU while it ran: {busy:.0f} s busy, {busy / wall:.2f} of {os.cpu_count()} cores"
        )
    terminalreporter.write_line(f"pytest wall time: {wall:.0f} s (budget for the whole suite: see tests/README.md)")


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A real single-node Kafka broker on 127.0.0.1 (free ports), stopped by PID at session end."""
    from localenv.kafka_broker import LocalKafkaBroker

    broker = LocalKafkaBroker(tmp_path_factory.mktemp("kafka"))
    info = broker.start()
    try:
        yield info
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A local Spark session from the project's factory (Delta, Kafka connector, RocksDB state)."""
    from streaming.job.runtime.spark_session import SparkSettings, build_spark_session
    from tests.support.job import TEST_SHUFFLE_PARTITIONS, test_spark_conf

    # Every test checkpoints under pytest's temporary directory, so the session writes checkpoint files as
    # the job does for a local checkpoint root; the tests' few rows need fewer shuffle partitions than the job's.
    session = build_spark_session(
        SparkSettings(
            app_name="rrm-tests",
            shuffle_partitions=TEST_SHUFFLE_PARTITIONS,
            local_dir=str(tmp_path_factory.mktemp("spark-local")),
            checkpoint_root=str(tmp_path_factory.getbasetemp()),
            extra_conf=test_spark_conf(),
        )
    )
    try:
        yield session
    finally:
        session.stop()
