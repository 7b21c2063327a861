"""A checkpoint keeps the shard count its state is keyed by: the job started on it with another
``[membership] shards`` (the consumer query's) or ``[producers] state_shards`` (send-ingest's fault items) is
refused with one line naming the option, before any query runs."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from streaming.app.cli import main
from streaming.config.loading import load_config
from streaming.contract.tables import TABLES
from streaming.job.delta.bus import struct_type
from streaming.job.runtime.checkpoint_layout import LAYOUT_FILE, CheckpointLayoutError, check_shard_layout
from streaming.job.sends.fault_replay import FaultReplayState, FaultStateFiles, ShardState
from tests.support.job import job_env
from tests.support.table_template import job_tables


def test_the_first_start_records_the_count_and_another_count_is_refused(spark, tmp_path):
    checkpoint = str(tmp_path / "consumer")
    check_shard_layout(spark, checkpoint, 4)
    assert (tmp_path / "consumer" / LAYOUT_FILE).read_text() == '{"shards": 4}'
    check_shard_layout(spark, checkpoint, 4)  # the same count: a restart
    with pytest.raises(CheckpointLayoutError, match=r"shards is 5, .* by 4 shards: set it back to 4"):
        check_shard_layout(spark, checkpoint, 5)
    assert (tmp_path / "consumer" / LAYOUT_FILE).read_text() == '{"shards": 4}'


@pytest.mark.parametrize(
    ("option", "changed"),
    [
        ("[membership] shards is 3", {"RRM__MEMBERSHIP__SHARDS": "3", "RRM__PRODUCERS__STATE_SHARDS": "4"}),
        ("[producers] state_shards is 5", {"RRM__PRODUCERS__STATE_SHARDS": "5"}),
    ],
    ids=["consumer", "send-ingest"],
)
def test_the_job_started_with_another_shard_count_says_so_in_one_line(
    kafka_broker, spark, tmp_path, monkeypatch, capsys, option, changed
):
    env, _ = job_env(kafka_broker.bootstrap_servers, tmp_path, "layout", tables_from_template=False)
    checkpoints = Path(env["RRM__PATHS__CHECKPOINT_ROOT"])
    check_shard_layout(spark, str(checkpoints / "consumer"), 2)  # as a job with the tests' 2 shards left it
    # send-ingest's fault items as a job with 4 state shards left them: one shard's state
    made = FaultReplayState(0, 0, 0, {1: ShardState({}, 0)}, 4)
    FaultStateFiles(spark, str(checkpoints / "send-ingest")).save(made)
    for key, value in {**env, **changed}.items():
        monkeypatch.setenv(key, value)
    assert main(["run", "--available-now"]) == 1
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1, error
    assert error.startswith(f"rebalance-monitor run: {option}"), error
    assert not (checkpoints / "consumer" / "offsets").exists()  # refused before any query started
    assert not (checkpoints / "send-ingest" / "offsets").exists()
    assert not list((tmp_path / "delta").glob("*/_delta_log"))  # and before any table was created


def test_a_new_checkpoint_over_written_tables_is_refused_unless_it_starts_a_new_state(
    kafka_broker, spark, tmp_path, monkeypatch, capsys
):
    env, _ = job_env(kafka_broker.bootstrap_servers, tmp_path, "newstate")
    config = load_config(None, env=env)
    tables = job_tables(spark, config.paths.delta_root, config)
    # An earlier state's writes (its checkpoint since removed): an open episode, in the history and current.
    episode = {
        "episode_id": "e1",
        "cluster": "DefaultCluster",
        "group": "G",
        "topic": "",
        "anomaly": "ORPHANED_QUEUES",
        "status": "OPENED",
        "opened_at_ms": 1_000,
        "closed_at_ms": None,
        "event_time_ms": 1_000,
        "event_time": datetime(2026, 1, 1),
        "generation": 1,
        "severity": "critical",
        "summary": "s",
        "details": "{}",
        "batch_id": 0,
    }
    for table in ("anomaly_episodes", "anomalies_current"):
        spec = TABLES[table]
        row = spark.createDataFrame([tuple(episode[c.name] for c in spec.columns)], struct_type(spec.columns))
        tables.append(table, row, "earlier", 0, 1)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    consumer = Path(env["RRM__PATHS__CHECKPOINT_ROOT"]) / "consumer"

    assert main(["run", "--available-now"]) == 1
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1, error
    assert error.startswith("rebalance-monitor run: the consumer checkpoint "), error
    assert "anomaly_episodes, anomalies_current" in error and "--new-state" in error, error
    assert not (consumer / "offsets").exists()

    assert main(["run", "--available-now", "--new-state"]) == 0
    assert tables.read("anomalies_current").count() == 0  # the earlier state's open episode is not this one's
    assert [r["episode_id"] for r in tables.read("anomaly_episodes").collect()] == ["e1"]  # history kept
    assert main(["run", "--available-now"]) == 0  # the checkpoint is this state's now: a restart needs nothing
