"""A single-node Apache Kafka broker (KRaft, combined broker+controller) run by the project itself.

The broker comes from Maven Central jars (profile ``kafka`` of ``jvm/pom.xml``), listens on 127.0.0.1
only, keeps its data and logs under one directory (git-ignored ``.run/kafka`` by default), and is stopped
by the PID it wrote. The same class backs ``rebalance-monitor kafka start|stop|status`` and the pytest
session fixture, so what tests run against is what users run.

Lifecycle: constructing a ``LocalKafkaBroker`` opens nothing; ``start()`` formats storage (first time),
launches the JVM, and waits until the broker answers a metadata request; ``stop()`` sends SIGTERM, waits,
and escalates to SIGKILL.
"""

from __future__ import annotations

import base64
import json
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from connectors import jvm_artifacts
from connectors.processes import free_port, pid_alive, port_is_open, stop_process

DEFAULT_HOME = jvm_artifacts.PROJECT_ROOT / ".run" / "kafka"
_STATE_FILE = "broker.json"

_LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log_dir}/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.file.ref = file
logger.kafka.name = kafka
logger.kafka.level = INFO
"""


class KafkaBrokerError(RuntimeError):
    """The local broker could not be started, reached or stopped; the message says why."""


def new_cluster_id() -> str:
    """A random KRaft cluster id (base64url of 16 bytes), never starting with '-'.

    Like Kafka's own ``Uuid.randomUuid()``: an id starting with '-' would be read as an option by the
    ``StorageTool`` command line (1 in 64 ids), and formatting would fail.
    """
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


@dataclass(frozen=True)
class BrokerInfo:
    pid: int
    port: int
    controller_port: int
    home: str

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"


class LocalKafkaBroker:
    """One KRaft broker on 127.0.0.1 with its data under ``home``."""

    def __init__(
        self,
        home: Path | str = DEFAULT_HOME,
        port: int | None = None,
        controller_port: int | None = None,
        heap: str = "512m",
    ) -> None:
        self.home = Path(home).resolve()
        self._port = port
        self._controller_port = controller_port
        self._heap = heap

    # -- state on disk -------------------------------------------------------------------------
    @property
    def _state_path(self) -> Path:
        return self.home / _STATE_FILE

    def info(self) -> BrokerInfo | None:
        """The running broker recorded under ``home``, or None (stale records are ignored)."""
        try:
            data = json.loads(self._state_path.read_text())
            info = BrokerInfo(**data)
        except (OSError, ValueError, TypeError):
            return None
        return info if pid_alive(info.pid) else None

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self, timeout_s: float = 90.0) -> BrokerInfo:
        """Start the broker (or return the one already running under ``home``)."""
        running = self.info()
        if running is not None:
            return running
        port = self._port or free_port()
        controller_port = self._controller_port or free_port()
        for taken in (port, controller_port):
            if port_is_open(taken):
                raise KafkaBrokerError(f"port {taken} on 127.0.0.1 is already in use; choose another")
        classpath = str(jvm_artifacts.jar_dir("kafka") / "*")
        jvm_artifacts.jars("kafka")  # resolve on first use
        data_dir, log_dir = self.home / "data", self.home / "logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        config = self._write_config(port, controller_port, data_dir, log_dir)
        if not (data_dir / "meta.properties").exists():
            self._format(classpath, config, data_dir)
        stdout = open(log_dir / "stdout.log", "ab")  # noqa: SIM115 - owned by the child process
        process = subprocess.Popen(
            [
                "java",
                f"-Xmx{self._heap}",
                "-XX:+UseSerialGC",  # a heap of 512 MiB: one collector thread, no concurrent marking
                "-Djava.awt.headless=true",
                f"-Dlog4j2.configurationFile=file:{self.home / 'log4j2.properties'}",
                "-cp",
                classpath,
                "kafka.Kafka",
                str(config),
            ],
            stdout=stdout,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # Ctrl-C in a terminal must not kill the broker before we stop it
        )
        info = BrokerInfo(process.pid, port, controller_port, str(self.home))
        self._state_path.write_text(json.dumps(info.__dict__))
        try:
            self._wait_ready(info, process, timeout_s)
        except BaseException:
            self.stop()
            raise
        return info

    def stop(self, timeout_s: float = 30.0) -> bool:
        """Stop the broker by PID; True if one was running."""
        info = self.info()
        self._state_path.unlink(missing_ok=True)
        if info is None:
            return False
        if stop_process(info.pid, timeout_s):
            return True
        raise KafkaBrokerError(f"Kafka broker pid {info.pid} did not exit after SIGKILL")

    # -- helpers --------------------------------------------------------------------------------
    def _write_config(self, port: int, controller_port: int, data_dir: Path, log_dir: Path) -> Path:
        properties = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(data_dir),
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "false",
            "log.retention.hours": "168",
            # A local broker idles most of its life (through a test suite, under a demo between bursts). The
            # KRaft controller appends a no-op record to its metadata log every 500 ms by default; with the
            # Kafka defaults below, an idle broker used 3.0-4.2 % of a core, with these and the serial
            # collector 1.6 % (60 s idle after a 20 s start, /proc CPU of the broker's JVM). One partition's
            # traffic needs no more threads; compacted topics (consumer offsets) stay small for its lifetime.
            "metadata.max.idle.interval.ms": "5000",
            "num.network.threads": "1",
            "num.io.threads": "2",
            "background.threads": "2",
            "log.cleaner.enable": "false",
        }
        config = self.home / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in properties.items()))
        (self.home / "log4j2.properties").write_text(_LOG4J2.format(log_dir=log_dir))
        return config

    def _format(self, classpath: str, config: Path, data_dir: Path) -> None:
        cluster_id = new_cluster_id()
        result = subprocess.run(
            [
                "java",
                "-cp",
                classpath,
                "kafka.tools.StorageTool",
                "format",
                "--standalone",
                "-t",
                cluster_id,
                "-c",
                str(config),
            ],
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            raise KafkaBrokerError(f"formatting Kafka storage in {data_dir} failed: {result.stderr.strip()}")

    def _wait_ready(self, info: BrokerInfo, process: subprocess.Popen[bytes], timeout_s: float) -> None:
        from kafka import KafkaAdminClient  # the adapter's own client library

        deadline = time.monotonic() + timeout_s
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise KafkaBrokerError(f"Kafka broker exited with code {process.returncode}; see {self.home / 'logs'}")
            if port_is_open(info.port):
                try:
                    admin = KafkaAdminClient(bootstrap_servers=info.bootstrap_servers, request_timeout_ms=5000)
                    try:
                        admin.list_topics()
                        return
                    finally:
                        admin.close()
                except Exception as error:  # not ready yet: retry until the deadline
                    last_error = error
            time.sleep(0.5)
        raise KafkaBrokerError(f"Kafka broker not ready after {timeout_s:.0f}s ({last_error})")
