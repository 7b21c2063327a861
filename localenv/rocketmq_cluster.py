"""A local RocketMQ cluster run by the project itself: one name server and two brokers on 127.0.0.1.

Real RocketMQ from Maven Central jars (profiles ``rocketmq-server-5``: 5.3.3, ``rocketmq-server-4.9``: 4.9.7 of
``jvm/pom.xml``), each process its own small JVM so one broker can be stopped and started alone. Data, logs and
the PID record live under one git-ignored directory (``.run/rocketmq/<line>`` by default). The same class backs
``rebalance-monitor rocketmq start|stop|status`` and the ``rocketmq_cluster`` test fixture; readiness (brokers
in cluster info, a topic routable) is checked through RocketMQ's own admin client (``ClusterAdmin``).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from connectors import jvm_artifacts
from connectors.jvm_cds import SharedClasses
from connectors.processes import free_port, pid_alive, port_is_open, stop_process
from connectors.rocketmq_collector import ADMIN_MAIN_CLASS

LINES = ("5", "4.9")
PROFILE_BY_LINE = {"5": "rocketmq-server-5", "4.9": "rocketmq-server-4.9"}
VERSION_BY_LINE = {"5": "5.3.3", "4.9": "4.9.7"}
BROKER_NAMES = ("broker-a", "broker-b")
CLUSTER_NAME = "DefaultCluster"
READY_TOPIC = "rrm-ready"
_STATE_FILE = "cluster.json"

_LOGBACK = """\
<configuration>
  <appender name="file" class="ch.qos.logback.core.FileAppender">
    <file>${{user.home}}/logs/rocketmqlogs/{name}.log</file>
    <encoder><pattern>%d{{yyy-MM-dd HH:mm:ss.SSS}} %-5p [%t] %c{{0}} - %m%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="file"/></root>
</configuration>
"""


def default_home(line: str) -> Path:
    return jvm_artifacts.PROJECT_ROOT / ".run" / "rocketmq" / line


class RocketMQClusterError(RuntimeError):
    """The local cluster could not be started, reached or stopped; the message says why."""


@dataclass(frozen=True)
class TestSpeedOptions:
    """Settings that make membership changes show sooner and idle brokers cheaper, for tests only; a user's cluster
    never gets them.

    ``channel_expired_timeout_ms`` is the 5.x broker's ``channelExpiredTimeout`` (RocketMQ's default 120000;
    4.9.x brokers have a fixed 120 s). The other two are what the tests' consumers set on themselves:
    ``client_heartbeat_interval_ms`` (``setHeartbeatBrokerInterval``, default 30000) and
    ``rebalance_wait_interval_ms`` (JVM property ``rocketmq.client.rebalance.waitInterval``, default 20000).

    ``client_closes_channel_on_timeout`` (JVM property ``com.rocketmq.remoting.client.closeSocketIfTimeout``,
    default true) keeps a test fleet's membership to what its script does on a busy machine: by default a client
    whose heartbeat times out closes its channel and opens another, and the broker, having run the late heartbeat
    on the closed channel, lists the client twice until that channel expires. That is a real duplicate in the
    broker's table, which the monitor reports; it is not one a test's script made.

    ``timer_flush_interval_ms`` is the 5.x broker's ``timerFlushIntervalMs`` (default 1000): how often its timer
    store writes its log, wheel and checkpoint to disk. Idle, that flush is a quarter of a 5.x broker's CPU (0.018
    of its 0.072 cores, sampled per thread; an idle cluster side by side: 0.136 cores with the default, 0.101 with
    30 s). A test cluster keeps nothing across runs, so its brokers flush far less often. Delivery is untouched:
    the timer's enqueue and dequeue threads keep their own cadence.
    """

    channel_expired_timeout_ms: int | None = None
    client_heartbeat_interval_ms: int | None = None
    rebalance_wait_interval_ms: int | None = None
    client_closes_channel_on_timeout: bool | None = None
    timer_flush_interval_ms: int | None = None

    def client_jvm_properties(self) -> dict[str, str]:
        """System properties for a consumer JVM (``-Dkey=value``)."""
        properties = {}
        if self.rebalance_wait_interval_ms is not None:
            properties["rocketmq.client.rebalance.waitInterval"] = str(self.rebalance_wait_interval_ms)
        if self.client_closes_channel_on_timeout is not None:
            properties["com.rocketmq.remoting.client.closeSocketIfTimeout"] = str(
                self.client_closes_channel_on_timeout
            ).lower()
        return properties


USER_DEFAULTS = TestSpeedOptions()
"""RocketMQ's own timings: what ``rebalance-monitor rocketmq start`` runs."""

