"""A consumer checkpoint keeps the shard count its state is keyed by: the job started on it with another
``[membership] shards`` is refused with one line naming the option, before any query runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from streaming.app.cli import main
from streaming.job.consumer.layout import LAYOUT_FILE, CheckpointLayoutError, check_shard_layout
from tests.support.job import job_env


def test_the_first_start_records_the_count_and_another_count_is_refused(spark, tmp_path):
    checkpoint = str(tmp_path / "consumer")
    check_shard_layout(spark, checkpoint, 4)
    assert (tmp_path / "consumer" / LAYOUT_FILE).read_text() == '{"shards": 4}'
    check_shard_layout(spark, checkpoint, 4)  # the same count: a restart
    with pytest.raises(CheckpointLayoutError, match=r"shards is 5, .* by 4 shards: set it back to 4"):
        check_shard_layout(spark, checkpoint, 5)
    assert (tmp_path / "consumer" / LAYOUT_FILE).read_text() == '{"shards": 4}'


def test_the_job_started_with_another_shard_count_says_so_in_one_line(
    kafka_broker, spark, tmp_path, monkeypatch, capsys
):
    env, _ = job_env(kafka_broker.bootstrap_servers, tmp_path, "layout", tables_from_template=False)
    consumer = Path(env["RRM__PATHS__CHECKPOINT_ROOT"]) / "consumer"
    check_shard_layout(spark, str(consumer), 2)  # as a job with the tests' 2 shards left it
    for key, value in {**env, "RRM__MEMBERSHIP__SHARDS": "3"}.items():
        monkeypatch.setenv(key, value)
    assert main(["run", "--available-now"]) == 1
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1, error
    assert error.startswith("rebalance-monitor run: [membership] shards is 3"), error
    assert not (consumer / "offsets").exists()  # refused before the query started
    assert not list((tmp_path / "delta").glob("*/_delta_log"))  # and before any table was created
