"""The trim of ``_send_fault_updates``: send-ingest deletes the reduced sends the fault-windows query no longer
needs, after its batch's appends, in its own thread.

When a trim may run at all is the runner's to say (``FaultUpdatesTrim.reader_started``): no query reads
another's checkpoint. Why deleting read rows loses nothing, and the rule: ``docs/design/fault-tolerance.md``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from streaming.job.send_query import FAULT_UPDATES_TABLE

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FaultUpdatesTrim:
    """When send-ingest deletes old rows of ``_send_fault_updates`` ([delta] fault_updates_retention_hours and
    fault_updates_trim_every_batches): without it the table grows by every batch's reduced sends forever.

    ``reader_started`` says whether the fault-windows query's Delta stream has fixed the table version it
    starts from (its first offsets exist): until then no trim runs. The cutoff comes from the batch (its
    newest send), and the DELETE is idempotent per batch like every write."""

    retention_ms: int
    every_batches: int
    reader_started: Callable[[], bool]

    def due(self, batch_id: int) -> bool:
        return not batch_id % self.every_batches and self.reader_started()

    def cutoff_ms(self, latest_send_ms: int) -> int:
        return latest_send_ms - self.retention_ms

    def after_batch(
        self,
        session: SparkSession,
        path: str,
        latest_send_ms: int,
        app_id: str,
        batch_id: int,
        on_trimmed: Callable[[int], None] | None,
    ) -> None:
        """After the appends of a batch that kept sends: when ``due``, ``trim_fault_updates`` at the batch's
        cutoff, heard by ``on_trimmed`` and logged."""
        if not self.due(batch_id):
            return
        cutoff_ms = self.cutoff_ms(latest_send_ms)
        deleted = trim_fault_updates(session, path, cutoff_ms, app_id, batch_id)
        if deleted is not None:
            if on_trimmed is not None:
                on_trimmed(deleted)
            log.info(
                "send-ingest batch %d: %d rows of %s older than %d ms deleted",
                batch_id,
                deleted,
                FAULT_UPDATES_TABLE,
                cutoff_ms,
            )


def trim_fault_updates(session: SparkSession, path: str, cutoff_ms: int, app_id: str, batch_id: int) -> int | None:
    """Delete the rows of ``_send_fault_updates`` with ``event_time_ms < cutoff_ms``, once per (app id, batch);
    the number of rows deleted, or None when a concurrent compaction (``maintain`` on a table without auto
    compaction) made the DELETE conflict: the next trim deletes them, and the query goes on."""
    from delta.exceptions import (
        ConcurrentAppendException,
        ConcurrentDeleteDeleteException,
        ConcurrentDeleteReadException,
    )

    from streaming.job.delta_sink import align_auto_compaction_count, merge_idempotent, sql_path

    deleted: list[int] = []

    def delete(own: SparkSession) -> None:
        align_auto_compaction_count(own, path)
        result = own.sql(f"DELETE FROM {sql_path(path)} WHERE event_time_ms < {int(cutoff_ms)}").first()
        deleted.append(int(result[0]) if result is not None and result[0] is not None else 0)

    try:
        merge_idempotent(session, f"{app_id}:{FAULT_UPDATES_TABLE}:trim", batch_id, delete)
    except (ConcurrentAppendException, ConcurrentDeleteReadException, ConcurrentDeleteDeleteException) as error:
        log.warning(
            "send-ingest batch %d: trimming %s conflicted with another commit, left for the next trim: %s",
            batch_id,
            FAULT_UPDATES_TABLE,
            str(error).splitlines()[0],
        )
        return None
    return deleted[0] if deleted else 0
