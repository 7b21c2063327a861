"""Writing micro-batch results into the Delta tables of ``tables.TABLES``, exactly once.

Every function here is called from a ``foreachBatch`` with the batch id and the query's app id. History
tables are appended with ``txnAppId = <app id>:<table>`` and ``txnVersion = batch id`` (one app id per
table and query, because Delta records the last version per app id and table); current tables are
overwritten under the same writer options, or MERGEd under the same ids through the session settings. A
replayed batch therefore changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from connectors.object_store import join
from streaming.contract.tables import TABLES, column_names
from streaming.domain.vocabulary import DEFAULT_CLUSTER
from streaming.job.delta.bus import struct_type
from streaming.job.delta.exactly_once import (
    align_auto_compaction_count,
    append_idempotent,
    ensure_table,
    merge_idempotent,
    overwrite_idempotent,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession


class DeltaTables:
    """Paths of the monitor's tables under one root (a local path or an object-store URI), created on demand
    from the catalogue."""

    def __init__(
        self,
        session: SparkSession,
        root: str | Path,
        checkpoint_interval: int = 10,
        auto_compact: bool = True,
        deleted_file_retention_hours: int = 168,
        log_retention_hours: int = 168,
        append_checkpoint_interval: int = 100,
        default_cluster: str = DEFAULT_CLUSTER,
    ) -> None:
        self.session = session
        self.root = str(root)
        # The cluster of rows that name none: when a table written before clusters gets the column, its current
        # rows.
        self.default_cluster = default_cluster
        # Set when a table is created ([delta] checkpoint_interval for current tables, append_checkpoint_interval
        # for the append-only ones, auto_compact, deleted_file_retention_hours, log_retention_hours).
        self.checkpoint_interval = checkpoint_interval
        self.append_checkpoint_interval = append_checkpoint_interval
        self.auto_compact = auto_compact
        self.deleted_file_retention_hours = deleted_file_retention_hours
        self.log_retention_hours = log_retention_hours

    def path(self, name: str) -> str:
        if name not in TABLES:
            raise KeyError(f"unknown table {name!r}")
        return join(self.root, name)

    def properties(self, kind: str) -> dict[str, str]:
        """Table properties for a new table of ``kind`` ("history" or "current")."""
        # Every micro-batch adds a file or two per table: the writer compacts them once they pile up.
        properties = {
            # MERGE replays the log from the last checkpoint; an append does not (it reads the checksum).
            "delta.checkpointInterval": str(
                self.checkpoint_interval if kind == "current" else self.append_checkpoint_interval
            ),
            "delta.autoOptimize.autoCompact": str(self.auto_compact).lower(),
            # What VACUUM (``rebalance-monitor maintain``) keeps; Delta 4 ignores a RETAIN argument other than 0.
            "delta.deletedFileRetentionDuration": f"interval {self.deleted_file_retention_hours} hours",
            # Every commit adds two log files and lists the log; Delta's default keeps them for 30 days.
            "delta.logRetentionDuration": f"interval {self.log_retention_hours} hours",
        }
        if kind == "current":
            properties["delta.enableChangeDataFeed"] = "true"
        return properties

    def ensure_all(self, names: list[str] | None = None) -> None:
        """Create each table that does not exist; add the catalogue's columns an existing one lacks (``evolve``)."""
        for name in names or list(TABLES):
            spec = TABLES[name]
            ensure_table(
                self.session, self.path(name), struct_type(spec.columns), spec.partition_by, self.properties(spec.kind)
            )
            self.evolve(name)

    def evolve(self, name: str) -> list[str]:
        """Add the catalogue's columns the table at ``name`` lacks (a table written by an earlier release: the
        ``cluster`` column); its existing rows hold NULL there, but a current table's, whose key starts with the
        cluster, are given the default cluster, so the next batch's rows replace them. The columns added."""
        from delta.tables import DeltaTable
        from pyspark.sql import functions as F

        spec = TABLES[name]
        have = set(self.read(name).columns)
        missing = [c for c in spec.columns if c.name not in have]
        if not missing:
            return []
        added = ", ".join(f"`{c.name}` {c.type.ddl}" for c in missing)
        self.session.sql(f"ALTER TABLE delta.`{self.path(name)}` ADD COLUMNS ({added})")
        if spec.kind == "current" and any(c.name == "cluster" for c in missing):
            table = DeltaTable.forPath(self.session, self.path(name))
            table.update(F.col("cluster").isNull(), {"cluster": F.lit(self.default_cluster)})
        return [c.name for c in missing]

    def version(self, name: str) -> int:
        """The table's latest version as its log names it (0: created and never written; -1: no table)."""
        jvm = self.session.sparkContext._jvm
        log = jvm.org.apache.hadoop.fs.Path(self.path(name), "_delta_log")
        fs = log.getFileSystem(self.session.sparkContext._jsc.hadoopConfiguration())
        if not fs.exists(log):
            return -1
        names = [status.getPath().getName() for status in fs.listStatus(log)]
        return max((int(n[:20]) for n in names if n[:20].isdigit()), default=-1)

    def read(self, name: str) -> DataFrame:
        return self.session.read.format("delta").load(self.path(name))

    # -- writes ------------------------------------------------------------------------------------
    def append(self, name: str, frame: DataFrame, app_id: str, batch_id: int, rows: int | None = None) -> None:
        """Append exactly once; ``rows``, when known, keeps a small frame to one file (``append_idempotent``)."""
        append_idempotent(self._columns(name, frame), self.path(name), f"{app_id}:{name}", batch_id, rows)

    def overwrite(self, name: str, frame: DataFrame, app_id: str, batch_id: int, rows: int) -> None:
        """Replace the table's rows with ``frame``'s, exactly once (``overwrite_idempotent``)."""
        overwrite_idempotent(self._columns(name, frame), self.path(name), f"{app_id}:{name}", batch_id, rows)

    def _columns(self, name: str, frame: DataFrame) -> DataFrame:
        """``frame`` as the table's columns; rows of a frame without ``cluster`` are the default cluster's."""
        from pyspark.sql import functions as F

        if "cluster" not in frame.columns:
            frame = frame.withColumn("cluster", F.lit(self.default_cluster))
        return frame.select(*column_names(name))

    def delete(self, name: str, condition: Column) -> None:
        """Delete the rows matching ``condition`` (idempotent by its own terms: see its callers)."""
        from delta.tables import DeltaTable

        DeltaTable.forPath(self.session, self.path(name)).delete(condition)

    def merge_upsert(
        self, name: str, frame: DataFrame, app_id: str, batch_id: int, delete_condition: str | None = None
    ) -> None:
        """Upsert rows on the table's key; rows matching ``delete_condition`` (on the source) delete."""
        from delta.tables import DeltaTable

        spec = TABLES[name]
        on = " AND ".join(f"t.`{k}` <=> s.`{k}`" for k in spec.key)
        values = {f"`{c}`": f"s.`{c}`" for c in column_names(name)}

        def statement(session: SparkSession) -> None:
            # The MERGE runs on ``session``, which carries its txn ids; the source may come from another session.
            align_auto_compaction_count(session, self.path(name))
            target = DeltaTable.forPath(session, self.path(name))
            merge = target.alias("t").merge(frame.alias("s"), on)
            if delete_condition:
                merge = merge.whenMatchedDelete(condition=delete_condition)
                merge = merge.whenMatchedUpdate(condition=f"NOT ({delete_condition})", set=values)
                merge = merge.whenNotMatchedInsert(condition=f"NOT ({delete_condition})", values=values)
            else:
                merge = merge.whenMatchedUpdate(set=values).whenNotMatchedInsert(values=values)
            merge.execute()

        merge_idempotent(frame.sparkSession, f"{app_id}:{name}", batch_id, statement)


def run_concurrently(writes: list[Callable[[], None]]) -> None:
    """Run independent table writes at the same time and raise the first failure once all have ended.

    A batch's writes go to different tables, each exactly once on its own (its own txn app id), so their
    order does not matter. Run one after another, most of each write's time is the driver alone (log
    replay planning, commit, checksum) or a handful of tasks, and the cores sit idle; run together, one
    write's tasks fill the gaps of another. Threads inherit the caller's Spark local properties
    (``InheritableThread``), so the jobs stay attributed to the streaming query.
    """
    from pyspark.util import InheritableThread

    failures: list[BaseException] = []

    def guarded(write: Callable[[], None]) -> None:
        try:
            write()
        except BaseException as failure:  # noqa: BLE001 - re-raised below, in the caller's thread
            failures.append(failure)

    threads = [InheritableThread(target=guarded, args=(write,)) for write in writes[1:]]
    for thread in threads:
        thread.start()
    if writes:
        guarded(writes[0])
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]
