"""One copy of an input in Kafka through the real job at several ``max_offsets_per_trigger``: equal tables?

The input is the job-scenarios test's valid events (``tests/support/job_scenarios.py``) and the simulator's
``mixed`` scenario up to ``--horizon-ms``, published in event-time order with the event-time header. Each limit
runs the job (``available_now``, a 10-minute watermark delay so that no event is late, ``[kafka] batch_planning``
as ``--planning`` says) on checkpoints and tables of its own; every consumer table is compared with the first
limit's, ``EXCLUDED`` columns left out. Reports per limit the batches, the wall time and per table whether the
rows are equal (else the counts of missing and extra rows and a few of each) to ``--results``. The evidence for
``docs/design/batch-invariance.md`` (the topics' read order, batches planned by event time):

    .venv/bin/python -m bench.read_order --planning event_time --results bench/results/read-order-event-time.json
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

START_MS = 1_700_000_000_000
# The micro-batch that wrote a row, not the input's; the only column that tells batches apart (no table holds a
# processing or commit time: those are in the Delta log, not in rows).
EXCLUDED = ("batch_id",)
# Send-path tables: the input holds no send results.
LEFT_OUT = ("fault_windows", "send_latency_minutes")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limits", default="0,40", help="max_offsets_per_trigger per run, 0 unbounded (the reference)")
    parser.add_argument("--horizon-ms", type=int, default=150_000, help="the mixed scenario's events up to then")
    parser.add_argument("--no-scenarios", action="store_true", help="leave out the job-scenarios events")
    parser.add_argument("--planning", default="event_time", choices=("records", "event_time"), help="batch_planning")
    parser.add_argument("--results", default="bench/results/read-order.json")
    return parser.parse_args()


def the_input(horizon_ms: int, scenarios: bool) -> list[dict[str, Any]]:
    from streaming.app.simulation.fleet import Simulation, build_scenario
    from tests.support.job_scenarios import progress_events, run1_events, run2_events

    valid = [e for e in run1_events() + progress_events() + run2_events() if isinstance(e, dict)] if scenarios else []
    simulation = Simulation(build_scenario("mixed", 1), START_MS, 1, sends_per_second=0, assignment_reports=True)
    mixed = [e for e in simulation.events_until(START_MS + horizon_ms) if e["type"] != "send_result"]
    return sorted(valid + mixed, key=lambda e: int(e["event_time"]))


def tables_of(delta_root: str, names: list[str]) -> dict[str, list[str]]:
    """Each table's rows as sorted JSON lines without the ``EXCLUDED`` columns, read with delta-rs (no JVM)."""
    from connectors.delta_reader import MonitorTables

    tables = MonitorTables(delta_root)
    return {
        name: sorted(
            json.dumps({k: v for k, v in r.items() if k not in EXCLUDED}, sort_keys=True, default=str)
            for r in tables.arrow(name).to_pylist()
        )
        for name in names
    }


def compare_limits(
    spark: Any,
    bootstrap: str,
    work: Path,
    events: list[dict[str, Any]],
    limits: list[int],
    planning: str,
    from_template: bool = False,
) -> list[dict[str, Any]]:
    """``events`` published once, then read by the job at each limit (the first the reference): one entry per
    limit with its batches, wall time and, after the first, its equal and unequal tables. ``from_template``: the
    tables copied from the tests' template (``tests.support.job.job_env``), else the job creates them."""
    from streaming.contract.tables import Table
    from tests.support.job import job_config, publish, run_available

    names = [str(t) for t in Table if str(t) not in LEFT_OUT]
    runs: list[dict[str, Any]] = []
    reference: dict[str, list[str]] | None = None
    for limit in limits:
        config, topics = job_config(
            bootstrap,
            work / f"limit-{limit}",
            "order",
            tables_from_template=from_template,
            RRM__KAFKA__MAX_OFFSETS_PER_TRIGGER=str(limit),
            RRM__KAFKA__BATCH_PLANNING=planning,
            RRM__INGEST__WATERMARK_DELAY='"10 minutes"',
        )
        if reference is None:
            publish(bootstrap, events, topics)
        started = time.monotonic()
        job = run_available(spark, config)
        wall = round(time.monotonic() - started, 1)
        batches = len(list((Path(config.paths.checkpoint_root)).glob("*/commits/[0-9]*")))
        tables = tables_of(config.paths.delta_root, names)
        run: dict[str, Any] = {"max_offsets_per_trigger": limit, "wall_s": wall, "commits_all_queries": batches}
        del job
        if reference is None:
            reference = tables
            run["rows"] = {n: len(rows) for n, rows in tables.items()}
        else:
            differ = {}
            for name in names:
                if tables[name] != reference[name]:
                    missing = sorted(set(reference[name]) - set(tables[name]))
                    extra = sorted(set(tables[name]) - set(reference[name]))
                    differ[name] = {
                        "rows": [len(reference[name]), len(tables[name])],
                        "missing": len(missing),
                        "extra": len(extra),
                        "examples_missing": [r[:600] for r in missing[:2]],
                        "examples_extra": [r[:600] for r in extra[:2]],
                    }
            run["equal_tables"] = [n for n in names if n not in differ]
            run["unequal_tables"] = differ
        runs.append(run)
    return runs


def main() -> int:
    args = parse_args()
    from localenv.kafka_broker import LocalKafkaBroker
    from streaming.job.runtime.spark_session import SparkSettings, build_spark_session

    limits = [int(x) for x in args.limits.split(",")]
    work = Path(tempfile.mkdtemp(prefix="rrm-read-order-"))
    broker = LocalKafkaBroker(work / "kafka")
    bootstrap = broker.start().bootstrap_servers
    spark = build_spark_session(
        SparkSettings(app_name="rrm-read-order", local_dir=str(work / "spark"), checkpoint_root=str(work))
    )
    try:
        events = the_input(args.horizon_ms, not args.no_scenarios)
        runs = compare_limits(spark, bootstrap, work, events, limits, args.planning)
        for run in runs:
            print(json.dumps({k: v for k, v in run.items() if k != "unequal_tables"}), flush=True)
            for name, verdict in run.get("unequal_tables", {}).items():
                print(f"  UNEQUAL {name}: rows {verdict['rows']} missing {verdict['missing']} extra {verdict['extra']}")
        result = {
            "records": len(events),
            "horizon_ms": args.horizon_ms,
            "scenarios": not args.no_scenarios,
            "planning": args.planning,
            "excluded_columns": list(EXCLUDED),
            "command": "python -m bench.read_order " + " ".join(sys.argv[1:]),
        }
        Path(args.results).write_text(json.dumps({**result, "runs": runs}, indent=2) + "\n")
        return 0 if all(not r.get("unequal_tables") for r in runs) else 1
    finally:
        spark.stop()
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
