"""The metrics send-ingest sets from what it writes: dead letters by reason, per-broker send latency histograms.

Each count reads the frame of one of the batch's appends (a small job on the batch's cache) and runs beside
that append, not before it: ``_SendIngestBatches`` lists it among the batch's writes, which run concurrently.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

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

    def observe_minutes(self, frame: DataFrame, batch_id: int) -> None:
        """A batch's ``send_latency_minutes`` rows (cumulative counts per fault-table threshold, see
        ``sends.reduce.minute_partials``) added into the per-broker send-latency histogram: a few hundred rows."""
        if not self.metered.first_time("send-ingest:send_latency_minutes", batch_id):
            return
        per_broker: dict[tuple[str, str], tuple[list[int], list[int], int, int]] = {}
        for row in frame.collect():
            uppers, counts = list(row["bucket_upper_ms"]), list(row["bucket_counts"])
            at = (row.asDict().get("cluster") or self.default_cluster, row["broker"])
            seen = per_broker.get(at)
            if seen is not None and seen[0] == uppers:
                counts = [a + b for a, b in zip(seen[1], counts, strict=True)]
            sends = row["sends"] + (seen[2] if seen else 0)
            total_ms = row["latency_sum_ms"] + (seen[3] if seen else 0)
            per_broker[at] = (uppers, counts, sends, total_ms)
        for at, (uppers, counts, sends, total_ms) in per_broker.items():
            self.metrics.observe_histogram(
                Metrics.BROKER_SEND_LATENCY_SECONDS,
                at,
                [u / 1000 for u in uppers],
                counts,
                sends,
                total_ms / 1000,
            )
