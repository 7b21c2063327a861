"""``rebalance-monitor demo --rocketmq``: the live view over a real local RocketMQ cluster.

Starts, showing progress, the project's Kafka broker and local RocketMQ cluster (each unless already running),
two topics with 4 queues on each of the two brokers, the collector, real push consumers of both client lines
(independent clients, several to a JVM; the one the script crashes and each of the pair sharing a client ID in a
JVM of its own; the heartbeat and rebalance wait interval set on them explicitly) and the real job. Once the monitor
runs it plays a script on the cluster: a pair of consumers sharing one client ID joins a group, a member
subscribing another topic than the others joins another, a consumer is SIGKILLed, a new member scales a group
out. Ctrl-C or ``--duration`` stops every process it started, by PID.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from connectors.jvm_artifacts import PROJECT_ROOT
from connectors.metric_catalogue import Metrics
from localenv.rocketmq_clients import (
    ClientProcess,
    ConsumerSpec,
    HostedConsumer,
    consumer_host,
    planned_consumers,
    process_plan,
)
from localenv.rocketmq_cluster import TEST_SPEED, VERSION_BY_LINE
from streaming.app.demo import (
    FALLING_BEHIND_LOGGER,
    _say,
    _StatusLine,
    _Waiting,
    job_setup,
    show,
    start_kafka,
    state_summary,
    view_lines,
)

if TYPE_CHECKING:
    from streaming.config import MonitorConfig
    from streaming.job.runner import MonitorJob

QUEUES_PER_BROKER = 4
FIRST_STEP_S = 8.0  # from the monitor running to the script's first step
STEP_GAP_S = 12.0  # between the starts of the script's steps
GROUPS_WAIT_S = 600.0  # the script starts when the monitor shows the initial groups, or after this long
TWIN_IP = "192.0.2.7"  # a documentation address (RFC 5737): the client IP the duplicate pair shares
CLIENT_VERSION = {"5": "5.3.3", "4.9": "4.9.8"}


@dataclass
class RocketMQDemoSettings:
    line: str = "5"  # the cluster's line; the consumers are of both client lines
    duration_s: float | None = None  # counted from the script's start
    metrics_port: int = 9464
    live: bool = True


@dataclass(frozen=True)
class Consumer:
    name: str
    line: str
    group: str
    topics: tuple[str, ...]
    instance_name: str | None = None  # default: the name; equal names and client IPs make one client ID
    client_ip: str | None = None
    own_process: bool = False  # the script signals it: no other consumer in its JVM

    def spec(self) -> ConsumerSpec:
        return ConsumerSpec(self.name, self.group, ",".join(self.topics), self.instance_name, self.client_ip)


class Fleet:
    """The demo's consumer processes: started in parallel, every one stopped by ``stop_all`` (also those a
    script step was starting at the time)."""

    def __init__(self, namesrv: str, log_dir: Path) -> None:
        self.namesrv, self.log_dir = namesrv, log_dir
        self.clients: list[ClientProcess] = []
        self.named: dict[str, HostedConsumer] = {}  # the last started under each name
        self._lock = threading.Lock()
        self._closed = False

    def start(self, consumers: list[Consumer]) -> list[HostedConsumer]:
        """Start ``consumers``, those of one client line sharing a JVM (``process_plan``); in the order given."""
        plan = process_plan([(c.line, c.spec(), c.own_process) for c in consumers])
        with self._lock:
            if self._closed:
                raise RuntimeError("the demo is stopping")
            processes = []
            for members in plan:
                first = consumers[members[0]]
                process = consumer_host(
                    first.line,
                    self.log_dir / f"{first.name}-{len(self.clients)}",
                    [consumers[m].spec() for m in members],
                    namesrv=self.namesrv,
                    timings=TEST_SPEED,
                )
                self.clients.append(process)
                processes.append(process)
                process.launch()
        for process in processes:
            process.wait_started(120.0)
        started = planned_consumers(plan, processes)
        for c, client in zip(consumers, started, strict=True):
            self.named[c.name] = client
            _say(
                f"  consumer {c.name} (client {CLIENT_VERSION[c.line]}) in {c.group}, topics {','.join(c.topics)}: "
                f"client id {client.client_id}, pid {client.pid}"
            )
        return started

    def stop_all(self) -> int:
        """Stop every client (SIGTERM, SIGKILL after a grace period); how many there were."""
        with self._lock:
            self._closed = True
            clients = list(self.clients)
        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(lambda c: c.stop(grace_s=15.0), clients))
        return len(clients)


class Script:
    """The demo's groups, its initial consumers and the steps played once the monitor runs."""

    def __init__(self, prefix: str, client_line: str, fleet: Fleet) -> None:
        self.fleet = fleet
        self.payments, self.refunds = f"{prefix}-payments", f"{prefix}-refunds"
        self.orders, self.ledger, self.audit = (f"{prefix}-{g}" for g in ("orders", "ledger", "audit"))
        other = "4.9" if client_line == "5" else "5"
        self.line, self.other = client_line, other
        self.done: list[str] = []
        self.steps: list[tuple[str, Callable[[], str]]] = [
            ("duplicate client ID", self._duplicate),
            ("inconsistent subscription", self._inconsistent),
            ("crash", self._crash),
            ("scale-out", self._scale_out),
        ]

    @property
    def topics(self) -> tuple[str, str]:
        return self.payments, self.refunds

    def initial(self) -> list[Consumer]:
        return [
            Consumer("orders-1", self.line, self.orders, (self.payments,)),
            Consumer("orders-2", self.other, self.orders, (self.payments,)),
            Consumer("orders-3", self.line, self.orders, (self.payments,), own_process=True),  # crashed
            Consumer("ledger-1", self.other, self.ledger, (self.payments,)),
            Consumer("audit-1", self.line, self.audit, (self.payments,)),
            Consumer("audit-2", self.other, self.audit, (self.payments,)),
        ]

    def _duplicate(self) -> str:
        twins = self.fleet.start(
            [Consumer("ledger-twin", self.line, self.ledger, (self.payments,), client_ip=TWIN_IP)] * 2
        )
        return (
            f"duplicate client ID: two consumers with client id {twins[0].client_id} joined {self.ledger} "
            f"(pids {twins[0].pid}, {twins[1].pid})"
        )

    def _inconsistent(self) -> str:
        # It subscribes the other topic instead: whichever of the members' subscriptions a broker's table holds
        # (it keeps the last full heartbeat's), some member does not subscribe a topic the group consumes.
        (client,) = self.fleet.start([Consumer("audit-3", self.line, self.audit, (self.refunds,))])
        return (
            f"inconsistent subscription: {client.client_id} joined {self.audit} subscribing {self.refunds} "
            f"instead of {self.payments}, which its other members subscribe (pid {client.pid})"
        )

    def _crash(self) -> str:
        victim = self.fleet.named["orders-3"]
        victim.kill()
        victim.wait_exit(30)
        return f"crash: SIGKILL consumer orders-3 of {self.orders}, client id {victim.client_id} (pid {victim.pid})"

    def _scale_out(self) -> str:
        (client,) = self.fleet.start([Consumer("orders-4", self.other, self.orders, (self.payments,))])
        return f"scale-out: client id {client.client_id} joined {self.orders} (pid {client.pid})"

    def play(self, ready: threading.Event, stopping: threading.Event, clock: dict[str, float]) -> None:
        """The steps, from ``FIRST_STEP_S`` after ``ready`` (the monitor shows the initial groups), ``STEP_GAP_S``
        apart (or at once after a step that took longer); ends early when ``stopping`` is set."""
        while not ready.wait(0.5):
            if stopping.is_set():
                return
            if "up" in clock and time.monotonic() - clock["up"] > GROUPS_WAIT_S:
                _say(f"the monitor shows no group {GROUPS_WAIT_S:.0f} s after it started; the script starts anyway")
                break
        begun = time.monotonic()
        for index, (title, step) in enumerate(self.steps):
            due = begun + FIRST_STEP_S + index * STEP_GAP_S
            if stopping.wait(max(0.0, due - time.monotonic())):
                return
            try:
                line = f"+{time.monotonic() - clock['up']:.0f} s {step()}"
            except Exception as error:  # noqa: BLE001 - the demo goes on without the step
                line = f"{title} failed: {error}"
            self.done.append(line)
            _say(line)


