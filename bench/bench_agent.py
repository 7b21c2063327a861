"""Benchmark (not a test): what the client agent costs a real producer per send, measured directly.

Run: ``.venv/bin/python -m bench.bench_agent [--lines 5 4.9] [--messages 100000] [--rounds 5]``
-> starts the project's Kafka broker and, per client line, its local RocketMQ cluster, then one test-client JVM
(``jvm/testclients`` ``bench``) with two producers: one with the agent's hook publishing every attempt to Kafka,
one without. They send SYNC messages of 128 bytes to the same topic, after an unmeasured warm-up of each, in
rounds of ``--messages`` sends per side made in alternating chunks of ``--chunk`` (which side goes first
alternates), so both sides see the same load on a shared machine. Per round: sends/s, p50/p99 latency, the process's
CPU, the sending thread's CPU, the agent's threads' CPU (ThreadMXBean) and the sending thread's CPU and wall
time inside the hook. Writes ``bench/results/agent.json``: per line the acceptance figures (the agent's own CPU
per send, the median of the per-round throughput ratios hook/plain, events dropped, each against its target),
the medians of the rounds, the other ratios, the counters, the Kafka broker's CPU per published event and the
machine's load. The defaults are the acceptance run: both lines, 5 rounds of 100,000 sends per side.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from connectors.kafka_topics import create_topics
from localenv import agent_artifacts
from localenv.kafka_broker import LocalKafkaBroker
from tests.support.process_cpu import process_cpu_seconds

RESULTS = Path(__file__).parent / "results" / "agent.json"
SMALL_JVM = ["-Xmx256m", "-XX:+UseSerialGC", "-Djava.net.preferIPv4Stack=true"]
SEND_RESULTS = "bench.send-results"
TARGET_AGENT_CPU_US = 20.0
TARGET_THROUGHPUT_RATIO = 0.98


def run_bench(
    line: str, classpath: str, namesrv: str, topic: str, bootstrap: str, args: argparse.Namespace, work: Path
) -> list[dict]:
    command = [
        "java",
        *SMALL_JVM,
        *args.jvm_option,
        f"-Drocketmq.client.logRoot={work / 'rocketmq-logs'}",
        f"-Drrm.agent.bootstrap.servers={bootstrap}",
        f"-Drrm.agent.topic.send.results={SEND_RESULTS}",
        "-cp",
        classpath,
        agent_artifacts.TEST_CLIENT_MAIN,
        "bench",
        "--namesrv",
        namesrv,
        "--topic",
        topic,
        "--messages",
        str(args.messages),
        "--rounds",
        str(args.rounds),
        "--warmup",
        str(args.warmup),
        "--chunk",
        str(args.chunk),
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=7200)
    if result.returncode != 0:
        raise SystemExit(f"bench client failed ({result.returncode}): {result.stderr[-2000:]}")
    lines = [json.loads(text) for text in result.stdout.splitlines() if text.startswith("{")]
    for line_ in lines:
        print(json.dumps({"line": line, **line_}), flush=True)
    return lines


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", nargs="+", choices=["5", "4.9"], default=["5", "4.9"], help="client lines")
    parser.add_argument("--messages", type=int, default=100_000, help="messages per round and side")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--chunk", type=int, default=10_000, help="sends per side before the other side's turn")
    parser.add_argument("--warmup", type=int, default=10_000, help="unmeasured messages per side first")
    parser.add_argument("--jvm-option", action="append", default=[], help="an extra JVM option (e.g. for JFR)")
    parser.add_argument("--results", type=Path, default=RESULTS, help=f"where to write the JSON (default {RESULTS})")
    return parser.parse_args()


def load() -> float:
    return round(os.getloadavg()[0], 2)


def process_cpu_s(pid: int) -> float:
    """A process's CPU seconds so far (user + system, from /proc); it must be running."""
    seconds = process_cpu_seconds(pid)
    if seconds is None:
        raise RuntimeError(f"process {pid} is gone")
    return seconds


IDLE_SAMPLE_S = 10.0


def kafka_cpu_per_event_us(kafka_pid: int, run: Callable[[], list[dict]]) -> tuple[list[dict], float]:
    """``run``'s lines and the Kafka broker's CPU per event the agent published meanwhile, less the broker's own
    idle CPU (its rate over ``IDLE_SAMPLE_S`` first): on this machine the broker runs next to the application."""
    idle_start = process_cpu_s(kafka_pid)
    time.sleep(IDLE_SAMPLE_S)
    idle_rate = (process_cpu_s(kafka_pid) - idle_start) / IDLE_SAMPLE_S
    start, started = process_cpu_s(kafka_pid), time.monotonic()
    lines = run()
    busy = process_cpu_s(kafka_pid) - start - idle_rate * (time.monotonic() - started)
    published = next(line for line in lines if line["kind"] == "summary")["agent"]["published"]
    return lines, round(max(0.0, busy) * 1e6 / max(1, published), 2)


