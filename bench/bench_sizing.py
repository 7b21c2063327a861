"""Benchmark (not a test): what the job costs at a fleet's size, the points of the sizing curve.

Run: ``.venv/bin/python -m bench.bench_sizing --point 1000x2000 [--point 10000x10000 ...] [--minutes 10]`` ->
``bench/results/sizing.json`` (one entry per point, a re-measured point replaces its entry), then
``python -m bench.sizing_table`` writes the curve into ``docs/deploy.md``. Each point runs the real job at
``conf/monitor.toml``'s defaults on the local Kafka broker against ``bench.collector_fleet``'s collector-shaped
fleet (groups x 10 members on 4 brokers, 200 producers) with the detection-latency bench's incidents, and
records the job's CPU, peak memory per process, detection latency, input lag over time and Delta writes.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import platform
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from prometheus_client.parser import text_string_to_metric_families

from bench.bench_detection_latency import (
    KINDS,
    JobProcess,
    MetricsWatch,
    attach_delta_times,
    fleet_shown,
    plan_phase,
    summarize,
    wait_for,
    write_config,
)
from bench.bench_soak import process_tree, role
from bench.collector_fleet import BROKERS
from bench.latency_fleet import EXPIRY_MS, HEARTBEAT_MS, FleetShape, Incident, Publisher, now_ms
from connectors.kafka_topics import create_topics
from connectors.processes import free_port
from localenv.kafka_broker import LocalKafkaBroker
from streaming.contract.events import DEFAULT_TOPICS
from tests.support.process_cpu import machine_busy_seconds, processes_cpu_seconds, tree_cpu_seconds

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).parent / "results" / "sizing.json"
POINTS = tuple((groups, sends) for groups in (1_000, 3_000, 10_000) for sends in (2_000, 10_000))
LARGEST, LARGEST_MINUTES, DEFAULT_MINUTES = POINTS[-1], 30.0, 10.0
MEMBERS, PRODUCERS = 10, 200
PHASE_METRICS = ("rmqmon_batch_phase_seconds_total", "rmqmon_batches_total", "rmqmon_input_rows_total")
STATE_METRICS = ("rmqmon_state_rows", "rmqmon_state_memory_bytes")
# Input lag is "growing" when its least-squares slope over the second half exceeds this share of the input rate.
GROWING_SHARE = 0.01
PARTITIONS = 2  # of each topic
UNDER_LOAD_CORES = 0.25  # a point is under load when the machine's other work took more cores than this
TRIGGER = tomllib.loads((ROOT / "conf" / "monitor.toml").read_text())["spark"]["trigger_interval"]  # the default
ROLES = ("spark_jvm", "driver_python", "python_workers")
# Only a job that never finishes a batch waits this long for its first ones (the warm-up's timeout runs after them).
FIRST_BATCH_GUARD_S = 1800.0


def parse_point(text: str) -> tuple[int, int]:
    groups, sends = re.fullmatch(r"(\d+)x(\d+)", text.replace(",", "")).groups()  # type: ignore[union-attr]
    return int(groups), int(sends)


def metric_values(url: str, names: tuple[str, ...]) -> dict[str, float]:
    """``name{label=value,...}`` -> value of the job's metrics ``names``."""
    query = "&".join(f"name[]={n}" for n in names)
    with urllib.request.urlopen(f"{url}?{query}", timeout=5) as response:  # noqa: S310 (our local endpoint)
        text = response.read().decode()
    values = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name in names:
                labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
                values[f"{s.name}{{{labels}}}"] = s.value
    return values


def committed_offsets(checkpoints: Path) -> dict[tuple[str, int], int]:
    """(topic, partition) -> the end offset of the newest committed micro-batch of the query reading it."""
    offsets: dict[tuple[str, int], int] = {}
    if not checkpoints.is_dir():
        return offsets
    for query in checkpoints.iterdir():
        commits = [int(p.name) for p in (query / "commits").glob("*") if p.name.isdigit()]
        if not commits:
            continue
        try:
            lines = (query / "offsets" / str(max(commits))).read_text().splitlines()[2:]
        except OSError:
            continue
        for line in lines:
            with contextlib.suppress(ValueError):
                for topic, partitions in json.loads(line).items():
                    for partition, offset in partitions.items():
                        offsets[(topic, int(partition))] = offset
    return offsets


