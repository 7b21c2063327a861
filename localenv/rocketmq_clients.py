"""Real RocketMQ client processes (the project's test clients, ``jvm/testclients``), read from their own output.

``ClientProcess("5", "consumer", group=..., topics=...)`` starts a small JVM (``-Xmx128m -XX:+UseSerialGC
-XX:TieredStopAtLevel=1``: about 100 MB) running a push consumer, a producer or the send benchmark of RocketMQ
client line ``"4.9"`` or ``"5"``, with the client agent on its classpath. The process prints JSON lines (what the
client itself holds: its queues, its latency-fault items); a reader thread collects them, ``wait_for`` waits for
one that matches. ``terminate``/``kill``/``freeze``/``thaw`` send SIGTERM/SIGKILL/SIGSTOP/SIGCONT, so tests can
stop or freeze a client as a crash or a long GC would. Separate processes are what duplicate client ids need
(one JVM shares one client instance per id). ``consumer_process`` builds a push consumer with explicit client
timings (``TEST_SPEED``'s by default). Used by ``demo --rocketmq`` and by the tests.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from localenv import agent_artifacts
from localenv.rocketmq_cluster import TEST_SPEED, TestSpeedOptions

SMALL_JVM = ("-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.net.preferIPv4Stack=true")
Line = dict[str, Any]


class ClientProcessError(RuntimeError):
    """The client process exited or did not print what was waited for; the message has its stderr's tail."""


