"""Hostile input through the real job: every record applied or dead-lettered, never both, never neither.

The records come from ``tests.support.hostile`` (seeded mutations of events drawn from the schema files):
numbers at and past every bound, every JSON type in every field, Unicode, sizes, duplicate keys, wrappers,
each type on every other type's topic. Seed 0's sample goes through Kafka and the job, then the job stops and
a restart from its checkpoints takes seed 1's. Per record, by (topic, partition, offset):

* a record the contract rejects has exactly one dead letter, with the contract validator's reason (a valid
  event of a type the topic's query does not read is ``UNKNOWN_TYPE``);
* a valid record has none (but a report of a group no broker knows: ``UNKNOWN_GROUP``), and it took effect:
  a heartbeat joined its group (or, older than the watermark, was counted late), a send counted in its
  minute's statistics exactly once;
* and the job never stopped (a failed query raises).
``bench/hostile_input.py`` runs the same check over many seeds.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tests.support.hostile import generate
from tests.support.hostile_check import check_outcome, publish_recorded, read_outcome
from tests.support.job import finish, job_config

BUDGET_PER_SEED = 700  # about 1,400 records: the whole test stays near three minutes on a 2-core machine


@pytest.fixture(scope="module")
def outcome(kafka_broker, spark, tmp_path_factory):
    from streaming.job.runner import MonitorJob

    root: Path = tmp_path_factory.mktemp("hostile")
    config, topics = job_config(kafka_broker.bootstrap_servers, root, "hostile")
    published = []
    jobs = []
    for seed in (0, 1):  # a restart between the seeds
        published += publish_recorded(kafka_broker.bootstrap_servers, seed, generate(seed, BUDGET_PER_SEED), topics)
        job = MonitorJob(config, available_now=True)
        job.start()
        finish(job)  # raises if a query failed
        jobs.append(job)
    return published, read_outcome(spark, config, jobs), topics


def test_every_record_is_applied_or_dead_lettered_never_both_never_neither(outcome):
    published, seen, topics = outcome
    problems = check_outcome(published, seen, topics, restart_after=sum(1 for p in published if p.seed == 0))
    assert not problems, problems[:10]


def test_the_harness_exercised_every_outcome(outcome):
    published, seen, _ = outcome
    reasons = Counter(letter["reason"] for letter in seen.dead_letters)
    assert {"NOT_JSON", "WRONG_TYPE", "INVALID_VALUE", "MISSING_FIELD", "UNKNOWN_TYPE", "OVERSIZED"} <= set(reasons)
    assert seen.joined and seen.sends  # valid heartbeats and sends took effect
    assert len(published) > 1_000
