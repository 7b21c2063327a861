"""Benchmark (not a test): how soon an incident in a live fleet shows in the metrics and in the Delta tables.

Run: ``.venv/bin/python -m bench.bench_detection_latency [--groups 1000 --members 10 --producers 200
--sends-per-second 2000 --incidents 32 --trigger "10 seconds"]`` -> writes ``bench/results/latency.json``.
A real-time fleet publishes to the local Kafka broker while the real job runs with ``conf/monitor.toml``'s
defaults; incidents of four kinds are injected one at a time, each timed from the moment its first event is
handed to Kafka; ``/metrics`` is polled every 100 ms and a Delta row counts from its commit file's time. A
second phase repeats them after a restart on the same checkpoints.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing.queues
import os
import queue
import random
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import asdict
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from bench.bench_soak import process_tree
from bench.latency_fleet import (
    EXPIRY_MS,
    HEARTBEAT_MS,
    PRODUCER_BROKERS,
    SLOW_FOR_MS,
    Fleet,
    FleetShape,
    Handed,
    Incident,
    Injection,
    Publisher,
    now_ms,
)
from connectors.kafka_topics import create_topics
from connectors.processes import free_port
from localenv.kafka_broker import LocalKafkaBroker
from streaming.contract.events import DEFAULT_TOPICS
from tests.support.process_cpu import tree_cpu_seconds

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).parent / "results" / "latency.json"
KINDS = ("duplicate_client_id", "unregister", "silent_member", "slow_broker")
WATCHED = (
    "rmqmon_group_duplicate_client_ids",
    "rmqmon_group_members",
    "rmqmon_broker_isolated",
    "rmqmon_broker_isolation_episodes_total",
    "rmqmon_batch_duration_seconds",
    "rmqmon_last_batch_timestamp_seconds",
)


class MetricsWatch(threading.Thread):
    """Polls the job's ``/metrics`` every 100 ms: when each incident first shows, and every batch's duration.

    An incident is watched from the publisher's report that its first event was handed to Kafka (``reports``,
    one ``Handed`` per incident ``expect`` numbered)."""

    def __init__(
        self, url: str, reports: multiprocessing.queues.Queue[Handed] | None = None, members: int = 10
    ) -> None:
        super().__init__(daemon=True)
        self.url = url + "?" + "&".join(f"name[]={name}" for name in WATCHED)
        self.reports, self.members, self.numbered = reports, members, 0
        self.expected: dict[int, Incident] = {}  # injection index -> incident, until its events are handed
        # (incident, before it: the group's members, or the broker's isolation episodes for a slow broker)
        self.pending: list[tuple[Incident, float]] = []
        self.batches: dict[str, dict[float, float]] = {}  # query -> batch end -> duration
        self.values: dict[tuple[str, str], float] = {}
        self.lock = threading.Lock()
        self.stopped = threading.Event()

    def read(self) -> dict[tuple[str, str], float] | None:
        try:
            with urllib.request.urlopen(self.url, timeout=2) as response:  # noqa: S310 (our local endpoint)
                text = response.read().decode()
        except OSError:
            return None  # the job is starting or restarting
        values = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                values[(s.name, s.labels.get("consumer_group") or s.labels.get("broker") or s.labels.get("query"))] = (
                    s.value
                )
        return values

    def expect(self, incident: Incident) -> int:
        """Number ``incident`` for the publisher's report on it."""
        with self.lock:
            index = self.numbered = self.numbered + 1
            self.expected[index] = incident
            return index

    def handed_over(self, report: Handed) -> None:
        """The publisher handed ``report``'s incident to Kafka: time it from then, and watch for it (a group's
        member count falls below ``members``; a broker's isolation episodes rise above their count now)."""
        with self.lock:
            incident = self.expected.pop(report.index)
            incident.moment_ms, incident.at_ms = report.moment_ms, report.handed_ms
            if incident.kind == "slow_broker":
                before = self.values.get(("rmqmon_broker_isolation_episodes_total", incident.target), 0.0)
            else:
                before = float(self.members)
            self.pending.append((incident, before))

    def shows(self, incident: Incident, before: float, values: dict[tuple[str, str], float]) -> bool:
        if incident.kind == "duplicate_client_id":
            return values.get(("rmqmon_group_duplicate_client_ids", incident.target), 0) >= 1
        if incident.kind == "slow_broker":
            # The gauge holds the state at a batch's last send, so it misses an isolation shorter than the sends
            # one send-ingest batch covers; the episode counter does not (docs/metrics.md): either shows it.
            isolated = values.get(("rmqmon_broker_isolated", incident.target), 0) >= 1
            return isolated or values.get(("rmqmon_broker_isolation_episodes_total", incident.target), 0) > before
        return values.get(("rmqmon_group_members", incident.target), before) < before

    def run(self) -> None:
        while not self.stopped.wait(0.1):
            while self.reports is not None:
                try:
                    self.handed_over(self.reports.get_nowait())
                except queue.Empty:
                    break
            values = self.read()
            if values is None:
                continue
            now_ms = int(time.time() * 1000)
            with self.lock:
                self.values = values
                for incident, before in list(self.pending):
                    if now_ms >= incident.at_ms and self.shows(incident, before, values):
                        incident.metric_ms = now_ms
                        self.pending.remove((incident, before))
                for (name, query), value in values.items():
                    if name == "rmqmon_last_batch_timestamp_seconds" and query:
                        duration = values.get(("rmqmon_batch_duration_seconds", query))
                        if duration is not None:
                            self.batches.setdefault(query, {})[value] = duration


