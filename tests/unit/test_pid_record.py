"""The local servers' PID record (``localenv/pid_record.py``) with real processes: read back only while its PID
lives, the server stopped by that PID when it never became ready, the record of secrets private."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from connectors.processes import pid_alive
from localenv.pid_record import PidRecord


@dataclass(frozen=True)
class Info:
    pid: int
    port: int


class NeverReady(RuntimeError):
    pass


def sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)


def test_a_record_is_read_while_its_process_lives_and_stop_ends_it(tmp_path: Path) -> None:
    record = PidRecord(tmp_path / "server.json", Info, RuntimeError, "test server")
    process = sleeper()
    info = record.started(Info(process.pid, 1234), lambda: None)
    assert record.read() == info == Info(process.pid, 1234)
    assert record.stop(timeout_s=5) is True
    process.wait(timeout=10)
    assert not pid_alive(process.pid) and not record.path.exists()
    assert record.read() is None and record.stop() is False


def test_a_record_whose_process_is_gone_is_ignored(tmp_path: Path) -> None:
    record = PidRecord(tmp_path / "server.json", Info, RuntimeError, "test server")
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait(timeout=10)
    record.path.write_text(f'{{"pid": {process.pid}, "port": 1}}')
    assert record.read() is None
    record.path.write_text("not json")
    assert record.read() is None


def test_a_server_that_never_becomes_ready_is_stopped_by_its_pid(tmp_path: Path) -> None:
    record = PidRecord(tmp_path / "server.json", Info, RuntimeError, "test server", private=True)
    process = sleeper()

    def wait_ready() -> None:
        assert record.path.stat().st_mode & 0o777 == 0o600  # written before the wait, readable by its owner only
        raise NeverReady("no answer on the port")

    with pytest.raises(NeverReady):
        record.started(Info(process.pid, 1), wait_ready)
    process.wait(timeout=10)
    assert not record.path.exists()
