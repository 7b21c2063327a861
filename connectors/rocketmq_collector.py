"""The collector (``rebalance-monitor collect``) as a supervised JVM process.

The poll cycle runs in the JVM (``jvm/collector``: RocketMQ's own admin client and kafka-clients, see
docs/design/collector.md); this module turns the monitor's typed configuration into the collector's settings
file (private, removed when the process ends: it may hold ACL and Kafka secrets), launches the JVM, stops it by
PID and, for ``collect``, restarts it after a crash with a growing pause. Tests and benchmarks drive the same
``CollectorProcess``.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from connectors import jvm_artifacts
from connectors.jvm_cds import SharedClasses
from connectors.processes import pid_alive, stop_process
from streaming.config import MonitorConfig
from streaming.contract.events import EventType

MAIN_CLASS = "io.github.rrm.collector.Collector"
# The local cluster's admin commands (``localenv.rocketmq_cluster``), on the collector's class path.
ADMIN_MAIN_CLASS = "io.github.rrm.collector.ClusterAdmin"
# The event types the collector publishes, each to the topic its ``topic.<type>`` property names.
COLLECTOR_EVENTS = (
    EventType.CONSUMER_CONNECTIONS,
    EventType.REPORTED_ASSIGNMENT,
    EventType.TOPIC_ROUTE,
    EventType.CONSUME_PROGRESS,
)
# The collector's exit code when it cannot name its cluster (``ClusterName.EXIT_CODE``): a configuration error,
# which a restart would only repeat.
CONFIG_ERROR_EXIT = 78
_SERIES = re.compile(r"^(?P<name>[a-z_]+(?:\{[^}]*\})?) (?P<value>\S+)$")


def collector_settings(config: MonitorConfig, max_cycles: int = 0, metrics_port: int | None = None) -> dict[str, str]:
    """The collector's settings (``CollectorConfig.java`` reads them) from the monitor's configuration."""
    c = config.collector
    settings = {
        "namesrv.addr": c.namesrv_addr.replace(" ", ""),
        "collector.id": c.collector_id,
        "cluster": c.cluster,
        "poll.interval.ms": str(c.poll_interval_ms),
        "stale.after.ms": str(c.effective_stale_after_ms),
        "running.info.interval.ms": str(c.running_info_interval_ms),
        "running.info.after.change.ms": str(c.running_info_after_change_ms),
        "running.info.after.change.groups": str(c.running_info_after_change_groups),
        "route.republish.interval.ms": str(c.route_republish_interval_ms),
        "admin.timeout.ms": str(c.admin_timeout_ms),
        "concurrency": str(c.concurrency),
        "in.flight.per.broker": str(c.in_flight_per_broker),
        "running.info.per.cycle": str(c.running_info_per_cycle),
        "groups.include": ",".join(c.include_groups),
        "groups.exclude": ",".join(c.exclude_groups),
        "shard.index": str(c.shard_index),
        "shard.count": str(c.shard_count),
        "access.key": c.access_key,
        "secret.key": c.secret_key,
        "metrics.host": c.metrics_host,
        "metrics.port": str(c.metrics_port if metrics_port is None else metrics_port),
        "summary.interval.ms": str(c.summary_interval_ms),
        "progress.interval.ms": str(c.progress_interval_ms),
        "progress.in.flight.per.broker": str(c.progress_in_flight_per_broker),
        "progress.min.offset.every": str(c.progress_min_offset_every),
        "max.event.bytes": str(config.ingest.max_event_bytes),
        "max.cycles": str(max_cycles),
        **{f"topic.{t}": config.kafka.topics.of(t) for t in COLLECTOR_EVENTS},
        "kafka.bootstrap.servers": config.kafka.bootstrap_servers.replace(" ", ""),
    }
    settings.update({f"kafka.{key}": value for key, value in config.kafka.options.items()})
    return settings


def _properties_text(settings: dict[str, str]) -> str:
    def escape(text: str) -> str:
        out = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("=", "\\=")
        return out.replace(":", "\\:").replace("#", "\\#").replace("!", "\\!")

    return "".join(f"{escape(k)}={escape(v)}\n" for k, v in settings.items())


def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text as ``{'rmqcol_problems_total{kind="x"}': 3.0, ...}``."""
    series = {}
    for line in text.splitlines():
        match = _SERIES.match(line)
        if match and not line.startswith("#"):
            series[match.group("name")] = float(match.group("value"))
    return series


