"""A job killed while it creates its Delta tables starts again: ``ensure_table`` creates a table whose
creation died before its first commit (an empty ``_delta_log``, or one holding only Delta's staging folder
and a temporary commit file), which Delta alone refuses as a table that does not exist; a directory holding
anything more is never touched."""

from __future__ import annotations

import pytest

from streaming.job.delta.exactly_once import ensure_table

DDL = "seq INT, kind STRING"


@pytest.mark.parametrize("leftover", ["empty _delta_log", "staging folder and temporary commit"])
def test_a_creation_killed_before_its_first_commit_is_created_again(spark, tmp_path, leftover):
    path = tmp_path / "table"
    log = path / "_delta_log"
    log.mkdir(parents=True)
    if leftover != "empty _delta_log":
        (log / "_staged_commits").mkdir()
        (log / ".00000000000000000000.json.0f3c9a.tmp").write_text('{"commitInfo":{}}\n')

    ensure_table(spark, str(path), spark.createDataFrame([], DDL).schema)

    frame = spark.read.format("delta").load(str(path))
    assert frame.schema == spark.createDataFrame([], DDL).schema
    assert frame.count() == 0
    assert (log / "00000000000000000000.json").exists()


def test_a_directory_with_files_beside_an_uncommitted_log_is_left_alone(spark, tmp_path):
    path = tmp_path / "table"
    (path / "_delta_log").mkdir(parents=True)
    (path / "part-00000.snappy.parquet").write_bytes(b"not ours to delete")

    with pytest.raises(Exception, match="DELTA_"):
        ensure_table(spark, str(path), spark.createDataFrame([], DDL).schema)
    assert (path / "part-00000.snappy.parquet").read_bytes() == b"not ours to delete"
    assert (path / "_delta_log").is_dir()
