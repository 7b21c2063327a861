"""Each query's micro-batch count and time per phase (Spark's ``durationMs``) as counters: summed by the
progress board over every batch the listener reports, exported by the job as ``rmqmon_batches_total`` and
``rmqmon_batch_phase_seconds_total``; and ``docs/metrics.md`` is exactly what the catalogue renders."""

from __future__ import annotations

from datetime import UTC, datetime
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


def test_a_trigger_that_finds_nothing_new_keeps_the_query_looking_alive_but_adds_no_batch(tmp_path):
    monitor = MonitorJob(load_config(None, env={"RRM__PATHS__CHECKPOINT_ROOT": str(tmp_path / "checkpoints")}))
    monitor.board.record({**progress("send-ingest", 3, triggerExecution=2_000), "timestamp": "2026-11-29T10:00:00Z"})
    monitor.board.record_idle("send-ingest", "2026-11-29T10:07:30.000Z")  # producers quiet for minutes
    monitor.board.record_idle("consumer", "2026-11-29T10:07:31.000Z")  # no batch in this process yet
    monitor.refresh_job_metrics()

    gauges = monitor.metrics.gauges
    batch_end = datetime(2026, 11, 29, 10, 0, 0, tzinfo=UTC).timestamp() + 2.0  # the batch took 2 s
    assert gauges["rmqmon_last_batch_timestamp_seconds"] == {("send-ingest",): batch_end}
    assert gauges["rmqmon_last_trigger_timestamp_seconds"] == {
        ("send-ingest",): batch_end + 448.0,
        ("consumer",): batch_end + 449.0,
    }
    assert monitor.metrics.counters["rmqmon_batches_total"] == {("send-ingest",): 1.0}
    assert not monitor.board.has_progress("consumer")  # an idle trigger is no micro-batch's progress
