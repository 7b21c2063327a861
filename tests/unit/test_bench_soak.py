"""The soak compares a query's micro-batches kind with kind, read from its checkpoint, not a sampled gauge."""

from __future__ import annotations

import json
import os
from pathlib import Path

from bench.bench_soak import batch_series, disk_usage, query_batches, summarize_batches

STARTED = 1_000_000.0


def _batch(query: Path, batch: int, start_s: float, duration_s: float, offset: int) -> None:
    """A committed batch as Spark leaves it: an offsets entry (trigger time, end offsets) and a commit file."""
    (query / "offsets").mkdir(parents=True, exist_ok=True)
    (query / "commits").mkdir(parents=True, exist_ok=True)
    metadata = {"batchWatermarkMs": 0, "batchTimestampMs": int(start_s * 1000), "conf": {}}
    offsets = {"channels": {"0": offset}}
    (query / "offsets" / str(batch)).write_text(f"v1\n{json.dumps(metadata)}\n{json.dumps(offsets)}\n")
    commit = query / "commits" / str(batch)
    commit.write_text('v1\n{"nextBatchWatermarkMs":0}\n')
    os.utime(commit, (start_s + duration_s, start_s + duration_s))


def _run(tmp_path: Path) -> Path:
    """Early (0-100 s): each 7.5 s batch with input followed by a 0.5 s no-data batch (the same end offsets);
    late (100-200 s): batches with input only, as long as the early ones."""
    query = tmp_path / "checkpoints" / "consumer"
    batch, offset, t = 0, 0, STARTED
    while t < STARTED + 100:
        offset += 500
        _batch(query, batch, t, 7.5, offset)
        _batch(query, batch + 1, t + 8, 0.5, offset)
        batch, t = batch + 2, t + 10
    while t < STARTED + 200:
        offset += 500
        _batch(query, batch, t, 7.5, offset)
        batch, t = batch + 1, t + 10
    return tmp_path / "checkpoints"


def test_batches_with_input_compare_with_their_kind_whatever_the_share_of_no_data_batches(tmp_path):
    batches: dict[str, dict[int, dict]] = {}
    query_batches(_run(tmp_path), batches, {})
    report = summarize_batches(batch_series(batches, STARTED), 0, 100, 200)
    assert report["batch_duration_s{consumer,data}"]["late_over_early"] == 1.0
    assert report["batch_duration_s{consumer,no-data}"]["early"] == 0.5
    assert report["batch_duration_s{consumer,no-data}"]["late"] is None
    # 10 of the early window's 19 batches with a kind: the first batch has no batch before it to compare with
    assert report["no_data_batch_share{consumer}"]["early"] == round(10 / 19, 3)
    assert report["no_data_batch_share{consumer}"]["late"] == 0.0


def test_batches_are_read_once_and_kept_after_spark_deletes_their_files(tmp_path):
    checkpoints = _run(tmp_path)
    batches: dict[str, dict[int, dict]] = {}
    offsets: dict[tuple[str, int], list] = {}
    query_batches(checkpoints, batches, offsets)
    first = dict(batches["consumer"])
    for name in ("offsets", "commits"):
        for entry in (checkpoints / "consumer" / name).iterdir():
            if int(entry.name) < 10:
                entry.unlink()
    query_batches(checkpoints, batches, offsets)
    assert batches["consumer"] == first
    assert batches["consumer"][1] == {"end": STARTED + 8.5, "duration_s": 0.5, "data": False}


def test_disk_usage_counts_the_batches_each_checkpoint_holds(tmp_path):
    _run(tmp_path)
    usage = disk_usage(tmp_path)
    assert usage["checkpoint_batches{consumer}"] == 30
    assert usage["checkpoint_files"] == 60
