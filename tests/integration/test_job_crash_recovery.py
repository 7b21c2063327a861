"""SIGKILL of the job's driver at three seeded moments, a restart after each: the Delta tables equal those of an
uninterrupted run, nothing lost and nothing duplicated.

The harness (``tests.support.driver_kills``) is the one ``bench.driver_kills`` runs with twenty kill points;
the seed here plans a kill inside a batch, one in a restarted run's first batch (its state just restored) and
one right after a Delta commit whose batch has not committed its checkpoint yet.
"""

from __future__ import annotations

from streaming.contract.events import DEFAULT_TOPICS
from streaming.job.tables import TABLES
from tests.support.driver_kills import compare_tables, run_with_kills, table_rows, workload
from tests.support.job import publish

KILLS, SEED = 3, 7


def test_sigkill_at_three_seeded_moments_then_restarts_equals_an_uninterrupted_run(kafka_broker, spark, tmp_path):
    from localenv.kafka_broker import create_topics

    prefix = "crash"
    topics = {t: f"{prefix}.{name.split('.', 1)[1]}" for t, name in DEFAULT_TOPICS.items()}
    create_topics(kafka_broker.bootstrap_servers, topics.values())
    publish(kafka_broker.bootstrap_servers, workload(), topics)

    outcome = run_with_kills(
        lambda ref, got: compare_tables(spark, ref, got, TABLES),
        tmp_path,
        kafka_broker.bootstrap_servers,
        prefix,
        KILLS,
        SEED,
        max_offsets=60,
    )

    kills = outcome.kills
    assert len(kills) == KILLS, f"the input was drained after {len(kills)} of {KILLS} kills: {outcome.runs}"
    assert {p.phase for p in outcome.plan} == {"mid-batch", "first-batch", "after-delta-commit"}
    # Every kill but the planned start-up ones landed after the killed run had written something of its own.
    assert all(k.observed != "before-first-write" for k in kills), [(k.point, k.observed) for k in kills]
    assert sum(k.commits_in_run for k in kills) >= 1, "no kill left any batch committed before it"
    assert not [k.orphans for k in kills if k.orphans], "a killed job's processes outlived it"
    assert outcome.unequal() == {}, {t: v for t, v in outcome.unequal().items()}
    for table in ("fault_windows", "anomaly_episodes", "group_status_current", "membership_changes"):
        assert table_rows(spark, tmp_path / "uninterrupted", table), f"{table} is empty: the workload proves nothing"
