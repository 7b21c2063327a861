"""``rebalance-monitor demo``: the local broker, the fleet simulator and the real job, with a live view.

Starts (showing progress) the project's Kafka broker, then the streaming job with local Delta tables and
the metrics endpoint, and feeds it a simulated fleet (the ``mixed`` scenario by default) whose event time
runs ``--speed`` times faster than wall time, so channel expiry and fault windows show up in seconds.
The terminal view updates in place: groups and their state, consume lag and queues in alerting progress
states, open anomalies, avoided brokers, input rate, last batch. Ctrl-C, ``--duration`` or ``--simulated`` (the
fleet time the monitor has processed) stops everything cleanly and prints where the results are.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from connectors.jvm_artifacts import PROJECT_ROOT
from connectors.metric_catalogue import Metrics
from streaming.domain.progress.verdict import QueueState, alerts_on
from streaming.domain.vocabulary import in_cluster as named

if TYPE_CHECKING:
    from connectors.emitter import EventEmitter
    from streaming.app.simulation.fleet import Scenario, Simulation
    from streaming.config import MonitorConfig
    from streaming.job.runner import MonitorJob

MAX_FUTURE_SKEW_MS = 86_400_000  # the most ingest.max_future_skew_ms allows (a day)
HEAD_START_MS = 12 * 3_600_000  # simulated time starts this long before the wall clock
# Warns "Current batch is falling behind" after every micro-batch longer than the trigger interval. The demo
# keeps its queries busy on purpose (a short trigger, the fleet paced by their progress), so on a small machine
# it said so after nearly every batch; its status line shows each query's batch time instead.
FALLING_BEHIND_LOGGER = "org.apache.spark.sql.execution.streaming.runtime.ProcessingTimeExecutor"
# The consume-progress states the live view names beside a group: those whose severity alerts.
ALERTING_STATES = frozenset(s for s in QueueState if alerts_on(s))


def processed_ms(job: Any, queries: tuple[str, ...]) -> int:
    """The event time the given queries have all processed up to (their smallest watermark; 0 before any).

    Only queries whose watermark follows Kafka: send-ingest has none (its fault replay keeps its own)."""
    from datetime import datetime

    progress = job.board.snapshot()
    marks = []
    for name in queries:
        watermark = getattr(progress.get(name), "watermark", None)
        if not watermark:
            return 0
        marks.append(int(datetime.fromisoformat(watermark.replace("Z", "+00:00")).timestamp() * 1000))
    return min(marks)


@dataclass
class DemoSettings:
    scenario: str = "mixed"
    duration_s: float | None = None
    speed: float = 20.0
    seed: int = 1
    metrics_port: int = 9464
    live: bool = True
    extra_groups: int = 0  # healthy load groups beside the scenario's
    clients_per_group: int = 4
    queues_per_broker: int = 4
    sends_per_second: float | None = None  # per producer; None: the scenario's own (0.8/s)
    # Stop the job this many times, evenly over duration_s (or simulated_s), and start it again on the same
    # checkpoints and tables while the fleet goes on (what a restart keeps, over a long run: ``bench_soak``).
    restarts: int = 0
    # Stop once the monitor has processed this many seconds of fleet time (its event-time watermark), each run
    # (see ``restarts``) at its share: a run of known content however fast the machine is. With ``duration_s``
    # as well, whichever comes first.
    simulated_s: float | None = None
    # Simulated time runs at most this far ahead of what the job has processed. A longer lead lets the fleet
    # go faster on a slow machine, in larger batches and with a view further behind the fleet.
    lead_s: float = 180.0
    # A running Kafka broker (host:port) to use and leave running; None starts the local one and stops it after.
    bootstrap_servers: str | None = None


def _say(message: str) -> None:
    print(f"[demo] {message}", flush=True)


class _StatusLine:
    """One line that updates in place on a terminal (a line per update, thinned out, otherwise)."""

    def __init__(self) -> None:
        self.tty = sys.stdout.isatty()
        self.last_print = 0.0
        self.width = 0

    def update(self, text: str) -> None:
        line = f"[demo]   {text}"
        if self.tty:
            sys.stdout.write("\r" + line[:160].ljust(self.width) + "\r")
            self.width = min(max(self.width, len(line)), 160)
            sys.stdout.flush()
        elif time.monotonic() - self.last_print >= 5 or text.endswith(("ready", "done")) or " ready in " in text:
            print(line, flush=True)
            self.last_print = time.monotonic()

    def done(self) -> None:
        if self.tty and self.width:
            sys.stdout.write("\r" + " " * self.width + "\r")
            sys.stdout.flush()
        self.width = 0


class _Waiting:
    """While a phase runs, show that it runs and for how long (Spark's start-up says nothing for a while)."""

    def __init__(self, status: _StatusLine, what: str) -> None:
        self.status, self.what = status, what
        self.started = time.monotonic()
        self.finished = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.finished.wait(1.0):
            self.status.update(f"{self.what} ... {time.monotonic() - self.started:.0f} s")

    def stop(self) -> float:
        if not self.finished.is_set():
            self.finished.set()
            self.thread.join(timeout=2)
            self.status.done()
        return time.monotonic() - self.started


def start_kafka(broker: Any, status: _StatusLine) -> Any:
    """Start the local Kafka broker (or find it running) behind a waiting line; its ``BrokerInfo``."""
    _say("starting the local Kafka broker on 127.0.0.1 ...")
    phase = time.monotonic()
    running = broker.info() is not None
    waiting = _Waiting(status, "waiting for the broker")
    try:
        info = broker.start()
    finally:
        waiting.stop()
    _say(
        f"Kafka broker {'already running' if running else 'ready'} at {info.bootstrap_servers} "
        f"(pid {info.pid}, {time.monotonic() - phase:.0f} s)"
    )
    return info


def job_config(bootstrap: str, topics: Mapping[str, str], run_dir: Path, metrics_port: int) -> MonitorConfig:
    """A demo job's configuration: the defaults with ``topics`` (event type -> Kafka topic), tables and
    checkpoints under ``run_dir``, a 3 s trigger and ``metrics_port``."""
    from streaming.config import MonitorConfig
    from streaming.contract.events import TOPIC_OPTIONS

    c = MonitorConfig()
    own_topics = {t: name for t, name in topics.items() if TOPIC_OPTIONS[t] == t}
    return replace(
        c,
        kafka=replace(c.kafka, bootstrap_servers=bootstrap, topics=replace(c.kafka.topics, **own_topics)),
        paths=replace(c.paths, delta_root=str(run_dir / "delta"), checkpoint_root=str(run_dir / "checkpoints")),
        spark=replace(c.spark, trigger_interval="3 seconds"),
        metrics=replace(c.metrics, port=metrics_port),
    )


def job_setup(bootstrap: str, stamp: str, run_dir: Path, metrics_port: int) -> tuple[dict[str, str], MonitorConfig]:
    """A demo job's own topics (``demo-<stamp>.*``, created) and its ``job_config``, whose metrics port is
    ``metrics_port``, or a free port when that one is taken."""
    from connectors.kafka_topics import create_topics
    from connectors.processes import free_port, port_is_open
    from streaming.contract.events import DEFAULT_TOPICS

    topics = {t: f"demo-{stamp}.{name.split('.', 1)[1]}" for t, name in DEFAULT_TOPICS.items()}
    create_topics(bootstrap, topics.values())
    port = metrics_port if not port_is_open(metrics_port) else free_port()
    return topics, job_config(bootstrap, topics, run_dir, port)


def simulated_fleet_config(config: MonitorConfig) -> MonitorConfig:
    """``config`` for the simulated fleet: a 10 s watermark delay, 4 shards, and the longest future skew the
    configuration allows, because simulated time runs ahead of the Kafka record timestamps (wall clock)."""
    return replace(
        config,
        ingest=replace(config.ingest, watermark_delay="10 seconds", max_future_skew_ms=MAX_FUTURE_SKEW_MS),
        membership=replace(config.membership, shards=4),
    )


def run_demo(settings: DemoSettings) -> int:
    """Run the demo until Ctrl-C or ``--duration``, then print where the results are; the job's exit code."""
    from connectors.emitter import EventEmitter
    from localenv.kafka_broker import LocalKafkaBroker
    from streaming.app.simulation.fleet import build_scenario

    scenario = build_scenario(
        settings.scenario,
        settings.seed,
        extra_groups=settings.extra_groups,
        clients_per_group=settings.clients_per_group,
    )
    status = _StatusLine()
    _fetch_jars(status)
    broker = None
    if settings.bootstrap_servers is None:
        broker = LocalKafkaBroker(PROJECT_ROOT / ".run" / "kafka")
        bootstrap = start_kafka(broker, status).bootstrap_servers
    else:
        bootstrap = settings.bootstrap_servers
        _say(f"Kafka broker at {bootstrap} (already running, left running)")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    run_dir = PROJECT_ROOT / ".run" / "demo" / stamp
    topics, config = job_setup(bootstrap, stamp, run_dir, settings.metrics_port)
    config = simulated_fleet_config(config)
    emitter = EventEmitter(bootstrap, topics)
    simulation, start_ms = _simulation(settings, scenario)
    _say(f"starting Spark and the monitor (scenario {scenario.name}: {scenario.description}) ...")
    waiting = _Waiting(status, "starting Spark, creating the Delta tables, starting the two queries")
    feed = _FleetFeed(settings, scenario.name, emitter, simulation, start_ms, config.metrics.port, waiting)
    try:
        code = _run_job(settings, config, feed)
    finally:
        waiting.stop()
        try:
            emitter.close()
        finally:
            if broker is not None:
                broker.stop()
    _print_results(scenario, simulation, start_ms, run_dir, config.metrics.port, emitter)
    return code


def _run_job(settings: DemoSettings, config: MonitorConfig, feed: _FleetFeed) -> int:
    """The job for ``duration_s`` or ``simulated_s`` (or until Ctrl-C), stopped and started again ``restarts``
    times on the same checkpoints and tables; the last run's exit code, or the first non-zero one."""
    from streaming.job.runner import MonitorJob

    runs = settings.restarts + 1
    run_s = None if settings.duration_s is None else settings.duration_s / runs
    for run in range(1, runs + 1):
        started = time.monotonic()
        if settings.simulated_s is not None:
            feed.until_ms = feed.start_ms + int(settings.simulated_s * 1000 * run / runs)
        feed.reached = False
        # quiet before its queries start: a first batch can end before the first tick on a busy machine
        job = MonitorJob(config, logger_levels={FALLING_BEHIND_LOGGER: "ERROR"})
        code = job.run(duration_s=run_s, on_tick=feed.tick)
        # a run that ended before its share of the duration or of the fleet time was stopped by Ctrl-C or SIGTERM
        done = feed.reached or (run_s is not None and time.monotonic() - started >= run_s)
        if code != 0 or run == runs or not done:
            return code
        _say(f"restart {run} of {settings.restarts}: a new job on the same checkpoints and Delta tables ...")
    return code


def _fetch_jars(status: _StatusLine) -> None:
    """The Spark and Kafka jars, downloaded on the first run, with progress on ``status``."""
    from connectors import jvm_artifacts

    phase = time.monotonic()
    _say("JVM jars (first run: downloaded from Maven Central into .cache/jars) ...")
    counts = {profile: len(jvm_artifacts.jars(profile, status.update)) for profile in ("spark", "kafka")}
    status.done()
    _say(f"jars ready: {', '.join(f'{p} {n}' for p, n in counts.items())} ({time.monotonic() - phase:.0f} s)")


def _simulation(settings: DemoSettings, scenario: Scenario) -> tuple[Simulation, int]:
    """The simulated fleet of ``scenario`` and the simulated time it starts at."""
    from streaming.app.simulation.fleet import Simulation

    # Simulated time starts in the past, so that running --speed times faster it stays within the job's
    # future-skew limit of the wall clock for a long while; once it would not, it runs at wall-clock speed.
    start_ms = int(time.time() * 1000) - HEAD_START_MS
    simulation = Simulation(
        scenario,
        start_ms,
        settings.seed,
        queues_per_broker=settings.queues_per_broker,
        sends_per_second=settings.sends_per_second,
    )
    return simulation, start_ms


class _FleetFeed:
    """The demo's ``on_tick``: once the monitor runs, sends the simulated fleet's events up to a simulated time
    that runs ``--speed`` times faster than the wall clock, and shows the live view (or a line now and then)."""

    PACED_BY = ("consumer",)  # the query with an event-time watermark over Kafka (send-ingest has none)

    def __init__(
        self,
        settings: DemoSettings,
        scenario_name: str,
        emitter: EventEmitter,
        simulation: Simulation,
        start_ms: int,
        port: int,
        waiting: _Waiting,
    ) -> None:
        self.settings, self.scenario_name, self.emitter = settings, scenario_name, emitter
        self.simulation, self.start_ms, self.port, self.waiting = simulation, start_ms, port, waiting
        self.clock: dict[str, float] = {}
        self.until_ms: int | None = None  # the current run stops once the monitor has processed this far
        self.reached = False

    def tick(self, job: MonitorJob) -> bool:
        """Feed the fleet on; True once the run has processed as far as ``until_ms`` (the run then stops)."""
        settings, clock, start_ms = self.settings, self.clock, self.start_ms
        now = time.monotonic()
        if not self.waiting.finished.is_set():
            _say(f"monitor running ({self.waiting.stop():.0f} s); metrics on http://127.0.0.1:{self.port}/metrics")
            clock["last_tick"], clock["virtual"] = now, float(start_ms)  # the fleet starts when the monitor is up
        # Simulated time runs --speed times faster than the wall clock, but never more than --lead ahead of
        # what every query has processed: on a slow machine the fleet slows down instead of piling up a
        # backlog, so each micro-batch stays small and the view stays current.
        advance = (now - clock["last_tick"]) * settings.speed * 1000
        clock["last_tick"] = now
        paced = max(processed_ms(job, self.PACED_BY), start_ms) + int(settings.lead_s * 1000)
        skew_limit = int(time.time() * 1000) + MAX_FUTURE_SKEW_MS - 60_000
        if clock["virtual"] + advance > skew_limit and "capped" not in clock:
            clock["capped"] = 1.0
            if not settings.live:
                _say("simulated time reached the job's future-skew limit: it runs at wall-clock speed from now on")
        clock["virtual"] = max(clock["virtual"], min(clock["virtual"] + advance, paced, skew_limit))
        virtual_now = int(clock["virtual"])
        self.emitter.emit_all(self.simulation.events_until(virtual_now))
        report = self.emitter.flush()
        if report.errors and not settings.live:
            _say(f"{report.failed} event(s) could not be delivered, e.g. {report.errors[-1]}")
        if settings.live:
            render(job, self.scenario_name, virtual_now - start_ms, report.sent, report.failed, self.port)
        self.reached = self.until_ms is not None and processed_ms(job, self.PACED_BY) >= self.until_ms
        if not settings.live and (self.reached or time.monotonic() - clock.get("last_line", 0.0) >= 15):
            clock["last_line"] = time.monotonic()
            _say(summary_line(job, virtual_now - start_ms, report.sent))
        return self.reached


def _print_results(
    scenario: Scenario, simulation: Simulation, start_ms: int, run_dir: Path, port: int, emitter: EventEmitter
) -> None:
    """Where the demo's results are, commands that read them, and what the fleet's consume progress should show."""
    from streaming.app.simulation.progress import fact_lines

    print()
    _say("stopped. Results:")
    print(
        f"  simulated    : {scenario.name}, {(simulation.cursor_ms - start_ms) // 1000} s of fleet time from "
        f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(start_ms / 1000))} (event times, for --at/--since)"
    )
    print(f"  Delta tables : {run_dir / 'delta'}  (one folder per table, see docs/tables.md)")
    print(f"  metrics      : were served on http://127.0.0.1:{port}/metrics")
    print(f"  events       : {emitter.report.sent} sent, {emitter.report.failed} failed")
    for line in fact_lines(simulation.progress.facts(), start_ms):  # not read by the job yet
        print(line)
    delta = run_dir / "delta"
    group = sorted(scenario.group_names)[0]
    for name, kind in sorted(scenario.expected):
        if kind != "BROKER_AVOIDED":
            group = name
            break
    print("  try:")
    print(f"    .venv/bin/rebalance-monitor query anomalies --delta-root {delta}")
    print(f"    .venv/bin/rebalance-monitor query assignment --delta-root {delta} --group {group}")
    print(f"    .venv/bin/rebalance-monitor allocate --delta-root {delta} --group {group} --strategy AVG_BY_CIRCLE")
    if scenario.expected_avoided_brokers:
        broker_name = sorted(scenario.expected_avoided_brokers)[0]
        print(f"    .venv/bin/rebalance-monitor query faults --delta-root {delta} --broker {broker_name}")


