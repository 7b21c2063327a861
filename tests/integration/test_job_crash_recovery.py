"""SIGKILL of the job's driver at three seeded moments, a restart after each: the Delta tables equal those of an
uninterrupted run, nothing lost and nothing duplicated.

The harness (``tests.support.driver_kills``) is the one ``bench.driver_kills`` runs with twenty kill points;
the seed here plans a kill inside a batch, one in a restarted run's first batch (its state just restored) and
one right after a Delta commit whose batch has not committed its checkpoint yet. The killed runs are
``rebalance-monitor run`` processes; the uninterrupted run (shared with the cluster's worker-kill test,
``tests.support.kill_workload``) and the restart that drains the input after the last kill run in the tests'
Spark session, on the same topics and settings.
"""

from __future__ import annotations

from streaming.config import load_config
from streaming.contract.tables import TABLES
from tests.support.driver_kills import compare_tables, plan_kills, run_kill_plan
from tests.support.job import run_available
from tests.support.kill_workload import kill_workload_run

KILLS, SEED = 3, 7
# How long a job process takes to start, for start-up kill points (this seed plans none).
STARTUP_S = 20.0


def test_sigkill_at_three_seeded_moments_then_restarts_equals_an_uninterrupted_run(
    kafka_broker, spark, tmp_path, tmp_path_factory
):
    reference = kill_workload_run(kafka_broker, spark, tmp_path_factory)
    interrupted = tmp_path / "interrupted"
    settings = reference.settings(interrupted)
    crash = tmp_path / "crash.toml"
    crash.write_text("# every setting comes from the RRM__ environment of tests.support.kill_workload\n")
    plan = plan_kills(KILLS, SEED, STARTUP_S, reference.batch_s)

    runs = run_kill_plan(crash, plan, env=settings, drain=lambda: run_available(spark, load_config(None, env=settings)))

    kills = [r for r in runs if r.killed]
    assert len(kills) == KILLS, f"the input was drained after {len(kills)} of {KILLS} kills: {runs}"
    assert {p.phase for p in plan} == {"mid-batch", "first-batch", "after-delta-commit"}
    # Every kill but the planned start-up ones landed after the killed run had written something of its own.
    assert all(k.observed != "before-first-write" for k in kills), [(k.point, k.observed) for k in kills]
    assert sum(k.commits_in_run for k in kills) >= 1, "no kill left any batch committed before it"
    assert not [k.orphans for k in kills if k.orphans], "a killed job's processes outlived it"
    tables = compare_tables(spark, reference.root, interrupted, TABLES, lambda table: reference.rows(spark, table))
    unequal = {t: v for t, v in tables.items() if not v["equal"]}
    assert unequal == {}, unequal
    for table in ("fault_windows", "anomaly_episodes", "group_status_current", "membership_changes"):
        assert reference.rows(spark, table), f"{table} is empty: the workload proves nothing"