def delta_first_seen(table: Path, matches) -> dict[int, int]:  # type: ignore[no-untyped-def]
    """For each incident index ``matches(row)`` returns, the time its first row became visible: the modification
    time of the commit file that added it, in epoch ms."""
    import pyarrow.parquet as pq

    seen: dict[int, int] = {}
    for commit in sorted((table / "_delta_log").glob("*.json")):
        visible_ms = int(commit.stat().st_mtime * 1000)
        for line in commit.read_text().splitlines():
            add = json.loads(line).get("add")
            if not add or not add.get("dataChange", True):
                continue  # a compaction only rewrites rows an earlier commit made visible
            for row in pq.read_table(table / urllib.request.url2pathname(add["path"])).to_pylist():
                index = matches(row)
                if index is not None and index not in seen:
                    seen[index] = visible_ms
    return seen


def attach_delta_times(delta_root: Path, incidents: list[Incident], polled: bool = False) -> None:
    """Each incident's first Delta row; ``polled``: the fleet is a collector's polls, where a member that left
    or went silent is one missing from a poll (``VANISHED``)."""

    def matcher(kinds: tuple[str, ...], test):  # type: ignore[no-untyped-def]
        def match(row):  # type: ignore[no-untyped-def]
            for index, incident in enumerate(incidents):
                if incident.at_ms and incident.kind in kinds and test(incident, row):
                    return index
            return None

        return match

    tables = {
        "anomaly_episodes": matcher(
            ("duplicate_client_id",),
            lambda i, r: (
                r["group"] == i.target
                and r["anomaly"] == "DUPLICATE_CLIENT_ID"
                and r["status"] == "OPENED"
                and r["opened_at_ms"] >= i.moment_ms - 1_000
            ),
        ),
        "membership_changes": matcher(
            ("unregister", "silent_member"),
            lambda i, r: (
                r["group"] == i.target
                and r["client_id"] == i.client_id
                and r["change"] == ("VANISHED" if polled else "LEAVE" if i.kind == "unregister" else "EXPIRED")
            ),
        ),
        "fault_windows": matcher(
            ("slow_broker",),
            lambda i, r: (
                r["broker"] == i.target
                and r["status"] == "OPENED"
                and r["window_start_ms"] >= i.moment_ms - 1_000
                and r["window_start_ms"] <= i.moment_ms + SLOW_FOR_MS
            ),
        ),
    }
    for table, match in tables.items():
        for index, visible_ms in delta_first_seen(delta_root / table, match).items():
            incidents[index].delta_ms = visible_ms


