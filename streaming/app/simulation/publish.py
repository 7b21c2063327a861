"""``rebalance-monitor simulate``: a simulated RocketMQ fleet's events, into Kafka or a file, without the job.

What it is for: trying a monitor that runs elsewhere (a staging cluster, or ``run --config`` on this
machine) against problems whose answer is known, and giving collector authors real examples of the event
contract. The scenario's events go either to the Kafka topics a monitor's configuration names (keyed as the
contract says, validated before sending, delivery failures reported) or, as JSON lines, to a file.

Pacing into Kafka: fleet time starts at ``start_ms`` and runs ``speed`` times faster than the wall clock,
but never further ahead of the wall clock than the monitor's ``[ingest] max_future_skew_ms`` allows (less a
minute of margin): the monitor would dead-letter such events as ``FUTURE_EVENT_TIME``. So a run at
``--speed 20`` from now falls back to wall-clock speed after a few seconds; start it in the past
(``--start``) to see expiry and fault windows quickly. Into a file there is no pacing: ``fleet_seconds``
of fleet time are written at once, in order of event time.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

SKEW_MARGIN_MS = 60_000  # fleet time stays this far inside the monitor's future-skew limit
CHUNK_MS = 60_000  # a file run generates this much fleet time at a time (bounded memory)


@dataclass(frozen=True)
class SimulateSettings:
    scenario: str = "mixed"
    seed: int = 1
    namespace: str = ""
    extra_groups: int = 0
    clients_per_group: int = 4
    queues_per_broker: int = 4
    sends_per_second: float | None = None
    start_ms: int | None = None  # None: now
    speed: float = 1.0
    fleet_seconds: float | None = None  # stop after this much fleet time
    duration_s: float | None = None  # stop after this much wall time (Kafka only)
    max_future_skew_ms: int = 300_000
    progress_every_s: float = 15.0
    progress_interval_ms: int = 30_000  # consume_progress samples (0: none)
    assignment_reports: bool = False  # each live member's reported_assignment at every sample
    cluster: str | None = None  # the RocketMQ cluster every event names (None: version 1, the default cluster)


def build_simulation(settings: SimulateSettings) -> Any:
    """The scenario's ``Simulation``, from ``settings.start_ms`` (default: now)."""
    from streaming.app.simulation.fleet import Simulation, build_scenario

    start_ms = settings.start_ms if settings.start_ms is not None else int(time.time() * 1000)

    scenario = build_scenario(
        settings.scenario,
        settings.seed,
        namespace=settings.namespace,
        extra_groups=settings.extra_groups,
        clients_per_group=settings.clients_per_group,
    )
    return Simulation(
        scenario,
        start_ms,
        settings.seed,
        queues_per_broker=settings.queues_per_broker,
        sends_per_second=settings.sends_per_second,
        progress_interval_ms=settings.progress_interval_ms,
        assignment_reports=settings.assignment_reports,
        cluster=settings.cluster,
    )


def what_to_expect(scenario: Any) -> list[str]:
    """The scenario's known answer, as lines for a person watching the monitor."""
    from streaming.app.simulation.fleet import AVOIDED

    lines = [f"scenario {scenario.name}: {scenario.description}"]
    lines.append(
        f"  {len(scenario.groups)} consumer group(s), {len(scenario.producers)} producer(s), brokers "
        f"{', '.join(scenario.brokers)}, topics {', '.join(scenario.topics)}"
    )
    if not scenario.expected:
        lines.append("  the monitor should report no anomaly and no avoided broker")
    for name, kind in sorted(scenario.expected):
        what = f"broker {name} avoided by producers" if kind == AVOIDED else f"{kind} in {name}"
        lines.append(f"  expect: {what}")
    return lines


def progress_to_expect(simulation: Any) -> list[str]:
    """What the fleet's consume progress should show at its last sample, from the simulator's own offsets."""
    from streaming.app.simulation.progress import fact_lines

    return fact_lines(simulation.progress.facts(), simulation.start_ms)


def write_events(simulation: Any, until_ms: int, out: IO[str]) -> int:
    """Every event of ``simulation`` before ``until_ms`` as JSON lines, each validated against the contract;
    how many."""
    from streaming.contract.validator import Rejection, validate_event

    written = 0
    while simulation.cursor_ms < until_ms:
        for event in simulation.events_until(min(simulation.cursor_ms + CHUNK_MS, until_ms)):
            line = json.dumps(event, separators=(",", ":"))
            # The simulator makes valid events; checking here keeps the file a faithful contract example.
            verdict = validate_event(line.encode(), event["event_time"] + 1)
            if isinstance(verdict, Rejection):
                raise ValueError(f"the simulator made an invalid event ({verdict.reason}: {verdict.detail})")
            out.write(line + "\n")
            written += 1
    return written