TEST_SPEED = TestSpeedOptions(
    channel_expired_timeout_ms=15_000,
    client_heartbeat_interval_ms=3_000,
    rebalance_wait_interval_ms=2_000,
    client_closes_channel_on_timeout=False,
    timer_flush_interval_ms=30_000,
)
"""The settings the test tier uses (a frozen 5.x client expires in about 20 s instead of about 110 s)."""


@dataclass(frozen=True)
class AclAccount:
    """Access control on the brokers: on 5.x ACL 2.0 (authentication and authorization, users kept by each
    broker), on 4.9.x ACL 1 (``aclEnable`` and each broker's ``conf/plain_acl.yml``). This account is the
    brokers' super user (admin), and the cluster's own admin calls are signed with it. A client without it, or
    with a wrong secret, is refused."""

    access_key: str
    secret_key: str

    def broker_settings(self) -> dict[str, str]:
        user = json.dumps({"username": self.access_key, "password": self.secret_key})
        inner = json.dumps({"accessKey": self.access_key, "secretKey": self.secret_key})
        return {
            "authenticationEnabled": "true",
            "authenticationProvider": "org.apache.rocketmq.auth.authentication.provider.DefaultAuthenticationProvider",
            "authenticationMetadataProvider": "org.apache.rocketmq.auth.authentication.provider.LocalAuthenticationMetadataProvider",  # noqa: E501 (a class name)
            "authorizationEnabled": "true",
            "authorizationProvider": "org.apache.rocketmq.auth.authorization.provider.DefaultAuthorizationProvider",
            "authorizationMetadataProvider": "org.apache.rocketmq.auth.authorization.provider.LocalAuthorizationMetadataProvider",  # noqa: E501 (a class name)
            "initAuthenticationUser": user,
            "innerClientAuthenticationCredentials": inner,
        }

    def plain_acl_yml(self) -> str:
        """The 4.9.x brokers' ``plain_acl.yml``: this account alone, with admin rights."""
        return (
            "globalWhiteRemoteAddresses: []\naccounts:\n"
            f"  - accessKey: {json.dumps(self.access_key)}\n    secretKey: {json.dumps(self.secret_key)}\n"
            "    admin: true\n"
        )


@dataclass(frozen=True)
class ProcessInfo:
    pid: int
    port: int


@dataclass(frozen=True)
class ClusterInfo:
    line: str
    home: str
    namesrv: ProcessInfo
    brokers: dict[str, ProcessInfo] = field(default_factory=dict)

    @property
    def namesrv_addr(self) -> str:
        return f"127.0.0.1:{self.namesrv.port}"

    def broker_addr(self, name: str) -> str:
        return f"127.0.0.1:{self.brokers[name].port}"


def _bindable(port: int) -> bool:
    if not 1024 < port < 65535:
        return False
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_broker_port(taken: set[int] = frozenset()) -> int:  # type: ignore[assignment]
    """A listen port whose neighbours are free too: a broker also binds ``port - 2`` (fast channel) and
    ``port + 1`` (HA)."""
    for _ in range(200):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
        wanted = {port - 2, port, port + 1}
        if not wanted & taken and all(_bindable(p) for p in wanted):
            return port
    raise RocketMQClusterError("no free port triple (p-2, p, p+1) on 127.0.0.1")


