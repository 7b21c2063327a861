"""Benchmark (not a test): what the client agent's hook costs a real producer per send.

Run: ``.venv/bin/python -m bench.bench_agent [--line 5] [--messages 2000] [--rounds 6]``
-> starts the project's Kafka broker and local RocketMQ cluster (or uses ``--namesrv ADDR --topic T``), then one
test-client JVM (``jvm/testclients`` ``bench``) with two producers: one with the agent's hook publishing every
attempt to Kafka, one without. They send SYNC messages of 128 bytes to the same topic in alternating rounds
(which side goes first alternates too), after an unmeasured warm-up of each. Prints and writes to
``bench/results/agent.json``: per side sends/s (mean of the rounds), p50 and p99 send latency over all rounds,
and the JVM's CPU time during the rounds (the agent's publishing thread included); the ratios hook/plain.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from connectors.kafka_topics import create_topics
from localenv import agent_artifacts
from localenv.kafka_broker import LocalKafkaBroker

RESULTS = Path(__file__).parent / "results" / "agent.json"
SMALL_JVM = ["-Xmx256m", "-XX:+UseSerialGC", "-Djava.net.preferIPv4Stack=true"]


def run_bench(line: str, namesrv: str, topic: str, bootstrap: str, args: argparse.Namespace, work: Path) -> list[dict]:
    classpath = os.pathsep.join(str(p) for p in agent_artifacts.client_classpath(line))
    command = [
        "java",
        *SMALL_JVM,
        f"-Drocketmq.client.logRoot={work / 'rocketmq-logs'}",
        f"-Drrm.agent.bootstrap.servers={bootstrap}",
        "-Drrm.agent.topic.send.results=bench.send-results",
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
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=3600)
    if result.returncode != 0:
        raise SystemExit(f"bench client failed ({result.returncode}): {result.stderr[-2000:]}")
    lines = [json.loads(text) for text in result.stdout.splitlines() if text.startswith("{")]
    for line_ in lines:
        print(json.dumps(line_))
    return lines


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--line", choices=["5", "4.9"], default="5", help="RocketMQ client and cluster line")
    parser.add_argument("--messages", type=int, default=2000, help="messages per round and side")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--warmup", type=int, default=1000, help="unmeasured messages per side first")
    parser.add_argument("--namesrv", help="use this running cluster's name server instead of starting one")
    parser.add_argument("--topic", default="bench_agent", help="with --namesrv: an existing topic")
    parser.add_argument("--results", type=Path, default=RESULTS, help=f"where to write the JSON (default {RESULTS})")
    return parser.parse_args()


def run_on_brokers(args: argparse.Namespace) -> list[dict]:
    """``run_bench`` against a Kafka broker of its own and the given cluster, or one of its own."""
    with tempfile.TemporaryDirectory(prefix="bench-agent-") as tmp:
        work = Path(tmp)
        kafka = LocalKafkaBroker(work / "kafka")
        cluster = None
        try:
            bootstrap = kafka.start(timeout_s=300).bootstrap_servers  # generous: a busy machine starts it slowly
            create_topics(bootstrap, ["bench.send-results"])
            namesrv = args.namesrv
            if namesrv is None:
                from localenv.rocketmq_cluster import LocalRocketMQCluster

                cluster = LocalRocketMQCluster(args.line, work / "rocketmq")
                cluster.start(timeout_s=300)
                cluster.create_topic(args.topic, 4)
                namesrv = cluster.namesrv_addr
            return run_bench(args.line, namesrv, args.topic, bootstrap, args, work)
        finally:
            if cluster is not None:
                cluster.stop()
            kafka.stop()


def report_document(args: argparse.Namespace, lines: list[dict]) -> dict:
    """Both sides' summaries, the ratios hook/plain and the CPU per send, and every round."""
    summary = next(line for line in lines if line["kind"] == "summary")
    plain, hooked = summary["without_hook"], summary["with_hook"]
    ratios = {
        "sends_per_s": round(hooked["sends_per_s"] / plain["sends_per_s"], 3),
        "p99": round(hooked["p99_us"] / plain["p99_us"], 3),
        "p50": round(hooked["p50_us"] / plain["p50_us"], 3),
        "cpu": round(hooked["cpu_ms"] / plain["cpu_ms"], 3),
    }
    per_send_cpu_us = {
        side: round(summary[side]["cpu_ms"] * 1000 / (args.messages * args.rounds), 1)
        for side in ("without_hook", "with_hook")
    }
    return {
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}",
        "command": "python -m bench.bench_agent "
        + " ".join(
            f"--{k} {v}" for k, v in (("line", args.line), ("messages", args.messages), ("rounds", args.rounds))
        ),
        "client_line": args.line,
        "without_hook": plain,
        "with_hook": hooked,
        "ratio_hook_over_plain": ratios,
        "process_cpu_us_per_send": per_send_cpu_us,
        "agent_counters": summary["agent"],
        "rounds": [line for line in lines if line["kind"] == "round"],
    }


def main() -> None:
    args = parse_args()
    report = report_document(args, run_on_brokers(args))
    print(json.dumps({k: report[k] for k in ("ratio_hook_over_plain", "process_cpu_us_per_send")}))
    args.results.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
