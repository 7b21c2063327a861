"""A checkpoint keeps the shard count its state is keyed by: the job started on it with another
``[membership] shards`` (the consumer query's) or ``[producers] state_shards`` (send-ingest's fault items) is
refused with one line naming the option, before any query runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from streaming.app.cli import main
from streaming.job.runtime.checkpoint_layout import LAYOUT_FILE, CheckpointLayoutError, check_shard_layout
from streaming.job.sends.fault_replay import FaultReplayState, FaultStateFiles, ShardState
from tests.support.job import job_env


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
