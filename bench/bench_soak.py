"""Benchmark (not a test): does the job stay steady over a day of fleet time, across restarts? Memory, batch
time, disk.

Run: ``.venv/bin/python -m bench.bench_soak [--duration 4500 --speed 48 --lead 600 --restarts 2 --warmup 900]``
-> prints a table and writes ``bench/results/soak.json``. It runs the demo with ``--groups`` extra healthy groups,
the job stopped and started again ``--restarts`` times on its checkpoints, and samples every process's resident
memory, each query's batch duration, state rows and lag from the job's metrics, and the Delta and checkpoint
files; each series is reported as its last window over an early one, so a leak or slow-down shows as a ratio
that grows with ``--duration``. Batch durations are also read per micro-batch from each query's checkpoint and
compared kind with kind (batches with input, and the no-data batches Spark runs to fire state timeouts), since
the last-batch gauge sampled every 10 s mixes both in varying shares. Each table's live files at the end of both
windows (what VACUUM leaves) are read afterwards by time travel."""

from __future__ import annotations

import argparse
import json
import re
import signal
import statistics
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from bench.common import machine, measured_at

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).parent / "results" / "soak.json"
QUERY_METRICS = (
    "rmqmon_batch_duration_seconds",
    "rmqmon_state_rows",
    "rmqmon_state_memory_bytes",
    "rmqmon_kafka_offsets_behind",
)
# Series that only grow: reported as their rate in each window.
COUNTERS = ("rmqmon_input_rows_total", "delta_data_bytes", "delta_data_files", "delta_log_files", "checkpoint_files")
METRICS_URL = re.compile(r"metrics on (http://127\.0\.0\.1:\d+/metrics)")
RUN_DIR = re.compile(r"Delta tables : (\S+)/delta")
FLEET_SECONDS = re.compile(r"simulated +: \S+ (\d+) s of fleet time")
RESTART_LINE = re.compile(r"\[demo\] restart \d+ of \d+")
# spark.sql.streaming.minBatchesToRetain: a checkpoint holds this many batches' files once it is full.
RETAINED_BATCHES = 100