class Sampler(threading.Thread):
    """Every ``every_s``: the job's CPU seconds, each process's resident memory and peak (VmHWM) by role, and
    the input lag (the topics' end offsets minus what the job's committed batches read)."""

    def __init__(self, pid: int, bootstrap: str, topics: set[str], checkpoints: Path, every_s: float) -> None:
        super().__init__(daemon=True)
        self.pid, self.bootstrap, self.topics = pid, bootstrap, topics
        self.checkpoints, self.every_s = checkpoints, every_s
        self.samples: list[dict] = []
        self.peak_process = dict.fromkeys(ROLES, 0)  # role -> the largest peak RSS of one process
        self.peak_sum = dict.fromkeys(ROLES, 0)  # role -> the largest RSS of its processes at one sample, summed
        self.stopped = threading.Event()

    def roles(self) -> dict[int, str]:
        """The job's processes by role (``bench_soak.role``): its root process is the driver's Python."""
        tree = process_tree(self.pid)
        return {pid: "driver_python" if pid == self.pid else role(command) for pid, command in tree.items()}

    def cpu_s(self) -> float:
        """User and system CPU seconds of the job's processes."""
        return processes_cpu_seconds(pid for pid, kind in self.roles().items() if kind in ROLES)

    def memory(self) -> None:
        total: dict[str, int] = {}
        for pid, kind in self.roles().items():
            try:
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue
            rss = re.search(r"^VmRSS:\s+(\d+) kB", status, re.MULTILINE)
            hwm = re.search(r"^VmHWM:\s+(\d+) kB", status, re.MULTILINE)
            if rss and hwm and kind in ROLES:
                total[kind] = total.get(kind, 0) + int(rss.group(1)) * 1024
                self.peak_process[kind] = max(self.peak_process.get(kind, 0), int(hwm.group(1)) * 1024)
        for kind, value in total.items():
            self.peak_sum[kind] = max(self.peak_sum.get(kind, 0), value)

    def run(self) -> None:
        from kafka import KafkaConsumer, TopicPartition

        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap)
        partitions = [TopicPartition(t, p) for t in self.topics for p in sorted(consumer.partitions_for_topic(t) or ())]
        while not self.stopped.wait(self.every_s):
            ends = consumer.end_offsets(partitions)
            read = committed_offsets(self.checkpoints)
            self.memory()
            self.samples.append(
                {
                    "t": time.time(),
                    "cpu_s": self.cpu_s(),
                    "input_end": sum(ends.values()),
                    "lag": sum(max(0, end - read.get((tp.topic, tp.partition), 0)) for tp, end in ends.items()),
                }
            )
        consumer.close()


