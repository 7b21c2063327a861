"""Writing micro-batch results into the Delta tables of ``tables.TABLES``, exactly once.

Every function here is called from a ``foreachBatch`` with the batch id and the query's app id. History
tables are appended with ``txnAppId = <app id>:<table>`` and ``txnVersion = batch id`` (one app id per
table and query, because Delta records the last version per app id and table); current tables are
overwritten under the same writer options, or MERGEd under the same ids through the session settings. A
replayed batch therefore changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
    read_latest,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType


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

    def upsert(self, name: str, changes: DataFrame, app_id: str, batch_id: int, deleted: str) -> None:
        """Apply ``changes`` (at most one per key of the table) exactly once: a change whose ``deleted`` column is
        true deletes its key's row, any other replaces or adds it. The table is rewritten whole in one Spark job
        (``overwrite_idempotent``): its rows of keys ``changes`` does not name, then the changed rows. Rows the
        batch leaves alone keep every column, ``batch_id`` included, as a MERGE copies them; the change feed
        shows the batch as a delete and an insert of every row."""
        from functools import reduce

        from pyspark.sql import functions as F

        key = TABLES[name].key
        named = self._columns(name, changes).select(*[F.col(k).alias(f"_changed_{k}") for k in key])
        # Read on the changes' session: the overwrite commits on it, with the snapshot the read resolved.
        current = read_latest(changes.sparkSession, self.path(name))
        same_key = reduce(lambda a, b: a & b, [current[k].eqNullSafe(named[f"_changed_{k}"]) for k in key])
        kept = current.join(F.broadcast(named), same_key, "left_anti").select(*column_names(name))
        rows = kept.unionByName(self._columns(name, changes.where(~F.col(deleted))))
        # ``rows`` 1 stands for "one write task": the table stays one file, read and rewritten by one task.
        overwrite_idempotent(rows, self.path(name), f"{app_id}:{name}", batch_id, rows=1)

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


def local_frame(session: SparkSession, rows: Sequence[Sequence[Any]], schema: StructType) -> DataFrame:
    """``session.createDataFrame(rows, schema)`` (the same checks, conversions and values) without a Python worker.

    PySpark hands a list's pickled rows to the JVM through an identity ``map`` on its parallelized RDD, so every
    write of a frame of driver-held rows ran a Python worker per partition, its CPU and start-up on top of the
    write's; the JVM unpickles the same bytes here as that worker's output would be unpickled."""
    from pyspark.sql import DataFrame
    from pyspark.sql.types import _make_type_verifier

    verify = _make_type_verifier(schema)
    internal = []
    for row in rows:
        verify(row)
        internal.append(schema.toInternal(row))
    jvm = session.sparkContext._jvm
    assert jvm is not None
    pickled = session.sparkContext.parallelize(internal, 1)._jrdd  # pickled lists of rows, read by the JVM
    objects = jvm.org.apache.spark.api.python.SerDeUtil.pythonToJava(pickled, True)
    arrays = jvm.org.apache.spark.api.python.SerDeUtil.toJavaArray(objects)
    frame = DataFrame(session._jsparkSession.applySchemaToPythonRDD(arrays.rdd(), schema.json()), session)
    frame._schema = schema
    return frame


def run_concurrently(writes: list[Callable[[], None]]) -> None:
    """Run independent table writes at the same time and raise the first failure once all have ended.

    A batch's writes go to different tables, each exactly once on its own (its own txn app id), so their
    order does not matter. Run one after another, most of each write's time is the driver alone (log
    replay planning, commit, checksum) or a handful of tasks, and the cores sit idle; run together, one
    write's tasks fill the gaps of another. Threads inherit the caller's Spark local properties
    (``InheritableThread``), so the jobs stay attributed to the streaming query.
    """
    if not writes:
        return
    pending = start_concurrently(writes[1:])
    failure = _guarded(writes[0])
    failure = pending.wait() or failure
    if failure is not None:
        raise failure


class PendingWrites:
    """Writes running in threads of their own (``start_concurrently``) until ``wait``."""

    def __init__(self, writes: list[Callable[[], None]]) -> None:
        from pyspark.util import InheritableThread

        self.failures: list[BaseException] = []
        self.threads = [InheritableThread(target=self._run, args=(write,)) for write in writes]
        for thread in self.threads:
            thread.start()

    def _run(self, write: Callable[[], None]) -> None:
        failure = _guarded(write)
        if failure is not None:
            self.failures.append(failure)

    def wait(self) -> BaseException | None:
        """Wait until every write has ended; the first failure, None if all succeeded (nothing is raised)."""
        for thread in self.threads:
            thread.join()
        return self.failures[0] if self.failures else None


def start_concurrently(writes: list[Callable[[], None]]) -> PendingWrites:
    """Start independent table writes (as ``run_concurrently`` runs them) and return at once: the caller goes on
    with work of its own and ``wait``s for them."""
    return PendingWrites(writes)


def _guarded(write: Callable[[], None]) -> BaseException | None:
    try:
        write()
    except BaseException as failure:  # noqa: BLE001 - handed back, raised by the caller in its own thread
        return failure
    return None
