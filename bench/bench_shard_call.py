"""One consumer shard's state-function call on the sizing bench's collector-shaped input, counted in instructions.

The input is ``bench.collector_fleet``'s (a poll per group and broker every cycle, reports at the running-info
cadence, routes, a progress sample per group and broker at the progress cadence; 10 members, 4 brokers), one shard
of ``--groups`` groups, warmed with ``--warm-s`` seconds of 2 s calls (400 s: every queue's progress window full),
then one call of ``--call-s`` seconds of input. The call is what the job's state function does: restore, the
events (``shard_events``), ``apply``, the snapshot compressed; ``whole`` adds the rows, the output frame and
PySpark's own pandas-to-Arrow conversion.

Time on a shared 2-core machine spreads by a quarter from minute to minute; instructions do not (0.2 %). Each tree
(this checkout, and ``--against REF``: that commit's files, exported) prepares its own input with its own code,
then ``valgrind --tool=cachegrind --cache-sim=no`` counts a process making the call once and one making it no
time: the difference is the call's instructions. The CPU time of a call (median of ``--repeat``, the process
warm) is reported beside it. Valgrind is Debian's package (``apt-get install valgrind``); without it
(``--no-valgrind``) only the CPU times are measured.

    python -m bench.bench_shard_call [--groups 375] [--against REF] [--out bench/results/shard_call.json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.bench_sizing import code, machine

ROOT = Path(__file__).resolve().parent.parent

# Runs in a tree's own code (``sys.argv[1]``): ``prepare`` writes the warmed state and the call's input to a pickle;
# ``call`` makes the call ``n`` times (``engine``: without the rows and Arrow) and prints the median CPU seconds.
CHILD = r"""
import json, pickle, statistics, sys, time
tree, mode, path = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, tree)
from bench.bench_consumer_state import call, columns_of
if mode == "prepare":
    from bench.collector_fleet import CollectorFleet
    groups, warm_s, call_s = (int(a) for a in sys.argv[4:7])
    kinds = ("consumer_channel", "consumer_connections", "reported_assignment", "topic_route", "send_result",
             "consume_progress")
    fleet = CollectorFleet(groups, 10, 1, 0, {k: k for k in kinds})
    start = 1_700_000_000_000
    def events(a, b):
        out = []
        for t in range(a, b, 100):
            for topic, _, value in fleet.due(t, t + 100):
                if topic != "send_result":
                    fields = json.loads(value)
                    out.append((fields.pop("event_time", t), fields))
        return out
    routes = [(start - 1, json.loads(v)) for _, _, v in fleet.routes(start)]
    blob, _ = call(None, columns_of(routes, True), 0, False)
    clock = start
    for _ in range(warm_s // 2):
        blob, _ = call(blob, columns_of(events(clock, clock + 2000), True), clock, False)
        clock += 2000
    columns = columns_of(events(clock, clock + call_s * 1000), True)
    rows = len(columns["event_type"])
    with open(path, "wb") as out:
        pickle.dump((blob, columns, clock), out)
    print(json.dumps({"rows": rows, "state_bytes": len(blob)}))
    sys.exit(0)
from pyspark.sql.conversion import PandasToArrowConversion
from streaming.domain.consumers.engine_settings import EngineSettings
from streaming.domain.consumers.shard_engine import TEXT_KEYS, ShardEngine
from streaming.job.consumer.events import lane_times, shard_events
from streaming.job.delta.bus import output_frame, output_schema
from streaming.job.delta.table_rows import rows_of
from streaming.job.runtime import state_blob
from streaming.job.runtime.python_worker import collector_paused
n, engine_only = int(sys.argv[4]), sys.argv[5] == "engine"
with open(path, "rb") as source:
    blob, columns, clock = pickle.load(source)
schema = output_schema()
times = []
for _ in range(n):
    began = time.process_time()
    with collector_paused():
        engine = ShardEngine.restore(state_blob.decode(blob, unread=True), EngineSettings())
        events, _, _ = shard_events(columns, engine, clock)
        outcomes = engine.apply(events, clock, lane_times(columns))
        state_blob.compress(engine.snapshot(), TEXT_KEYS)
        if not engine_only:
            rows = [row for outcome in outcomes for row in rows_of(outcome, "default")]
            frame = output_frame(rows)
            PandasToArrowConversion.convert(frame, schema, timezone="UTC", safecheck=True, assign_cols_by_name=True)
    times.append(time.process_time() - began)
print(json.dumps({"cpu_s": statistics.median(times) if times else None}))
"""

_REFS = re.compile(r"I\s+refs:\s+([\d,]+)")


def _child(tree: Path, *args: str, valgrind: bool = False) -> tuple[dict[str, Any], int | None]:
    """The child's printed result and, under valgrind, the instructions its process ran."""
    command = [sys.executable, "-c", CHILD, str(tree), *args]
    if valgrind:
        command = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null", *command]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tree, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the call in {tree} failed: {done.stderr.strip()[-2000:]}")
    found = _REFS.search(done.stderr) if valgrind else None
    return json.loads(done.stdout.strip().splitlines()[-1]), (int(found.group(1).replace(",", "")) if found else None)