def publish(
    simulation: Any,
    emitter: Any,
    settings: SimulateSettings,
    stop: threading.Event,
    say: Callable[[str], None],
) -> None:
    """Emit the fleet's events paced as the module docstring says, until ``stop``, ``duration_s`` of wall time
    or ``fleet_seconds`` of fleet time; deliveries are awaited after every step (``emitter.report``)."""
    began = last = time.monotonic()
    last_line = began
    virtual = float(simulation.cursor_ms)
    end_ms = None if settings.fleet_seconds is None else simulation.start_ms + int(settings.fleet_seconds * 1000)
    capped = False
    for _ in _steps(stop):
        now = time.monotonic()
        limit = int(time.time() * 1000) + settings.max_future_skew_ms - SKEW_MARGIN_MS
        ahead = virtual + (now - last) * settings.speed * 1000
        if ahead > limit and not capped:
            capped = True
            say("fleet time reached the monitor's future-skew limit: it runs at wall-clock speed from now on")
        virtual = max(virtual, min(ahead, limit))
        if end_ms is not None:
            virtual = min(virtual, end_ms)
        last = now
        emitter.emit_all(simulation.events_until(int(virtual)))
        report = emitter.flush()
        if now - last_line >= settings.progress_every_s:
            last_line = now
            say(progress_line(report, simulation))
        if end_ms is not None and simulation.cursor_ms >= end_ms:
            break
        if settings.duration_s is not None and now - began >= settings.duration_s:
            break


def _steps(stop: threading.Event, interval_s: float = 1.0) -> Iterator[None]:
    """One step now, then one per ``interval_s`` until ``stop`` is set."""
    yield
    while not stop.wait(interval_s):
        yield


def progress_line(report: Any, simulation: Any) -> str:
    """Events handed to Kafka (a ``DeliveryReport``) and the fleet time reached."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(simulation.cursor_ms / 1000))
    failed = f", {report.failed} failed" if report.failed else ""
    fleet_s = (simulation.cursor_ms - simulation.start_ms) // 1000
    return f"{report.sent + report.failed} events{failed}; fleet time {fleet_s} s, at {stamp}"


def run_to_file(settings: SimulateSettings, path: str, say: Callable[[str], None]) -> int:
    """``--output``: ``fleet_seconds`` of events as JSON lines into ``path`` (``-``: standard output)."""
    import sys

    assert settings.fleet_seconds is not None  # the CLI requires it with --output
    simulation = build_simulation(settings)
    until_ms = simulation.start_ms + int(settings.fleet_seconds * 1000)
    if path == "-":
        write_events(simulation, until_ms, sys.stdout)
        sys.stdout.flush()
    else:
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("w", encoding="utf-8") as out:
            written = write_events(simulation, until_ms, out)
        say(f"{written} events of {settings.fleet_seconds:g} s of fleet time written to {target}")
    for line in what_to_expect(simulation.scenario) + progress_to_expect(simulation):
        say(line)
    return 0


class MissingTopics(Exception):
    """The cluster lacks topics to publish to (its brokers may not create topics on first use)."""


def check_topics(
    bootstrap_servers: str,
    topics: Mapping[str, str],
    producer_options: dict[str, Any],
    create: bool,
    replication_factor: int | None = None,
) -> None:
    """Raise ``MissingTopics`` unless every topic of ``topics`` (event type -> topic) exists, creating the missing
    ones first when ``create``, with the contract's settings for their types (``events.topic_configs``) and
    ``replication_factor`` (None: ``connectors.kafka_topics.create_topics``'s default).

    Checked before publishing, because kafka-python blocks for a minute on a send to a topic it cannot
    find and then fails with a metadata timeout that does not name the topic."""
    from connectors.kafka_topics import admin_options, create_topics, missing_topics
    from streaming.contract.events import topic_configs

    # The producer's connection settings (security, timeouts) apply to the admin client too.
    client_options = admin_options(producer_options)
    missing = missing_topics(bootstrap_servers, set(topics.values()), **client_options)
    if missing and create:
        configs = topic_configs(topics)
        create_topics(bootstrap_servers, missing, 2, replication_factor, configs, **client_options)
    elif missing:
        raise MissingTopics(
            f"topic(s) {', '.join(missing)} do not exist on {bootstrap_servers}: create them as the "
            "monitor's topics are created, or pass --create-topics on a test cluster"
        )


def run_to_kafka(
    settings: SimulateSettings,
    bootstrap_servers: str,
    topics: Mapping[str, str],
    producer_options: dict[str, Any],
    say: Callable[[str], None],
    stop: threading.Event | None = None,
    create_missing_topics: bool = False,
    replication_factor: int | None = None,
) -> int:
    """Publish to Kafka until stopped; exit code 1 when any event was not delivered."""
    from connectors.emitter import EventEmitter

    check_topics(bootstrap_servers, topics, producer_options, create_missing_topics, replication_factor)
    stop = stop or threading.Event()
    simulation = build_simulation(settings)
    for line in what_to_expect(simulation.scenario):
        say(line)
    say(f"publishing to {bootstrap_servers}: " + ", ".join(f"{t} -> {name}" for t, name in sorted(topics.items())))
    emitter = EventEmitter(bootstrap_servers, topics, **producer_options)
    try:
        publish(simulation, emitter, settings, stop, say)
    finally:
        emitter.close()  # flushes what the last step left
    report = emitter.report
    say("stopped: " + progress_line(report, simulation))
    for line in progress_to_expect(simulation):
        say(line)
    if report.failed:
        say(f"{report.failed} event(s) were not delivered, e.g. {report.errors[-1]}")
        return 1
    return 0
