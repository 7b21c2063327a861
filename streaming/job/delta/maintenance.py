"""Keeping the monitor's Delta tables small and fast to read: compaction and VACUUM (``rebalance-monitor maintain``).

The writer compacts the current tables it rewrites itself (auto compaction); this module compacts only the append-only
tables the job does not compact (all tables with ``job_stopped``) and VACUUMs every table past its retention,
so it never races the running job's commits. Why each rule: ``docs/design/table-maintenance.md``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from connectors.object_store import join
from streaming.contract.tables import TABLES
from streaming.job.delta.exactly_once import sql_path

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

APPEND_ONLY_KINDS = ("history",)
_LISTING_PARALLELISM = "spark.sql.sources.parallelPartitionDiscovery.parallelism"


@dataclass(frozen=True)
class TableMaintenance:
    """What maintenance did to one table (a dry run reports what VACUUM would delete and compacts nothing)."""

    table: str
    kind: str  # history or current
    files_before: int  # data files of the latest version
    files_compacted: int  # small files OPTIMIZE rewrote
    files_after: int
    files_vacuumed: int  # entries VACUUM deleted (or would delete): data files, Hadoop .crc files, empty dirs
    retention: str  # the table's delta.deletedFileRetentionDuration (Delta's default when unset)
    note: str = ""  # why a step was skipped (the same for every table it applies to)


def monitor_tables() -> list[tuple[str, str]]:
    """(name, kind) of every table the job writes: the catalogue."""
    return [(name, spec.kind) for name, spec in TABLES.items()]


def maintain(
    session: SparkSession, root: str | Path, *, job_stopped: bool = False, dry_run: bool = False
) -> list[TableMaintenance]:
    """Compact and VACUUM the monitor's tables under ``root`` (see the module docstring); tables not yet
    created are left out. ``job_stopped`` compacts every table, even those the job compacts or rewrites."""
    from delta.tables import DeltaTable

    settings = {
        # VACUUM lists the table's directories in a Spark job with this many tasks, 10,000 by default: about
        # 50 s of task overhead per table on a 2-core machine for a few hundred files (measured: a dry run of
        # three small tables took 150 s, and 9 s with the parallelism of the cluster's cores).
        _LISTING_PARALLELISM: str(max(1, session.sparkContext.defaultParallelism)),
    }
    reports = []
    with _session_settings(session, settings):
        for name, kind in monitor_tables():
            path = join(str(root), name)
            if not DeltaTable.isDeltaTable(session, path):
                continue
            table = DeltaTable.forPath(session, path)
            before, properties = _detail(session, path)
            compacts_itself = properties.get("delta.autoOptimize.autoCompact") == "true"
            compacted, after, note = 0, before, ""  # a dry run compacts nothing (report_lines says so once)
            if not dry_run and (job_stopped or (kind in APPEND_ONLY_KINDS and not compacts_itself)):
                result = table.optimize().executeCompaction().first()
                compacted = int(result["metrics"]["numFilesRemoved"])
                after = before - compacted + int(result["metrics"]["numFilesAdded"])  # VACUUM keeps live files
            elif not dry_run and compacts_itself:
                note = "not compacted, the job compacts them itself (auto compaction; --job-stopped compacts here)"
            elif not dry_run:
                note = "not compacted, the running job rewrites them (--job-stopped compacts here)"
            vacuumed = session.sql(f"VACUUM {sql_path(path)} DRY RUN").count()
            if vacuumed and not dry_run:
                table.vacuum()
            retention = properties.get("delta.deletedFileRetentionDuration", "interval 1 week (Delta's default)")
            reports.append(TableMaintenance(name, kind, before, compacted, after, vacuumed, retention, note))
    return reports


@contextmanager
def _session_settings(session: SparkSession, settings: Mapping[str, str]) -> Iterator[None]:
    """Apply ``settings`` to the session for the block, then restore what was there."""
    previous = {key: session.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        session.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in previous.items():
            if value is None:
                session.conf.unset(key)
            else:
                session.conf.set(key, value)


def _detail(session: SparkSession, path: str) -> tuple[int, dict[str, str]]:
    """(data files of the latest version, table properties)."""
    detail = session.sql(f"DESCRIBE DETAIL {sql_path(path)}").first()
    return int(detail["numFiles"]), dict(detail["properties"] or {})


def report_lines(reports: list[TableMaintenance], dry_run: bool = False) -> list[str]:
    """The table ``rebalance-monitor maintain`` prints."""
    header = ("table", "kind", "files", "compacted", "now", "vacuumed", "retention")
    rows = [header] + [
        (
            r.table,
            r.kind,
            str(r.files_before),
            str(r.files_compacted),
            str(r.files_after),
            str(r.files_vacuumed),
            r.retention.removeprefix("interval "),
        )
        for r in reports
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    if dry_run:
        lines.insert(0, "dry run: 'vacuumed' is what VACUUM would delete; nothing was compacted or deleted")
    by_note: dict[str, list[str]] = {}
    for r in reports:
        if r.note:
            by_note.setdefault(r.note, []).append(r.table)
    return lines + [f"{note}: {', '.join(tables)}" for note, tables in by_note.items()]
