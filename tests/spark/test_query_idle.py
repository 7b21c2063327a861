"""Spark reports a trigger that finds no new input as an idle event, and the job's listener keeps its time: the
staleness alert reads it, so quiet topics are not taken for a stuck query."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from streaming.job.runtime.progress import ProgressBoard, ProgressListener


def test_a_query_with_nothing_to_read_reports_idle_triggers_to_the_board(spark, tmp_path):
    board = ProgressBoard()
    listener = ProgressListener(board)
    spark.streams.addListener(listener)
    source = tmp_path / "nothing-arrives"
    source.mkdir()
    started = time.time()
    query = (
        spark.readStream.schema("x INT")
        .json(str(source))
        .writeStream.queryName("idle-probe")
        .format("noop")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        deadline = time.monotonic() + 120
        while "idle-probe" not in board.idle_timestamps() and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        query.stop()
        spark.streams.removeListener(listener)
    idle = board.idle_timestamps()
    assert "idle-probe" in idle, "no idle trigger reported in 120 s"
    at = datetime.fromisoformat(idle["idle-probe"].replace("Z", "+00:00"))
    assert at.tzinfo is not None and started - 1 <= at.astimezone(UTC).timestamp() <= time.time() + 1
    assert not board.has_progress("idle-probe") or board.snapshot()["idle-probe"].input_rows == 0