def percentiles(values: list[float]) -> dict[str, float | int | None]:
    if not values:
        return {"n": 0, "p50": None, "p95": None, "max": None}
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {
        "n": len(ordered),
        "p50": round(statistics.median(ordered), 2),
        "p95": round(p95, 2),
        "max": round(ordered[-1], 2),
    }


def _seconds(latencies: Iterable[float | None]) -> list[float]:
    return [s for s in latencies if s is not None]


def summarize(incidents: list[Incident]) -> dict[str, dict]:
    summary = {}
    for kind in (*KINDS, "overall"):
        chosen = [i for i in incidents if kind in ("overall", i.kind)]
        summary[kind] = {
            "incidents": len(chosen),
            "to_metric_s": percentiles(_seconds(i.latency(i.metric_ms) for i in chosen)),
            "to_delta_row_s": percentiles(_seconds(i.latency(i.delta_ms) for i in chosen)),
            "never_in_metric": sum(i.latency(i.metric_ms) is None for i in chosen),
            "never_in_delta": sum(i.latency(i.delta_ms) is None for i in chosen),
            # how far behind its own moment the publisher handed each incident to Kafka (not counted above)
            "handing_lag_s": percentiles([(i.at_ms - i.moment_ms) / 1000 for i in chosen if i.at_ms]),
            "never_handed": sum(not i.at_ms for i in chosen),
        }
    return summary


class JobProcess:
    """``rebalance-monitor run`` as its own process, started and stopped as an operator would."""

    def __init__(self, config: Path, log: Path) -> None:
        self.config, self.log = config, log
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def start(self) -> None:
        with self.log.open("ab") as out:
            command = [sys.executable, "-m", "streaming.app.cli", "run", "--config", str(self.config)]
            self.process = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)

    def stop(self) -> float:
        """SIGTERM, as a supervisor stops it; the seconds it took to exit."""
        assert self.process is not None
        began = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            for pid in process_tree(self.process.pid):
                os.kill(pid, signal.SIGKILL)
            self.process.wait()
        return time.monotonic() - began


def write_config(work: Path, bootstrap: str, topics: dict[str, str], trigger: str, metrics_port: int) -> Path:
    from streaming.contract.events import TOPIC_OPTIONS

    names = "\n".join(f'{t} = "{name}"' for t, name in topics.items() if TOPIC_OPTIONS[t] == t)
    config = work / "monitor.toml"
    config.write_text(f"""[kafka]\nbootstrap_servers = "{bootstrap}"\n[kafka.topics]\n{names}\n
[spark]\ntrigger_interval = "{trigger}"\n[paths]\ndelta_root = "{work / "delta"}"
checkpoint_root = "{work / "checkpoints"}"\n[metrics]\nport = {metrics_port}\n""")
    return config


def wait_for(check: Callable[[], bool], what: str, timeout_s: float) -> float:
    began = time.monotonic()
    while not check():
        if time.monotonic() - began > timeout_s:
            raise TimeoutError(f"{what}: not within {timeout_s:.0f} s")
        time.sleep(0.5)
    return time.monotonic() - began


def batches_since(watch: MetricsWatch, since_s: float) -> bool:
    """Every query of the job has finished a micro-batch since ``since_s``."""
    from streaming.job.runner import QUERY_NAMES

    with watch.lock:
        ends = [v for (name, _), v in watch.values.items() if name == "rmqmon_last_batch_timestamp_seconds"]
    return len(ends) >= len(QUERY_NAMES) and min(ends) > since_s


