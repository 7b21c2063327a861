"""Exactly-once writes into Delta from ``foreachBatch``.

``foreachBatch`` alone is at-least-once: after a crash Spark replays the interrupted micro-batch with the
same batch id. Delta makes the replay a no-op when every write carries the query's application id and the
batch id: appends through the ``txnAppId``/``txnVersion`` writer options (``append_idempotent``), MERGE
statements through the session settings ``spark.databricks.delta.write.txnAppId``/``txnVersion`` (MERGE
ignores writer options).
Each table records the highest (app id, version) it committed, so a table written twice per batch needs
two app ids (``app_id`` + a suffix per logical write).

A new checkpoint must use a new app id (see ``checkpoint_app_id``), or Delta would skip its writes as
duplicates of the old query's batches.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streaming.job.runtime.hadoop_files import read_whole, write_whole

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

_TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
_TXN_VERSION = "spark.databricks.delta.write.txnVersion"


def checkpoint_app_id(checkpoint_dir: str | Path, prefix: str = "rrm", session: Any = None) -> str:
    """A stable app id bound to one checkpoint: created with the checkpoint, reused on restart. With ``session``
    the marker file is read and written through Hadoop's FileSystem (any checkpoint URI), else on local disk."""
    if session is not None:
        jvm = session.sparkContext._jvm
        directory = jvm.org.apache.hadoop.fs.Path(str(checkpoint_dir))
        fs = directory.getFileSystem(session.sparkContext._jsc.hadoopConfiguration())
        remote = jvm.org.apache.hadoop.fs.Path(directory, "delta-txn-app-id")
        if fs.exists(remote):
            return read_whole(fs, remote).decode().strip()
        fs.mkdirs(directory)
        app_id = f"{prefix}-{uuid.uuid4()}"
        write_whole(fs, remote, (app_id + "\n").encode())
        return app_id
    marker = Path(checkpoint_dir) / "delta-txn-app-id"
    if marker.exists():
        return marker.read_text().strip()
    marker.parent.mkdir(parents=True, exist_ok=True)
    app_id = f"{prefix}-{uuid.uuid4()}"
    marker.write_text(app_id + "\n")
    return app_id


def sql_path(path: str) -> str:
    """The Delta table at ``path`` as a SQL table reference (``delta.`path```, backticks escaped)."""
    return "delta.`" + path.replace("`", "``") + "`"


# A write task per this many rows of a frame whose size is known (``append_idempotent``'s ``rows``).
ROWS_PER_WRITE_TASK = 250_000


