"""Of one key's changes of the same event time in one batch, the consumer sink keeps the one the engine emitted
last: an offline group's backlog episode opened by one broker's sample and updated by the other's at the same
millisecond (the held ``anomalies_current``), and a queue answered twice at one sample (the MERGEd
``queue_progress_current``)."""

from __future__ import annotations

import json

from streaming.config.loading import load_config
from streaming.domain.consumers.engine_settings import EngineSettings
from streaming.domain.consumers.shard_engine import ShardEngine
from streaming.job.delta.bus import output_rows, output_schema
from streaming.job.delta.outputs import consumer_sink
from streaming.job.delta.table_rows import table_rows
from tests.support.engine import typed
from tests.support.job_scenarios import progress
from tests.support.table_template import job_tables, seed_tables

GROUP = "G-gone"
T = 60_000


def test_the_change_emitted_last_wins_at_a_tie(spark, tmp_path):
    # No member ever: broker-a answers a backlog on queue 0 and 1, broker-b on queue 0, at the same millisecond;
    # broker-a then answers queue 1 again in a second part of the same sample, with a larger backlog.
    events = [
        progress(T, GROUP, [(0, 50, 10), (1, 40, 40)]),
        progress(T, GROUP, [(0, 30, 5)], broker="broker-b"),
        progress(T, GROUP, [(1, 45, 40)]),
    ]
    outcomes = ShardEngine.restore(None, EngineSettings()).apply(typed(events), events[0]["event_time"])
    config = load_config(None, env={})
    seed_tables(tmp_path / "tables", config)
    tables = job_tables(spark, tmp_path / "tables", config)
    consumer_sink(tables, "ties", None)(spark.createDataFrame(output_rows(table_rows(outcomes)), output_schema()), 0)

    history = [r.asDict() for r in tables.read("anomaly_episodes").collect()]
    assert {r["event_time_ms"] for r in history} == {events[0]["event_time"]}  # the case: changes at one time
    assert sorted(r["status"] for r in history) == ["OPENED", "UPDATED", "UPDATED"]
    (current,) = [r.asDict() for r in tables.read("anomalies_current").collect()]
    queues = {(q["broker"], q["queue_id"]): q["lag"] for q in json.loads(current["details"])["queues"]}
    assert queues == {("broker-a", 0): 40, ("broker-b", 0): 25, ("broker-a", 1): 5}

    progress_rows = {(r["broker"], r["queue_id"]): r["lag"] for r in tables.read("queue_progress_current").collect()}
    assert progress_rows == {("broker-a", 0): 40, ("broker-a", 1): 5, ("broker-b", 0): 25}
