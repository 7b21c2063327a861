"""Each query's micro-batch count and time per phase (Spark's ``durationMs``) as counters: summed by the
progress board over every batch the listener reports, exported by the job as ``rmqmon_batches_total`` and
``rmqmon_batch_phase_seconds_total``; and ``docs/metrics.md`` is exactly what the catalogue renders."""

from __future__ import annotations

from pathlib import Path

from connectors.metrics import render_markdown
from streaming.config import load_config
from streaming.job.runner import MonitorJob

DOC = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"


def progress(name: str, batch_id: int, **durations: int) -> dict:
    return {"name": name, "batchId": batch_id, "durationMs": durations}


def test_the_job_counts_batches_and_seconds_per_phase_over_every_reported_batch(tmp_path):
    monitor = MonitorJob(load_config(None, env={"RRM__PATHS__CHECKPOINT_ROOT": str(tmp_path / "checkpoints")}))
    monitor.board.record(progress("consumer", 7, addBatch=3_250, queryPlanning=400, triggerExecution=4_000))
    snapshot = monitor.board.snapshot()
    monitor.board.record(progress("consumer", 8, addBatch=1_500, walCommit=90, triggerExecution=1_700))
    monitor.board.record(progress("send-ingest", 3, addBatch=2_000, triggerExecution=2_100))
    monitor.refresh_job_metrics()

    counters = monitor.metrics.counters
    assert counters["rmqmon_batches_total"] == {("consumer",): 2.0, ("send-ingest",): 1.0}
    assert counters["rmqmon_batch_phase_seconds_total"] == {
        ("consumer", "addBatch"): 4.75,
        ("consumer", "queryPlanning"): 0.4,
        ("consumer", "walCommit"): 0.09,
        ("consumer", "triggerExecution"): 5.7,
        ("send-ingest", "addBatch"): 2.0,
        ("send-ingest", "triggerExecution"): 2.1,
    }
    # A snapshot is a copy: later batches do not change it.
    assert snapshot["consumer"].phase_ms_total == {"addBatch": 3_250, "queryPlanning": 400, "triggerExecution": 4_000}
    assert monitor.metrics.gauges["rmqmon_batch_duration_seconds"][("consumer",)] == 1.7


def test_the_metrics_doc_is_what_the_catalogue_renders():
    assert DOC.read_text() == render_markdown()
