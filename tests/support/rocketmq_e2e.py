"""End-to-end runs on a real cluster: real consumers, the collector, the project's Kafka and the monitor job.

``Fleet`` starts push consumers (the project's test clients, several independent clients per JVM unless a test
signals one or they share a client id, with the tier's fast heartbeat and rebalance interval) and reads what
each one holds from its own output; ``PollLog`` reads back the ``consumer_connections`` polls the collector
published, so a test can wait until the collector has seen a settled group before the job runs.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from connectors.rocketmq_collector import CollectorProcess
from localenv.rocketmq_cluster import CLUSTER_NAME, TEST_SPEED
from tests.support.job import job_config
from tests.support.rocketmq_client import (
    ClientProcess,
    ConsumerSpec,
    HostedConsumer,
    Line,
    consumer_host,
    planned_consumers,
    process_plan,
    start_all,
    stop_all,
)

Queue = tuple[str, int]
# Two of the clients' 2 s rebalance intervals without a change: each client rebalances at least every interval, so
# a client that has not yet taken its final share changes within the first one; the second allows for a rebalance
# that a busy machine starts late.
CONVERGED_QUIET_S = 2 * TEST_SPEED.rebalance_wait_interval_ms / 1000
PROGRESS_INTERVAL_MS = 2000
PROGRESS_WINDOW = 5


def all_queues(route: dict[str, Any]) -> set[Queue]:
    """Every queue of a topic as the cluster's route answers it (``LocalRocketMQCluster.route``)."""
    return {(broker, q) for broker, counts in route.items() for q in range(counts["read_queue_nums"])}


def e2e_config(bootstrap: str, root: Path, prefix: str, namesrv: str, **env: str):
    """The job's and the collector's configuration for one test: its own topics, tables and groups."""
    return job_config(
        bootstrap,
        root,
        prefix,
        **{
            "RRM__COLLECTOR__NAMESRV_ADDR": f'"{namesrv}"',
            "RRM__COLLECTOR__COLLECTOR_ID": f'"{prefix}"',
            "RRM__COLLECTOR__POLL_INTERVAL_MS": "2000",
            "RRM__COLLECTOR__STALE_AFTER_MS": "10000",
            "RRM__COLLECTOR__RUNNING_INFO_INTERVAL_MS": "5000",
            # The clients rebalance every 2 s: a report counts 2 s after a generation, and the collector re-reads
            # a changed group's running info 2 s after that.
            "RRM__MEMBERSHIP__CLIENT_REBALANCE_DELAY_MS": str(TEST_SPEED.rebalance_wait_interval_ms),
            "RRM__COLLECTOR__RUNNING_INFO_AFTER_CHANGE_MS": str(TEST_SPEED.rebalance_wait_interval_ms + 2000),
            "RRM__COLLECTOR__INCLUDE_GROUPS": f'["{prefix}_*"]',
            # The collector names the cluster its brokers register in; the agents' version 1 reports belong to the
            # job's default cluster: the same one, as docs/deploy.md has a job of one cluster configured.
            "RRM__INGEST__DEFAULT_CLUSTER": f'"{CLUSTER_NAME}"',
            "RRM__COLLECTOR__METRICS_PORT": "0",
            "RRM__MEMBERSHIP__CHANNEL_EXPIRY_MS": str(TEST_SPEED.channel_expired_timeout_ms),
            # Consume progress every 2 s (no min offsets), judged over 5 samples: an orphan is confirmed 6 s
            # after its last holder left, a stuck holder 10 s after its offset stopped.
            "RRM__COLLECTOR__PROGRESS_INTERVAL_MS": str(PROGRESS_INTERVAL_MS),
            "RRM__COLLECTOR__PROGRESS_MIN_OFFSET_EVERY": "0",
            "RRM__PROGRESS__SAMPLE_INTERVAL_MS": str(PROGRESS_INTERVAL_MS),
            "RRM__PROGRESS__WINDOW": str(PROGRESS_WINDOW),
            **env,
        },
    )


