"""Metrics a restarted job exports before its first batch: every group's and broker's series as the job left them.

The driver's ``MetricsState`` lives in memory, and the sinks set a group's series only when the engine analyses
the group again: after a restart most groups had no series until they changed, and an alert on one (an open
duplicate client ID) resolved because the job restarted. So ``MonitorJob.start`` fills the state before the
queries start, from what the checkpoints and tables hold (why these sources: ``docs/design/restart-metrics.md``):
each group's gauges from the consumer query's state, each broker's from ``broker_status_current``, and the
counters from the history tables that record what they count.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streaming.job import state_blob
from streaming.job.outputs import apply_broker_metrics, apply_consumer_metrics, producers_all_down

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from connectors.metrics import MetricsState
    from streaming.job.sinks import DeltaTables

log = logging.getLogger(__name__)


def restore_metrics(session: SparkSession, tables: DeltaTables, checkpoints: Mapping[str, str],
                    engine_settings: Mapping[str, Any], metrics: MetricsState, now_ms: int) -> None:  # fmt: skip
    """Fill ``metrics`` with the series the job exported when it stopped (nothing for a first start);
    ``checkpoints`` maps each query's name to its checkpoint.

    Counters take only the rows of batches their query committed: a batch that was running when the job stopped
    is replayed, and counted, after the restart. A source that cannot be read is logged and skipped: the job
    starts anyway, and the series come back as their groups and brokers change, as they did without the restore.
    """
    committed = {query: last_committed_batch(path) for query, path in checkpoints.items()}
    for name, restore in (
        ("groups", lambda: restore_group_metrics(session, tables, checkpoints["consumer"], engine_settings, metrics,
                                                 now_ms)),
        ("brokers", lambda: restore_broker_metrics(tables, metrics, committed)),
    ):  # fmt: skip
        try:
            restore()
        except Exception:  # noqa: BLE001 - a restore must never keep the job from starting
            log.warning("could not restore the %s' metrics; they return with their next change", name, exc_info=True)


def restore_group_metrics(session: SparkSession, tables: DeltaTables, checkpoint: str,
                          engine_settings: Mapping[str, Any], metrics: MetricsState, now_ms: int) -> None:  # fmt: skip
    """Each group's series from the consumer query's state at its last committed batch, and its moved queues."""
    from pyspark.sql import functions as F

    from streaming.domain.fleet import ShardEngine

    committed = last_committed_batch(checkpoint)
    if committed is None:
        return
    state = session.read.format("statestore").load(checkpoint).select("value.groupState.blob").collect()
    records = []
    for (blob,) in state:
        engine = ShardEngine.restore(state_blob.decode(blob), engine_settings)
        records += engine.group_metrics(now_ms)
    apply_consumer_metrics(metrics, records)  # rebalances_total follows the generation; moved queues below
    groups = {row["group"] for _, row in records}
    if not groups:
        return
    # Each generation's moved queues per topic, as the sink counted them (a group moves queues only at a new one).
    topic = F.explode(F.from_json(F.get_json_object("details", "$.topics"), "MAP<STRING, STRUCT<moved: BIGINT>>"))
    moved = (
        tables.read("group_snapshots")
        .where(F.col("group").isin(*groups) & (F.col("batch_id") <= committed))
        .select("group", topic.alias("topic", "summary"))
        .groupBy("group", "topic")
        .agg(F.sum("summary.moved").alias("moved"))
        .collect()
    )
    for row in moved:
        metrics.set_counter("rmqmon_group_moved_queues_total", (row["group"], row["topic"]), row["moved"] or 0)


def restore_broker_metrics(tables: DeltaTables, metrics: MetricsState, committed: Mapping[str, int | None]) -> None:
    """Each broker's series from the fault-windows query's last broker refresh, its fault windows opened (by the
    query's committed batches) and its send latencies (by send-ingest's)."""
    from pyspark.sql import functions as F

    status = tables.read("broker_status_current")
    latest = status.agg(F.max("event_time_ms")).first()[0]
    if latest is None:
        return
    rows = [r.asDict() for r in status.where(F.col("event_time_ms") == latest).collect()]
    brokers = [r["broker"] for r in rows]
    opened = (
        tables.read("fault_windows").where((F.col("status") == "OPENED") & F.col("broker").isin(*brokers))
        .where(F.col("batch_id") <= _or_none(committed.get("fault-windows"))).groupBy("broker").count().collect()
    )  # fmt: skip
    for row in opened:
        metrics.set_counter("rmqmon_broker_isolation_episodes_total", (row["broker"],), row["count"])
    apply_broker_metrics(metrics, rows, producers_all_down(tables.read("producer_broker_status_current"), latest))
    restore_send_latency(tables, metrics, brokers, committed.get("send-ingest"))


def restore_send_latency(tables: DeltaTables, metrics: MetricsState, brokers: list[str],
                         committed: int | None) -> None:  # fmt: skip
    """The per-broker send-latency histogram: the partial counts of ``send_latency_minutes`` summed."""
    from pyspark.sql import functions as F

    minutes = tables.read("send_latency_minutes").where(F.col("broker").isin(*brokers))
    minutes = minutes.where(F.col("batch_id") <= _or_none(committed))
    totals = {
        (r["broker"], tuple(r["bucket_upper_ms"])): (r["sends"], r["latency_sum_ms"])
        for r in minutes.groupBy("broker", "bucket_upper_ms")
        .agg(F.sum("sends").alias("sends"), F.sum("latency_sum_ms").alias("latency_sum_ms"))
        .collect()
    }
    buckets: dict[tuple[str, tuple[int, ...]], dict[int, int]] = {}
    per_bucket = (
        minutes.select("broker", "bucket_upper_ms", F.posexplode("bucket_counts").alias("i", "n"))
        .groupBy("broker", "bucket_upper_ms", "i")
        .agg(F.sum("n").alias("n"))
        .collect()
    )
    for r in per_bucket:
        buckets.setdefault((r["broker"], tuple(r["bucket_upper_ms"])), {})[r["i"]] = r["n"]
    for (broker, uppers), (sends, latency_sum_ms) in sorted(totals.items()):
        counts = buckets.get((broker, uppers), {})
        metrics.observe_histogram(
            "rmqmon_broker_send_latency_seconds", (broker,), [u / 1000 for u in uppers],
            [counts.get(i, 0) for i in range(len(uppers))], sends, latency_sum_ms / 1000,
        )  # fmt: skip


def last_committed_batch(checkpoint: str) -> int | None:
    """The id of the query's last committed batch (its checkpoint's ``commits/<id>``), None before the first."""
    commits = Path(checkpoint) / "commits"
    ids = [int(p.name) for p in commits.iterdir() if p.name.isdigit()] if commits.is_dir() else []
    return max(ids, default=None)


def _or_none(batch_id: int | None) -> int:
    return -1 if batch_id is None else batch_id  # no committed batch: no row counts