def summary_line(job: Any, virtual_ms: int, sent: int) -> str:
    """The live view in one line (``--no-live``)."""
    return f"+{virtual_ms // 1000} s simulated, {sent} events sent; {state_summary(job)}"


def state_summary(job: Any) -> str:
    """Groups, open anomalies, avoided brokers and the queries' last batches, in one line."""
    with job.metrics.lock:
        gauges = {k: dict(v) for k, v in job.metrics.gauges.items()}
    groups = len(gauges.get(Metrics.GROUP_MEMBERS.name, {}))
    anomalies = sorted(
        f"{named(c, g)}:{k}" for (c, g, k), v in gauges.get(Metrics.GROUP_OPEN_ANOMALIES.name, {}).items() if v
    )
    avoided = sorted(named(c, b) for (c, b), v in gauges.get(Metrics.BROKER_PRODUCERS_AVOIDING.name, {}).items() if v)
    progress = sorted(job.board.snapshot().items())
    batches = ", ".join(
        f"{n} #{p.batch_id} {p.input_rows_per_second:.0f} rows/s in {p.batch_duration_ms / 1000:.1f} s"
        for n, p in progress
    )
    return (
        f"{groups} groups; open anomalies: {', '.join(anomalies) or '-'}; "
        f"avoided brokers: {', '.join(avoided) or '-'}; {batches or 'no batch yet'}"
    )