class _RocketMQSide:
    """The cluster, its topics, the collector and the initial consumers, started in a thread of their own while
    Spark starts; ``stop`` stops by PID what it started (a cluster found running is left running)."""

    def __init__(self, line: str, prefix: str, run_dir: Path, config: MonitorConfig) -> None:
        from localenv.rocketmq_cluster import LocalRocketMQCluster

        self.line, self.prefix, self.run_dir = line, prefix, run_dir
        self.config = config  # the collector's, but for the name server's address (known once it runs)
        self.cluster = LocalRocketMQCluster(line)
        self.started_cluster = False
        self.namesrv = ""
        self.collector: Any = None
        self.fleet: Fleet | None = None
        self.script: Script | None = None
        self.ready, self.stopping = threading.Event(), threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="demo-rocketmq", daemon=True)

    def _run(self) -> None:
        try:
            self._start()
        except BaseException as error:  # noqa: BLE001 - reported by the main thread
            self.error = error

    def _check(self) -> None:
        if self.stopping.is_set():
            raise RuntimeError("the demo is stopping")

    def _start(self) -> None:
        from connectors.rocketmq_collector import CollectorProcess

        version = VERSION_BY_LINE[self.line]
        phase = time.monotonic()
        _say(f"starting the local RocketMQ {version} cluster (a name server, broker-a, broker-b) ...")
        self.started_cluster = self.cluster.info() is None
        info = self.cluster.start()
        self.namesrv = info.namesrv_addr
        pids = ", ".join(f"{name} pid {p.pid}" for name, p in info.brokers.items())
        _say(
            f"RocketMQ {version} {'ready' if self.started_cluster else 'already running'}: name server "
            f"{info.namesrv_addr} (pid {info.namesrv.pid}), {pids} ({time.monotonic() - phase:.0f} s)"
        )
        self._check()
        self.fleet = Fleet(info.namesrv_addr, self.run_dir / "clients")
        self.script = Script(self.prefix, self.line, self.fleet)
        for topic in self.script.topics:
            self.cluster.create_topic(topic, QUEUES_PER_BROKER)
        _say(f"topics {', '.join(self.script.topics)}: {QUEUES_PER_BROKER} queues on each of broker-a and broker-b")
        self._check()
        phase = time.monotonic()
        config = replace(self.config, collector=replace(self.config.collector, namesrv_addr=self.namesrv))
        self.collector = CollectorProcess(config, self.run_dir / "collector")
        self.collector.start()
        self.collector.wait_polling()
        _say(
            f"collector polling every {config.collector.poll_interval_ms} ms (pid {self.collector.pid}, "
            f"{time.monotonic() - phase:.0f} s; log {self.collector.log_path})"
        )
        self._check()
        phase = time.monotonic()
        _say(
            f"starting consumers of client lines {CLIENT_VERSION['5']} and {CLIENT_VERSION['4.9']} (heartbeat "
            f"{TEST_SPEED.client_heartbeat_interval_ms} ms, rebalance wait {TEST_SPEED.rebalance_wait_interval_ms} "
            f"ms) ..."
        )
        self.fleet.start(self.script.initial())
        _say(f"consumers running ({time.monotonic() - phase:.0f} s)")
        self.ready.set()

    def stop(self) -> list[tuple[str, Callable[[], object]]]:
        """What to stop, in order, once the start-up thread has ended (waited for: it checks between phases)."""
        self.stopping.set()
        self.thread.join(timeout=300)
        steps: list[tuple[str, Callable[[], object]]] = []
        if self.fleet is not None:
            steps.append(("consumers", self.fleet.stop_all))
        if self.collector is not None:
            steps.append(("collector", self.collector.stop))
        if self.started_cluster:
            steps.append(("RocketMQ cluster", self.cluster.stop))
        return steps


