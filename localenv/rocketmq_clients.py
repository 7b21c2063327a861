"""Real RocketMQ client processes (the project's test clients, ``jvm/testclients``), read from their own output.

``ClientProcess("5", "producer", ...)`` starts a small JVM (``-Xmx128m -XX:+UseSerialGC -XX:TieredStopAtLevel=1``:
about 100 MB) running a producer or the send benchmark of RocketMQ client line ``"4.9"`` or ``"5"``, or push
consumers, with the client agent on its classpath. The process prints JSON lines (what each client itself holds:
its queues, its latency-fault items); a reader thread collects them, ``wait_for`` waits for one that matches.
``consumer_host`` runs several push consumers (``ConsumerSpec``) in one JVM, each an independent client with its
own client id and client instance; ``HostedConsumer`` is one of them, read from its own lines. ``terminate``/
``kill``/``freeze``/``thaw`` send SIGTERM/SIGKILL/SIGSTOP/SIGCONT, so tests can stop or freeze a client as a crash
or a long GC would: a consumer takes signals only when it is alone in its process. Duplicate client ids need
separate processes (one JVM shares one client instance per id). ``consumer_process`` is a process of one
consumer. Consumers get explicit client timings (``TEST_SPEED``'s by default). Used by ``demo --rocketmq`` and by
the tests.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from connectors.jvm_cds import SharedClasses
from localenv import agent_artifacts
from localenv.rocketmq_cluster import TEST_SPEED, TestSpeedOptions

SMALL_JVM = ("-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.net.preferIPv4Stack=true")
Line = dict[str, Any]


class ClientProcessError(RuntimeError):
    """The client process exited or did not print what was waited for; the message has its stderr's tail."""