def run_line(line: str, classpath: str, kafka: tuple[str, int], args: argparse.Namespace, work: Path) -> dict:
    """One line's cluster started, benchmarked and stopped; its summary with the load before and after and the
    Kafka broker's CPU per event the agent published."""
    from localenv.rocketmq_cluster import LocalRocketMQCluster

    bootstrap, kafka_pid = kafka
    cluster = LocalRocketMQCluster(line, work / f"rocketmq-{line}")
    try:
        cluster.start(timeout_s=300)
        cluster.create_topic("bench_agent", 4)
        load_before = load()
        lines, kafka_us = kafka_cpu_per_event_us(
            kafka_pid, lambda: run_bench(line, classpath, cluster.namesrv_addr, "bench_agent", bootstrap, args, work)
        )
        return {
            **summarise(lines),
            "kafka_broker_cpu_us_per_event": kafka_us,
            "load_1m": {"before": load_before, "after": load()},
        }
    finally:
        cluster.stop()


def per_send_us(round_: dict, key: str) -> float:
    return round_[key] / 1000 / round_["messages"]


def summarise(lines: list[dict]) -> dict:
    """Medians of the rounds per side, the agent's own CPU per send, the per-round ratios hook/plain."""
    rounds = [line for line in lines if line["kind"] == "round"]
    summary = next(line for line in lines if line["kind"] == "summary")
    sides = {"without_hook": [r for r in rounds if not r["hook"]], "with_hook": [r for r in rounds if r["hook"]]}

    def medians(side: list[dict]) -> dict:
        return {
            "sends_per_s": round(statistics.median(r["sends_per_s"] for r in side), 1),
            "p50_us": statistics.median(r["p50_us"] for r in side),
            "p99_us": statistics.median(r["p99_us"] for r in side),
            "process_cpu_us_per_send": round(statistics.median(per_send_us(r, "process_cpu_ns") for r in side), 2),
            "sending_thread_cpu_us_per_send": round(
                statistics.median(per_send_us(r, "sending_thread_cpu_ns") for r in side), 2
            ),
        }

    hooked = sides["with_hook"]
    pairs = [
        (plain, hook)
        for plain in sides["without_hook"]
        for hook in hooked
        if plain["round"] == hook["round"]  # the two sides of one round ran back to back
    ]
    agent_us = [per_send_us(r, "agent_threads_cpu_ns") + per_send_us(r, "hook_cpu_ns") for r in hooked]
    throughput_ratio = round(statistics.median(h["sends_per_s"] / p["sends_per_s"] for p, h in pairs), 3)
    agent_total = round(statistics.median(agent_us), 2)
    dropped = summary["agent"]["dropped"]
    return {
        # The acceptance figures: the agent's own CPU per send, the median of the rounds' throughput ratios
        # hook/plain, what it dropped; and whether each meets its target.
        "acceptance": {
            "agent_cpu_us_per_send": agent_total,
            "throughput_ratio": throughput_ratio,
            "dropped": dropped,
            "meets": {
                "agent_cpu_us_per_send": agent_total <= TARGET_AGENT_CPU_US,
                "throughput_ratio": throughput_ratio >= TARGET_THROUGHPUT_RATIO,
                "dropped": dropped == 0,
            },
        },
        "rounds": len(pairs),
        "messages_per_round": summary["messages_per_round"],
        "without_hook": medians(sides["without_hook"]),
        "with_hook": medians(hooked),
        "agent_cpu_us_per_send": {
            "total": agent_total,
            "agent_threads": round(statistics.median(per_send_us(r, "agent_threads_cpu_ns") for r in hooked), 2),
            "hook_in_sending_thread": round(statistics.median(per_send_us(r, "hook_cpu_ns") for r in hooked), 2),
            "hook_wall_time_in_sending_thread": round(
                statistics.median(per_send_us(r, "hook_wall_ns") for r in hooked), 2
            ),
        },
        "median_ratio_hook_over_plain": {
            "sends_per_s": throughput_ratio,
            "process_cpu_per_send": round(
                statistics.median(
                    per_send_us(h, "process_cpu_ns") / per_send_us(p, "process_cpu_ns") for p, h in pairs
                ),
                3,
            ),
            "p50": round(statistics.median(h["p50_us"] / p["p50_us"] for p, h in pairs), 3),
            "p99": round(statistics.median(h["p99_us"] / p["p99_us"] for p, h in pairs), 3),
        },
        # Each timed hook call's CPU includes about one thread-CPU read (two per send) of this cost.
        "thread_cpu_read_ns": summary.get("cpu_read_ns"),
        "agent_counters": summary["agent"],
        "round_lines": rounds,
    }


def main() -> None:
    args = parse_args()
    results: dict[str, dict] = {}
    # Built first: every line runs the same agent build even if its sources change while the bench runs.
    classpaths = {line: os.pathsep.join(map(str, agent_artifacts.client_classpath(line))) for line in args.lines}
    with tempfile.TemporaryDirectory(prefix="bench-agent-") as tmp:
        work = Path(tmp)
        kafka = LocalKafkaBroker(work / "kafka")
        try:
            broker = kafka.start(timeout_s=300)  # generous: a busy machine starts it slowly
            create_topics(broker.bootstrap_servers, [SEND_RESULTS])
            for line in args.lines:
                results[line] = run_line(line, classpaths[line], (broker.bootstrap_servers, broker.pid), args, work)
        finally:
            kafka.stop()
    report = {
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, shared",
        "command": f"python -m bench.bench_agent --lines {' '.join(args.lines)} --messages {args.messages} "
        f"--rounds {args.rounds} --chunk {args.chunk} --warmup {args.warmup}",
        "lines": results,
    }
    for line, result in results.items():
        print(json.dumps({"line": line, **{k: v for k, v in result.items() if k != "round_lines"}}))
    args.results.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
