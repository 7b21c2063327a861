"""A single-node Apache Kafka broker (KRaft, combined broker+controller) run by the project itself.

The broker comes from Maven Central jars (profile ``kafka`` of ``jvm/pom.xml``), listens on 127.0.0.1
only, keeps its data and logs under one directory (git-ignored ``.run/kafka`` by default), and is stopped
by the PID it wrote. The same class backs ``rebalance-monitor kafka start|stop|status`` and the pytest
session fixture, so what tests run against is what users run.

Lifecycle: constructing a ``LocalKafkaBroker`` opens nothing; ``start()`` formats storage (first time),
launches the JVM, and waits until the broker answers a metadata request; ``stop()`` sends SIGTERM, waits,
and escalates to SIGKILL. With ``secure=True`` its one client listener is SASL_SSL (SCRAM-SHA-512 over TLS):
the JDK's ``keytool`` makes its certificate and Kafka's storage tool its SCRAM users at the first start
(``SecureListener``).
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from connectors import jvm_artifacts
from connectors.processes import free_port, port_is_open
from localenv.pid_record import PidRecord

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


SCRAM_MECHANISM = "SCRAM-SHA-512"
CLIENT_USER = "rrm-client"
_BROKER_USER = "rrm-broker"  # the broker's own connections to its listener (inter-broker)
_SECRETS_FILE = "secure.json"


def scram_jaas(user: str, password: str) -> str:
    """``sasl.jaas.config`` of a SCRAM login."""
    quoted = password.replace("\\", "\\\\").replace('"', '\\"')
    return f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{user}" password="{quoted}";'


@dataclass(frozen=True)
class SecureListener:
    """A SASL_SSL listener's material under the broker's home, made at its first start: a self-signed
    certificate for 127.0.0.1 in a PKCS12 key store (``keytool``), the same certificate as a PEM trust store
    for clients (Java and kafka-python read PEM), and the SCRAM passwords (random, in a file only the owner
    reads)."""

    directory: Path

    @property
    def keystore(self) -> Path:
        return self.directory / "broker.p12"

    @property
    def truststore(self) -> Path:
        return self.directory / "truststore.pem"

    def _secrets(self) -> dict[str, str]:
        return json.loads((self.directory / _SECRETS_FILE).read_text())

    def secrets(self) -> list[str]:
        """Every password of the listener (to keep out of messages)."""
        return list(self._secrets().values())

    def client_password(self) -> str:
        return self._secrets()["client"]

    def client_options(self, password: str | None = None) -> dict[str, str]:
        """The Java client options (``[kafka.options]``) of the client user; ``password`` replaces its own."""
        return {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": SCRAM_MECHANISM,
            "sasl.jaas.config": scram_jaas(CLIENT_USER, self.client_password() if password is None else password),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.truststore),
        }

    def kafka_python_options(self, password: str | None = None) -> dict[str, object]:
        """The same for kafka-python (the project's Python clients)."""
        return {
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": SCRAM_MECHANISM,
            "sasl_plain_username": CLIENT_USER,
            "sasl_plain_password": self.client_password() if password is None else password,
            "ssl_cafile": str(self.truststore),
        }

    def create(self) -> bool:
        """Make the certificate, the stores and the passwords (once); False: they were there already."""
        if (self.directory / _SECRETS_FILE).exists():
            return False
        self.directory.mkdir(parents=True, exist_ok=True)
        store_password = secrets.token_urlsafe(18)
        for path in (self.keystore, self.truststore):
            path.unlink(missing_ok=True)
        store = ("-storetype", "PKCS12", "-keystore", str(self.keystore), "-storepass:env", "RRM_STORE_PASSWORD")
        _keytool(
            store_password,
            "-genkeypair", "-alias", "broker", "-keyalg", "RSA", "-keysize", "2048", "-validity", "3650",
            "-dname", "CN=127.0.0.1", "-ext", "san=ip:127.0.0.1,dns:localhost", *store,
        )  # fmt: skip
        self.truststore.write_text(_keytool(store_password, "-exportcert", "-rfc", "-alias", "broker", *store))
        self.keystore.chmod(0o600)  # the broker's private key
        path = self.directory / _SECRETS_FILE
        path.touch(mode=0o600)
        passwords = {"store": store_password, "broker": secrets.token_urlsafe(18), "client": secrets.token_urlsafe(18)}
        path.write_text(json.dumps(passwords))
        return True

    def write_client_config(self, bootstrap_servers: str) -> Path:
        """``client.toml`` beside the stores (only its owner reads it): the ``[kafka]`` settings of a monitor
        configuration that reaches this listener as the client user."""
        lines = [f"bootstrap_servers = {json.dumps(bootstrap_servers)}", "", "[kafka.options]"]
        lines += [f"{json.dumps(k)} = {json.dumps(v)}" for k, v in self.client_options().items()]
        path = self.directory / "client.toml"
        path.touch(mode=0o600)
        path.write_text("[kafka]\n" + "\n".join(lines) + "\n")
        return path

    def broker_properties(self) -> dict[str, str]:
        found = self._secrets()
        return {
            "sasl.enabled.mechanisms": SCRAM_MECHANISM,
            "sasl.mechanism.inter.broker.protocol": SCRAM_MECHANISM,
            f"listener.name.sasl_ssl.{SCRAM_MECHANISM.lower()}.sasl.jaas.config": scram_jaas(
                _BROKER_USER, found["broker"]
            ),
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(self.keystore),
            "ssl.keystore.password": found["store"],
            "ssl.key.password": found["store"],
            "ssl.truststore.type": "PEM",  # the broker's own client side (inter-broker) trusts its certificate
            "ssl.truststore.location": str(self.truststore),
            "ssl.client.auth": "none",
        }

    def scram_arguments(self) -> list[str]:
        """``kafka-storage format`` arguments creating both SCRAM users in the metadata log."""
        found = self._secrets()
        return [
            argument
            for user, password in ((_BROKER_USER, found["broker"]), (CLIENT_USER, found["client"]))
            for argument in ("--add-scram", f"{SCRAM_MECHANISM}=[name={user},password={password}]")
        ]


def _keytool(store_password: str, *args: str) -> str:
    """Run the JDK's keytool; the store password goes by environment, not on its command line."""
    environment = {**os.environ, "RRM_STORE_PASSWORD": store_password}
    result = subprocess.run(["keytool", "-noprompt", *args], capture_output=True, text=True, env=environment)
    if result.returncode != 0:
        raise KafkaBrokerError(f"keytool {args[0]} failed: {(result.stderr or result.stdout).strip()[-500:]}")
    return result.stdout


@dataclass(frozen=True)
class BrokerInfo:
    pid: int
    port: int
    controller_port: int
    home: str
    secure: bool = False

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def listener(self) -> SecureListener | None:
        """The SASL_SSL listener's material, or None for a PLAINTEXT broker."""
        return SecureListener(Path(self.home) / "secure") if self.secure else None


class LocalKafkaBroker:
    """One KRaft broker on 127.0.0.1 with its data under ``home``."""

    def __init__(
        self,
        home: Path | str = DEFAULT_HOME,
        port: int | None = None,
        controller_port: int | None = None,
        heap: str = "512m",
        secure: bool = False,
    ) -> None:
        self.home = Path(home).resolve()
        self.secure = secure
        self._port = port
        self._controller_port = controller_port
        self._heap = heap

    # -- state on disk -------------------------------------------------------------------------
    @property
    def _record(self) -> PidRecord[BrokerInfo]:
        return PidRecord(self.home / _STATE_FILE, BrokerInfo, KafkaBrokerError, "Kafka broker")

    def info(self) -> BrokerInfo | None:
        """The running broker recorded under ``home``, or None (stale records are ignored)."""
        return self._record.read()

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
        listener = SecureListener(self.home / "secure") if self.secure else None
        formatted = (data_dir / "meta.properties").exists()
        if listener is not None and listener.create() and formatted:
            raise KafkaBrokerError(
                f"{data_dir} was formatted without SCRAM users; start the secure broker in another home"
            )
        config = self._write_config(port, controller_port, data_dir, log_dir, listener)
        if not formatted:
            self._format(classpath, config, data_dir, listener)
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
        info = BrokerInfo(process.pid, port, controller_port, str(self.home), self.secure)
        return self._record.started(info, lambda: self._wait_ready(info, process, timeout_s))

    def stop(self, timeout_s: float = 30.0) -> bool:
        """Stop the broker by PID; True if one was running."""
        return self._record.stop(timeout_s)

    # -- helpers --------------------------------------------------------------------------------
    def _write_config(
        self, port: int, controller_port: int, data_dir: Path, log_dir: Path, listener: SecureListener | None
    ) -> Path:
        client = "PLAINTEXT" if listener is None else "SASL_SSL"
        properties = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{controller_port}",
            "listeners": f"{client}://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
            "advertised.listeners": f"{client}://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": client,
            "listener.security.protocol.map": f"CONTROLLER:PLAINTEXT,{client}:{client}",
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
        if listener is not None:
            properties |= listener.broker_properties()
        config = self.home / "server.properties"
        config.touch(mode=0o600)  # a secure broker's file holds its store password
        config.write_text("".join(f"{k}={v}\n" for k, v in properties.items()))
        (self.home / "log4j2.properties").write_text(_LOG4J2.format(log_dir=log_dir))
        return config

    def _format(self, classpath: str, config: Path, data_dir: Path, listener: SecureListener | None) -> None:
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
                *(listener.scram_arguments() if listener is not None else []),
            ],
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            reason = result.stderr.strip()
            for secret in listener.secrets() if listener is not None else ():
                reason = reason.replace(secret, "<redacted>")
            raise KafkaBrokerError(f"formatting Kafka storage in {data_dir} failed: {reason}")

    def _wait_ready(self, info: BrokerInfo, process: subprocess.Popen[bytes], timeout_s: float) -> None:
        from kafka import KafkaAdminClient  # the adapter's own client library

        deadline = time.monotonic() + timeout_s
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise KafkaBrokerError(f"Kafka broker exited with code {process.returncode}; see {self.home / 'logs'}")
            if port_is_open(info.port):
                try:
                    security = info.listener.kafka_python_options() if info.listener is not None else {}
                    admin = KafkaAdminClient(
                        bootstrap_servers=info.bootstrap_servers, request_timeout_ms=5000, **security
                    )
                    try:
                        admin.list_topics()
                        return
                    finally:
                        admin.close()
                except Exception as error:  # not ready yet: retry until the deadline
                    last_error = error
            time.sleep(0.5)
        raise KafkaBrokerError(f"Kafka broker not ready after {timeout_s:.0f}s ({last_error})")