class Fleet:
    """The real consumers of one test; stopped (SIGCONT, SIGTERM, then SIGKILL) by ``stop``."""

    def __init__(self, namesrv: str, log_dir: Path) -> None:
        self.namesrv, self.log_dir = namesrv, log_dir
        self.clients: list[ClientProcess] = []

    def consumers(self, specs: Iterable[tuple[str, str, str, str, dict[str, Any]]]) -> list[HostedConsumer]:
        """Start push consumers, all at once: (line, group, topic, name, options) each, ``topic`` possibly several
        topics, comma-separated; the options are ``ConsumerSpec``'s (strategy, model, client_ip,
        client_rebalance), ``agent`` (the client agent's settings: its reporter on the consumer) and
        ``own_process`` (true for a consumer the test signals). The consumers of one line and agent share a
        process, except those with a process of their own and those sharing a client id, which never share one.
        Returned in the order given."""
        planned = []
        for line, group, topic, name, options in specs:
            options = dict(options)
            own_process = options.pop("own_process", False)
            agent = options.pop("agent", None)
            planned.append(
                ((line, json.dumps(agent, sort_keys=True)), ConsumerSpec(name, group, topic, **options), own_process)
            )
        plan = process_plan(planned)
        processes = []
        for members in plan:
            (line, agent), first, _ = planned[members[0]]
            hosted = [planned[m][1] for m in members]
            log_dir = self.log_dir / (first.name if len(members) == 1 else f"{first.name}-and-{len(members) - 1}")
            processes.append(consumer_host(line, log_dir, hosted, namesrv=self.namesrv, agent=json.loads(agent)))
        self.clients += processes
        start_all(processes)
        return planned_consumers(plan, processes)

    def stop(self) -> None:
        stop_all(self.clients)


@dataclass(frozen=True)
class Reading:
    """A client's lines as they were when read, with the reading API of a ``HostedConsumer`` (``client_id``,
    ``pid``, ``of_kind``, ``last``): what a test judges after the client has stopped (whose shutdown empties its
    holdings)."""

    name: str
    client_id: str
    pid: int
    lines: tuple[Line, ...]

    @classmethod
    def of(cls, client: HostedConsumer) -> Reading:
        return cls(client.name, client.client_id, client.pid, tuple(client.lines))

    def of_kind(self, kind: str) -> list[Line]:
        return [line for line in self.lines if line["kind"] == kind]

    def last(self, kind: str) -> Line | None:
        found = self.of_kind(kind)
        return found[-1] if found else None


Client = HostedConsumer | Reading


def held(client: Client, topic: str) -> frozenset[Queue]:
    """The queues of ``topic`` the client holds now, as it printed them last."""
    line = client.last("held")
    return frozenset() if line is None else frozenset((b, q) for b, q in line["queues"].get(topic, []))


def holdings(clients: Iterable[Client], topic: str) -> tuple[frozenset[Queue], ...]:
    return tuple(held(c, topic) for c in clients)


def wait_converged(
    clients: list[Client], topic: str, quiet_s: float = CONVERGED_QUIET_S, timeout_s: float = 240.0
) -> tuple[frozenset[Queue], ...]:
    """Wait until no client's held queues of ``topic`` changed for ``quiet_s``; their holdings then. Clients of
    several groups are waited for together: one quiet period proves the same for each group."""
    return wait_all_converged([(clients, topic)], quiet_s, timeout_s)[0]


def wait_all_converged(
    clients_and_topics: Sequence[tuple[list[Client], str]], quiet_s: float = CONVERGED_QUIET_S, timeout_s: float = 240.0
) -> list[tuple[frozenset[Queue], ...]]:
    """``wait_converged`` of several (clients, topic) pairs in one quiet period (it proves the same for each);
    their holdings then, in order."""

    def now() -> list[tuple[frozenset[Queue], ...]]:
        return [holdings(clients, topic) for clients, topic in clients_and_topics]

    deadline = time.monotonic() + timeout_s
    last, since = now(), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.5)
        held_now = now()
        if held_now != last:
            last, since = held_now, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return held_now
    topics = [topic for _, topic in clients_and_topics]
    raise AssertionError(f"the clients of {topics} did not settle in {timeout_s} s: {last}")


