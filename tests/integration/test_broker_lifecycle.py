"""The session broker is stopped by PID when a pytest session ends, and leaves its port free."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from connectors.processes import pid_alive, port_is_open


def _run_child_session(tmp_path: Path, name: str) -> dict[str, int]:
    out = tmp_path / f"{name}.json"
    probe = Path(__file__).with_name("broker_session_probe.py")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(probe)],
        env=dict(os.environ, RRM_PROBE_OUT=str(out)),
        capture_output=True,
        text=True,
        cwd=Path(__file__).parents[2],
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(out.read_text())


def test_each_sessions_broker_is_gone_and_its_port_free_and_two_in_a_row_do_not_collide(tmp_path):
    first = _run_child_session(tmp_path, "first")
    assert not pid_alive(first["pid"])
    assert not port_is_open(first["port"])
    second = _run_child_session(tmp_path, "second")
    assert first["pid"] != second["pid"]
    assert not pid_alive(second["pid"]) and not port_is_open(second["port"])
