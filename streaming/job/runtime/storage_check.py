"""Before the job starts Spark: can it write its Delta tables and checkpoints where the configuration says?

A job that cannot write there fails anyway, but only after Spark has started, with a JVM stack trace that
hides the cause. Checked first, an unwritable directory, a path through a regular file or a full disk is one
line naming the path and the reason. Only local paths are checked (a URI with a scheme other than
``file:`` is left to its file system's own client).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from urllib.parse import urlparse

from streaming.domain.errors import MonitorError

# Below this much free space a Delta commit or a state-store snapshot may fail half-way through a batch.
MIN_FREE_BYTES = 64 * 1024 * 1024


class StorageError(MonitorError):
    """A configured storage location the job cannot write to; the message is one line."""


def local_path(location: str) -> Path | None:
    """The local directory of ``location`` (a path or a ``file:`` URI), or None for a remote URI."""
    parsed = urlparse(location)
    if parsed.scheme in ("", "file"):
        return Path(parsed.path if parsed.scheme == "file" else location)
    return None


def check_writable(location: str, role: str, min_free_bytes: int = MIN_FREE_BYTES) -> None:
    """Create ``location`` if needed, write and remove a file in it, and check its free space; raise
    ``StorageError`` (``role`` says what the directory is for) if any of it fails."""
    path = local_path(location)
    if path is None:
        return
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".rrm-write-check-") as probe:
            probe.write(b"\0" * 4096)
            probe.flush()
            os.fsync(probe.fileno())
        free = shutil.disk_usage(path).free
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise StorageError(f"cannot write the {role} at {location}: {reason}") from None
    if free < min_free_bytes:
        raise StorageError(
            f"the {role} at {location} has {free // (1024 * 1024)} MiB free, below the "
            f"{min_free_bytes // (1024 * 1024)} MiB a batch's commits need"
        )
