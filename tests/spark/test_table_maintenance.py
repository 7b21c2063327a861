"""Table maintenance on real Delta tables: auto compaction in the writer, and ``maintain`` (OPTIMIZE + VACUUM).

The tables are written the way the job writes them -- idempotent appends per batch id, MERGE upserts on the
key -- one small file per write, so each test knows how many files a table has and which of them a MERGE
replaced.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from streaming.contract.tables import column_names
from streaming.job.delta.maintenance import maintain
from streaming.job.delta.sinks import DeltaTables
from tests.support.job import job_shuffle_partitions

DEAD_LETTER_DDL = (
    "source STRING, kafka_topic STRING, kafka_partition INT, kafka_offset BIGINT, kafka_timestamp TIMESTAMP, "
    "raw_value STRING, reason STRING, detail STRING, batch_id BIGINT, cluster STRING"
)
ASSIGNMENT_DDL = (
    "group STRING, topic STRING, client_id STRING, queues ARRAY<STRUCT<broker: STRING, queue_id: INT>>, "
    "queue_count INT, generation BIGINT, event_time_ms BIGINT, batch_id BIGINT, cluster STRING"
)


@pytest.fixture(autouse=True)
def job_default_partitions(spark):
    """Compaction and maintenance are this file's subject: the job's own shuffle partition count, not the
    tests' smaller one."""
    with job_shuffle_partitions(spark):
        yield


def files_in_table(spark, path: str) -> int:
    return spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()["numFiles"]


def parquet_on_disk(path: str) -> int:
    return sum(1 for f in Path(path).rglob("*.parquet") if "_delta_log" not in f.parts)


def rows(spark, path: str) -> list:
    return sorted(tuple(r) for r in spark.read.format("delta").load(path).collect())


def write_small_batches(spark, tables: DeltaTables, batches: int = 3) -> None:
    """``batches`` one-row appends to dead_letters, and MERGEs that replace one current_assignment row each time
    (every MERGE removes the file the previous one wrote)."""
    for batch in range(batches):
        dead = spark.createDataFrame(
            [("send_result", "t", 0, batch, None, "{", "NOT_JSON", "x", batch, None)], DEAD_LETTER_DDL
        )
        tables.append("dead_letters", dead, "app", batch)
        assignment = spark.createDataFrame(
            [("g", "T", "c1", [("broker-a", batch)], 1, batch, 1_700_000_000_000 + batch, batch, "DefaultCluster")],
            ASSIGNMENT_DDL,
        ).select(*column_names("current_assignment"))
        tables.merge_upsert("current_assignment", assignment, "app", batch)


@pytest.fixture
def written(spark, tmp_path) -> DeltaTables:
    # Every write stays a file of its own, and VACUUM may delete a file as soon as no version needs it.
    tables = DeltaTables(spark, tmp_path, auto_compact=False, deleted_file_retention_hours=0)
    tables.ensure_all(["dead_letters", "current_assignment"])
    write_small_batches(spark, tables)
    return tables


def test_new_tables_ask_the_writer_to_compact(spark, tmp_path):
    tables = DeltaTables(spark, tmp_path, auto_compact=True)
    tables.ensure_all(["dead_letters", "current_assignment"])
    for path in (tables.path("dead_letters"), tables.path("current_assignment")):
        properties = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()["properties"]
        assert properties["delta.autoOptimize.autoCompact"] == "true"
        # Delta's default for the MERGE-maintained table, a tenth as many for the append-only ones.
        assert properties["delta.checkpointInterval"] == ("10" if path == tables.path("current_assignment") else "100")
        assert properties["delta.deletedFileRetentionDuration"] == "interval 168 hours"
        assert properties["delta.logRetentionDuration"] == "interval 168 hours"


@pytest.mark.parametrize("auto_compact", [True, False])
def test_the_writer_compacts_small_files_once_they_pile_up_only_when_asked(spark, tmp_path, auto_compact):
    tables = DeltaTables(spark, tmp_path, auto_compact=auto_compact)
    tables.ensure_all(["dead_letters"])
    path = tables.path("dead_letters")
    spark.conf.set("spark.databricks.delta.autoCompact.minNumFiles", "3")  # Delta's default is 50
    try:
        for batch in range(4):
            frame = spark.createDataFrame(
                [("send_result", "t", 0, batch, None, "{", "NOT_JSON", "x", batch, None)], DEAD_LETTER_DDL
            )
            tables.append("dead_letters", frame, "app", batch)
    finally:
        spark.conf.unset("spark.databricks.delta.autoCompact.minNumFiles")
    assert len(rows(spark, path)) == 4
    if auto_compact:
        assert files_in_table(spark, path) < 4
    else:
        assert files_in_table(spark, path) == 4


