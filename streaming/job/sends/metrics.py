"""The metrics send-ingest sets from what it writes: dead letters by reason, per-broker send latency histograms.

The dead letters are counted from their append's frame (a small job on the batch's cache), the histogram from
the minute partials the driver already holds; each runs beside its append, not before it: ``_SendIngestBatches``
lists them among the batch's writes, which run concurrently.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from connectors.metric_catalogue import Metrics
from streaming.domain.vocabulary import DEFAULT_CLUSTER
from streaming.job.runtime.metered import MeteredBatches

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from connectors.metrics import MetricsState


@dataclass(frozen=True)
class SendMetrics:
    metrics: MetricsState
    # A batch replayed after a failure is not counted again (``metered``).
    metered: MeteredBatches = field(default_factory=MeteredBatches)
    # The cluster of a row without one (a table written before the column was added).
    default_cluster: str = DEFAULT_CLUSTER

    def count_dead_letters(self, frame: DataFrame, batch_id: int) -> None:
        """``dead_letters`` rows of a batch, counted by reason."""
        if not self.metered.first_time("send-ingest:dead_letters", batch_id):
            return
        for row in frame.groupBy("reason").count().collect():
            self.metrics.inc(Metrics.DEAD_LETTERS_TOTAL, ("send-ingest", str(row["reason"])), row["count"])

    def observe_minutes(self, rows: Sequence[Any], bucket_upper_ms: Sequence[int], batch_id: int) -> None:
        """A batch's minute partials (rows holding ``cluster``, ``broker``, ``sends``, ``latency_sum_ms`` and the
        cumulative ``bucket_counts`` per fault-table threshold of ``bucket_upper_ms``, see
        ``sends.reduce.driver_view``) added into the per-broker send-latency histogram: a few hundred rows."""
        if not self.metered.first_time("send-ingest:send_latency_minutes", batch_id):
            return
        uppers = list(bucket_upper_ms)
        per_broker: dict[tuple[str, str], tuple[list[int], int, int]] = {}
        for row in rows:
            at = (row["cluster"] or self.default_cluster, row["broker"])
            counts, sends, total_ms = list(row["bucket_counts"]), row["sends"], row["latency_sum_ms"]
            seen = per_broker.get(at)
            if seen is not None:
                counts = [a + b for a, b in zip(seen[0], counts, strict=True)]
                sends, total_ms = sends + seen[1], total_ms + seen[2]
            per_broker[at] = (counts, sends, total_ms)
        for at, (counts, sends, total_ms) in per_broker.items():
            self.metrics.observe_histogram(
                Metrics.BROKER_SEND_LATENCY_SECONDS,
                at,
                [u / 1000 for u in uppers],
                counts,
                sends,
                total_ms / 1000,
            )