def rocketmq_cluster_config(config: MonitorConfig, prefix: str, collector_metrics_port: int) -> MonitorConfig:
    """``config`` for the local cluster: a 60 s stop grace (a busy machine's batch still commits when the demo
    stops), a 5 s watermark delay, 2 shards, and a collector polling the groups named ``<prefix>-*`` every 2 s
    (running info every 5 s) with its metrics on ``collector_metrics_port``."""
    return replace(
        config,
        spark=replace(config.spark, stop_grace_seconds=60),
        ingest=replace(config.ingest, watermark_delay="5 seconds"),
        membership=replace(config.membership, shards=2),
        collector=replace(
            config.collector,
            collector_id=prefix,
            poll_interval_ms=2_000,
            running_info_interval_ms=5_000,
            include_groups=(f"{prefix}-*",),
            metrics_port=collector_metrics_port,
        ),
    )


def run_rocketmq_demo(settings: RocketMQDemoSettings) -> int:
    """Run the demo on a local RocketMQ cluster until Ctrl-C or ``--duration``, stop by PID what it started and
    print where the results are; the exit code (1 if the RocketMQ side or a stop failed)."""
    from connectors.processes import free_port
    from localenv.kafka_broker import LocalKafkaBroker
    from streaming.job.runner import MonitorJob

    status = _StatusLine()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    prefix = f"demo-{stamp[-6:]}"
    run_dir = PROJECT_ROOT / ".run" / "demo" / f"{stamp}-rocketmq"
    version = VERSION_BY_LINE[settings.line]
    kafka = LocalKafkaBroker(PROJECT_ROOT / ".run" / "kafka")
    started_kafka = False
    side: _RocketMQSide | None = None
    script_thread: threading.Thread | None = None
    port = 0
    code = 1
    try:
        _fetch_jars_and_clients(status, settings.line)
        started_kafka = kafka.info() is None  # before its start: a half-started broker is stopped too
        kafka_info = start_kafka(kafka, status)
        _, config = job_setup(kafka_info.bootstrap_servers, stamp, run_dir, settings.metrics_port)
        config = rocketmq_cluster_config(config, prefix, free_port())
        port = config.metrics.port
        _say(f"Delta tables: {run_dir / 'delta'} (readable with rebalance-monitor query while the demo runs)")

        # The cluster, the collector and the consumers start while Spark does: neither needs the other yet.
        side = _RocketMQSide(settings.line, prefix, run_dir, config)
        side.thread.start()
        _say("starting Spark and the monitor ...")
        job = MonitorJob(config)
        waiting = _Waiting(status, "starting Spark, creating the Delta tables, starting the two queries")
        view = _RocketMQView(settings, version, side, port, waiting)
        script_thread = threading.Thread(
            target=_play_script, args=(side, view.monitor_shows, view.clock), name="demo-script", daemon=True
        )
        script_thread.start()
        try:
            code = job.run(on_tick=view.tick)
        finally:
            waiting.stop()
        code = 1 if "failed" in view.clock else code
    finally:
        code = _stop_everything(code, side, script_thread, kafka if started_kafka else None)
    _print_rocketmq_results(run_dir, port, side, settings.line)
    return code