def test_a_failed_auto_compaction_leaves_the_write_committed_and_the_writer_writing(spark, tmp_path):
    # A compaction that cannot read its input files fails inside the post-commit hook. The job must not
    # stop over it: the append's data is committed, and so is its txn version (a replay is skipped).
    assert spark.conf.get("spark.databricks.delta.postCommitHook.throwOnError") == "false"
    tables = DeltaTables(spark, tmp_path, auto_compact=True)
    tables.ensure_all(["dead_letters"])
    path = tables.path("dead_letters")

    def append(batch: int) -> None:
        frame = spark.createDataFrame(
            [("send_result", "t", 0, batch, None, "{", "NOT_JSON", "x", batch, None)], DEAD_LETTER_DDL
        )
        tables.append("dead_letters", frame, "app", batch)

    spark.conf.set("spark.databricks.delta.autoCompact.minNumFiles", "3")
    try:
        append(0)
        append(1)
        for written in Path(path).glob("*.parquet"):  # any compaction after the next append needs them
            written.unlink()
        append(2)  # commits, then its auto compaction fails
        append(3)  # the writer goes on (and its compaction fails again)
        append(3)  # a replay of a committed batch is still a no-op
    finally:
        spark.conf.unset("spark.databricks.delta.autoCompact.minNumFiles")
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").orderBy("version").collect()
    assert [r["operation"] for r in history] == ["CREATE TABLE"] + ["WRITE"] * 4  # no OPTIMIZE committed
    assert files_in_table(spark, path) == 4


def test_maintain_compacts_append_only_tables_and_vacuums_every_table_after_a_dry_run(spark, written):
    root = written.root
    paths = {name: written.path(name) for name in ("dead_letters", "current_assignment")}
    before = {name: rows(spark, path) for name, path in paths.items()}
    merged_files = files_in_table(spark, paths["current_assignment"])
    assert parquet_on_disk(paths["current_assignment"]) > merged_files  # the MERGEs left replaced files behind
    on_disk = {name: parquet_on_disk(path) for name, path in paths.items()}

    dry = {r.table: r for r in maintain(spark, root, dry_run=True)}

    assert {name: parquet_on_disk(path) for name, path in paths.items()} == on_disk  # nothing changed
    assert dry["current_assignment"].files_vacuumed > 0
    assert all(r.files_compacted == 0 and r.files_after == r.files_before for r in dry.values())

    reports = {r.table: r for r in maintain(spark, root)}

    assert set(reports) == set(paths)  # tables never created are left out
    for name in ("dead_letters",):
        assert (reports[name].files_before, reports[name].files_compacted, reports[name].files_after) == (3, 3, 1)
        assert reports[name].files_vacuumed >= 3  # the compacted small files (and Hadoop's .crc side files)
        assert parquet_on_disk(paths[name]) == 1
    current = reports["current_assignment"]
    assert current.files_compacted == 0 and "running job rewrites" in current.note
    assert current.files_after == current.files_before == merged_files
    assert current.files_vacuumed >= dry["current_assignment"].files_vacuumed
    assert parquet_on_disk(paths["current_assignment"]) == merged_files
    assert {name: rows(spark, path) for name, path in paths.items()} == before  # no row lost or added
    assert all(r.retention == "interval 0 hours" for r in reports.values())
    # maintain's own setting does not outlive it
    assert spark.conf.get("spark.sql.sources.parallelPartitionDiscovery.parallelism", None) is None