class ClientProcess:
    """A test client JVM: ``mode`` is ``consumer``, ``producer`` or ``bench``; ``options`` its ``--name value``s."""

    def __init__(
        self,
        line: str,
        mode: str,
        log_dir: Path,
        *,
        agent: Mapping[str, str] | None = None,
        jvm_properties: Mapping[str, str] | None = None,
        **options: object,
    ) -> None:
        self.line, self.mode = line, mode
        self.log_dir = Path(log_dir)
        self.agent = dict(agent) if agent is not None else None
        self.jvm_properties = dict(jvm_properties or {})
        self.options = {
            k.replace("_", "-"): str(v).lower() if isinstance(v, bool) else str(v)
            for k, v in options.items()
            if v is not None
        }
        self.lines: list[Line] = []
        self._changed = threading.Condition()
        self._process: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None
        self.started: Line | None = None

    def command(self) -> list[str]:
        classpath = os.pathsep.join(str(p) for p in agent_artifacts.client_classpath(self.line))
        properties = {
            "rocketmq.client.logRoot": str(self.log_dir / "rocketmq-logs"),
            "rocketmq.client.logLevel": "WARN",
            **self.jvm_properties,
        }
        if self.agent is not None:
            properties.update({f"rrm.agent.{k}": v for k, v in self.agent.items()})
        flat = [item for name, value in self.options.items() for item in (f"--{name}", value)]
        return [
            "java",
            *SMALL_JVM,
            *(f"-D{k}={v}" for k, v in properties.items()),
            "-cp",
            classpath,
            agent_artifacts.TEST_CLIENT_MAIN,
            self.mode,
            *flat,
            *(["--agent", "true"] if self.agent is not None and self.mode != "bench" else []),
        ]

    def start(self, timeout_s: float = 60.0) -> ClientProcess:
        """Start the JVM and wait for its ``started`` line (for ``bench``: nothing to wait for)."""
        self.launch()
        if self.mode != "bench":
            self.started = self.wait_for(lambda line: line["kind"] == "started", timeout_s)
        return self

    def launch(self) -> int:
        """Start the JVM without waiting for it; its PID."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        stderr = open(self.log_dir / f"{self.mode}-{time.monotonic_ns()}.stderr", "w")  # noqa: SIM115
        self._stderr_path = Path(stderr.name)
        self._process = subprocess.Popen(
            self.command(), stdout=subprocess.PIPE, stderr=stderr, text=True, start_new_session=True
        )
        stderr.close()
        self._reader = threading.Thread(target=self._read, name=f"client-{self.mode}", daemon=True)
        self._reader.start()
        return self._process.pid

    def _read(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        for text in self._process.stdout:
            text = text.strip()
            if not text.startswith("{"):
                continue
            line = json.loads(text)
            with self._changed:
                self.lines.append(line)
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    @property
    def pid(self) -> int:
        assert self._process is not None, "not started"
        return self._process.pid

    @property
    def client_id(self) -> str:
        assert self.started is not None, "not started"
        return self.started["client_id"]

    def of_kind(self, kind: str) -> list[Line]:
        with self._changed:
            return [line for line in self.lines if line["kind"] == kind]

    def last(self, kind: str) -> Line | None:
        found = self.of_kind(kind)
        return found[-1] if found else None

    def wait_for(self, predicate: Callable[[Line], bool], timeout_s: float, *, after: int = 0) -> Line:
        """The first line (from index ``after``) for which ``predicate`` holds, waiting up to ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while True:
                for line in self.lines[after:]:
                    if predicate(line):
                        return line
                remaining = deadline - time.monotonic()
                if remaining <= 0 or (
                    self._process is not None
                    and self._process.poll() is not None
                    and not (self._reader and self._reader.is_alive())
                ):
                    raise ClientProcessError(
                        f"{self.mode} ({self.line}): no matching line in {timeout_s} s; "
                        f"exit {self._process.poll() if self._process else None}; "
                        f"stderr: {self.stderr_tail()}"
                    )
                self._changed.wait(min(remaining, 0.5))

    def wait_exit(self, timeout_s: float) -> int:
        assert self._process is not None
        code = self._process.wait(timeout_s)
        if self._reader is not None:
            self._reader.join(5)
        return code

    def stderr_tail(self, chars: int = 2000) -> str:
        path = getattr(self, "_stderr_path", None)
        return path.read_text(errors="replace")[-chars:] if path and path.exists() else ""

    def signal(self, sig: signal.Signals) -> None:
        if self._process is not None and self._process.poll() is None:
            os.kill(self._process.pid, sig)

    def terminate(self) -> None:
        self.signal(signal.SIGTERM)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)

    def freeze(self) -> None:
        self.signal(signal.SIGSTOP)

    def thaw(self) -> None:
        self.signal(signal.SIGCONT)

    def stop(self, grace_s: float = 20.0) -> None:
        """SIGTERM (after SIGCONT, in case it is frozen), then SIGKILL after ``grace_s``."""
        if self._process is None or self._process.poll() is not None:
            return
        self.thaw()
        self.terminate()
        try:
            self._process.wait(grace_s)
        except subprocess.TimeoutExpired:
            self.kill()
            self._process.wait(10)

    def __enter__(self) -> ClientProcess:
        return self.start() if self._process is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def consumer_process(
    line: str,
    log_dir: Path,
    *,
    namesrv: str,
    group: str,
    topics: str,
    instance_name: str,
    client_ip: str | None = None,
    strategy: str = "AVG",
    model: str = "CLUSTERING",
    timings: TestSpeedOptions = TEST_SPEED,
    agent: Mapping[str, str] | None = None,
    client_rebalance: bool = True,
) -> ClientProcess:
    """A push consumer of client line ``line`` (not started) subscribing ``topics`` (comma-separated), with the
    heartbeat interval and rebalance wait interval of ``timings`` set on it explicitly, and the client agent's
    reporter when ``agent`` gives its settings. ``client_rebalance=False`` (line 5 only): the consumer asks the
    broker for its queues (``QUERY_ASSIGNMENT``), and pops them when the broker has the group in POP mode."""
    return ClientProcess(
        line,
        "consumer",
        log_dir,
        agent=agent,
        jvm_properties=timings.client_jvm_properties(),
        namesrv=namesrv,
        group=group,
        topics=topics,
        strategy=strategy,
        model=model,
        instance_name=instance_name,
        client_ip=client_ip,
        heartbeat_ms=timings.client_heartbeat_interval_ms,
        client_rebalance=None if client_rebalance else False,
    )
