"""send-ingest trims ``_send_fault_updates`` only once the runner says the fault-windows stream has started.

The runner, which lays out the checkpoints, tells send-ingest (``FaultUpdatesTrim.reader_started``): true when
the fault-windows checkpoint held offsets as send-ingest started, or once that query has reported progress.
"""

from __future__ import annotations

from streaming.config import load_config
from streaming.job.runner import MonitorJob
from streaming.job.send_trim import FaultUpdatesTrim


def job(tmp_path) -> MonitorJob:
    return MonitorJob(load_config(None, env={"RRM__PATHS__CHECKPOINT_ROOT": str(tmp_path / "checkpoints")}))


def test_the_trim_waits_for_the_fault_windows_query_progress_in_this_run(tmp_path):
    monitor = job(tmp_path)
    started = monitor._fault_stream_started()
    trim = FaultUpdatesTrim(3_600_000, 2, started)
    assert not started() and not trim.due(2)
    monitor.board.record({"name": "send-ingest", "batchId": 0})
    assert not trim.due(2)
    monitor.board.record({"name": "fault-windows", "batchId": 0})
    assert trim.due(2) and not trim.due(3)


def test_offsets_in_the_fault_windows_checkpoint_at_start_let_the_trim_run(tmp_path):
    offsets = tmp_path / "checkpoints" / "fault-windows" / "offsets"
    offsets.mkdir(parents=True)
    assert not job(tmp_path)._fault_stream_started()()  # no batch planned yet
    (offsets / "0").write_text("v1")
    assert job(tmp_path)._fault_stream_started()()