def _option_value(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


class ClientProcess:
    """A test client JVM: ``mode`` is ``consumer``, ``producer`` or ``bench``; ``options`` its ``--name value``s
    (``client_ip`` is ``--client-ip``). ``hosted``: the consumers of a ``consumer`` process, by the names its
    lines carry, each with its own options (``--<name>.<option> value``; ``consumer_host`` makes them)."""

    def __init__(
        self,
        line: str,
        mode: str,
        log_dir: Path,
        *,
        agent: Mapping[str, str] | None = None,
        attach: Mapping[str, str] | None = None,
        jvm_properties: Mapping[str, str] | None = None,
        hosted: Mapping[str, Mapping[str, str]] | None = None,
        **options: object,
    ) -> None:
        if agent is not None and attach is not None:
            raise ValueError("the agent is either registered by the test client (agent) or attached (attach)")
        self.line, self.mode = line, mode
        self.log_dir = Path(log_dir)
        self.agent = dict(agent) if agent is not None else None
        self.attach = dict(attach) if attach is not None else None
        self.jvm_properties = dict(jvm_properties or {})
        self.hosted = tuple(hosted or ())
        self.options = {k.replace("_", "-"): _option_value(v) for k, v in options.items() if v is not None}
        if hosted:
            self.options["hosted"] = ",".join(self.hosted)
            for name, own in hosted.items():
                self.options.update({f"{name}.{k}": v for k, v in own.items()})
        self.lines: list[Line] = []
        self._changed = threading.Condition()
        self._process: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None
        self._shared: SharedClasses | None = None
        self.started: Line | None = None

    def command(self) -> list[str]:
        """``agent``: the test client registers its clients with the agent on its classpath. ``attach``: the agent
        is attached with ``-javaagent`` alone (these settings its arguments), absent from the classpath."""
        classpath = os.pathsep.join(
            str(p) for p in agent_artifacts.client_classpath(self.line, with_agent=self.attach is None)
        )
        javaagent = []
        if self.attach is not None:
            arguments = ",".join(f"{k}={v}" for k, v in self.attach.items())
            javaagent = [f"-javaagent:{agent_artifacts.agent().javaagent}={arguments}"]
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
            *javaagent,
            *(f"-D{k}={v}" for k, v in properties.items()),
            "-cp",
            classpath,
            agent_artifacts.TEST_CLIENT_MAIN,
            self.mode,
            *flat,
            *(["--agent", "true"] if self.agent is not None and self.mode != "bench" else []),
        ]

    def start(self, timeout_s: float = 60.0) -> ClientProcess:
        """Start the JVM and wait for its ``started`` lines, one per hosted consumer (for ``bench``: nothing to wait
        for)."""
        self.launch()
        self.wait_started(timeout_s)
        return self

    def wait_started(self, timeout_s: float) -> None:
        """Wait for the ``started`` line of every hosted consumer (of a producer: its one ``started`` line)."""
        if self.mode == "bench":
            return
        for name in self.hosted or (None,):
            self.started = self.wait_for(
                lambda line, name=name: line["kind"] == "started" and line.get("consumer") == name, timeout_s
            )

    def consumers(self) -> list[HostedConsumer]:
        """Its hosted consumers, in the order given."""
        return [HostedConsumer(self, name) for name in self.hosted]

    def launch(self) -> int:
        """Start the JVM without waiting for it; its PID."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        stderr = open(self.log_dir / f"{self.mode}-{time.monotonic_ns()}.stderr", "w")  # noqa: SIM115
        self._stderr_path = Path(stderr.name)
        command = self.command()
        if self.attach is None:  # an agent attached with -javaagent transforms classes: none are shared then
            classpath = command[command.index("-cp") + 1]
            self._shared = SharedClasses(agent_artifacts.TEST_CLIENT_MAIN, classpath)
            command = [command[0], *self._shared.options, *command[1:]]
        self._process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=stderr, text=True, start_new_session=True
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
        """The client id of its only client (a process hosting several consumers has one per consumer)."""
        assert len(self.hosted) <= 1, "a process of several consumers: ask each of consumers() for its id"
        assert self.started is not None, "not started"
        return self.started["client_id"]

    def of_kind(self, kind: str) -> list[Line]:
        with self._changed:
            return [line for line in self.lines if line["kind"] == kind]

    def last(self, kind: str) -> Line | None:
        found = self.of_kind(kind)
        return found[-1] if found else None

    def wait_for(self, predicate: Callable[[Line], bool], timeout_s: float, *, after: int = 0, what: str = "") -> Line:
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
                        f"{self.mode} ({self.line}){what}: no matching line in {timeout_s} s; "
                        f"exit {self._process.poll() if self._process else None}; "
                        f"its last lines: {self.lines[-5:]}; stderr: {self.stderr_tail()}"
                    )
                self._changed.wait(min(remaining, 0.5))

    def wait_exit(self, timeout_s: float) -> int:
        assert self._process is not None
        code = self._process.wait(timeout_s)
        if self._reader is not None:
            self._reader.join(5)
        self._ended(code)
        return code

    def _ended(self, code: int) -> None:
        """The classes its JVM shared at its exit, if it made them and ended by itself or by SIGTERM (a JVM exits
        with 143 then, once its shutdown hooks have run)."""
        if self._shared is not None:
            self._shared.ended(well=code in (0, 128 + signal.SIGTERM))

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
        if self._process is None:
            return
        if self._process.poll() is not None:
            self._ended(self._process.returncode)
            return
        self.thaw()
        self.terminate()
        try:
            self._ended(self._process.wait(grace_s))
        except subprocess.TimeoutExpired:
            self.kill()
            self._ended(self._process.wait(10))

    def __enter__(self) -> ClientProcess:
        return self.start() if self._process is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class HostedConsumer:
    """One consumer of a ``consumer`` process, read from the lines that name it: the same reading API as a
    ``ClientProcess`` of one client. Signals and stopping reach the whole process, so they are refused unless
    the consumer is alone in it."""

    def __init__(self, process: ClientProcess, name: str) -> None:
        self.process, self.name = process, name

    def _mine(self, line: Line) -> bool:
        return line.get("consumer") == self.name

    @property
    def line(self) -> str:
        return self.process.line

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def started(self) -> Line | None:
        found = self.of_kind("started")
        return found[0] if found else None

    @property
    def client_id(self) -> str:
        started = self.started
        assert started is not None, f"consumer {self.name} not started"
        return started["client_id"]

    @property
    def lines(self) -> list[Line]:
        with self.process._changed:
            return [line for line in self.process.lines if self._mine(line)]

    def of_kind(self, kind: str) -> list[Line]:
        return [line for line in self.lines if line["kind"] == kind]

    def last(self, kind: str) -> Line | None:
        found = self.of_kind(kind)
        return found[-1] if found else None

    def wait_for(self, predicate: Callable[[Line], bool], timeout_s: float) -> Line:
        """Its first line for which ``predicate`` holds, waiting up to ``timeout_s``."""
        return self.process.wait_for(
            lambda line: self._mine(line) and predicate(line), timeout_s, what=f" consumer {self.name}"
        )

    def alone(self) -> ClientProcess:
        """Its process, which must host no other consumer (a signal to it reaches every client it runs)."""
        assert self.process.hosted == (self.name,), (
            f"consumer {self.name} shares its process with {[n for n in self.process.hosted if n != self.name]}: "
            "give it a process of its own to signal it"
        )
        return self.process

    def terminate(self) -> None:
        self.alone().terminate()

    def kill(self) -> None:
        self.alone().kill()

    def freeze(self) -> None:
        self.alone().freeze()

    def thaw(self) -> None:
        self.alone().thaw()

    def wait_exit(self, timeout_s: float) -> int:
        return self.alone().wait_exit(timeout_s)

    def stop(self, grace_s: float = 20.0) -> None:
        self.alone().stop(grace_s)


@dataclass(frozen=True)
class ConsumerSpec:
    """One push consumer: ``name`` names it in its process's lines (and is its instance name unless
    ``instance_name`` is given: equal instance names and client IPs make one client id); ``topics`` may name
    several, comma-separated. ``client_rebalance=False`` (line 5 only): the consumer asks the broker for its queues
    (``QUERY_ASSIGNMENT``), and pops them when the broker has the group in POP mode. ``block_on_message`` N: its
    listener blocks for good on the Nth message it receives (printing a ``blocked`` line: topic, broker, queue_id,
    queue_offset), so that queue's offset stays there while it keeps the queue. ``strategy`` ``MACHINE_ROOM_NEARBY``
    is ``AllocateMachineRoomNearby`` around AVG, with rooms from ``machine_room_regex`` (its first group, searched in
    broker names and client ids). ``poll_name_server_ms``: how often it reads its topics' routes
    (``setPollNameServerInterval``, RocketMQ's default 30000): a long one keeps an old route that long.
    ``consume_sleep_ms`` N: its listener sleeps N ms on every message (a slow listener), on ``consume_threads``
    threads (``consumeThreadMin`` and ``consumeThreadMax``; the client's 20 when None). ``heartbeat_ms``: its own
    heartbeat interval instead of its process's (the test speed's)."""

    name: str
    group: str
    topics: str
    instance_name: str | None = None
    client_ip: str | None = None
    strategy: str = "AVG"
    model: str = "CLUSTERING"
    client_rebalance: bool = True
    block_on_message: int | None = None
    machine_room_regex: str | None = None
    poll_name_server_ms: int | None = None
    consume_sleep_ms: int | None = None
    consume_threads: int | None = None
    heartbeat_ms: int | None = None

    @property
    def identity(self) -> tuple[str, str | None]:
        """What its client id is made of: the instance name and the client IP (the machine's when None)."""
        return self.instance_name or self.name, self.client_ip

    def options(self) -> dict[str, str]:
        """Its own options (the process's are the ones its consumers share)."""
        options = {
            "group": self.group,
            "topics": self.topics,
            "instance-name": self.identity[0],
            "client-ip": self.client_ip,
            "strategy": self.strategy,
            "model": self.model,
            "client-rebalance": None if self.client_rebalance else False,
            "block-on-message": self.block_on_message,
            "machine-room-regex": self.machine_room_regex,
            "poll-name-server-ms": self.poll_name_server_ms,
            "consume-sleep-ms": self.consume_sleep_ms,
            "consume-threads": self.consume_threads,
            "heartbeat-ms": self.heartbeat_ms,
        }
        return {k: _option_value(v) for k, v in options.items() if v is not None}


def consumer_host(
    line: str,
    log_dir: Path,
    consumers: Sequence[ConsumerSpec],
    *,
    namesrv: str,
    timings: TestSpeedOptions = TEST_SPEED,
    agent: Mapping[str, str] | None = None,
    attach: Mapping[str, str] | None = None,
) -> ClientProcess:
    """A process (not started) of client line ``line`` running ``consumers``, each an independent push consumer
    with the heartbeat interval and rebalance wait interval of ``timings`` set on it explicitly, all registered
    with one client agent when ``agent`` gives its settings (or by the agent attached with ``-javaagent`` and
    the settings ``attach``). Their names must be distinct, without commas, and
    their client ids too (a duplicate client id needs another process)."""
    names = [c.name for c in consumers]
    if not names or len(set(names)) != len(names) or any("," in n for n in names):
        raise ValueError(f"consumer names must be distinct, without commas: {names}")
    identities = [c.identity for c in consumers]
    if len(set(identities)) != len(identities):
        raise ValueError(f"consumers sharing a client id need processes of their own: {identities}")
    return ClientProcess(
        line,
        "consumer",
        log_dir,
        agent=agent,
        attach=attach,
        jvm_properties=timings.client_jvm_properties(),
        hosted={c.name: c.options() for c in consumers},
        namesrv=namesrv,
        heartbeat_ms=timings.client_heartbeat_interval_ms,
    )


def process_plan(consumers: Sequence[tuple[Hashable, ConsumerSpec, bool]]) -> list[list[int]]:
    """Which consumers share a process, as lists of indices into ``consumers``: (key, spec, own_process) each.
    Consumers with equal keys (what their process is: its client line, its agent's settings) share one, in the
    order given, except a consumer with ``own_process`` (one a signal is for) and consumers that would share a
    client id, which never share one."""
    processes: list[tuple[Hashable, bool, list[int]]] = []
    for index, (key, spec, own_process) in enumerate(consumers):
        joins = next(
            (
                members
                for k, alone, members in processes
                if k == key
                and not alone
                and not own_process
                and spec.identity not in {consumers[m][1].identity for m in members}
            ),
            None,
        )
        if joins is None:
            processes.append((key, own_process, [index]))
        else:
            joins.append(index)
    return [members for _, _, members in processes]


def planned_consumers(plan: Sequence[Sequence[int]], processes: Sequence[ClientProcess]) -> list[HostedConsumer]:
    """The consumers of ``processes``, made by ``plan`` (``process_plan``), in the order ``plan`` was made from."""
    by_index = {
        index: hosted
        for members, process in zip(plan, processes, strict=True)
        for index, hosted in zip(members, process.consumers(), strict=True)
    }
    return [by_index[i] for i in range(len(by_index))]


def start_all(processes: Sequence[ClientProcess], timeout_s: float = 120.0) -> None:
    """Start client processes at once and wait until every one has started all its clients (the client jars
    are built first, once, rather than once per thread)."""
    for line in sorted({p.line for p in processes}):
        agent_artifacts.client_classpath(line)
    with ThreadPoolExecutor(max_workers=max(1, len(processes))) as pool:
        list(pool.map(lambda p: p.start(timeout_s), processes))


def stop_all(processes: Sequence[ClientProcess], grace_s: float = 20.0) -> None:
    """Stop client processes at once (SIGCONT, SIGTERM, then SIGKILL after ``grace_s``)."""
    with ThreadPoolExecutor(max_workers=max(1, len(processes))) as pool:
        list(pool.map(lambda p: p.stop(grace_s), processes))


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
    """A process (not started) of one push consumer of client line ``line``, named by its instance name (see
    ``ConsumerSpec`` and ``consumer_host``)."""
    spec = ConsumerSpec(
        instance_name,
        group,
        topics,
        client_ip=client_ip,
        strategy=strategy,
        model=model,
        client_rebalance=client_rebalance,
    )
    return consumer_host(line, log_dir, [spec], namesrv=namesrv, timings=timings, agent=agent)