def process_tree(root_pid: int) -> dict[int, str]:
    """The pids under ``root_pid`` (itself included), each with its command line."""
    parents: dict[int, int] = {}
    commands: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            commands[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # the process ended while we looked
            continue
        parents[int(entry.name)] = int(stat[stat.rindex(")") + 2 :].split()[1])
    tree, frontier = {root_pid}, [root_pid]
    while frontier:
        pid = frontier.pop()
        children = [child for child, parent in parents.items() if parent == pid]
        tree.update(children)
        frontier += children
    return {pid: commands.get(pid, "") for pid in tree}


def role(command: str) -> str:
    if "kafka.Kafka" in command:
        return "kafka_broker"
    if "java" in command.split(" ", 1)[0] or "SparkSubmit" in command:
        return "spark_jvm"
    if "pyspark.daemon" in command or "pyspark.worker" in command:
        return "python_workers"
    if "rebalance-monitor" in command or "streaming.app.cli" in command:
        return "driver_python"
    return "other"


def rss_by_role(root_pid: int) -> dict[str, int]:
    """Resident bytes summed per role (see ``role``)."""
    totals: dict[str, int] = {}
    for pid, command in process_tree(root_pid).items():
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        match = re.search(r"^VmRSS:\s+(\d+) kB", status, re.MULTILINE)
        if match and role(command) != "other":  # e.g. a short-lived shell
            totals[role(command)] = totals.get(role(command), 0) + int(match.group(1)) * 1024
    return totals


def job_metrics(url: str) -> dict[str, float]:
    """``<metric>{query}`` -> value for ``QUERY_METRICS``, plus rows read per query (a counter)."""
    with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 (a local http URL we printed)
        text = response.read().decode()
    values: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in QUERY_METRICS or sample.name == "rmqmon_input_rows_total":
                values[f"{sample.name}{{{sample.labels.get('query', '')}}}"] = sample.value
    return values


def disk_usage(run_dir: Path) -> dict[str, int]:
    """Bytes and file counts of the Delta tables' data files, their logs and the checkpoints, and the batches each
    query's checkpoint holds."""
    usage = {
        "delta_data_bytes": 0,
        "delta_data_files": 0,
        "delta_log_files": 0,
        "checkpoint_bytes": 0,
        "checkpoint_files": 0,
    }
    for path in run_dir.rglob("*"):
        try:
            if not path.is_file():
                continue
            size = path.stat().st_size
        except OSError:
            continue
        parts = path.relative_to(run_dir).parts
        if parts[0] == "checkpoints":
            usage["checkpoint_bytes"] += size
            usage["checkpoint_files"] += 1
            if len(parts) == 4 and parts[2] == "offsets" and parts[3].isdigit():
                # the checkpoint grows until each query holds RETAINED_BATCHES, then stays
                key = f"checkpoint_batches{{{parts[1]}}}"
                usage[key] = usage.get(key, 0) + 1
        elif "_delta_log" in parts:
            usage["delta_log_files"] += 1
        elif parts[0] == "delta" and path.suffix == ".parquet":
            usage["delta_data_bytes"] += size
            usage["delta_data_files"] += 1
    return usage


def sample(demo_pid: int, url: str) -> dict[str, float]:
    """One sample: memory per role, the job's metrics and the newest demo run's disk usage."""
    values: dict[str, float] = {f"rss_bytes{{{k}}}": v for k, v in rss_by_role(demo_pid).items()}
    try:
        values.update(job_metrics(url))
    except OSError as error:
        print(f"metrics not read: {error}", flush=True)
    newest_run = max((ROOT / ".run" / "demo").iterdir())
    values.update({k: float(v) for k, v in disk_usage(newest_run).items()})
    return values


def read_offsets(path: Path) -> tuple[float, list[str]]:
    """A checkpoint's offsets entry: the batch's start (s since the epoch) and its sources' end offsets."""
    lines = path.read_text().splitlines()
    return json.loads(lines[1])["batchTimestampMs"] / 1000, lines[2:]


def query_batches(checkpoints: Path, batches: dict[str, dict[int, dict]], offsets: dict[tuple[str, int], list]) -> None:
    """Add every query's micro-batches committed since the last call to ``batches`` (query -> id -> record).

    A record holds the batch's end (the commit file's time, s since the epoch), its duration from its trigger
    time, and whether it read input: a no-data batch ends at the offsets the batch before it ended at.
    ``offsets`` keeps each batch's end offsets, as Spark deletes old entries (``minBatchesToRetain``)."""
    for query in sorted(p for p in checkpoints.iterdir() if (p / "commits").is_dir()):
        seen = batches.setdefault(query.name, {})
        for entry in sorted((query / "commits").iterdir(), key=lambda e: (len(e.name), e.name)):
            if not entry.name.isdigit() or int(entry.name) in seen:
                continue
            batch = int(entry.name)
            try:
                ended = entry.stat().st_mtime
                started, ends = read_offsets(query / "offsets" / entry.name)
            except (OSError, ValueError, IndexError, KeyError):  # being written or already deleted
                continue
            offsets[(query.name, batch)] = ends
            previous = offsets.get((query.name, batch - 1))
            seen[batch] = {
                "end": round(ended, 3),
                "duration_s": round(ended - started, 3),
                "data": None if previous is None else ends != previous,
            }


def batch_series(batches: dict[str, dict[int, dict]], started: float) -> list[tuple[str, float, float]]:
    """(series, seconds since ``started``, value) per batch: its duration under its kind (``data`` or
    ``no-data``), and 1.0 or 0.0 under ``no_data_batch_share``."""
    points = []
    for query, seen in sorted(batches.items()):
        for record in seen.values():
            if record["data"] is None:
                continue
            kind = "data" if record["data"] else "no-data"
            t_s = record["end"] - started
            points.append((f"batch_duration_s{{{query},{kind}}}", t_s, record["duration_s"]))
            points.append((f"no_data_batch_share{{{query}}}", t_s, 0.0 if record["data"] else 1.0))
    return points


def summarize_batches(points: list[tuple[str, float, float]], warmup_s: float, window_s: float, end_s: float) -> dict:
    """Per batch series: the median of the batches that ended in the early and in the last window, their ratio
    and how many batches each window holds (a share is the mean, not the median)."""
    report = {}
    for key in sorted({k for k, _, _ in points}):
        measure = statistics.fmean if key.startswith("no_data_batch_share") else statistics.median
        early_values = [v for k, t, v in points if k == key and warmup_s <= t < warmup_s + window_s]
        late_values = [v for k, t, v in points if k == key and end_s - window_s <= t < end_s]
        early = round(measure(early_values), 3) if early_values else None
        late = round(measure(late_values), 3) if late_values else None
        ratio = late / early if early and late is not None else None
        report[key] = {
            "early": early,
            "late": late,
            "late_over_early": None if ratio is None else round(ratio, 3),
            "batches": [len(early_values), len(late_values)],
        }
    return report


def window_median(samples: list[dict], key: str, start_s: float, end_s: float) -> float | None:
    values = [s["values"][key] for s in samples if start_s <= s["t_s"] < end_s and key in s["values"]]
    return statistics.median(values) if values else None


def window_rate(samples: list[dict], key: str, start_s: float, end_s: float) -> float | None:
    """A counter's increase per second over the samples of the window."""
    points = [(s["t_s"], s["values"][key]) for s in samples if start_s <= s["t_s"] < end_s and key in s["values"]]
    if len(points) < 2 or points[-1][0] == points[0][0]:
        return None
    return round((points[-1][1] - points[0][1]) / (points[-1][0] - points[0][0]), 3)


def summarize(samples: list[dict], warmup_s: float, window_s: float) -> dict[str, dict]:
    """Per series: the median of the early window (from ``warmup_s``) and of the last window, and their ratio.
    Counters (``COUNTERS``) become their rate per second in each window."""
    end_s = samples[-1]["t_s"] + 1e-9
    keys = sorted({k for s in samples for k in s["values"]})
    report = {}
    for key in keys:
        measure = window_rate if key.startswith(COUNTERS) else window_median
        name = f"{key} per s" if key.startswith(COUNTERS) else key
        early = measure(samples, key, warmup_s, warmup_s + window_s)
        late = measure(samples, key, end_s - window_s, end_s)
        ratio = late / early if early and late is not None else None
        report[name] = {"early": early, "late": late, "late_over_early": None if ratio is None else round(ratio, 3)}
    return report


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--duration", type=float, default=4500, help="wall seconds of the demo (default 4500)")
    parser.add_argument("--groups", type=int, default=50, help="healthy groups beside the scenario's (default 50)")
    parser.add_argument("--speed", type=float, default=48, help="fleet seconds per wall second at most (default 48)")
    parser.add_argument(
        "--lead", type=float, default=600, help="fleet seconds the fleet may run ahead of the job (default 600)"
    )
    parser.add_argument(
        "--restarts", type=int, default=2, help="times the job is stopped and started again, evenly (default 2)"
    )
    parser.add_argument("--sample", type=float, default=10, help="seconds between samples (default 10)")
    parser.add_argument("--warmup", type=float, default=900, help="seconds before the early window (default 900)")
    parser.add_argument("--window", type=float, default=240, help="seconds per compared window (default 240)")
    parser.add_argument("--results", type=Path, default=RESULTS, help=f"where to write the JSON (default {RESULTS})")
    return parser.parse_args()


def demo_command(args: argparse.Namespace) -> list[str]:
    return [
        str(ROOT / ".venv" / "bin" / "rebalance-monitor"),
        "demo",
        "--no-live",
        "--duration",
        str(args.duration),
        "--groups",
        str(args.groups),
        "--speed",
        str(args.speed),
        "--restarts",
        str(args.restarts),
        "--lead",
        str(args.lead),
    ]


@dataclass
class SoakRun:
    """The demo as it ran: the finished process, the samples, each query's batches from its checkpoint, the wall
    time sampling began (s since the epoch) and when the job was restarted (s after that)."""

    demo: subprocess.Popen[bytes]
    samples: list[dict] = field(default_factory=list)
    batches: dict[str, dict[int, dict]] = field(default_factory=dict)
    started_wall: float = 0.0
    restarted_at: list[float] = field(default_factory=list)


def _interrupted(*_: object) -> None:
    raise KeyboardInterrupt


def run_demo(args: argparse.Namespace, log_path: Path) -> SoakRun:
    """Run the demo to its end, or until Ctrl-C or SIGTERM stop it cleanly, sampling every ``--sample`` seconds
    once its metrics are up."""
    # SIGTERM too: a bench started in the background by a non-interactive shell ignores SIGINT
    signal.signal(signal.SIGTERM, _interrupted)
    url = None
    offsets: dict[tuple[str, int], list] = {}
    started = next_sample = 0.0
    with log_path.open("w") as log, log_path.open() as output:
        run = SoakRun(
            subprocess.Popen(demo_command(args), cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        )
        unfinished = ""  # the demo's output is read as it grows, line by line
        try:
            while run.demo.poll() is None:
                time.sleep(0.5)
                lines, _, unfinished = (unfinished + output.read()).rpartition("\n")
                if url is None:
                    url = m.group(1) if (m := METRICS_URL.search(lines)) else None
                    if url is None:
                        continue
                    started = next_sample = time.monotonic()
                    run.started_wall = time.time()
                    print(f"monitor up, sampling {url} every {args.sample:.0f} s", flush=True)
                for _ in RESTART_LINE.findall(lines):
                    run.restarted_at.append(round(time.monotonic() - started, 1))
                    print(f"job restarted at {run.restarted_at[-1]:.0f} s", flush=True)
                if time.monotonic() >= next_sample:
                    values = sample(run.demo.pid, url)
                    run.samples.append({"t_s": round(time.monotonic() - started, 1), "values": values})
                    query_batches(max((ROOT / ".run" / "demo").iterdir()) / "checkpoints", run.batches, offsets)
                    next_sample += args.sample
        except KeyboardInterrupt:
            # the demo alone: it stops its job and Spark itself (SIGTERM on the whole group would kill the JVM
            # under the stopping job)
            run.demo.send_signal(signal.SIGTERM)
            run.demo.wait()
    return run


def live_table_files(delta_root: Path, started_wall: float, moments: dict[str, float], every_s: float) -> dict:
    """Per table, the data files and bytes its snapshot held at each of ``moments`` (s after ``started_wall``)
    and every ``every_s`` s of the run, read afterwards by time travel with delta-rs: what VACUUM (``rebalance-
    monitor maintain``) leaves on disk then. Compaction makes an append-only table's count a saw-tooth, so the
    most files it held at once is reported beside the late over early ratio."""
    from datetime import UTC, datetime

    import pyarrow as pa
    from deltalake import DeltaTable

    def at(table: DeltaTable, t_s: float) -> dict:
        table.load_as_version(datetime.fromtimestamp(started_wall + t_s, UTC))
        sizes = pa.table(table.get_add_actions(flatten=True)).column("size_bytes").to_pylist()
        return {"t_s": round(t_s, 1), "version": table.version(), "files": len(sizes), "bytes": sum(sizes)}

    end_s = max(moments.values())
    report: dict[str, dict] = {}
    for table_dir in sorted(p for p in delta_root.iterdir() if (p / "_delta_log").is_dir()):
        table = DeltaTable(str(table_dir))
        row: dict = {label: at(table, t_s) for label, t_s in moments.items()}
        early, late = row["early"]["files"], row["late"]["files"]
        row["files_late_over_early"] = round(late / early, 3) if early else None
        series = [at(table, k * every_s) for k in range(int(end_s // every_s) + 1)]
        row["max_files"] = max(point["files"] for point in [*series, row["early"], row["late"]])
        row["files_every_interval"] = [point["files"] for point in series]
        report[table_dir.name] = row
    return report


def delta_bytes_written(delta_root: Path, started_wall: float, windows: dict[str, tuple[float, float]]) -> dict:
    """Bytes the job added to its tables per second in each window (s after ``started_wall``), from the commit
    files: new data (appends and MERGEs, ``dataChange``) apart from compaction's rewrites of data already there
    (``OPTIMIZE``), which VACUUM later takes back. A window holding a compaction of a big table writes more."""
    rates: dict[str, dict] = {label: {"data": 0, "compaction": 0} for label in windows}
    for commit in delta_root.glob("*/_delta_log/*.json"):
        adds, committed_s = [], None
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                adds.append(action["add"])
            elif "commitInfo" in action:
                committed_s = action["commitInfo"]["timestamp"] / 1000 - started_wall
        for label, (start_s, end_s) in windows.items():
            if committed_s is not None and start_s <= committed_s < end_s:
                for add in adds:
                    rates[label]["data" if add.get("dataChange", True) else "compaction"] += add["size"]
    return {
        label: {kind: round(total / (windows[label][1] - windows[label][0]), 1) for kind, total in totals.items()}
        for label, totals in rates.items()
    }


def print_report(report: dict[str, dict]) -> None:
    print(f"{'series':<62} {'early':>14} {'late':>14} {'late/early':>10}")
    for key, row in report.items():
        early, late = row["early"], row["late"]
        print(
            f"{key:<62} {early if early is not None else '-':>14} {late if late is not None else '-':>14} "
            f"{row['late_over_early'] if row['late_over_early'] is not None else '-':>10}"
        )


def results_document(args: argparse.Namespace, run: SoakRun, report: dict, demo_output: str) -> dict:
    # relative to the project, as the demo keeps its runs under .run/demo
    run_dir = str(Path(m.group(1)).resolve().relative_to(ROOT)) if (m := RUN_DIR.search(demo_output)) else None
    fleet_s = int(m.group(1)) if (m := FLEET_SECONDS.search(demo_output)) else None
    return {
        "machine": machine(),
        "measured_at": measured_at(),
        "input": {
            "duration_s": args.duration,
            "groups": args.groups,
            "speed": args.speed,
            "restarts": args.restarts,
            "lead_s": args.lead,
            "sample_s": args.sample,
            "warmup_s": args.warmup,
            "window_s": args.window,
            "run_dir": run_dir,
        },
        "fleet_time_s": fleet_s,
        "started_wall_s": round(run.started_wall, 3),
        "restarted_at_s": run.restarted_at,
        "summary": report,
        "samples": run.samples,
        "batches": {
            query: [{"batch": b, **r, "end": round(r["end"] - run.started_wall, 1)} for b, r in sorted(seen.items())]
            for query, seen in run.batches.items()
        },
    }


def main() -> None:
    args = parse_args()
    log_path = args.results.with_suffix(".log")
    run = run_demo(args, log_path)
    if run.demo.returncode != 0 or len(run.samples) < 3:
        sys.exit(
            f"the demo ended with {run.demo.returncode} after {len(run.samples)} samples; its output is in {log_path}"
        )

    report = summarize(run.samples, args.warmup, args.window)
    end_s = run.samples[-1]["t_s"] + 1e-9
    report |= summarize_batches(batch_series(run.batches, run.started_wall), args.warmup, args.window, end_s)
    print_report(report)
    result = results_document(args, run, report, log_path.read_text())
    print(f"fleet time {result['fleet_time_s']} s; job restarted at {run.restarted_at} s")
    if result["input"]["run_dir"]:
        # the end of each compared window, as in ``summarize``
        moments = {"early": args.warmup + args.window, "late": end_s}
        delta_root = ROOT / result["input"]["run_dir"] / "delta"
        result["live_table_files"] = tables = live_table_files(delta_root, run.started_wall, moments, 60)
        windows = {"early": (args.warmup, args.warmup + args.window), "late": (end_s - args.window, end_s)}
        result["delta_bytes_written_per_s"] = written = delta_bytes_written(delta_root, run.started_wall, windows)
        print(f"Delta bytes written per s, early -> late: {written['early']} -> {written['late']}")
        for table, row in tables.items():
            print(
                f"{table:<34} live files {row['early']['files']:>5} -> {row['late']['files']:>5}, "
                f"at most {row['max_files']} (every 60 s)"
            )
    held = {k: r["early"] or 0 for k, r in report.items() if k.startswith("checkpoint_batches")}
    filling = [k for k, early in held.items() if early < RETAINED_BATCHES]
    if filling:
        print(f"checkpoint bytes: early window before {RETAINED_BATCHES} retained batches in {', '.join(filling)}")
    args.results.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.results} (demo output: {log_path})")


if __name__ == "__main__":
    main()