class CollectorProcess:
    """One collector JVM: started with ``start()``, stopped by PID with ``stop()``; logs to ``log_path``."""

    def __init__(
        self, config: MonitorConfig, work_dir: Path | str, max_cycles: int = 0, metrics_port: int | None = None
    ) -> None:
        self.config = config
        self.work_dir = Path(work_dir).resolve()
        self.max_cycles = max_cycles
        self.metrics_port = config.collector.metrics_port if metrics_port is None else metrics_port
        self.log_path = self.work_dir / "collector.log"
        self.process: subprocess.Popen[bytes] | None = None
        self._settings_dir: str | None = None

    def command(self, settings_path: Path) -> list[str]:
        # The admin commands' shared classes (the same class path: RocketMQ's admin client), if made yet.
        shared = SharedClasses(ADMIN_MAIN_CLASS, jvm_artifacts.collector_classpath(), make=False)
        return [
            "java",
            *shared.options,
            f"-Xmx{self.config.collector.heap}",
            "-XX:+UseSerialGC",
            f"-Duser.home={self.work_dir}",
            "-Djava.net.preferIPv4Stack=true",
            "-cp",
            jvm_artifacts.collector_classpath(),
            MAIN_CLASS,
            str(settings_path),
        ]

    def start(self, stderr: int | None = None) -> int:
        """Launch the JVM; its log goes to ``log_path`` unless ``stderr`` (e.g. None for the terminal) is given."""
        jvm_artifacts.jars("collector")
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self._settings_dir = tempfile.mkdtemp(prefix="rrm-collector-")  # mode 0700
        settings_path = Path(self._settings_dir) / "collector.properties"
        settings = collector_settings(self.config, self.max_cycles, self.metrics_port)
        descriptor = os.open(settings_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            file.write(_properties_text(settings))
        log = open(self.log_path, "ab") if stderr is None else None  # noqa: SIM115 - owned by the child
        self.process = subprocess.Popen(
            self.command(settings_path),
            stdin=subprocess.DEVNULL,
            stdout=log if log is not None else None,
            stderr=subprocess.STDOUT if log is not None else stderr,
            start_new_session=True,
        )
        return self.process.pid

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def wait(self, timeout_s: float | None = None) -> int:
        assert self.process is not None
        code = self.process.wait(timeout_s)
        self._forget_settings()
        return code

    def stop(self, grace_s: float = 20.0) -> None:
        """SIGTERM (the collector flushes Kafka and exits), SIGKILL after ``grace_s``."""
        if self.process is not None and pid_alive(self.process.pid):
            stop_process(self.process.pid, grace_s)
        if self.process is not None:
            self.process.poll()
        self._forget_settings()

    def metrics(self, timeout_s: float = 5.0) -> dict[str, float]:
        """The collector's counters from its endpoint."""
        url = f"http://{self.config.collector.metrics_host}:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=timeout_s) as response:  # noqa: S310 - our own 127.0.0.1 endpoint
            return parse_metrics(response.read().decode())

    def wait_polling(self, timeout_s: float = 120.0) -> None:
        """Wait until the collector has completed a poll cycle (read from its metrics endpoint)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.running():
                raise RuntimeError(f"the collector exited with code {self.process.returncode}; see {self.log_path}")
            try:
                if self.metrics(timeout_s=2.0).get("rmqcol_cycles_total", 0) >= 1:
                    return
            except OSError:
                pass  # the endpoint is not up yet
            time.sleep(0.5)
        raise RuntimeError(f"the collector completed no poll cycle in {timeout_s:.0f} s; see {self.log_path}")

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def _forget_settings(self) -> None:
        if self._settings_dir is not None:
            shutil.rmtree(self._settings_dir, ignore_errors=True)
            self._settings_dir = None


def supervise(
    config: MonitorConfig, work_dir: Path, say: Callable[[str], None], max_cycles: int = 0, max_backoff_s: float = 60.0
) -> int:
    """Run the collector in the foreground (its log on standard error) until SIGTERM/SIGINT or, with
    ``max_cycles``, until it has polled that often; restart it after a crash, waiting 1, 2, 4 ... s (at most
    ``max_backoff_s``), not after a configuration error (``CONFIG_ERROR_EXIT``). Returns the exit code."""
    stopping = False
    collector: CollectorProcess | None = None

    def on_signal(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True
        if collector is not None and collector.running():
            os.kill(collector.pid, signal.SIGTERM)  # type: ignore[arg-type]

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    backoff = 1.0
    try:
        while True:
            collector = CollectorProcess(config, work_dir, max_cycles=max_cycles)
            started = time.monotonic()
            collector.start(stderr=sys.stderr.fileno())
            code = collector.wait()
            if stopping or max_cycles or code in (0, CONFIG_ERROR_EXIT):
                return 0 if stopping else code
            if time.monotonic() - started > 5 * max_backoff_s:
                backoff = 1.0
            say(f"collector exited with code {code}; restarting in {backoff:.0f} s")
            deadline = time.monotonic() + backoff
            while time.monotonic() < deadline and not stopping:
                time.sleep(0.2)
            if stopping:
                return 0
            backoff = min(backoff * 2, max_backoff_s)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