def measure_tree(tree: Path, groups: int, warm_s: int, call_s: int, repeat: int, valgrind: bool) -> dict[str, Any]:
    """One tree's call: its input, the call's instructions (whole and engine only) and CPU seconds."""
    with tempfile.TemporaryDirectory(prefix="shard-call-") as scratch:
        data = str(Path(scratch) / "input.pkl")
        prepared, _ = _child(tree, "prepare", data, str(groups), str(warm_s), str(call_s))
        result: dict[str, Any] = {"input_rows": prepared["rows"], "state_bytes": prepared["state_bytes"]}
        for part in ("whole", "engine"):
            timed, _ = _child(tree, "call", data, str(repeat), part)
            result[f"{part}_cpu_ms"] = round(1000 * timed["cpu_s"], 1)
            if valgrind:
                _, once = _child(tree, "call", data, "1", part, valgrind=True)
                _, none = _child(tree, "call", data, "0", part, valgrind=True)
                assert once is not None and none is not None
                result[f"{part}_instructions"] = once - none
    return result


def exported(ref: str, into: Path) -> Path:
    """The files of commit ``ref`` in a directory of their own (``git archive``)."""
    archive = subprocess.run(["git", "archive", ref], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def ratios(head: dict[str, Any], base: dict[str, Any]) -> dict[str, float]:
    """This tree's figures over the baseline's, where both have them."""
    keys = [k for k in head if k.endswith(("_instructions", "_cpu_ms")) and base.get(k)]
    return {k: round(head[k] / base[k], 3) for k in keys}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", type=int, default=375, help="groups in the shard (375: 3,000 over 8 shards)")
    parser.add_argument("--warm-s", type=int, default=400, help="input before the call (400 s: full windows)")
    parser.add_argument("--call-s", type=int, default=40, help="the call's input (40 s: a batch of a job behind)")
    parser.add_argument("--repeat", type=int, default=5, help="timed calls per tree (the median is reported)")
    parser.add_argument("--against", help="a git ref measured side by side (its files exported)")
    parser.add_argument("--no-valgrind", action="store_true", help="CPU times only")
    parser.add_argument("--out", type=Path, help="write the result here as JSON")
    args = parser.parse_args()
    valgrind = not args.no_valgrind
    if valgrind and shutil.which("valgrind") is None:
        parser.error("valgrind is not installed (Debian: apt-get install valgrind); or run with --no-valgrind")
    shape = (args.groups, args.warm_s, args.call_s, args.repeat, valgrind)
    report: dict[str, Any] = {
        "command": "python -m bench.bench_shard_call " + " ".join(sys.argv[1:]),
        "machine": machine(),
        "groups": args.groups,
        "brokers": 4,
        "members": 10,
        "warm_s": args.warm_s,
        "call_s": args.call_s,
        "head": {"commit": code(), **measure_tree(ROOT, *shape)},
    }
    if args.against:
        with tempfile.TemporaryDirectory(prefix="shard-call-base-") as scratch:
            base = measure_tree(exported(args.against, Path(scratch)), *shape)
        commit = subprocess.run(["git", "rev-parse", "--short", args.against], cwd=ROOT, capture_output=True, text=True)
        report["base"] = {"commit": commit.stdout.strip(), **base}
        report["head_over_base"] = ratios(report["head"], base)
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