def fleet_shown(watch: MetricsWatch, fleet: Fleet) -> bool:
    """Every group's member count in the metrics, as the fleet has it."""
    with watch.lock:
        members = [v for (name, _), v in watch.values.items() if name == "rmqmon_group_members"]
    return len(members) >= fleet.groups and min(members) >= fleet.members - 1


def plan_phase(
    phase: str,
    count: int,
    spacing_ms: int,
    start_ms: int,
    fleet: Fleet,
    publisher: Publisher,
    watch: MetricsWatch,
    free_groups: list[int],
    kinds: tuple[str, ...] = KINDS,
) -> list[Incident]:
    """Schedule ``count`` incidents, one every ``spacing_ms`` from ``start_ms``, the ``kinds`` in turn (a silent
    member is silenced ``EXPIRY_MS`` before its slot, so it expires about then)."""
    incidents = []
    for k in range(count):
        kind, slot_ms = kinds[k % len(kinds)], start_ms + k * spacing_ms
        if kind == "slow_broker":
            incident = Incident(kind, phase, PRODUCER_BROKERS[(k // len(kinds)) % len(PRODUCER_BROKERS)])
            injection = Injection(watch.expect(incident), kind, slot_ms, broker=incident.target)
        else:
            group, member = free_groups.pop(), k % fleet.members
            incident = Incident(kind, phase, f"G{group}", fleet.client_id(group, member))
            when_ms = slot_ms - (EXPIRY_MS if kind == "silent_member" else 0)
            injection = Injection(watch.expect(incident), kind, when_ms, group, member, incident.client_id)
        incidents.append(incident)
        publisher.inject(injection)
    return incidents


def batch_summary(watch: MetricsWatch, since_s: float, until_s: float) -> dict[str, dict]:
    with watch.lock:
        return {
            query: percentiles([d for end, d in ends.items() if since_s <= end <= until_s])
            for query, ends in sorted(watch.batches.items())
        }


def run_phase(
    phase: str,
    args: argparse.Namespace,
    fleet: Fleet,
    publisher: Publisher,
    watch: MetricsWatch,
    job: JobProcess,
    free_groups: list[int],
) -> tuple[list[Incident], dict]:
    """One phase: its silences set up first (a silent member counts from its expiry), then the incidents."""
    assert job.process is not None
    began_s, cpu_before = time.time(), tree_cpu_seconds(job.process.pid) or 0.0
    start_ms = now_ms() + EXPIRY_MS + HEARTBEAT_MS
    spacing_ms = int(args.spacing * 1000)
    incidents = plan_phase(phase, args.incidents, spacing_ms, start_ms, fleet, publisher, watch, free_groups)
    settle_s = (start_ms + args.incidents * spacing_ms - now_ms()) / 1000 + args.settle
    print(
        f"{phase}: {args.incidents} incidents from {time.strftime('%H:%M:%S', time.localtime(start_ms / 1000))}, "
        f"{settle_s:.0f} s",
        flush=True,
    )
    time.sleep(settle_s)
    with watch.lock:  # one not shown by now never was: a later incident on the same target must not count for it
        watch.pending = [(incident, before) for incident, before in watch.pending if incident not in incidents]
    return incidents, {
        "wall_s": round(time.time() - began_s, 1),
        "job_cpu_s": round((tree_cpu_seconds(job.process.pid) or 0.0) - cpu_before, 1),
        "batches_s": batch_summary(watch, began_s, time.time()),
    }


def measure(args: argparse.Namespace, trigger: str, work: Path, bootstrap: str) -> dict:
    prefix = f"latency-{int(time.time())}"
    topics = {t: f"{prefix}.{name.split('.', 1)[1]}" for t, name in DEFAULT_TOPICS.items()}
    create_topics(bootstrap, set(topics.values()), partitions=args.partitions)
    shape = FleetShape(args.groups, args.members, args.producers, args.sends_per_second, topics)
    fleet = shape.fleet()  # the benchmark's copy, for names and counts; the publisher's own one moves
    metrics_port = free_port()
    job = JobProcess(write_config(work, bootstrap, topics, trigger, metrics_port), work / "job.log")
    publisher = Publisher(shape, bootstrap)
    watch = MetricsWatch(f"http://127.0.0.1:{metrics_port}/metrics", publisher.reports, args.members)
    free_groups = random.Random(11).sample(range(args.groups), min(args.groups, 2 * args.incidents))
    publisher.start()
    job.start()
    watch.start()
    warm_up_s = wait_for(lambda: fleet_shown(watch, fleet), "the whole fleet in the metrics", args.timeout)
    print(f"fleet shown after {warm_up_s:.0f} s", flush=True)
    phases, incidents = {}, []
    fresh, phases["fresh"] = run_phase("fresh", args, fleet, publisher, watch, job, free_groups)
    stop_s = job.stop()
    restarted_at = time.time()
    job.start()
    back_s = wait_for(lambda: batches_since(watch, restarted_at), "a batch of each restarted query", args.timeout)
    restarted, phases["after_restart"] = run_phase("after_restart", args, fleet, publisher, watch, job, free_groups)
    phases["after_restart"].update({"stop_s": round(stop_s, 1), "back_to_batches_s": round(back_s, 1)})
    job.stop()
    publisher.stop()
    watch.stopped.set()
    watch.join()
    incidents = fresh + restarted
    attach_delta_times(work / "delta", incidents)
    for name, chosen in (("fresh", fresh), ("after_restart", restarted)):
        phases[name]["latency"] = summarize(chosen)
    return {
        "trigger": trigger,
        "warm_up_s": round(warm_up_s, 1),
        "publisher_late_ticks": publisher.late_ticks,
        "publisher_longest_tick_ms": publisher.longest_tick_ms,
        "phases": phases,
        "incidents": [asdict(i) for i in incidents],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--members", type=int, default=10)
    parser.add_argument("--producers", type=int, default=200)
    parser.add_argument("--sends-per-second", type=int, default=2000)
    parser.add_argument("--incidents", type=int, default=32, help="per phase (fresh, after a restart)")
    parser.add_argument("--spacing", type=float, default=25.0, help="seconds between incidents")
    parser.add_argument("--settle", type=float, default=60.0, help="seconds after the last incident")
    parser.add_argument("--trigger", action="append", help='the job\'s trigger_interval (repeatable); "10 seconds"')
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--work", help="keep the broker, tables and job logs here (default: a temporary directory)")
    parser.add_argument("--results", default=str(RESULTS))
    args = parser.parse_args()
    import contextlib
    import tempfile

    runs = []
    place = contextlib.nullcontext(args.work) if args.work else tempfile.TemporaryDirectory(prefix="latency-")
    with place as scratch:
        broker = LocalKafkaBroker(Path(scratch) / "kafka")
        bootstrap = broker.start().bootstrap_servers
        try:
            for n, trigger in enumerate(args.trigger or ["10 seconds"]):
                work = Path(scratch) / f"run-{n}"
                work.mkdir()
                runs.append(measure(args, trigger, work, bootstrap))
                print(json.dumps({p: v["latency"]["overall"] for p, v in runs[-1]["phases"].items()}, indent=1))
        finally:
            broker.stop()
    result = {
        "command": " ".join(["python -m bench.bench_detection_latency", *sys.argv[1:]]),
        "cores": os.cpu_count(),
        "load_average_at_end": os.getloadavg(),
        "fleet": {
            k: getattr(args, k)
            for k in ("groups", "members", "producers", "sends_per_second", "incidents", "spacing", "partitions")
        },
        "targets_p95_s": {"to_metric_s": 5, "to_delta_row_s": 15},
        "runs": runs,
    }
    Path(args.results).write_text(json.dumps(result, indent=1) + "\n")
    print(f"written {args.results}")


if __name__ == "__main__":
    main()
