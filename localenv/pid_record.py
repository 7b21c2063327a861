"""The PID record of a local server started as one process (Kafka, Prometheus, s3proxy): a JSON file under the
server's home, written once the process is launched, read back only while that PID lives, and removed when the
server is stopped by it."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any, Generic, TypeVar

from connectors.processes import pid_alive, stop_process

Info = TypeVar("Info")


class PidRecord(Generic[Info]):
    """``path`` holds an ``Info`` dataclass (with a ``pid`` field) of the running server; ``error`` is raised,
    naming ``what``, when the process outlives even SIGKILL. ``private``: the file holds secrets (mode 600)."""

    def __init__(
        self, path: Path, info_type: type[Info], error: type[Exception], what: str, private: bool = False
    ) -> None:
        self.path = path
        self._info_type = info_type
        self._error = error
        self._what = what
        self._private = private

    def read(self) -> Info | None:
        """The recorded server if its process is alive, else None (a stale or unreadable record is ignored)."""
        try:
            info = self._info_type(**json.loads(self.path.read_text()))
        except (OSError, ValueError, TypeError):
            return None
        return info if pid_alive(_pid(info)) else None

    def started(self, info: Info, wait_ready: Callable[[], None]) -> Info:
        """Record a launched server, then wait until it is ready; on any failure stop it by its PID and re-raise."""
        self.path.write_text(json.dumps(asdict(info)))  # type: ignore[call-overload]
        if self._private:
            self.path.chmod(0o600)
        try:
            wait_ready()
        except BaseException:
            self.stop()
            raise
        return info

    def stop(self, timeout_s: float = 20.0) -> bool:
        """Stop the recorded server by PID (SIGTERM, then SIGKILL); True if one was running."""
        info = self.read()
        self.path.unlink(missing_ok=True)
        if info is None:
            return False
        if stop_process(_pid(info), timeout_s):
            return True
        raise self._error(f"{self._what} pid {_pid(info)} did not exit after SIGKILL")


def _pid(info: Any) -> int:
    return int(info.pid)