class ProgressReader:
    """The ``ClusterAdmin progress`` process of ``LocalRocketMQCluster.consume_progress``: each ``read()`` asks the
    brokers again; ``close()`` ends the process (it exits when its input ends)."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process

    def read(self, timeout_s: float = 60.0) -> dict[str, dict[str, list[dict]]]:
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None and stdout is not None
        stdin.write("read\n")
        stdin.flush()
        answer: list[str] = []
        reader = threading.Thread(target=lambda: answer.append(stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout_s)
        if not answer or not answer[0].strip():
            self.close()
            raise RocketMQClusterError(f"the admin process gave no consume stats within {timeout_s:.0f} s")
        return json.loads(answer[0])

    def close(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __enter__(self) -> ProgressReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LocalRocketMQCluster:
    """A name server and brokers ``broker-a``/``broker-b`` (one cluster, ASYNC_MASTER) under ``home``."""

    def __init__(
        self,
        line: str = "5",
        home: Path | str | None = None,
        namesrv_port: int | None = None,
        heap: str = "512m",
        test_speed: TestSpeedOptions = USER_DEFAULTS,
        stop_grace_s: float = 10.0,
        acl: AclAccount | None = None,
    ) -> None:
        if line not in LINES:
            raise RocketMQClusterError(f"unknown RocketMQ line {line!r}; expected one of {', '.join(LINES)}")
        self.acl = acl
        self.line = line
        self.home = Path(home if home is not None else default_home(line)).resolve()
        self._namesrv_port = namesrv_port
        self._heap = heap
        self.test_speed = test_speed
        self._stop_grace_s = stop_grace_s

    # -- state on disk -------------------------------------------------------------------------
    @property
    def _state_path(self) -> Path:
        return self.home / _STATE_FILE

    def _recorded(self) -> ClusterInfo | None:
        try:
            data = json.loads(self._state_path.read_text())
            return ClusterInfo(
                data["line"],
                data["home"],
                ProcessInfo(**data["namesrv"]),
                {name: ProcessInfo(**p) for name, p in data["brokers"].items()},
            )
        except (OSError, ValueError, TypeError, KeyError):
            return None

    def _record(self, info: ClusterInfo) -> None:
        self._state_path.write_text(json.dumps(asdict(info)))

    def info(self) -> ClusterInfo | None:
        """The running cluster recorded under ``home`` (its name server alive), or None."""
        info = self._recorded()
        return info if info is not None and pid_alive(info.namesrv.pid) else None

    @property
    def namesrv_addr(self) -> str:
        """The running name server's address (``127.0.0.1:port``)."""
        return self._require().namesrv_addr

    def broker_addr(self, name: str) -> str:
        return self._require().broker_addr(name)

    def masters(self) -> dict[str, str]:
        """Cluster info as the name server answers it now: broker name to master address."""
        return self.admin("cluster", self.namesrv_addr)

    def route(self, topic: str) -> dict[str, dict[str, int]]:
        """The topic's route as the name server answers it: broker name to its queue numbers and permission."""
        return self.admin("route", self.namesrv_addr, topic)

    def create_group(self, group: str, brokers: tuple[str, ...] = BROKER_NAMES) -> None:
        """Create a subscription group on each broker (a group the brokers know without any consumer)."""
        self.admin("create-group", self.namesrv_addr, group, ",".join(brokers))

    def set_pop_mode(
        self, topic: str, group: str, pop_share_queue_num: int = -1, brokers: tuple[str, ...] = BROKER_NAMES
    ) -> None:
        """Put ``group`` in POP mode for ``topic`` on each broker (5.x): its push consumers without client
        rebalance then pop. A ``pop_share_queue_num`` of -1 (or at least the group's size less one) has every
        consumer pop every broker's queues."""
        self.admin("pop-mode", self.namesrv_addr, topic, group, ",".join(brokers), str(pop_share_queue_num))

    def connections(self, group: str, broker: str) -> list[dict]:
        """The broker's connection list of ``group`` as the admin client reads it (empty: not online)."""
        return self.admin("connections", self.namesrv_addr, group, self.broker_addr(broker))["connections"]

    def consume_progress(self, *groups: str) -> ProgressReader:
        """A reader of the brokers' consume stats of ``groups`` through the admin client (one admin process for
        every read; close it when done): ``read()`` gives, per group and master broker, that broker's answer to the
        per-broker call (no topic) as a dict per queue with topic, queue_id, broker/consumer/pull offsets,
        last_timestamp and the queue's min_offset (the broker's topic stats)."""
        command = _with_shared_classes(self._admin_command("progress", self.namesrv_addr, ",".join(groups)))
        return ProgressReader(subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))

    def commit_offsets(self, group: str, topic: str, queues: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """Set ``group``'s consumer offset of each of ``queues`` ((broker, queue id) pairs of ``topic``) to the queue's
        max offset on its master, as a consumer that had taken every message would have committed; the offsets set."""
        named = [f"{broker}:{queue_id}" for broker, queue_id in sorted(queues)]
        answer = self.admin("commit-offsets", self.namesrv_addr, group, topic, *named)
        return {(key.rsplit(":", 1)[0], int(key.rsplit(":", 1)[1])): int(offset) for key, offset in answer.items()}

    def running_brokers(self) -> list[str]:
        info = self.info()
        return [] if info is None else [n for n, p in info.brokers.items() if pid_alive(p.pid)]

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self, timeout_s: float = 120.0) -> ClusterInfo:
        """Start the name server and both brokers (or return the cluster already running under ``home``) and
        wait until both brokers are in cluster info and a topic is routable on both."""
        running = self.info()
        if running is not None and all(pid_alive(p.pid) for p in running.brokers.values()):
            return running
        if running is not None or self._recorded() is not None:
            self.stop()
        jvm_artifacts.jars(PROFILE_BY_LINE[self.line])  # resolve on first use
        jvm_artifacts.collector_jar()
        self.home.mkdir(parents=True, exist_ok=True)
        namesrv_port = self._namesrv_port or free_port()
        if port_is_open(namesrv_port):
            raise RocketMQClusterError(f"port {namesrv_port} on 127.0.0.1 is already in use; choose another")
        info = ClusterInfo(self.line, str(self.home), ProcessInfo(self._launch_namesrv(namesrv_port), namesrv_port))
        self._record(info)
        try:
            self._wait_port(namesrv_port, info.namesrv.pid, "name server", timeout_s)
            taken: set[int] = {namesrv_port}
            brokers = {}
            for name in BROKER_NAMES:
                port = free_broker_port(taken)
                taken |= {port - 2, port, port + 1}
                brokers[name] = ProcessInfo(self._launch_broker(name, port, info.namesrv_addr), port)
                info = ClusterInfo(self.line, str(self.home), info.namesrv, dict(brokers))
                self._record(info)
            self.create_topic(READY_TOPIC, 1, timeout_s=timeout_s)
        except BaseException:
            self.stop()
            raise
        return info

    def stop(self) -> bool:
        """Stop every process by PID (SIGTERM, SIGKILL after the grace period); True if any was running."""
        info = self._recorded()
        self._state_path.unlink(missing_ok=True)
        if info is None:
            return False
        pids = [p.pid for p in info.brokers.values()] + [info.namesrv.pid]
        alive = [pid for pid in pids if pid_alive(pid)]
        self._stop_pids(alive)
        return bool(alive)

    def stop_broker(self, name: str) -> None:
        """Stop one broker by PID (the others and the name server keep running)."""
        info = self._require()
        self._stop_pids([info.brokers[name].pid])

    def kill_broker(self, name: str) -> None:
        """SIGKILL one broker: a crash, as opposed to ``stop_broker``'s shutdown."""
        info = self._require()
        stop_process(info.brokers[name].pid, 0.0)

    def start_broker(self, name: str, timeout_s: float = 120.0) -> None:
        """Start a stopped broker again on its port and wait until it is back in cluster info."""
        info = self._require()
        broker = info.brokers[name]
        if pid_alive(broker.pid):
            return
        pid = self._launch_broker(name, broker.port, info.namesrv_addr)
        brokers = {**info.brokers, name: ProcessInfo(pid, broker.port)}
        self._record(ClusterInfo(info.line, info.home, info.namesrv, brokers))
        self._wait_port(broker.port, pid, name, timeout_s)
        self.admin("wait-brokers", info.namesrv_addr, name, str(int(timeout_s * 1000)), timeout_s=timeout_s + 30)

    def create_topic(
        self, topic: str, queues: int, brokers: tuple[str, ...] = BROKER_NAMES, timeout_s: float = 120.0
    ) -> None:
        """Create ``topic`` with ``queues`` read and write queues on each broker's master through the admin
        client, and wait until its route lists every one of them."""
        info = self._require()
        self.admin(
            "create-topic",
            info.namesrv_addr,
            topic,
            str(queues),
            ",".join(brokers),
            str(int(timeout_s * 1000)),
            timeout_s=timeout_s + 30,
        )

    def admin(self, *args: str, timeout_s: float = 60.0, attempts: int = 3) -> dict:
        """Run one ``ClusterAdmin`` command (RocketMQ's admin client in a short-lived JVM); its JSON answer.

        Every command is idempotent, so one that fails (a broker answering late on a busy machine) is run again,
        up to ``attempts`` times."""
        reason = "no attempt"
        for _ in range(attempts):
            try:
                result = _run_short_jvm(self._admin_command(*args), timeout_s)
            except subprocess.TimeoutExpired:
                reason = f"did not finish in {timeout_s:.0f}s"
                continue
            if result.returncode == 0:
                return json.loads(result.stdout.strip().splitlines()[-1])
            reason = (result.stderr.strip().splitlines()[-1:] or ["no output"])[0]
        raise RocketMQClusterError(
            f"admin command {args[0]} failed {attempts} times, last: {reason}; logs in {self.home}"
        )

    def mqadmin(self, command: str, *args: str, timeout_s: float = 60.0) -> str:
        """RocketMQ's own ``mqadmin COMMAND -n NAMESRV ARGS`` (the line's tools, in a short-lived JVM): what it
        printed. mqadmin prints a failure's stack trace and exits 0, so the caller judges the text."""
        home = self.home / "mqadmin"
        (home / "conf").mkdir(parents=True, exist_ok=True)
        # 4.9.x's mqadmin reads its logging set-up from the RocketMQ home and stops without it; it logs nothing here.
        (home / "conf" / "logback_tools.xml").write_text('<configuration><root level="OFF"/></configuration>\n')
        run = _short_jvm(
            home,
            str(jvm_artifacts.jar_dir(PROFILE_BY_LINE[self.line]) / "*"),
            ["org.apache.rocketmq.tools.command.MQAdminStartup", command, "-n", self.namesrv_addr, *args],
            f"-Drocketmq.home.dir={home}",
            "-Djava.net.preferIPv4Stack=true",
        )
        result = _run_short_jvm(run, timeout_s)
        return result.stdout + result.stderr

    # -- helpers --------------------------------------------------------------------------------
    def _admin_command(self, *args: str) -> list[str]:
        signed = (
            []
            if self.acl is None
            else [f"-Drrm.admin.access.key={self.acl.access_key}", f"-Drrm.admin.secret.key={self.acl.secret_key}"]
        )
        return _short_jvm(
            self.home / "admin",
            jvm_artifacts.collector_classpath(),
            [ADMIN_MAIN_CLASS, *args],
            *signed,
        )

    def _require(self) -> ClusterInfo:
        info = self.info()
        if info is None:
            raise RocketMQClusterError(f"no RocketMQ cluster is running under {self.home}")
        return info

    def _stop_pids(self, pids: list[int]) -> None:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + self._stop_grace_s
        while time.monotonic() < deadline and any(pid_alive(pid) for pid in pids):
            time.sleep(0.2)
        stuck = [pid for pid in pids if pid_alive(pid) and not stop_process(pid, 0.0)]
        if stuck:
            raise RocketMQClusterError(f"RocketMQ processes {stuck} did not exit after SIGKILL")

    def _jvm(self, name: str, main_class: str, conf: Path) -> int:
        process_home = self.home / name
        (process_home / "conf").mkdir(parents=True, exist_ok=True)
        # 4.9.x reads its logback configuration from rocketmq.home.dir; 5.x ships its own in the jars.
        for logback in ("namesrv", "broker"):
            (process_home / "conf" / f"logback_{logback}.xml").write_text(_LOGBACK.format(name=logback))
        log_dir = process_home / "logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        stdout = open(log_dir / "stdout.log", "ab")  # noqa: SIM115 - owned by the child process
        command = [
            "java",
            "-Xms128m",
            f"-Xmx{self._heap}",
            "-XX:MaxDirectMemorySize=256m",
            "-XX:+UseG1GC",
            f"-Duser.home={process_home}",
            f"-Drocketmq.home.dir={process_home}",
            "-Djava.net.preferIPv4Stack=true",
            "-Djava.awt.headless=true",
            # 4.9.x unmaps store files through JDK internals: at shutdown, and at a start after an unclean stop
            # (it destroys the index files newer than its checkpoint; without jdk.internal.ref the load fails).
            "--add-opens",
            "java.base/java.nio=ALL-UNNAMED",
            "--add-opens",
            "java.base/sun.nio.ch=ALL-UNNAMED",
            "--add-opens",
            "java.base/jdk.internal.ref=ALL-UNNAMED",
            "-cp",
            str(jvm_artifacts.jar_dir(PROFILE_BY_LINE[self.line]) / "*"),
            main_class,
            "-c",
            str(conf),
        ]
        process = subprocess.Popen(
            command, stdout=stdout, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
        return process.pid

    def _launch_namesrv(self, port: int) -> int:
        conf = self.home / "namesrv" / "namesrv.conf"
        conf.parent.mkdir(parents=True, exist_ok=True)
        settings = {"listenPort": port}
        if self.line == "5":
            settings["bindAddress"] = "127.0.0.1"
        conf.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
        return self._jvm("namesrv", "org.apache.rocketmq.namesrv.NamesrvStartup", conf)

    def _launch_broker(self, name: str, port: int, namesrv_addr: str) -> int:
        store = self.home / name / "store"
        settings: dict[str, object] = {
            "brokerClusterName": CLUSTER_NAME,
            "brokerName": name,
            "brokerId": 0,
            "brokerRole": "ASYNC_MASTER",
            "flushDiskType": "ASYNC_FLUSH",
            "namesrvAddr": namesrv_addr,
            "brokerIP1": "127.0.0.1",
            "brokerIP2": "127.0.0.1",
            "listenPort": port,
            "storePathRootDir": store,
            "storePathCommitLog": store / "commitlog",
            "autoCreateTopicEnable": "true",
            "autoCreateSubscriptionGroup": "true",
            "mappedFileSizeCommitLog": 67_108_864,
            "mappedFileSizeConsumeQueue": 300_000,
            "mappedFileSizeConsumeQueueExt": 4_194_304,
            "maxHashSlotNum": 10_000,
            "maxIndexNum": 40_000,
        }
        if self.line == "5":
            settings |= {"bindAddress": "127.0.0.1", "mappedFileSizeTimerLog": 8_388_608, "timerMaxDelaySec": 3_600}
            if self.test_speed.channel_expired_timeout_ms is not None:
                settings["channelExpiredTimeout"] = self.test_speed.channel_expired_timeout_ms
            if self.test_speed.timer_flush_interval_ms is not None:
                settings["timerFlushIntervalMs"] = self.test_speed.timer_flush_interval_ms
            if self.acl is not None:
                settings |= self.acl.broker_settings()
        elif self.acl is not None:  # 4.9.x reads the accounts from <rocketmq.home.dir>/conf/plain_acl.yml
            settings["aclEnable"] = "true"
            (self.home / name / "conf").mkdir(parents=True, exist_ok=True)
            (self.home / name / "conf" / "plain_acl.yml").write_text(self.acl.plain_acl_yml())
        conf = self.home / name / "broker.conf"
        conf.parent.mkdir(parents=True, exist_ok=True)
        conf.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
        return self._jvm(name, "org.apache.rocketmq.broker.BrokerStartup", conf)

    def _wait_port(self, port: int, pid: int, what: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not pid_alive(pid):
                raise RocketMQClusterError(f"the {what} exited at start; see {self.home}")
            if port_is_open(port):
                return
            time.sleep(0.2)
        raise RocketMQClusterError(f"the {what} did not listen on port {port} within {timeout_s:.0f}s")


def _short_jvm(home: Path, classpath: str, main_and_args: list[str], *options: str) -> list[str]:
    """The command of a short-lived admin JVM (small heap, C1 only, serial GC; ``options`` beside them)."""
    return [
        "java",
        "-Xmx128m",
        "-XX:TieredStopAtLevel=1",
        "-XX:+UseSerialGC",
        *options,
        f"-Duser.home={home}",
        "-cp",
        classpath,
        *main_and_args,
    ]


def _shared_classes(command: list[str], make: bool) -> SharedClasses:
    """The shared classes of a ``_short_jvm`` command's main class and class path."""
    classpath, main_class = command[command.index("-cp") + 1], command[command.index("-cp") + 2]
    return SharedClasses(main_class, classpath, make)


def _with_shared_classes(command: list[str]) -> list[str]:
    """A ``_short_jvm`` command that maps its class path's shared classes, if there are any yet."""
    return [command[0], *_shared_classes(command, make=False).options, *command[1:]]


def _run_short_jvm(command: list[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    """Run a ``_short_jvm`` command to its end, with its class path's shared classes (``connectors.jvm_cds``: the
    admin commands of a test run start hundreds of these JVMs; each maps the classes the first one loaded)."""
    shared = _shared_classes(command, make=True)
    run = [command[0], *shared.options, *command[1:]]
    try:
        result = subprocess.run(run, capture_output=True, text=True, timeout=timeout_s)
    except BaseException:
        shared.ended(well=False)
        raise
    shared.ended(well=result.returncode == 0)
    return result
