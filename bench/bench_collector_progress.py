"""Benchmark (not a test): the collector's consume-progress cycle against rocketmq-exporter's way.

Run: ``.venv/bin/python -m bench.bench_collector_progress [--groups 1000 --cycles 5]`` -> prints the figures and
writes ``bench/results/collector_progress.json``. On the local real cluster (5.3.3, two brokers) the groups are
registered as in ``bench_collector`` (a heartbeat generator: subscription groups and ``%RETRY%`` topics on both
brokers, kept online) and given offsets (``jvm/collector/src/bench``: messages on every queue of an 8-queue topic,
then per group and master an offset on each queue and on its ``%RETRY%`` queue). Then, one after the other:

* the collector's progress cycle (its JVM, running info off, the membership cycle only at its start and end):
  calls per cycle from its counters, cycle time and failures from its log, its JVM's CPU seconds during each cycle
  (``/proc`` sampled every 50 ms);
* the exporter's way in a JVM of its own: the one-argument ``examineConsumeStats(group)`` per group, serially; the
  requests its admin client sends, by request code, counted by an RPC hook, and the JVM's own CPU time.

The first cycle of each side is left out (JIT warm-up; the collector's also overlaps its membership cycle and reads
min offsets); medians over the rest, and the ratios progress cycle / exporter's way.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.bench_collector import TOPIC, HeartbeatGenerator
from bench.common import machine, measured_at, write_results
from connectors import jvm_artifacts
from connectors.kafka_topics import create_topics
from connectors.rocketmq_collector import CollectorProcess
from localenv.kafka_broker import LocalKafkaBroker
from localenv.rocketmq_cluster import LocalRocketMQCluster
from streaming.config import load_config
from tests.support.process_cpu import process_cpu_seconds

RESULTS = Path(__file__).parent / "results" / "collector_progress.json"
BENCH_SOURCES = jvm_artifacts.PROJECT_ROOT / "jvm" / "collector" / "src" / "bench" / "java"
BENCH_MAIN = "io.github.rrm.collector.bench.ProgressBench"
QUEUES = 8
PROGRESS_CALLS = ("consume_stats", "topic_stats", "broker_runtime_info")
# RocketMQ request codes (remoting RequestCode) the exporter's way sends.
REQUEST_NAMES = {"105": "topic_route", "208": "consume_stats", "351": "topic_config"}
_LINE = re.compile(
    r"^(?P<time>\S+) INFO collector: (?P<what>progress: (?P<groups>\d+) groups x (?P<brokers>\d+) brokers in "
    r"(?P<ms>\d+) ms, (?P<failed>\d+) samples without an answer, (?P<queues>\d+) queues.*"
    r"|cycle (?P<cycle>\d+) took (?P<cycle_ms>\d+) ms.*)$",
    re.MULTILINE,
)


def _instant(text: str) -> float:
    """A Java ``Instant`` (``2026-01-01T10:00:00.123456Z``) as Unix seconds."""
    whole, _, fraction = text.rstrip("Z").partition(".")
    return datetime.fromisoformat(whole).replace(tzinfo=UTC).timestamp() + float("0." + (fraction or "0"))


class CpuSampler:
    """Every 50 ms, the CPU seconds of each watched process (by name); ``between`` interpolates a window."""

    def __init__(self) -> None:
        self.pids: dict[str, int] = {}
        self.samples: dict[str, list[tuple[float, float]]] = {}
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def watch(self, name: str, pid: int) -> None:
        self.samples.setdefault(name, [])
        self.pids[name] = pid

    def _run(self) -> None:
        while not self.stopping.wait(0.05):
            for name, pid in list(self.pids.items()):
                cpu = process_cpu_seconds(pid)
                if cpu is not None:
                    self.samples[name].append((time.time(), cpu))

    def between(self, names: tuple[str, ...], start: float, end: float) -> float:
        return round(sum(self._at(self.samples[n], end) - self._at(self.samples[n], start) for n in names), 3)

    @staticmethod
    def _at(samples: list[tuple[float, float]], moment: float) -> float:
        """The CPU seconds at ``moment``, interpolated between the samples around it."""
        before = max((s for s in samples if s[0] <= moment), default=samples[0])
        after = min((s for s in samples if s[0] >= moment), default=samples[-1])
        if after[0] == before[0]:
            return before[1]
        return before[1] + (after[1] - before[1]) * (moment - before[0]) / (after[0] - before[0])


def bench_classpath() -> str:
    jar = jvm_artifacts.compiled_jar(
        BENCH_SOURCES,
        "rrm-collector-bench",
        lambda: [str(jvm_artifacts.collector_jar()), *map(str, jvm_artifacts.jars("collector"))],
    )
    return os.pathsep.join([str(jar), jvm_artifacts.collector_classpath()])


def bench_jvm(work: Path, *args: str, timeout_s: float = 3600) -> list[dict[str, Any]]:
    """One ``ProgressBench`` command in a JVM of its own, sized as the collector's; its JSON lines."""
    command = [
        "java",
        "-Xmx256m",
        "-XX:+UseSerialGC",
        f"-Duser.home={work}",
        "-Djava.net.preferIPv4Stack=true",
        "-cp",
        bench_classpath(),
        BENCH_MAIN,
        *args,
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    if result.returncode != 0:
        raise RuntimeError(f"ProgressBench {args[0]} failed ({result.returncode}): {result.stderr[-2000:]}")
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def collector_config(bootstrap: str, namesrv: str, interval_ms: int, cycles: int):  # type: ignore[no-untyped-def]
    """Progress every ``interval_ms``; the membership cycle once at the start and once after ``cycles`` + 1
    progress cycles (then the collector exits); running info off; the bench's groups only."""
    return load_config(
        env={
            "RRM__KAFKA__BOOTSTRAP_SERVERS": bootstrap,
            "RRM__COLLECTOR__NAMESRV_ADDR": namesrv,
            "RRM__COLLECTOR__POLL_INTERVAL_MS": str(interval_ms * (cycles + 1) + interval_ms // 2),
            "RRM__COLLECTOR__RUNNING_INFO_INTERVAL_MS": "0",
            "RRM__COLLECTOR__PROGRESS_INTERVAL_MS": str(interval_ms),
            "RRM__COLLECTOR__INCLUDE_GROUPS": '["bench-*"]',
        }
    )


def collector_cycles(  # type: ignore[no-untyped-def]
    config, work: Path, cycles: int, cpu: CpuSampler, cluster: tuple[str, ...]
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Runs the collector until it exits: each progress cycle with its time, calls, failures and CPU seconds (the
    collector's and the cluster's), and the collector's problem counters at the end."""
    with socket.socket() as probe:  # a free port for the collector's counters
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    collector = CollectorProcess(config, work / "collector", max_cycles=2, metrics_port=port)
    cpu.watch("collector", collector.start())
    scrapes: list[dict[str, float]] = []  # the counters right after each progress line
    seen = 0
    deadline = time.time() + config.collector.progress_interval_ms / 1000 * (cycles + 4) + 600
    while collector.running() and time.time() < deadline:
        lines = [m for m in _LINE.finditer(collector.log_text()) if m.group("ms")]
        if len(lines) > seen:
            seen = len(lines)
            try:
                scrapes.append(collector.metrics())
            except OSError:
                scrapes.append({})
        time.sleep(0.05)
    if collector.running():
        collector.stop()
        raise RuntimeError(f"the collector did not finish in time; see {collector.log_path}")
    text = collector.log_text()
    membership = [
        (_instant(m.group("time")) - int(m.group("cycle_ms")) / 1000, _instant(m.group("time")))
        for m in _LINE.finditer(text)
        if m.group("cycle")
    ]
    result, previous = [], dict.fromkeys(PROGRESS_CALLS, 0.0)
    for index, match in enumerate(m for m in _LINE.finditer(text) if m.group("ms")):
        end = _instant(match.group("time"))
        start = end - int(match.group("ms")) / 1000
        totals = scrapes[index] if index < len(scrapes) else {}
        calls = {c: totals.get(f'rmqcol_rpc_total{{call="{c}"}}', 0.0) for c in PROGRESS_CALLS}
        by_call = {c: int(calls[c] - previous[c]) for c in PROGRESS_CALLS}
        previous = calls
        result.append(
            {
                "cycle": index + 1,
                "cycle_s": int(match.group("ms")) / 1000,
                "cpu_s": cpu.between(("collector",), start, end),
                "cluster_cpu_s": cpu.between(cluster, start, end),
                "calls": sum(by_call.values()),
                "by_call": by_call,
                "failures": int(match.group("failed")),
                "rows": int(match.group("queues")),
                "overlaps_membership_cycle": any(s < end and start < e for s, e in membership),
                "counted": bool(totals),
            }
        )
    problems = {k: v for k, v in (scrapes[-1] if scrapes else {}).items() if k.startswith("rmqcol_problems_total")}
    if len(result) < cycles + 1:
        raise RuntimeError(f"{len(result)} progress cycles, {cycles + 1} wanted; see {collector.log_path}")
    return result, problems


def exporter_cycles(
    work: Path, namesrv: str, groups_file: Path, cycles: int, cpu: CpuSampler, cluster: tuple[str, ...]
) -> list[dict[str, Any]]:
    """The exporter's way, ``cycles`` + 1 times in its JVM: each with its time, requests, failures and CPU seconds
    (the JVM's own, and the cluster's)."""
    lines = bench_jvm(work, "exporter", namesrv, str(groups_file), str(cycles + 1))
    result = []
    for line in lines:
        by_call = {REQUEST_NAMES.get(code, f"code_{code}"): n for code, n in line["requests_by_code"].items()}
        result.append(
            {
                "cycle": line["cycle"],
                "cycle_s": line["wall_ms"] / 1000,
                "cpu_s": line["cpu_ms"] / 1000,
                "cluster_cpu_s": cpu.between(cluster, line["start_ms"] / 1000, line["end_ms"] / 1000),
                "calls": sum(n for name, n in by_call.items() if name in REQUEST_NAMES.values()),
                "by_call": by_call,
                "failures": line["failures"],
                "rows": line["rows"],
                "first_error": line["first_error"],
            }
        )
    return result


def summary(cycles: list[dict[str, Any]], count: int) -> dict[str, Any]:
    """Medians over the measured cycles: the ``count`` after the first, but any the membership cycle overlapped."""
    measured = [c for c in cycles[1 : count + 1] if not c.get("overlaps_membership_cycle")]
    return {
        "measured_cycles": [c["cycle"] for c in measured],
        "calls": statistics.median(c["calls"] for c in measured),
        "cycle_s": statistics.median(c["cycle_s"] for c in measured),
        "cycle_s_range": [min(c["cycle_s"] for c in measured), max(c["cycle_s"] for c in measured)],
        "cpu_s": round(statistics.median(c["cpu_s"] for c in measured), 3),
        "cpu_s_range": [min(c["cpu_s"] for c in measured), max(c["cpu_s"] for c in measured)],
        "cluster_cpu_s": round(statistics.median(c["cluster_cpu_s"] for c in measured), 3),
        "failures": sum(c["failures"] for c in measured),
        "rows": statistics.median(c["rows"] for c in measured),
    }


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--channels", type=int, default=1, help="client instances heartbeating every group")
    parser.add_argument("--cycles", type=int, default=5, help="measured cycles per side (one more runs first)")
    parser.add_argument("--interval-ms", type=int, default=15000, help="the collector's progress_interval_ms")
    parser.add_argument("--messages-per-queue", type=int, default=20)
    parser.add_argument("--results", type=Path, default=RESULTS)
    return parser.parse_args()


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def main() -> None:
    args = parse_args()
    import jpype

    work = Path(tempfile.mkdtemp(prefix="rrm-bench-progress-"))
    kafka, cluster = LocalKafkaBroker(work / "kafka"), LocalRocketMQCluster("5", work / "rocketmq")
    generator = None
    load: dict[str, list[float]] = {}
    cpu = CpuSampler()
    try:
        bootstrap = kafka.start(timeout_s=300).bootstrap_servers
        info = cluster.start(timeout_s=300)
        for name, process in {"namesrv": info.namesrv, **info.brokers}.items():
            cpu.watch(name, process.pid)
        names = ("namesrv", *info.brokers)
        cpu.thread.start()
        cluster.create_topic(TOPIC, QUEUES)
        config = collector_config(bootstrap, info.namesrv_addr, args.interval_ms, args.cycles)
        topics = config.kafka.topics
        create_topics(
            bootstrap,
            [topics.consumer_channel, topics.reported_assignment, topics.topic_route, topics.consume_progress],
        )
        jpype.startJVM(
            "-Xmx512m",
            f"-Duser.home={work}",
            classpath=[str(p) for p in jvm_artifacts.jars("collector")],
            convertStrings=True,
        )
        groups = [f"bench-g{i:05d}" for i in range(args.groups)]
        generator = HeartbeatGenerator(
            info.namesrv_addr, [info.broker_addr(b) for b in info.brokers], groups, args.channels
        )
        generator.start()
        groups_file = work / "groups.txt"
        groups_file.write_text("\n".join(groups) + "\n")
        seeded = bench_jvm(work, "seed", info.namesrv_addr, TOPIC, str(groups_file), str(args.messages_per_queue))
        print(f"{args.groups} groups registered on both brokers, offsets committed: {seeded}", flush=True)
        load["collector_start"] = _load()
        collector, problems = collector_cycles(config, work, args.cycles, cpu, names)
        load["collector_end"] = load["exporter_start"] = _load()
        exporter = exporter_cycles(work, info.namesrv_addr, groups_file, args.cycles, cpu, names)
        load["exporter_end"] = _load()
    finally:
        cpu.stopping.set()
        if generator is not None:
            generator.stop()
        cluster.stop()
        kafka.stop()
        shutil.rmtree(work, ignore_errors=True)
    progress, baseline = summary(collector, args.cycles), summary(exporter, args.cycles)
    document = {
        "measured_at": measured_at(),
        "machine": machine(),
        "command": "python -m bench.bench_collector_progress "
        + f"--groups {args.groups} --channels {args.channels} --cycles {args.cycles} --interval-ms {args.interval_ms}",
        "groups": args.groups,
        "brokers": 2,
        "topic_queues_per_broker": QUEUES,
        "groups_online": f"all, {args.channels} channel(s) each per broker (heartbeats every 30 s)",
        "offsets": "every group on every queue of the topic and on its %RETRY% queue, on both brokers",
        "progress_interval_ms": args.interval_ms,
        "progress_in_flight_per_broker": config.collector.progress_in_flight_per_broker,
        "load_average_1_5_15": load,
        "progress_cycle": {**progress, "problems_total_at_end": problems, "cycles": collector},
        "exporter_way": {**baseline, "cycles": exporter},
        "ratios_progress_over_exporter": {
            "cycle_s": round(progress["cycle_s"] / baseline["cycle_s"], 3),
            "cpu_s": round(progress["cpu_s"] / baseline["cpu_s"], 3),
            "cluster_cpu_s": round(progress["cluster_cpu_s"] / baseline["cluster_cpu_s"], 3),
            "calls": round(progress["calls"] / baseline["calls"], 3),
        },
        "calls_per_group": {
            "progress_cycle": progress["calls"] / args.groups,
            "exporter_way": baseline["calls"] / args.groups,
        },
    }
    write_results(args.results, document)
    print(json.dumps({k: v for k, v in document.items() if k not in ("progress_cycle", "exporter_way")}, indent=2))
    for name in ("progress_cycle", "exporter_way"):
        print(name, json.dumps({k: v for k, v in document[name].items() if k != "cycles"}))


if __name__ == "__main__":
    main()
