"""One run of the real job over every simulator scenario, shared by the test modules that read its tables.

Each scenario runs in its own namespace (``build_scenario(..., namespace=name)`` prefixes its groups,
topics, brokers and producer groups), so all ten share the Kafka topics and one job but no state. The
events go through the project's ``EventEmitter`` in event-time order -- seven simulated minutes, long
enough for the crashed member to expire (60 s + 120 s), the outage and the storm -- in two parts: the job
processes the first 75 s, stops, and resumes from its checkpoints for the rest, so the history has a
state before the scale-out (90 s) and after it, and the restart is on the path too. (One micro-batch per
part and query: on two shared cores each micro-batch costs seconds to minutes.)

``fleet_run`` runs it once per test session (a job start is the expensive part) and returns the config;
callers read tables with ``tests.support.job.read``.

One scenario plays twice: as every scenario, in the job's default cluster (contract version 1), and again, its
consumer events only, in the cluster ``OTHER_CLUSTER`` (version 2) with the very same names (``CLUSTER_COPY``):
what the monitor keeps of the two must never mix (``tests/integration/test_simulator_scenarios.py``). The send path
does not carry a cluster yet, so the copy publishes no sends.
"""

from __future__ import annotations

from typing import Any

from connectors.emitter import EventEmitter
from streaming.app.simulation.fleet import SCENARIOS, Scenario, Simulation, build_scenario
from streaming.contract.events import EventType
from tests.support.job import job_config, run_available

START_MS = 1_700_000_000_000
SIMULATED_MS = 7 * 60_000
SEED = 1
FIRST_PART_MS = 75_000
SENDS_PER_SECOND = 0.2  # per producer: enough for fault windows, few micro-batches for send-ingest
CLUSTER_COPY = "duplicate-ids"  # the scenario played in a second cluster too, with the same names
OTHER_CLUSTER = "east"

_runs: dict[str, Any] = {}


def scenarios() -> dict[str, Scenario]:
    return {name: build_scenario(name, SEED, namespace=name) for name in SCENARIOS}


def fleet_events() -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for scenario in scenarios().values():
        simulation = Simulation(scenario, START_MS, SEED, sends_per_second=SENDS_PER_SECOND)
        events += simulation.events_until(START_MS + SIMULATED_MS)
    copy = Simulation(scenarios()[CLUSTER_COPY], START_MS, SEED, cluster=OTHER_CLUSTER)
    events += [e for e in copy.events_until(START_MS + SIMULATED_MS) if e["type"] != EventType.SEND_RESULT]
    events.sort(key=lambda e: e["event_time"])  # one fleet, in event-time order
    return events


def fleet_run(kafka_broker: Any, spark: Any, tmp_path_factory: Any) -> Any:
    """The job's config after it processed the whole simulated fleet (once per session)."""
    if "config" in _runs:
        return _runs["config"]
    root = tmp_path_factory.mktemp("simulated-fleet")
    # The job's own settings, and tables it creates itself: delta-rs must read what the job makes of them
    # (tests/integration/test_delta_interop.py), every table included.
    config, topics = job_config(
        kafka_broker.bootstrap_servers, root, "fleet", sized_for_tests=False, tables_from_template=False
    )
    events = fleet_events()
    for part in (
        [e for e in events if e["event_time"] < START_MS + FIRST_PART_MS],
        [e for e in events if e["event_time"] >= START_MS + FIRST_PART_MS],
    ):
        emitter = EventEmitter(kafka_broker.bootstrap_servers, topics)
        try:
            emitter.emit_all(part)
            report = emitter.flush()
        finally:
            emitter.close()
        assert (report.sent, report.failed) == (len(part), 0), report.errors
        run_available(spark, config)
    _runs["config"] = config
    return config