def batch_interval(per_second: dict[str, float]) -> float:
    """The longest mean time between two micro-batches of one query over the window (s)."""
    rates = [v for k, v in per_second.items() if k.startswith("rmqmon_batches_total{") and v > 0]
    return max((1 / v for v in rates), default=0.0)


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (x, y) points."""
    n = len(points)
    if n < 2:
        return 0.0
    mx, my = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
    var = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / var if var else 0.0


def lag_summary(samples: list[dict], began: float, ended: float, batch_interval_s: float = 0.0) -> dict:
    """The input lag over the window, and its slope over the second half: growing when the rise it fits over the
    half is more than ``GROWING_SHARE`` of the half's input and more than the input of one ``batch_interval_s``
    (the lag a job that keeps up shows at a batch's end: a sawtooth, not a trend)."""
    window = [s for s in samples if began <= s["t"] <= ended]
    half = [(s["t"] - began, s["lag"]) for s in window if s["t"] >= (began + ended) / 2]
    rate = 0.0
    if len(window) > 1:
        rate = (window[-1]["input_end"] - window[0]["input_end"]) / (window[-1]["t"] - window[0]["t"])
    per_s = slope(half)
    half_s = (ended - began) / 2
    tolerance = max(GROWING_SHARE * rate * half_s, rate * batch_interval_s)
    return {
        "input_events_per_s": round(rate, 1),
        "series_s_lag": [[round(s["t"] - began, 1), s["lag"]] for s in window],
        "second_half_slope_events_per_s": round(per_s, 2),
        "rise_tolerated": round(tolerance),
        "verdict": "growing" if rate and per_s * half_s > tolerance else "flat",
        "max": max((s["lag"] for s in window), default=None),
    }


def delta_writes(delta_root: Path, began: float, ended: float) -> dict:
    """Commits and bytes (data files added, new data and compaction apart, and the commit files) per minute over
    the window, from the tables' commit files."""
    commits, data, compaction, log = 0, 0, 0, 0
    for commit in delta_root.glob("*/_delta_log/*.json"):
        adds, at = [], None
        text = commit.read_text()
        for line in text.splitlines():
            action = json.loads(line)
            if "add" in action:
                adds.append(action["add"])
            elif "commitInfo" in action:
                at = action["commitInfo"]["timestamp"] / 1000
        if at is None or not began <= at < ended:
            continue
        commits, log = commits + 1, log + len(text.encode())
        for add in adds:
            if add.get("dataChange", True):
                data += add["size"]
            else:
                compaction += add["size"]
    minutes = (ended - began) / 60
    return {
        "commits_per_min": round(commits / minutes, 1),
        "data_bytes_per_min": round(data / minutes),
        "compaction_bytes_per_min": round(compaction / minutes),
        "log_bytes_per_min": round(log / minutes),
    }


def differences(before: dict[str, float], after: dict[str, float], wall_s: float) -> dict[str, float]:
    """Counters' growth per second of wall time."""
    return {k: round((v - before.get(k, 0.0)) / wall_s, 4) for k, v in sorted(after.items())}


class Job(Protocol):
    """The job a point measures: its process id (its process tree is the job's), started and stopped."""

    @property
    def pid(self) -> int: ...

    def start(self) -> None: ...

    def stop(self) -> float: ...


def job_process(
    work: Path, bootstrap: str, metrics_port: int, prefix: str, trigger: str = TRIGGER
) -> tuple[Job, dict[str, str]]:
    """``rebalance-monitor run`` at ``conf/monitor.toml``'s defaults (but ``trigger``) on topics of its own, as an
    operator runs it."""
    topics = {t: f"{prefix}.{name.split('.', 1)[1]}" for t, name in DEFAULT_TOPICS.items()}
    create_topics(bootstrap, set(topics.values()), partitions=PARTITIONS)
    return JobProcess(write_config(work, bootstrap, topics, trigger, metrics_port), work / "job.log"), topics


def measure_point(
    args: argparse.Namespace,
    groups: int,
    sends: int,
    minutes: float,
    work: Path,
    bootstrap: str,
    make_job: Callable[[Path, str, int, str], tuple[Job, dict[str, str]]] = job_process,
    kinds: tuple[str, ...] = KINDS,
) -> dict:
    """One point: the fleet shown in the metrics, then ``minutes`` measured with ``kinds`` of incidents in it."""
    metrics_port = free_port()
    job, topics = make_job(work, bootstrap, metrics_port, f"sizing-{groups}x{sends}-{int(time.time())}")
    shape = FleetShape(groups, MEMBERS, PRODUCERS, sends, topics, input_shape="collector")
    fleet = shape.fleet()
    publisher = Publisher(shape, bootstrap)
    url = f"http://127.0.0.1:{metrics_port}/metrics"
    watch = MetricsWatch(url, publisher.reports, MEMBERS)
    window_s = minutes * 60
    # a silent member is silenced EXPIRY_MS before its slot; the last incident leaves settle_s to reach Delta
    lead_s = (EXPIRY_MS + HEARTBEAT_MS) / 1000 if "silent_member" in kinds else args.spacing
    incidents = args.incidents
    if incidents is None:
        room_s = window_s - lead_s - args.settle
        incidents = max(len(kinds), int(room_s // args.spacing) // len(kinds) * len(kinds))
    free_groups = random.Random(11).sample(range(groups), min(groups, incidents))
    load_at_start = [round(v, 2) for v in os.getloadavg()]
    publisher.start()
    job.start()
    watch.start()
    sampler = Sampler(job.pid, bootstrap, set(topics.values()), work / "checkpoints", args.sample_every)
    sampler.start()
    try:
        # The fleet may take ``args.timeout`` to show from the job's first batches, however long those take (on a
        # loaded machine, minutes: FIRST_BATCH_GUARD_S only ends a job that never finishes one).
        checkpoints = work / "checkpoints"
        first = wait_for(lambda: committed_after(checkpoints, 0.0), "a first batch of every query", FIRST_BATCH_GUARD_S)
        warm_up_s = first + wait_for(lambda: fleet_shown(watch, fleet), "the whole fleet in the metrics", args.timeout)
        print(f"{groups}x{sends}: fleet shown after {warm_up_s:.0f} s; measuring {window_s:.0f} s", flush=True)
        began = time.time()
        cpu_before, counters_before = sampler.cpu_s(), metric_values(url, PHASE_METRICS)
        busy_before, ours_before = machine_busy_seconds() or 0.0, tree_cpu_seconds(os.getpid()) or 0.0
        start_ms = now_ms() + int(lead_s * 1000)
        spacing_ms = int(args.spacing * 1000)
        chosen = plan_phase("sizing", incidents, spacing_ms, start_ms, fleet, publisher, watch, free_groups, kinds)
        time.sleep(max(0.0, began + window_s - time.time()))
        # On a loaded machine one batch can outlast a short window: the window ends no earlier than a batch of
        # every query planned after the last incident was handed to Kafka (the test's 10 s point waits for it).
        wait_for(lambda: batched_after(checkpoints, chosen), "a batch of every query after the incidents", args.timeout)
        ended = time.time()
        cpu_s = sampler.cpu_s() - cpu_before
        # the machine's other work: busy cores beyond this bench's processes (the job, the broker, the fleet)
        busy = (machine_busy_seconds() or 0.0) - busy_before
        others = (busy - ((tree_cpu_seconds(os.getpid()) or 0.0) - ours_before)) / (ended - began)
        counters_after, state = metric_values(url, PHASE_METRICS), metric_values(url, STATE_METRICS)
        with watch.lock:  # one not shown by now never was
            watch.pending = []
    finally:
        sampler.stopped.set()
        sampler.join()
        job.stop()
        publisher.stop()
        watch.stopped.set()
        watch.join()
    attach_delta_times(work / "delta", chosen, polled=True)
    per_second = differences(counters_before, counters_after, ended - began)
    return {
        "point": {"groups": groups, "sends_per_second": sends},
        "fleet": {
            "groups": groups,
            "members": MEMBERS,
            "brokers": len(BROKERS),
            "producers": PRODUCERS,
            "sends_per_second": sends,
            "input_shape": "collector",
            "cadences_ms": fleet.cadence.as_dict(),
        },
        "job_settings": {
            "trigger_interval": getattr(args, "trigger", TRIGGER),
            "other": "conf/monitor.toml's defaults",
        },
        "window_s": round(ended - began, 1),
        "warm_up_s": round(warm_up_s, 1),
        "job_cores": round(cpu_s / (ended - began), 3),
        "job_cpu_s": round(cpu_s, 1),
        "peak_rss_bytes": {
            "per_process": dict(sorted(sampler.peak_process.items())),
            "summed_per_role": dict(sorted(sampler.peak_sum.items())),
        },
        "latency": summarize(chosen),
        "input_lag": lag_summary(sampler.samples, began, ended, batch_interval(per_second)),
        "delta": delta_writes(work / "delta", began, ended),
        "per_second": per_second,
        "state_at_end": state,
        "publisher_late_ticks": publisher.late_ticks,
        "publisher_longest_tick_ms": publisher.longest_tick_ms,
        "load_average_at_start": load_at_start,
        "other_work_cores": round(others, 2),
        "under_load": others > UNDER_LOAD_CORES,
        "load_average_at_end": [round(v, 2) for v in os.getloadavg()],
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def committed_after(checkpoints: Path, since_s: float) -> bool:
    """Every query of the job has committed a batch it planned after ``since_s`` (epoch seconds): its entry in the
    query's offsets log written then, from the checkpoints (a job in this process has no loop setting its batch
    metrics)."""
    from streaming.job.runner import QUERY_NAMES

    for query in QUERY_NAMES:
        planned = {p.name: p.stat().st_mtime for p in (checkpoints / query / "offsets").glob("[0-9]*")}
        if not any(planned.get(p.name, 0.0) > since_s for p in (checkpoints / query / "commits").glob("[0-9]*")):
            return False
    return True


def batched_after(checkpoints: Path, incidents: list[Incident]) -> bool:
    """Every incident was handed to Kafka and every query of the job has since committed a batch planned after the
    last of them."""
    if any(not i.at_ms for i in incidents):
        return False
    return committed_after(checkpoints, max((i.at_ms for i in incidents), default=0) / 1000)


def machine() -> dict:
    memory = re.search(r"^MemTotal:\s+(\d+) kB", Path("/proc/meminfo").read_text(), re.MULTILINE)
    return {
        "cores": os.cpu_count(),
        "memory_bytes": int(memory.group(1)) * 1024 if memory else None,
        "platform": platform.platform(),
        "python": platform.python_version(),
    }


def merge(results: Path, entries: list[dict], command: str, ran_from: str) -> dict:
    """The results file with ``entries`` replacing those of the same points, ordered by point (``ran_from``: the
    ``code`` the job ran)."""
    document = json.loads(results.read_text()) if results.is_file() else {"points": []}
    fresh = {(e["point"]["groups"], e["point"]["sends_per_second"]) for e in entries}
    kept = [e for e in document["points"] if (e["point"]["groups"], e["point"]["sends_per_second"]) not in fresh]
    for entry in entries:
        entry["command"], entry["machine"], entry["code"] = command, machine(), ran_from
    points = sorted(kept + entries, key=lambda e: (e["point"]["groups"], e["point"]["sends_per_second"]))
    return {"targets_at_largest": TARGETS, "points": points}


def code() -> str:
    """The commit the job runs from, with ``+changes`` when the tree differs from it; "unknown" outside a git
    checkout (an exported tree), so that a run's figures are never lost to it."""

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()

    try:
        changed = git("status", "--porcelain", "--untracked-files=no")
        return git("rev-parse", "--short", "HEAD") + ("+changes" if changed else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


TARGETS = {
    "point": {"groups": LARGEST[0], "sends_per_second": LARGEST[1]},
    "minutes": LARGEST_MINUTES,
    "input_lag": "flat",
    "p95_to_metric_s": 10,
    "p95_to_delta_row_s": 30,
    "peak_memory_bytes": 8 * 2**30,
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--point", action="append", type=parse_point, help="GROUPSxSENDS (repeatable); default all six")
    parser.add_argument(
        "--minutes",
        type=float,
        help=f"each point's measured window (default {DEFAULT_MINUTES:g}, {LARGEST_MINUTES:g} at the largest point)",
    )
    parser.add_argument("--incidents", type=int, help="per point (default: as many as fit the window, spaced)")
    parser.add_argument("--spacing", type=float, default=25.0, help="seconds between incidents")
    parser.add_argument("--settle", type=float, default=60.0, help="seconds the window keeps after the last incident")
    parser.add_argument("--sample-every", type=float, default=5.0, help="seconds between CPU, memory and lag samples")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds the fleet may take to show")
    parser.add_argument("--work", help="keep the broker, tables and job logs here (default: a temporary directory)")
    parser.add_argument("--results", default=str(RESULTS))
    parser.add_argument("--trigger", default=TRIGGER, help=f"the job's trigger interval (default {TRIGGER!r})")
    args = parser.parse_args(argv)
    make_job = functools.partial(job_process, trigger=args.trigger)
    ran_from = code()  # before the run: what the job starts from
    entries = []
    place = contextlib.nullcontext(args.work) if args.work else tempfile.TemporaryDirectory(prefix="sizing-")
    with place as scratch:
        broker = LocalKafkaBroker(Path(scratch) / "kafka")
        bootstrap = broker.start().bootstrap_servers
        try:
            for groups, sends in args.point or POINTS:
                minutes = args.minutes or (LARGEST_MINUTES if (groups, sends) == LARGEST else DEFAULT_MINUTES)
                work = Path(scratch) / f"point-{groups}x{sends}"
                work.mkdir()
                entries.append(measure_point(args, groups, sends, minutes, work, bootstrap, make_job))
                e = entries[-1]
                print(
                    json.dumps({k: e[k] for k in ("point", "job_cores", "peak_rss_bytes")})
                    + f" lag {e['input_lag']['verdict']} p95 {e['latency']['overall']['to_metric_s']['p95']} s",
                    flush=True,
                )
        finally:
            broker.stop()
    given = argv if argv is not None else sys.argv[1:]
    kept = [a for n, a in enumerate(given) if a != "--work" and (n == 0 or given[n - 1] != "--work")]
    command = " ".join(["python -m bench.bench_sizing", *kept])  # where it kept its files is the machine's
    results = Path(args.results)
    results.write_text(json.dumps(merge(results, entries, command, ran_from), indent=1) + "\n")
    print(f"written {results}")


if __name__ == "__main__":
    main()
