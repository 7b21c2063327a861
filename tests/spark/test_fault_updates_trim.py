"""Trimming ``_send_fault_updates`` under the fault-windows query's Delta stream: no row lost, none twice.

The stream is the query's own reader (``fault_query.fault_updates_stream``), run with a checkpoint in
``availableNow`` steps, so the test decides exactly which commits it has read when the trim runs; the trim
may run once the reader has reported progress, as the runner tells send-ingest.
"""

from __future__ import annotations

from collections import Counter

from streaming.job.delta_sink import append_idempotent
from streaming.job.fault_query import fault_updates_stream
from streaming.job.send_query import FAULT_UPDATES_DDL, ensure_fault_updates_table
from streaming.job.send_trim import FaultUpdatesTrim, trim_fault_updates
from streaming.job.sinks import DeltaTables

HOUR = 3_600_000
T0 = 1_700_000_000_000


def sends(batch: int, times: list[int]) -> list[tuple]:
    return [
        ("p1", "PG", "broker-a", t, 5, "OK", "V4_9_8", "rocketmq-4", 0, batch * 100 + i, batch)
        for i, t in enumerate(times)
    ]


def test_trims_lose_and_repeat_no_row_for_the_fault_stream_even_rows_it_has_not_read(spark, tmp_path):
    path = ensure_fault_updates_table(spark, DeltaTables(spark, tmp_path / "tables"))
    reader_checkpoint = str(tmp_path / "fault-windows")
    progress: list[dict] = []  # the reader's last progress after each of its runs
    trim = FaultUpdatesTrim(retention_ms=2 * HOUR, every_batches=2, reader_started=lambda: bool(progress))
    appended: list[tuple] = []
    seen: list[tuple] = []

    def append(batch: int, times: list[int]) -> None:
        rows = sends(batch, times)
        append_idempotent(spark.createDataFrame(rows, FAULT_UPDATES_DDL), path, "app:internal", batch)
        appended.extend(rows)

    def read_what_is_new() -> None:
        query = (
            fault_updates_stream(spark, path)
            .writeStream.option("checkpointLocation", reader_checkpoint)
            .foreachBatch(lambda frame, _: seen.extend(tuple(r) for r in frame.collect()))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        assert query.exception() is None
        if query.lastProgress is not None:
            progress.append(query.lastProgress)

    append(0, [T0, T0 + HOUR])
    append(1, [T0 + 2 * HOUR, T0 + 3 * HOUR])
    assert not trim.due(2)  # the stream has not fixed its starting version yet
    read_what_is_new()  # starts from the table's current rows
    assert trim.due(2) and not trim.due(3)

    append(2, [T0 + 2 * HOUR + HOUR // 2, T0 + 4 * HOUR])  # its first row is older than the cutoff below
    cutoff = trim.cutoff_ms(T0 + 5 * HOUR)
    assert cutoff == T0 + 3 * HOUR
    assert trim_fault_updates(spark, path, cutoff, "app", 2) == 4  # batch 0's 2 rows, 1 of batch 1, 1 of batch 2
    version = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").first()["version"]
    assert trim_fault_updates(spark, path, cutoff, "app", 2) == 0  # a replayed batch deletes nothing more
    assert spark.sql(f"DESCRIBE HISTORY delta.`{path}`").first()["version"] == version  # ... and commits nothing
    append(3, [T0 + 5 * HOUR])
    read_what_is_new()  # the trim's commit (it rewrote the files of batches 1 and 2) lies between 2 and 3

    assert Counter(seen) == Counter(appended)  # every row read once, batch 2's row deleted before it was read too
    left = sorted(r["event_time_ms"] for r in spark.read.format("delta").load(path).collect())
    assert left == [T0 + 3 * HOUR, T0 + 4 * HOUR, T0 + 5 * HOUR]