def _fetch_jars_and_clients(status: _StatusLine, line: str) -> None:
    """The jars of Spark, Kafka, the collector and client line ``line``, and the test clients of both lines,
    downloaded and compiled on the first run, with progress on ``status``."""
    from connectors import jvm_artifacts
    from localenv import agent_artifacts
    from localenv.rocketmq_cluster import PROFILE_BY_LINE

    phase = time.monotonic()
    _say("JVM jars and test clients (first run: downloaded from Maven Central, compiled) ...")
    profiles = ("spark", "kafka", "collector", PROFILE_BY_LINE[line])
    counts = {profile: len(jvm_artifacts.jars(profile, status.update)) for profile in profiles}
    for client_line in CLIENT_VERSION:
        agent_artifacts.client_classpath(client_line)
    status.done()
    _say(
        f"jars ready: {', '.join(f'{p} {n}' for p, n in counts.items())}, test clients of both client "
        f"lines ({time.monotonic() - phase:.0f} s)"
    )


class _RocketMQView:
    """The demo's ``on_tick``: says when the monitor runs, starts the script once the monitor shows the initial
    groups (``monitor_shows``), shows the live view (or a line now and then), and says when to stop."""

    def __init__(
        self, settings: RocketMQDemoSettings, version: str, side: _RocketMQSide, port: int, waiting: _Waiting
    ) -> None:
        self.settings, self.side, self.port, self.waiting = settings, side, port, waiting
        self.version = version
        self.monitor_shows = threading.Event()  # the monitor shows the initial groups: the script may start
        self.clock: dict[str, float] = {}

    def tick(self, job: MonitorJob) -> bool:
        from streaming.job.runtime.spark_session import set_logger_levels

        side, clock, settings = self.side, self.clock, self.settings
        now = time.monotonic()
        if "up" not in clock:
            set_logger_levels(job.session, {FALLING_BEHIND_LOGGER: "ERROR"})
            _say(
                f"monitor running ({self.waiting.stop():.0f} s, Spark JVM pid {_jvm_pid(job)}); metrics on "
                f"http://127.0.0.1:{self.port}/metrics"
            )
            clock["up"] = now
        if side.error is not None:
            _say(f"the RocketMQ side could not start: {side.error}")
            clock["failed"] = 1.0
            return True
        if side.ready.is_set() and not self.monitor_shows.is_set() and _caught_up(job):
            _say(f"the monitor's first consumer batch is done and shows {_groups(job)} groups; the script starts")
            clock["script"] = now
            self.monitor_shows.set()
        elapsed = now - clock["up"]
        # --duration counts from the script's start (from GROUPS_WAIT_S after the monitor runs at the latest)
        since = clock.get("script", clock["up"] + GROUPS_WAIT_S)
        if settings.live:
            show(self.live_view(job, elapsed))
        elif now - clock.get("last_line", 0.0) >= 15:
            clock["last_line"] = now
            _say(f"+{elapsed:.0f} s; {state_summary(job)}")
        return settings.duration_s is not None and now - since >= settings.duration_s

    def live_view(self, job: MonitorJob, elapsed: float) -> list[str]:
        """The terminal's lines: the monitor's view, the script's steps done and those to come."""
        script = self.side.script
        header = (
            f"RocketMQ rebalance monitor -- demo on a local RocketMQ {self.version} cluster "
            f"({self.side.namesrv or 'starting'}), +{elapsed:.0f} s, metrics http://127.0.0.1:{self.port}/metrics"
        )
        done = script.done if script is not None else []
        upcoming = [title for title, _ in script.steps[len(done) :]] if script is not None else []
        steps = [f"  {line}" for line in done] + ([f"  next: {', '.join(upcoming)}"] if upcoming else [])
        return [header, "", *view_lines(job), "", "script:", *steps, "", "Ctrl-C stops the demo."]


