"""What the running queries report about themselves, kept as a snapshot for metrics and the demo view.

A ``StreamingQueryListener`` (registered with ``spark.streams.addListener``) receives every micro-batch's
progress on the driver. The callback only copies numbers into a lock-protected snapshot: it must be
cheap and must never raise (an exception there would be logged by Spark on every batch).

Late rows: Spark's stateful operators with event-time timeouts drop input rows older than the watermark
before user code sees them; the progress reports them as ``numRowsDroppedByWatermark``. They are summed
here per query so the monitor can count late events (metric and demo view) instead of losing them
silently.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql.streaming import StreamingQueryListener


@dataclass
class QueryProgress:
    name: str
    batch_id: int = -1
    input_rows: int = 0
    input_rows_total: int = 0
    processed_rows_per_second: float = 0.0
    input_rows_per_second: float = 0.0
    batch_duration_ms: int = 0
    batch_timestamp: str = ""
    watermark: str | None = None
    state_rows: int = 0
    state_memory_bytes: int = 0
    late_rows_total: int = 0
    offsets_behind: int = 0
    durations_ms: dict[str, int] = field(default_factory=dict)
    batches_total: int = 0
    phase_ms_total: dict[str, int] = field(default_factory=dict)  # durationMs per phase, summed over batches


class ProgressBoard:
    """Thread-safe latest progress per query name, plus totals."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queries: dict[str, QueryProgress] = {}
        self._idle: dict[str, str] = {}  # query name -> when its last trigger found nothing new (ISO time)
        self.terminated: dict[str, str | None] = {}

    def snapshot(self) -> dict[str, QueryProgress]:
        with self._lock:
            return {
                name: QueryProgress(
                    **{**vars(p), "durations_ms": dict(p.durations_ms), "phase_ms_total": dict(p.phase_ms_total)}
                )
                for name, p in self._queries.items()
            }

    def has_progress(self, name: str) -> bool:
        """Whether query ``name`` has reported a micro-batch's progress in this process (an idle trigger is not
        reported as progress: it goes to ``onQueryIdle``)."""
        with self._lock:
            return name in self._queries

    def record(self, progress: dict[str, Any]) -> None:
        name = progress.get("name") or progress.get("id") or "unnamed"
        with self._lock:
            entry = self._queries.setdefault(name, QueryProgress(name=name))
            entry.batch_id = int(progress.get("batchId", -1))
            entry.input_rows = int(progress.get("numInputRows", 0) or 0)
            entry.input_rows_total += entry.input_rows
            entry.input_rows_per_second = float(progress.get("inputRowsPerSecond", 0.0) or 0.0)
            entry.processed_rows_per_second = float(progress.get("processedRowsPerSecond", 0.0) or 0.0)
            entry.durations_ms = {k: int(v) for k, v in (progress.get("durationMs") or {}).items()}
            entry.batches_total += 1
            for phase, ms in entry.durations_ms.items():
                entry.phase_ms_total[phase] = entry.phase_ms_total.get(phase, 0) + ms
            entry.batch_duration_ms = entry.durations_ms.get("triggerExecution", 0)
            entry.batch_timestamp = str(progress.get("timestamp", ""))
            entry.watermark = (progress.get("eventTime") or {}).get("watermark")
            operators = progress.get("stateOperators") or []
            entry.state_rows = sum(int(op.get("numRowsTotal", 0) or 0) for op in operators)
            entry.state_memory_bytes = sum(int(op.get("memoryUsedBytes", 0) or 0) for op in operators)
            entry.late_rows_total += sum(int(op.get("numRowsDroppedByWatermark", 0) or 0) for op in operators)
            behind = 0
            for source in progress.get("sources") or []:
                metrics = source.get("metrics") or {}
                try:
                    behind += int(float(metrics.get("maxOffsetsBehindLatest", 0) or 0))
                except (TypeError, ValueError):
                    pass
            entry.offsets_behind = behind

    def record_idle(self, name: str, timestamp: str) -> None:
        """A trigger of query ``name`` found no new input at ``timestamp``: alive, though no batch ran."""
        with self._lock:
            self._idle[name] = timestamp

    def idle_timestamps(self) -> dict[str, str]:
        with self._lock:
            return dict(self._idle)

    def mark_terminated(self, name: str, error: str | None) -> None:
        with self._lock:
            self.terminated[name] = error


class ProgressListener(StreamingQueryListener):
    """Feeds a ``ProgressBoard``; never raises."""

    def __init__(self, board: ProgressBoard) -> None:
        self.board = board
        self._names: dict[str, str] = {}

    def onQueryStarted(self, event: Any) -> None:  # noqa: N802 - Spark's API names
        try:
            self._names[str(event.id)] = event.name or str(event.id)
        except Exception:  # noqa: BLE001 - a listener must never throw
            pass

    def onQueryProgress(self, event: Any) -> None:  # noqa: N802
        try:
            import json

            self.board.record(json.loads(event.progress.json))
        except Exception:  # noqa: BLE001
            pass

    def onQueryIdle(self, event: Any) -> None:  # noqa: N802
        try:
            self.board.record_idle(self._names.get(str(event.id), str(event.id)), str(event.timestamp))
        except Exception:  # noqa: BLE001
            pass

    def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
        try:
            self.board.mark_terminated(self._names.get(str(event.id), str(event.id)), event.exception)
        except Exception:  # noqa: BLE001
            pass