def write_tasks(rows: int, rows_per_task: int = ROWS_PER_WRITE_TASK) -> int:
    """How many tasks (so files) an append of ``rows`` rows takes: one per ``rows_per_task``, at least one."""
    return max(1, -(-int(rows) // rows_per_task))


def append_idempotent(
    frame: DataFrame,
    path: str,
    app_id: str,
    batch_id: int,
    rows: int | None = None,
    rows_per_task: int = ROWS_PER_WRITE_TASK,
) -> bool:
    """Append ``frame`` to the Delta table at ``path`` once per (app_id, batch_id); False when the table had
    already committed that batch (or a later one) for ``app_id`` and nothing was written.

    The append is Delta's own (``txnAppId``/``txnVersion``, as ``frame.write`` with those options), through
    ``io.github.rrm.delta.IdempotentDeltaAppend``, which reads the committed version from the table's checksum
    file instead of replaying the log on every append (see that class).

    ``rows``, the frame's row count when the caller knows it, bounds the write to ``write_tasks(rows)`` tasks
    (a coalesce, so the frame should be cheap to read: a persisted batch, or rows after a shuffle). Without
    it Delta writes a file per partition of the frame, and the job's frames are a micro-batch's few result
    rows spread over every Kafka or shuffle partition: a send-ingest batch of a 16-partition topic added 16
    files to each of its two tables, each written by a task of its own (with its own writer and statistics
    set-up), so the batch took 3.7-3.9 s against 2.8 s coalesced, and auto compaction ran 16 times as often.
    """
    if rows is not None:
        frame = frame.coalesce(write_tasks(rows, rows_per_task))
    jvm = frame.sparkSession.sparkContext._jvm
    assert jvm is not None
    return bool(jvm.io.github.rrm.delta.IdempotentDeltaAppend.append(frame._jdf, path, app_id, int(batch_id)))


def overwrite_idempotent(frame: DataFrame, path: str, app_id: str, batch_id: int, rows: int) -> bool:
    """Replace the Delta table at ``path`` with ``frame`` (``rows`` rows) once per (app_id, batch_id), as
    ``append_idempotent`` appends; False when nothing was written. For a current table the driver holds whole:
    one small file written, where a MERGE of the same rows reads the table, joins and rewrites every file
    holding one of them."""
    frame = frame.coalesce(write_tasks(rows))
    jvm = frame.sparkSession.sparkContext._jvm
    assert jvm is not None
    return bool(jvm.io.github.rrm.delta.IdempotentDeltaAppend.overwrite(frame._jdf, path, app_id, int(batch_id)))


def read_latest(session: SparkSession, path: str) -> DataFrame:
    """The latest rows of the Delta table at ``path``, read from the files its checksum lists where it lists
    them (a table of at most 50 files), so without the log replay a Delta read of a just-written snapshot costs
    (``io.github.rrm.delta.ListedFilesRead``); otherwise Delta's own read."""
    from pyspark.sql import DataFrame

    jvm = session.sparkContext._jvm
    assert jvm is not None
    return DataFrame(jvm.io.github.rrm.delta.ListedFilesRead.latest(session._jsparkSession, path), session)


def align_auto_compaction_count(session: SparkSession, path: str) -> None:
    """Set the file count Delta's auto compaction decides on to the table's real one, before a write that is not
    ``append_idempotent`` (which does it itself): Delta counts in the driver's memory only the files this process
    added and removed, and after a restart compacted at every commit (``io.github.rrm.delta.AutoCompactionCount``)."""
    jvm = session.sparkContext._jvm
    assert jvm is not None
    jvm.io.github.rrm.delta.AutoCompactionCount.align(session._jsparkSession, path)


def isolated_session(session: SparkSession) -> SparkSession:
    """A clone of ``session``: the same SparkContext, settings, cache and temporary views, and settings of its
    own from then on (as Spark gives each streaming query a clone of the session that started it)."""
    from pyspark.sql import SparkSession

    return SparkSession(session.sparkContext, session._jsparkSession.cloneSession())


def merge_idempotent(
    session: SparkSession,
    app_id: str,
    batch_id: int,
    statement: Callable[[SparkSession], None],
) -> None:
    """Run a MERGE (or UPDATE/DELETE) once per (app_id, batch_id) via the session's txn settings.

    The settings go on a clone of ``session`` (``isolated_session``) made for this one statement, and
    ``statement`` must run on the session it is given. A session's settings are shared by every thread that
    uses it: on the driver's session, concurrent queries overwrote and unset each other's txn ids between
    ``set`` and the MERGE, and a replayed batch's MERGE was then applied a second time (the crash test caught
    exactly that in ``send_latency_minutes``); on the micro-batch's session, two MERGEs of one batch could
    only run one after the other. With a clone each, they run together.
    """
    own = isolated_session(session)
    own.conf.set(_TXN_APP_ID, app_id)
    own.conf.set(_TXN_VERSION, str(batch_id))
    statement(own)


def ensure_table(
    session: SparkSession,
    path: str,
    schema: StructType,
    partition_by: tuple[str, ...] = (),
    properties: Mapping[str, str] | None = None,
) -> None:
    """Create an empty Delta table of ``schema`` if none exists at ``path``."""
    from delta.tables import DeltaTable

    if DeltaTable.isDeltaTable(session, path):
        return
    remove_unfinished_creation(session, path)
    builder = DeltaTable.createIfNotExists(session).location(path).addColumns(schema)
    if partition_by:
        builder = builder.partitionedBy(*partition_by)
    for key, value in (properties or {}).items():
        builder = builder.property(key, value)
    builder.execute()


def remove_unfinished_creation(session: SparkSession, path: str) -> bool:
    """Remove what a table creation killed before its first commit left: a ``_delta_log`` holding no commit
    or checkpoint file in an otherwise empty table directory. Delta takes it for a table that does not exist
    and refuses to create one there, so a job killed while creating its tables could never start again.
    Anything more (data files, any version) is left for Delta's error to name. Whether it removed one."""
    jvm = session.sparkContext._jvm
    log = jvm.org.apache.hadoop.fs.Path(path, "_delta_log")
    fs = log.getFileSystem(session.sparkContext._jsc.hadoopConfiguration())
    if not fs.isDirectory(log):
        return False
    beside = [s.getPath().getName() for s in fs.listStatus(log.getParent())]
    versions = [n for s in fs.listStatus(log) if (n := s.getPath().getName())[:20].isdigit()]
    if beside != ["_delta_log"] or versions:
        return False
    return bool(fs.delete(log, True))