def _play_script(side: _RocketMQSide, monitor_shows: threading.Event, clock: dict[str, float]) -> None:
    """Once the RocketMQ side is ready, play its script (unless the demo stops or the side failed first)."""
    while not side.ready.wait(0.5):
        if side.stopping.is_set() or side.error is not None:
            return
    side.script.play(monitor_shows, side.stopping, clock)


def _print_rocketmq_results(run_dir: Path, port: int, side: _RocketMQSide | None, line: str) -> None:
    """Where the demo's results are, what was left running, and commands that read the results."""
    print()
    _say("stopped. Results:")
    print(f"  Delta tables : {run_dir / 'delta'}  (one folder per table, see docs/tables.md)")
    print(f"  metrics      : were served on http://127.0.0.1:{port}/metrics")
    if side is not None and side.collector is not None:
        print(f"  collector log: {side.collector.log_path}")
    if side is not None and not side.started_cluster and side.namesrv:
        print(f"  RocketMQ     : left running as found (rebalance-monitor rocketmq stop --line {line})")
    if side is not None and side.script is not None:
        delta, script = run_dir / "delta", side.script
        print("  try:")
        print(f"    .venv/bin/rebalance-monitor query anomalies --delta-root {delta}")
        print(f"    .venv/bin/rebalance-monitor query assignment --delta-root {delta} --group {script.ledger}")
        print(
            f'    .venv/bin/rebalance-monitor query sql --delta-root {delta} "select * from membership_changes '
            f'where \\"group\\" = \'{script.orders}\'"'
        )


def _caught_up(job: Any) -> bool:
    """The consumer query has completed a batch (the backlog since the collector started) and shows groups."""
    return "consumer" in job.board.snapshot() and _groups(job) > 0


def _groups(job: Any) -> int:
    with job.metrics.lock:
        return len(job.metrics.gauges.get(Metrics.GROUP_MEMBERS.name, {}))


def _jvm_pid(job: Any) -> str:
    try:
        return str(job.session._jvm.java.lang.ProcessHandle.current().pid())
    except Exception:  # noqa: BLE001 - only shown
        return "?"


def _stop_everything(code: int, side: _RocketMQSide | None, script_thread: threading.Thread | None, kafka: Any) -> int:
    """Stop, by PID, every process the demo started, Ctrl-C ignored meanwhile; the exit code (1 if one failed)."""
    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if in_main else None
    try:
        steps = side.stop() if side is not None else []
        if script_thread is not None:
            script_thread.join(timeout=5)  # a step still starting a consumer fails once the fleet is closed
        if kafka is not None:
            steps.append(("Kafka broker", kafka.stop))
        for what, stop in steps:
            phase = time.monotonic()
            try:
                stop()
                _say(f"stopped the {what} ({time.monotonic() - phase:.0f} s)")
            except Exception as error:  # noqa: BLE001 - the others must still be stopped
                _say(f"could not stop the {what}: {error}")
                code = 1
        if side is not None and side.fleet is not None and script_thread is not None and script_thread.is_alive():
            script_thread.join(timeout=130)
            side.fleet.stop_all()
        return code
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
