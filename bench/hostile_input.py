"""Hostile input at scale: many seeds of ``tests.support.hostile`` through Kafka and the real job.

The integration test (``tests/integration/test_hostile_input.py``) runs a sample of two seeds; this runs every
record of ``--seeds`` seeds, the first half before a restart of the job and the second half after, and checks
the same invariant record by record (``tests.support.hostile_check``): applied or dead-lettered, never both,
never neither, the job never stopped. Not a speed comparison: it reports the record count, the job's wall and
CPU time, and every broken invariant (none expected), to ``--results``.

    .venv/bin/python -m bench.hostile_input --seeds 20
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=20, help="seeds to generate (each about 1,900 records)")
    parser.add_argument("--first-seed", type=int, default=100)
    parser.add_argument("--results", default="bench/results/hostile-input.json")
    args = parser.parse_args()

    from bench.bench_job import cpu_clock
    from localenv.kafka_broker import LocalKafkaBroker
    from streaming.job.runner import MonitorJob
    from tests.support.hostile import generate
    from tests.support.hostile_check import check_outcome, publish_recorded, read_outcome
    from tests.support.job import job_config

    work = Path(tempfile.mkdtemp(prefix="rrm-hostile-"))
    broker = LocalKafkaBroker(work / "kafka")
    info = broker.start()
    jobs = []
    try:
        config, topics = job_config(info.bootstrap_servers, work, "hostile")
        seeds = list(range(args.first_seed, args.first_seed + args.seeds))
        halves = (seeds[: len(seeds) // 2], seeds[len(seeds) // 2 :])
        published = []
        wall_s, restart_after = 0.0, 0
        for number, half in enumerate(halves):
            for seed in half:
                published += publish_recorded(info.bootstrap_servers, seed, generate(seed), topics)
            if number == 0:
                restart_after = len(published)
            job = MonitorJob(config, available_now=True)
            started = time.perf_counter()
            job.start()
            job.await_available()  # raises if a query failed
            wall_s += time.perf_counter() - started
            jobs.append(job)
            if number == 0:
                job.stop()
        seen = read_outcome(jobs[-1].session, config, jobs)
        problems = check_outcome(published, seen, topics, restart_after)
        own = resource.getrusage(resource.RUSAGE_SELF)
        jvm_cpu_s = cpu_clock(jobs[-1].session)()  # the Spark JVM and its Python workers, since it started
        result = {
            "seeds": seeds,
            "records": len(published),
            "dead_letters": len(seen.dead_letters),
            "job_wall_s": round(wall_s, 1),
            "cpu_s_spark_jvm_and_workers": round(jvm_cpu_s, 1),
            "cpu_s_driver": round(own.ru_utime + own.ru_stime, 1),
            "problems": problems[:50],
            "problem_count": len(problems),
        }
        print(json.dumps(result, indent=2))
        Path(args.results).write_text(json.dumps(result, indent=2) + "\n")
        return 1 if problems else 0
    finally:
        if jobs:
            jobs[-1].stop()
        broker.stop()


if __name__ == "__main__":
    sys.exit(main())
