"""The job's driver SIGKILLed at ``--kills`` seeded moments over one run, restarted after each: equal tables?

The integration test (``tests/integration/test_job_crash_recovery.py``) runs three kill points; this runs the
full plan through the same harness (``tests.support.driver_kills``) on a broker of its own, in smaller batches
so that the kills spread over many of them. Not a speed comparison: it reports each kill's phase, moment and
the batches committed before it, the restarts, the wall and CPU time of the reference and interrupted runs,
and per table whether the rows equal the uninterrupted run's (any difference listed), to ``--results``.

    .venv/bin/python -m bench.driver_kills --kills 20 --seed 1
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-offsets", type=int, default=40, help="records per micro-batch (every run alike)")
    parser.add_argument("--results", default="bench/results/driver-kills.json")
    parser.add_argument("--keep", action="store_true", help="keep the working directory (tables, logs)")
    return parser.parse_args()


def partial_recorder(args: argparse.Namespace) -> Callable[[Any], None]:
    """A function noting each finished run in ``--results``'s ``.partial.json``, in case the whole plan does
    not end."""
    finished = []

    def record(run) -> None:  # type: ignore[no-untyped-def]
        finished.append({**asdict(run), "observed": run.observed})
        partial = {"complete": False, "kills_planned": args.kills, "seed": args.seed, "runs": finished}
        Path(args.results).with_suffix(".partial.json").write_text(json.dumps(partial, indent=2) + "\n")

    return record


def results_document(args: argparse.Namespace, outcome, records: int, started: float) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    kills, runs = outcome.kills, outcome.runs
    return {
        "kills_planned": args.kills,
        "kills": len(kills),
        "restarts": len(runs) - 1 if runs else 0,
        "seed": args.seed,
        "records": records,
        "max_offsets_per_trigger": args.max_offsets,
        "all_tables_equal": not outcome.unequal(),
        "observed_phases": dict(Counter(k.observed for k in kills)),
        "planned_phases": dict(Counter(p.phase for p in outcome.plan)),
        "reference_run": {
            "wall_s": outcome.reference.wall_s,
            "cpu_s": outcome.reference.cpu_s,
            "first_write_s": outcome.reference.first_write_s,
            "batches_committed": outcome.reference.commits_in_run,
        },
        "interrupted_runs": {
            "wall_s": round(sum(r.wall_s for r in runs), 1),
            "cpu_s": round(sum(r.cpu_s for r in runs), 1),
            "batches_committed": sum(r.commits_in_run for r in runs),
        },
        "experiment_wall_s": round(time.monotonic() - started, 1),
        "orphans": [k.orphans for k in kills if k.orphans],
        "kill_points": [
            {**{k: v for k, v in asdict(r).items() if k != "orphans"}, "observed": r.observed} for r in kills
        ],
        "drain_run": asdict(runs[-1]) if runs and not runs[-1].killed else None,
        "tables": outcome.tables,
    }


def print_outcome(result: dict[str, Any], outcome) -> None:  # type: ignore[no-untyped-def]
    print(json.dumps({k: v for k, v in result.items() if k not in ("kill_points", "tables")}, indent=2))
    for table, verdict in outcome.unequal().items():
        print(f"UNEQUAL {table}: missing {verdict['missing']} extra {verdict['extra']}")


def main() -> int:
    args = parse_args()

    from connectors.kafka_topics import create_topics
    from localenv.kafka_broker import LocalKafkaBroker
    from streaming.contract.events import DEFAULT_TOPICS
    from streaming.contract.tables import TABLES
    from streaming.job.runtime.spark_session import SparkSettings, build_spark_session
    from tests.support.driver_kills import compare_tables, run_with_kills, workload
    from tests.support.job import publish

    work = Path(tempfile.mkdtemp(prefix="rrm-driver-kills-"))
    broker = LocalKafkaBroker(work / "kafka")
    bootstrap = broker.start().bootstrap_servers
    spark = None
    started = time.monotonic()
    try:
        prefix = "kills"
        topics = {t: f"{prefix}.{name.split('.', 1)[1]}" for t, name in DEFAULT_TOPICS.items()}
        create_topics(bootstrap, topics.values())
        events = workload()
        publish(bootstrap, events, topics)

        def compare(reference: Path, interrupted: Path) -> dict:
            nonlocal spark
            spark = build_spark_session(
                SparkSettings(app_name="rrm-driver-kills", local_dir=str(work / "spark"), checkpoint_root=str(work))
            )
            return compare_tables(spark, reference, interrupted, TABLES)

        record = partial_recorder(args)
        outcome = run_with_kills(compare, work, bootstrap, prefix, args.kills, args.seed, args.max_offsets, record)
        Path(args.results).with_suffix(".partial.json").unlink(missing_ok=True)
        result = results_document(args, outcome, len(events), started)
        print_outcome(result, outcome)
        Path(args.results).write_text(json.dumps(result, indent=2) + "\n")
        complete = len(outcome.kills) == args.kills and not result["orphans"]
        return 0 if result["all_tables_equal"] and complete else 1
    finally:
        if spark is not None:
            spark.stop()
        broker.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"working directory kept: {work}")


if __name__ == "__main__":
    sys.exit(main())