def render(job: Any, scenario: str, virtual_ms: int, sent: int, failed: int, port: int) -> None:
    header = (
        f"RocketMQ rebalance monitor -- demo ({scenario}), simulated time +{virtual_ms // 1000} s, "
        f"{sent} events sent, {failed} failed, metrics http://127.0.0.1:{port}/metrics"
    )
    show([header, "", *view_lines(job), "", "Ctrl-C stops the demo."])


def show(lines: list[str]) -> None:
    """Replace the terminal's content with ``lines``."""
    sys.stdout.write("\x1b[H\x1b[2J" + "\n".join(lines) + "\n")
    sys.stdout.flush()


def view_lines(job: Any) -> list[str]:
    """The live view's body: groups with their members, queues and open anomalies; brokers; queries."""
    state = job.metrics
    with state.lock:
        gauges = {k: dict(v) for k, v in state.gauges.items()}
    members = gauges.get(Metrics.GROUP_MEMBERS.name, {})
    lines = [
        f"{'consumer group':28} {'members':>7} {'gen':>4} {'orphaned':>8} {'double':>6} {'lag':>8}  "
        "open anomalies; queues by alerting progress state"
    ]
    queues = gauges.get(Metrics.GROUP_QUEUES.name, {})
    anomalies = gauges.get(Metrics.GROUP_OPEN_ANOMALIES.name, {})
    lag = gauges.get(Metrics.GROUP_PROGRESS_LAG.name, {})
    states = gauges.get(Metrics.GROUP_PROGRESS_QUEUES.name, {})
    # a group without members (gone, its progress still watched for a backlog) is listed by its lag
    groups = sorted(set(members) | {(c, g) for (c, g, _) in lag})
    for group in groups:
        count = members.get(group, 0)
        orphaned = sum(v for (c, g, _, s), v in queues.items() if (c, g) == group and s == "orphaned")
        doubled = sum(v for (c, g, _, s), v in queues.items() if (c, g) == group and s == "double_owned")
        waiting = [v for (c, g, _), v in lag.items() if (c, g) == group]
        behind = f"{int(sum(waiting))}" if waiting else "-"  # no progress sample of the group: unknown, not 0
        open_kinds = ", ".join(sorted(k for (c, g, k), v in anomalies.items() if (c, g) == group and v)) or "-"
        alerting: dict[str, float] = {}
        for (c, g, _, state), v in states.items():
            if (c, g) == group and v and state in ALERTING_STATES:
                alerting[state] = alerting.get(state, 0) + v
        stuck = ", ".join(f"{state} {int(v)}" for state, v in sorted(alerting.items()))
        generation = gauges.get(Metrics.GROUP_GENERATION.name, {}).get(group, 0)
        lines.append(
            f"{named(*group):28} {int(count):>7} {int(generation):>4} {int(orphaned):>8} {int(doubled):>6} "
            f"{behind:>8}  {open_kinds}{'; ' + stuck if stuck else ''}"
        )
    avoided = {named(c, b): v for (c, b), v in gauges.get(Metrics.BROKER_PRODUCERS_AVOIDING.name, {}).items()}
    lines += [
        "",
        "brokers: " + (", ".join(f"{b}: {int(v)} producer(s) avoiding" for b, v in sorted(avoided.items())) or "-"),
    ]
    lines.append("")
    for name, progress in sorted(job.board.snapshot().items()):
        lines.append(
            f"query {name:14} batch {progress.batch_id:>4}  {progress.input_rows_per_second:8.1f} rows/s in  "
            f"last batch {progress.batch_duration_ms} ms  watermark {progress.watermark}"
        )
    return lines
