"""A real Prometheus server run by the project itself (tests and local checks of rules and dashboards).

The binary is Debian's ``prometheus`` package unpacked into ``.cache/prometheus`` by
``scripts/install_observability_tools.sh`` (no service scripts). The server listens on 127.0.0.1 only, keeps
its generated configuration, TSDB and log under one directory, scrapes the given targets, evaluates the given
rule files, and is stopped by the PID it wrote -- like ``localenv.kafka_broker``.

Lifecycle: constructing a ``LocalPrometheus`` opens nothing; ``start()`` writes the configuration, launches
the server and waits until it is ready; ``stop()`` sends SIGTERM, waits, and escalates to SIGKILL.
``query()`` and ``alerts()`` read its HTTP API.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from connectors import jvm_artifacts
from connectors.processes import free_port, port_is_open
from localenv.pid_record import PidRecord

BIN_DIR = jvm_artifacts.PROJECT_ROOT / ".cache" / "prometheus" / "usr" / "bin"
PROMETHEUS = BIN_DIR / "prometheus"
PROMTOOL = BIN_DIR / "promtool"
_STATE_FILE = "prometheus.json"


class PrometheusError(RuntimeError):
    """The local Prometheus could not be started, reached or stopped; the message says why."""


@dataclass(frozen=True)
class ScrapeTarget:
    job: str
    address: str  # host:port
    metrics_path: str = "/metrics"


@dataclass(frozen=True)
class PrometheusInfo:
    pid: int
    port: int
    home: str

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def _yaml_list(items: Sequence[str]) -> str:
    return "[" + ", ".join(json.dumps(i) for i in items) + "]"


class LocalPrometheus:
    """One Prometheus on 127.0.0.1 with its configuration and data under ``home``."""

    def __init__(
        self,
        home: Path | str,
        targets: Sequence[ScrapeTarget],
        rule_files: Sequence[Path | str] = (),
        scrape_interval: str = "15s",
        evaluation_interval: str | None = None,
        port: int | None = None,
        binary: Path = PROMETHEUS,
    ) -> None:
        self.home = Path(home).resolve()
        self.targets = tuple(targets)
        self.rule_files = tuple(Path(r).resolve() for r in rule_files)
        self.scrape_interval = scrape_interval
        self.evaluation_interval = evaluation_interval or scrape_interval
        self._port = port
        self.binary = Path(binary)

    @property
    def _record(self) -> PidRecord[PrometheusInfo]:
        return PidRecord(self.home / _STATE_FILE, PrometheusInfo, PrometheusError, "Prometheus")

    def info(self) -> PrometheusInfo | None:
        """The running server recorded under ``home``, or None (stale records are ignored)."""
        return self._record.read()

    def config_text(self) -> str:
        lines = [
            "global:",
            f"  scrape_interval: {self.scrape_interval}",
            f"  evaluation_interval: {self.evaluation_interval}",
            f"rule_files: {_yaml_list([str(r) for r in self.rule_files])}",
            "scrape_configs:",
        ]
        for target in self.targets:
            lines += [
                f"  - job_name: {json.dumps(target.job)}",
                f"    metrics_path: {json.dumps(target.metrics_path)}",
                f"    static_configs: [{{targets: {_yaml_list([target.address])}}}]",
            ]
        return "\n".join(lines) + "\n"

    def start(self, timeout_s: float = 60.0) -> PrometheusInfo:
        running = self.info()
        if running is not None:
            return running
        if not self.binary.exists():
            raise PrometheusError(f"{self.binary} is missing: run make setup-test")
        port = self._port or free_port()
        if port_is_open(port):
            raise PrometheusError(f"port {port} on 127.0.0.1 is already in use; choose another")
        self.home.mkdir(parents=True, exist_ok=True)
        config = self.home / "prometheus.yml"
        config.write_text(self.config_text())
        log = open(self.home / "prometheus.log", "ab")  # noqa: SIM115 - owned by the child process
        process = subprocess.Popen(
            [
                str(self.binary),
                f"--config.file={config}",
                f"--storage.tsdb.path={self.home / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--storage.tsdb.retention.time=1d",
                "--web.enable-lifecycle",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        info = PrometheusInfo(process.pid, port, str(self.home))
        return self._record.started(info, lambda: self._wait_ready(info, process, timeout_s))

    def stop(self, timeout_s: float = 20.0) -> bool:
        """Stop the server by PID; True if one was running."""
        return self._record.stop(timeout_s)

    def _wait_ready(self, info: PrometheusInfo, process: subprocess.Popen[bytes], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise PrometheusError(
                    f"Prometheus exited with code {process.returncode}; see {self.home / 'prometheus.log'}"
                )
            try:
                with urllib.request.urlopen(f"{info.url}/-/ready", timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.3)
        raise PrometheusError(f"Prometheus not ready after {timeout_s:.0f}s; see {self.home / 'prometheus.log'}")

    # -- HTTP API -------------------------------------------------------------------------------------
    def _get(self, path: str, **params: str) -> Any:
        info = self.info()
        if info is None:
            raise PrometheusError("Prometheus is not running")
        url = f"{info.url}{path}" + (("?" + urllib.parse.urlencode(params)) if params else "")
        with urllib.request.urlopen(url, timeout=10) as response:
            body = json.loads(response.read().decode())
        if body.get("status") != "success":
            raise PrometheusError(f"{path} {params}: {body.get('error')}")
        return body["data"]

    def query(self, promql: str) -> list[dict[str, Any]]:
        """An instant query's result (a vector's samples, or a scalar as one sample)."""
        data = self._get("/api/v1/query", query=promql)
        if data["resultType"] in ("scalar", "string"):
            return [{"metric": {}, "value": data["result"]}]
        return list(data["result"])

    def query_range(self, promql: str, seconds: int, step: str = "5s") -> list[dict[str, Any]]:
        now = time.time()
        data = self._get("/api/v1/query_range", query=promql, start=str(now - seconds), end=str(now), step=step)
        return list(data["result"])

    def alerts(self) -> list[dict[str, Any]]:
        return list(self._get("/api/v1/alerts")["alerts"])

    def targets_health(self) -> list[dict[str, Any]]:
        return list(self._get("/api/v1/targets")["activeTargets"])