class PollLog:
    """The ``consumer_connections`` events in the job's Kafka topic, read as they come."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        from kafka import KafkaConsumer

        self._consumer = KafkaConsumer(
            topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False, group_id=None
        )
        self.polls: list[dict[str, Any]] = []

    def refresh(self) -> list[dict[str, Any]]:
        while batch := self._consumer.poll(timeout_ms=1000):
            for records in batch.values():
                for record in records:
                    event = json.loads(record.value)
                    if event.get("type") == "consumer_connections":
                        self.polls.append(event)
        return self.polls

    def of(self, group: str, broker: str | None = None) -> list[dict[str, Any]]:
        return [p for p in self.refresh() if p["group"] == group and broker in (None, p["broker"])]

    def wait(
        self,
        groups: Iterable[str],
        brokers: Iterable[str],
        after_ms: int,
        *,
        strategies: bool = True,
        timeout_s: float = 120.0,
    ) -> None:
        """Wait for a poll of every (group, broker) read after ``after_ms`` (epoch ms) that lists at least one
        channel and, with ``strategies``, carries every listed client's strategy (from its running info)."""
        pending = {(g, b) for g in groups for b in brokers}
        deadline = time.monotonic() + timeout_s
        while pending and time.monotonic() < deadline:
            for poll in self.refresh():
                key = (poll["group"], poll["broker"])
                connections = poll["connections"]
                if (
                    key in pending
                    and poll["event_time"] > after_ms
                    and connections
                    and (not strategies or all(c.get("allocate_strategy") for c in connections))
                ):
                    pending.discard(key)
            if pending:
                time.sleep(1.0)
        assert not pending, f"no complete poll after {after_ms} for {sorted(pending)}"

    def close(self) -> None:
        self._consumer.close()


def wait_progress_sample(
    bootstrap: str, topic: str, groups: Iterable[str], brokers: Iterable[str], after_ms: int, timeout_s: float = 60.0
) -> None:
    """Wait until the collector's ``consume_progress`` events (in ``topic``) hold an answered sample of every group
    on every broker taken after ``after_ms`` (epoch ms)."""
    from tests.support.agent_events import read_records

    pending = {(g, b) for g in groups for b in brokers}
    deadline = time.monotonic() + timeout_s
    while pending:
        events = [event for _, event in read_records(bootstrap, topic, timeout_s=10)]
        pending -= {(e["group"], e["broker"]) for e in events if e["event_time"] > after_ms and e.get("error") is None}
        assert not pending or time.monotonic() < deadline, f"no progress sample after {after_ms} of {sorted(pending)}"
        if pending:
            time.sleep(1.0)


def start_collector(config, work_dir: Path) -> CollectorProcess:
    collector = CollectorProcess(config, work_dir, metrics_port=0)
    collector.start()
    return collector


def expected_by_client(rows: list[dict[str, Any]], group: str, topic: str) -> dict[str, frozenset[Queue]]:
    """The monitor's current expected assignment of ``group`` and ``topic``, client by client."""
    return {
        r["client_id"]: frozenset((q["broker"], q["queue_id"]) for q in r["queues"])
        for r in rows
        if r["group"] == group and r["topic"] == topic
    }


def real_by_client(clients: Iterable[Client], topic: str) -> dict[str, frozenset[Queue]]:
    """What the real clients hold, client id by client id (clients sharing an id must hold the same)."""
    found: dict[str, frozenset[Queue]] = {}
    for client in clients:
        queues = held(client, topic)
        assert found.setdefault(client.client_id, queues) == queues, f"clients {client.client_id} hold differently"
    return found
