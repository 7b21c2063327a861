"""The job refuses storage it cannot write before Spark starts: one line naming the path, a non-zero exit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from streaming.job.runtime.storage_check import StorageError, check_writable, local_path

ROOT = Path(__file__).parents[2]


def test_a_writable_directory_is_created_and_left_without_the_probe(tmp_path):
    target = tmp_path / "new" / "delta"
    check_writable(str(target), "Delta root")
    assert target.is_dir() and list(target.iterdir()) == []


def test_a_path_through_a_regular_file_is_refused_with_its_reason(tmp_path):
    (tmp_path / "file").write_text("not a directory")
    with pytest.raises(StorageError, match=r"cannot write the Delta root at .*file/delta: Not a directory"):
        check_writable(str(tmp_path / "file" / "delta"), "Delta root")


def test_too_little_free_space_is_refused(tmp_path):
    with pytest.raises(StorageError, match=r"MiB free, below the \d+ MiB"):
        check_writable(str(tmp_path), "checkpoint root", min_free_bytes=2**62)


def test_remote_uris_are_left_to_their_file_system():
    assert local_path("s3a://bucket/delta") is None
    assert local_path("file:///data/delta") == Path("/data/delta")
    assert local_path(".run/delta") == Path(".run/delta")
    check_writable("s3a://bucket/that/does/not/exist", "Delta root")  # no error: not checked here


def test_run_with_an_unwritable_delta_root_prints_one_line_and_exits_non_zero(tmp_path):
    (tmp_path / "file").write_text("not a directory")
    config = tmp_path / "monitor.toml"
    config.write_text(
        f'[paths]\ndelta_root = "{tmp_path / "file" / "delta"}"\ncheckpoint_root = "{tmp_path / "checkpoints"}"\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "streaming.app.cli", "run", "--config", str(config)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [
        f"rebalance-monitor run: cannot write the Delta root ([paths] delta_root) at {tmp_path / 'file' / 'delta'}: "
        "Not a directory"
    ]
    assert "Traceback" not in done.stdout + done.stderr
