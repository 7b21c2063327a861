"""One copy of an input in Kafka through the real job at several ``max_offsets_per_trigger``: equal tables?

The input is the job-scenarios test's valid events (``tests/support/job_scenarios.py``) and the simulator's
``mixed`` scenario up to ``--horizon-ms``, published in event-time order with the event-time header. Each limit
runs the job (``available_now``, a 10-minute watermark delay so that no event is late, ``[kafka] batch_planning``
as ``--planning`` says) on checkpoints and tables of its own; every consumer table is compared with the first
limit's, ``EXCLUDED`` columns left out. Reports per limit the batches, the wall time and per table whether the
rows are equal (else the counts of missing and extra rows and a few of each) to ``--results``. With ``--triggers``,
the job then also runs at each processing-time trigger interval, unbounded, on topics of its own, while the same
input arrives in ``--slices`` parts ``--pace-s`` apart (so the trigger, not a limit, cuts its batches), until every
query has read it all; its tables are compared with the first limit's. The evidence for
``docs/design/batch-invariance.md`` (the topics' read order, batches planned by event time):

    .venv/bin/python -m bench.read_order --planning event_time --results bench/results/read-order-event-time.json
    .venv/bin/python -m bench.read_order --limits 0 --triggers "1 second,5 seconds" \
        --results bench/results/read-order-triggers.json
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
    parser.add_argument("--triggers", default="", help='processing-time trigger intervals, "1 second,5 seconds"')
    parser.add_argument("--slices", type=int, default=12, help="parts the input arrives in during a trigger run")
    parser.add_argument("--pace-s", type=float, default=1.5, help="seconds between those parts")
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
    from tests.support.job import job_config, publish, run_available

    names = consumer_tables()
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
            run.update(verdict(reference, tables))
        runs.append(run)
    return runs


def consumer_tables() -> list[str]:
    from streaming.contract.tables import Table

    return [str(t) for t in Table if str(t) not in LEFT_OUT]


def verdict(reference: dict[str, list[str]], tables: dict[str, list[str]]) -> dict[str, Any]:
    """The tables equal to the reference's, and for each other one its row counts and a few differing rows."""
    differ = {}
    for name, rows in reference.items():
        if tables[name] != rows:
            missing = sorted(set(rows) - set(tables[name]))
            extra = sorted(set(tables[name]) - set(rows))
            differ[name] = {
                "rows": [len(rows), len(tables[name])],
                "missing": len(missing),
                "extra": len(extra),
                "examples_missing": [r[:600] for r in missing[:2]],
                "examples_extra": [r[:600] for r in extra[:2]],
            }
    return {"equal_tables": [n for n in reference if n not in differ], "unequal_tables": differ}


def compare_triggers(
    spark: Any,
    bootstrap: str,
    work: Path,
    events: list[dict[str, Any]],
    triggers: list[str],
    planning: str,
    reference: dict[str, list[str]],
    slices: int,
    pace_s: float,
) -> list[dict[str, Any]]:
    """The job at each processing-time trigger, started before its input and fed it in ``slices`` parts ``pace_s``
    apart, stopped once each query has processed all of it: one entry per trigger with its batches, wall time and
    its equal and unequal tables against ``reference``."""
    from streaming.job.runner import MonitorJob
    from tests.support.job import job_config, publish

    runs: list[dict[str, Any]] = []
    for n, trigger in enumerate(triggers):
        config, topics = job_config(
            bootstrap,
            work / f"trigger-{n}",
            f"order-trigger-{n}",
            RRM__KAFKA__MAX_OFFSETS_PER_TRIGGER="0",
            RRM__KAFKA__BATCH_PLANNING=planning,
            RRM__INGEST__WATERMARK_DELAY='"10 minutes"',
            RRM__SPARK__TRIGGER_INTERVAL=json.dumps(trigger),
        )
        started = time.monotonic()
        job = MonitorJob(config)
        job.start()
        try:
            size = -(-len(events) // slices)
            for part in range(0, len(events), size):
                publish(bootstrap, events[part : part + size], topics)
                time.sleep(pace_s)
            for query in job.queries.values():
                query.processAllAvailable()
            job.raise_if_failed()
            # where this run's trigger cut the input: records per batch of each query that read any
            cuts = {
                name: [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
                for name, query in job.queries.items()
            }
        finally:
            job.stop()
        wall = round(time.monotonic() - started, 1)
        batches = len(list((Path(config.paths.checkpoint_root)).glob("*/commits/[0-9]*")))
        tables = tables_of(config.paths.delta_root, list(reference))
        runs.append(
            {"trigger_interval": trigger, "wall_s": wall, "commits_all_queries": batches, "records_per_batch": cuts}
            | verdict(reference, tables)
        )
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
        triggers = [t.strip() for t in args.triggers.split(",") if t.strip()]
        if triggers:
            reference = tables_of(str(work / f"limit-{limits[0]}" / "delta"), consumer_tables())
            runs += compare_triggers(
                spark, bootstrap, work, events, triggers, args.planning, reference, args.slices, args.pace_s
            )
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
