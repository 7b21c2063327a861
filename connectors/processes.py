"""Local processes and ports: a free port, whether one listens, whether a PID lives, and stopping one by PID.

Everything the project starts (the collector's JVM, the local Kafka broker, RocketMQ, Spark and Prometheus)
is stopped by the PID it recorded, never by name, so one machine can run several copies side by side.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def port_is_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.5)
        return probe.connect_ex((host, port)) == 0


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child still answers kill(0); reap it if it is ours.
    try:
        reaped, _ = os.waitpid(pid, os.WNOHANG)
        return reaped == 0
    except ChildProcessError:
        return Path(f"/proc/{pid}").exists() and "zombie" not in _proc_state(pid)


def stop_process(pid: int, timeout_s: float) -> bool:
    """SIGTERM, then SIGKILL after ``timeout_s``; True once the process is gone, False if even SIGKILL failed."""
    for sig, wait_s in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 10.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return True
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if not pid_alive(pid):
                return True
            time.sleep(0.2)
    return False


def _proc_state(pid: int) -> str:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("State:"):
                return line.lower()
    except OSError:
        pass
    return ""
