"""A cut the engine made where a call ended and amended in the next call leaves the consumer tables as the same
input in one batch does: the sink deletes the amended cut's history rows of the earlier batch and applies the
restored or retracted current rows; a replay of the amending batch changes nothing."""

from __future__ import annotations

import json
from typing import Any

from streaming.domain.consumers.engine_settings import EngineSettings
from streaming.domain.consumers.outcomes import CutRetracted, EpisodeRetracted
from streaming.domain.consumers.shard_engine import ShardEngine
from streaming.job.delta.bus import output_rows, output_schema
from streaming.job.delta.outputs import consumer_sink
from streaming.job.delta.sinks import DeltaTables
from streaming.job.delta.table_rows import table_rows
from streaming.job.runtime.state_blob import encode
from tests.support.engine import typed
from tests.support.events import BASE, hb, route

TABLES = [
    "group_snapshots",
    "expected_assignments",
    "anomaly_episodes",
    "anomalies_current",
    "current_assignment",
    "group_status_current",
    "membership_changes",
]
# A second client id joins at 1 s beside c1 (a duplicate id: an episode), the input stops; 0.5 s later, in the
# next batch, c3 joins: the same coalescing window, so the generation of 1 s is amended to 1.5 s, and the
# duplicate id, split over three members, is the same episode opened at 1.5 s instead.
FIRST = [route(0), hb(0, "ch1", "c1"), hb(1000, "ch2", "c1")]
LATER = [hb(1500, "ch3", "c3")]


def batch(spark, outcomes: list[Any]):  # type: ignore[no-untyped-def]
    return spark.createDataFrame(output_rows(table_rows(outcomes)), output_schema())


def read(tables: DeltaTables) -> dict[str, list[str]]:
    out = {}
    for name in TABLES:
        rows = [r.asDict(recursive=True) for r in tables.read(name).drop("batch_id", "event_time").collect()]
        out[name] = sorted(json.dumps(r, sort_keys=True, default=str) for r in rows)
    return out


def test_an_amended_cut_leaves_the_tables_of_its_input_in_one_batch(spark, tmp_path):
    engine = ShardEngine.restore(None, EngineSettings())
    first = engine.apply(typed(FIRST), BASE)
    engine = ShardEngine.restore(json.loads(encode(engine.snapshot())), EngineSettings())
    later = engine.apply(typed(LATER), BASE + 1000)
    assert any(type(o) is CutRetracted for o in later)  # the case is the amendment
    assert any(type(o) is EpisodeRetracted for o in later)

    split = DeltaTables(spark, tmp_path / "split")
    split.ensure_all(TABLES)
    sink = consumer_sink(split, "split", None)
    sink(batch(spark, first), 0)
    assert any("DUPLICATE_CLIENT_ID" in r for r in read(split)["anomalies_current"])  # shown at once
    sink(batch(spark, later), 1)
    amended = read(split)

    whole = DeltaTables(spark, tmp_path / "whole")
    whole.ensure_all(TABLES)
    consumer_sink(whole, "whole", None)(
        batch(spark, ShardEngine.restore(None, EngineSettings()).apply(typed(FIRST + LATER), BASE)), 0
    )
    assert amended == read(whole)
    assert sorted(json.loads(r)["event_time_ms"] for r in amended["group_snapshots"]) == [BASE, BASE + 1500]

    consumer_sink(split, "split", None)(batch(spark, later), 1)  # the amending batch replayed
    assert read(split) == amended
