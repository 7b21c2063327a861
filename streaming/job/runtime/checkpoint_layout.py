"""The shard count a consumer checkpoint's state is keyed by, recorded beside it and checked at every start.

The consumer query keys its state by ``hash(group) mod [membership] shards``. Started on the same checkpoint
with another count, a group's events reach a shard without its state while its old shard keeps it for good: a
second, empty membership and an old one that never changes again. So the count is written to
``<checkpoint>/rrm-consumer-layout.json`` (through Hadoop's FileSystem, any checkpoint URI) at the first start,
and a start with another count is refused. A checkpoint from before the file existed records the count it is
started with. (send-ingest's fault items record their ``[producers] state_shards`` in their own state files:
``sends.fault_replay.check_state_shards``.)
"""

from __future__ import annotations

import json
from typing import Any

from streaming.domain.errors import MonitorError
from streaming.job.runtime.hadoop_files import read_whole, write_whole

LAYOUT_FILE = "rrm-consumer-layout.json"


class CheckpointLayoutError(MonitorError):
    """A setting the checkpoint's state depends on differs from the one it was written with."""


def check_shard_layout(session: Any, checkpoint: str, shards: int) -> None:
    """Record ``shards`` for ``checkpoint``, or raise ``CheckpointLayoutError`` if it holds another count."""
    jvm = session.sparkContext._jvm
    hadoop_path = jvm.org.apache.hadoop.fs.Path
    root = hadoop_path(checkpoint)
    fs = root.getFileSystem(session.sparkContext._jsc.hadoopConfiguration())
    layout = hadoop_path(root, LAYOUT_FILE)
    if fs.exists(layout):
        recorded = int(json.loads(read_whole(fs, layout))["shards"])
        if recorded != shards:
            raise CheckpointLayoutError(
                f"[membership] shards is {shards}, but the consumer checkpoint {checkpoint} keys its state by "
                f"{recorded} shards: set it back to {recorded}, or start on a new checkpoint_root (memberships "
                "then rebuild from the next heartbeats and polls)"
            )
        return
    fs.mkdirs(root)
    write_whole(fs, layout, json.dumps({"shards": shards}).encode())


def checkpoint_used(session: Any, checkpoint: str) -> bool:
    """Whether a query has ever started on ``checkpoint``: Spark's ``metadata`` or the Delta writers' app id
    (``delta-txn-app-id``, made before the query starts) is there. A query writes its tables only after both."""
    jvm = session.sparkContext._jvm
    root = jvm.org.apache.hadoop.fs.Path(checkpoint)
    fs = root.getFileSystem(session.sparkContext._jsc.hadoopConfiguration())
    return any(fs.exists(jvm.org.apache.hadoop.fs.Path(root, name)) for name in ("metadata", "delta-txn-app-id"))