def test_tables_the_job_compacts_or_merges_are_compacted_only_with_the_job_stopped(spark, tmp_path):
    tables = DeltaTables(spark, tmp_path, auto_compact=True)  # the job's default: the writer compacts
    tables.ensure_all(["dead_letters", "current_assignment"])
    for batch in range(3):  # three files each (the writer compacts only from 50 on), none replaced
        dead = spark.createDataFrame(
            [("send_result", "t", 0, batch, None, "{", "NOT_JSON", "x", batch, None)], DEAD_LETTER_DDL
        )
        tables.append("dead_letters", dead, "app", batch)
        frame = spark.createDataFrame(
            [("g", "T", f"c{batch}", [("broker-a", batch)], 1, 1, 1, batch, "DefaultCluster")], ASSIGNMENT_DDL
        )
        tables.merge_upsert("current_assignment", frame.select(*column_names("current_assignment")), "app", batch)
    before = {name: rows(spark, tables.path(name)) for name in ("dead_letters", "current_assignment")}

    running = {r.table: r for r in maintain(spark, tmp_path)}

    assert running["dead_letters"].files_compacted == 0 and "compacts them itself" in running["dead_letters"].note
    assert running["current_assignment"].files_compacted == 0
    assert all(r.files_after == r.files_before == 3 for r in running.values())

    stopped = {r.table: r for r in maintain(spark, tmp_path, job_stopped=True)}

    for report in stopped.values():
        assert (report.files_before, report.files_compacted, report.files_after) == (3, 3, 1)
        assert report.files_vacuumed == 0  # the compacted files are younger than the retention (168 hours)
    assert {name: rows(spark, tables.path(name)) for name in before} == before


def test_the_maintain_command_reports_per_table_and_refuses_a_root_without_tables(
    spark, written, tmp_path_factory, capsys
):
    from streaming.app.cli import main

    config = tmp_path_factory.mktemp("conf") / "monitor.toml"
    config.write_text(f'[paths]\ndelta_root = "{written.root}"\n')

    assert main(["maintain", "--config", str(config)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:5] == ["table", "kind", "files", "compacted", "now"]
    assert lines[0].split()[-1] == "retention"
    table = {line.split()[0]: line.split()[1:5] + line.split()[-2:] for line in lines[1:3]}
    assert table == {
        "dead_letters": ["history", "3", "3", "1", "0", "hours"],
        "current_assignment": ["current", "1", "0", "1", "0", "hours"],  # one row, rewritten
    }
    assert lines[-1] == "not compacted, the running job rewrites them (--job-stopped compacts here): current_assignment"

    assert main(["maintain", "--config", str(config), "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("dry run:") and lines[1].split()[0] == "table"
    assert not any("not compacted" in line for line in lines)  # nothing is compacted in a dry run anyway

    empty = tmp_path_factory.mktemp("empty")
    config.write_text(f'[paths]\ndelta_root = "{empty}"\n')
    assert main(["maintain", "--config", str(config)]) == 1
    assert "no monitor tables under" in capsys.readouterr().err
    config.write_text("[delta]\ndeleted_file_retention_hours = 0\n")
    assert main(["maintain", "--config", str(config)]) == 2
    assert "delta.deleted_file_retention_hours" in capsys.readouterr().err


def test_after_a_restart_an_append_only_table_is_compacted_only_once_it_has_the_threshold_of_files(spark, tmp_path):
    # Delta decides on auto compaction from file counts its driver keeps in memory; a restarted driver has none,
    # and compacted at every append from the first compaction on. The restart here is a new driver process.
    import subprocess
    import sys

    from tests.support.dead_letter_writer import MIN_NUM_FILES, append_batches

    threshold = 4
    tables = DeltaTables(spark, tmp_path, auto_compact=True)
    spark.conf.set(MIN_NUM_FILES, str(threshold))
    try:
        append_batches(spark, str(tmp_path), 0, threshold + 1)  # compacted at 4 files, then one more: 2 files
    finally:
        spark.conf.unset(MIN_NUM_FILES)
    path = tables.path("dead_letters")
    restart_version = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").agg({"version": "max"}).first()[0]
    assert files_in_table(spark, path) == 2
    restarted = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.support.dead_letter_writer",
            str(tmp_path),
            str(threshold + 1),
            "6",
            str(threshold),
        ],
        cwd=Path(__file__).parents[2],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert restarted.returncode == 0, restarted.stderr[-3000:]

    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").where(f"version > {restart_version}").orderBy("version")
    files, compacted_at = 2, []
    for commit in history.collect():
        metrics = commit["operationMetrics"]
        if commit["operation"] == "WRITE":
            files += int(metrics["numFiles"])
        else:
            assert commit["operation"] == "OPTIMIZE"
            compacted_at.append(files)
            files += int(metrics["numAddedFiles"]) - int(metrics["numRemovedFiles"])
    # 2 files + 6 appends: compacted when the 2nd append makes 4, and again when the 5th does, never before.
    assert compacted_at == [threshold, threshold]
    assert files == files_in_table(spark, path) == 2
    assert len(rows(spark, path)) == threshold + 1 + 6
