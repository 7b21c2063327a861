"""Real producers with the client agent's hook, judged by their own latency-fault items.

Producers of both client lines run in their own JVMs (the project's test clients) against the local cluster
and print what their ``MQFaultStrategy``'s fault tolerance holds, read by reflection inside the producer.
While broker-b is frozen (SIGSTOP) their sends to it time out; the hook publishes every attempt to Kafka, the
monitor's real job turns them into fault windows, and the windows must say what the producers' own items
say: the same ends, starts where the producer first showed the item, and the same availability at every
moment the producer was sampled. The hook's span of an attempt lies inside the producer's own, so where the
producer measured a first-threshold latency and every attempt the hook saw then was below it, the hook's own
events show that no window could come from them, and that item is not judged. Producers with a fault table far
too strict (every send makes its broker unavailable for 10 minutes) then avoid every broker they know while the
job runs: the all-brokers-unavailable section's query names exactly them, and RocketMQ shows the brokers up.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from connectors.kafka_topics import create_topics
from dashboards.alerts import PREFIX
from localenv.kafka_broker import LocalKafkaBroker
from streaming.app.cli import main as cli_main
from tests.support.agent_events import read_events
from tests.support.job import job_config, read, run_available
from tests.support.rocketmq_client import ClientProcess
from tests.support.runbook import confirm_commands

BROKERS = ("broker-a", "broker-b")
FROZEN_BROKER = "broker-b"
FREEZE_S = 8.0
# The producer and the hook read the clock at different instants of the same attempt (the hook's after-call,
# then sendDefaultImpl's updateFaultItem), so an end may differ by a few milliseconds; allow for a busy machine.
SAME_INSTANT_MS = 200
# The producer's items are sampled every 20 ms: a new item shows within one sample, or a few on a busy machine.
SAMPLED_WITHIN_MS = 1000
# The first latency threshold of both client lines' fault tables (semantics §6): below it, no isolation.
FIRST_THRESHOLD_MS = 550
# A fault table far too strict for any network, set on the real producers (``setLatencyMax``/
# ``setNotAvailableDuration``) and given to the monitor: every send, however fast, makes its broker unavailable for
# 10 minutes (longer than the test), so a producer avoids every broker it knows from its first send to each.
STRICT_TABLE = {"latency_max": "0", "not_available_duration": "600000"}
STRICT_PRODUCERS = {"all49": "4.9", "all5": "5"}
STRICT_ENV = {
    **{
        f"RRM__PRODUCERS__FAULT_TABLES__STRICT{line[0]}__{key}": value
        for line, semantics, isolation_ms in (("4.9", "overwrite", 30000), ("5", "extend", 10000))
        for key, value in (
            ("LATENCY_MAX_MS", f"[{STRICT_TABLE['latency_max']}]"),
            ("NOT_AVAILABLE_DURATION_MS", f"[{STRICT_TABLE['not_available_duration']}]"),
            ("ISOLATION_LATENCY_MS", str(isolation_ms)),
            ("SEMANTICS", semantics),
        )
    },
    # The strict producers' groups their tables; every other 4.9 producer the 4.x preset, as by default.
    "RRM__PRODUCERS__RULES": "["
    + ", ".join(
        f'{{producer_group = "{name}_group", fault_table = "strict{line[0]}"}}'
        for name, line in STRICT_PRODUCERS.items()
    )
    + ', {producer_group = "*", client_line = "4.9", fault_table = "rocketmq-4"}]',
}


def producer(
    line: str,
    name: str,
    namesrv: str,
    topic: str,
    tmp_path: Path,
    agent: dict[str, str],
    *,
    fault_enable: bool,
    **options: str,
) -> ClientProcess:
    return ClientProcess(
        line,
        "producer",
        tmp_path / name,
        agent=agent,
        namesrv=namesrv,
        group=f"{name}_group",
        topic=topic,
        instance_name=name,
        fault_enable=fault_enable,
        rate=20,
        **options,
    )


def frozen(cluster, broker: str, seconds: float) -> None:
    """Freeze one broker with SIGSTOP (a long GC pause or a hung host), then let it go on."""
    pid = cluster.info().brokers[broker].pid
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(seconds)
    finally:
        os.kill(pid, signal.SIGCONT)


def monitor_intervals(windows: list[dict]) -> dict[str, list[tuple[int, int]]]:
    """Broker -> the monitor's unavailable intervals [start, end) of one producer, with each window's last end."""
    last: dict[tuple[str, int], dict] = {}
    for row in sorted(windows, key=lambda r: (r["event_time_ms"], r["batch_id"])):
        last[(row["broker"], row["window_start_ms"])] = row
    intervals: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for (broker, start), row in sorted(last.items()):
        end = row["event_time_ms"] if row["status"] == "CLOSED_EARLY" else row["window_end_ms"]
        intervals[broker].append((start, end))
    return intervals


def producer_items(client: ClientProcess) -> dict[str, list[tuple[int, int, bool]]]:
    """Broker -> (sample time, startTimestamp, isAvailable) of every sample the producer printed."""
    samples: dict[str, list[tuple[int, int, bool]]] = defaultdict(list)
    for line in client.of_kind("faults"):
        for item in line["items"]:
            samples[item["broker"]].append((line["time"], item["start_timestamp"], item["available"]))
    return samples


def producer_latencies(client: ClientProcess) -> dict[tuple[str, int], int]:
    """(broker, startTimestamp) -> the producer's own currentLatency of that item."""
    return {
        (item["broker"], item["start_timestamp"]): item["current_latency"]
        for line in client.of_kind("faults")
        for item in line["items"]
    }


def unseen_by_the_hook(attempts: list[dict], broker: str, first_seen: int, producer_latency: int) -> bool:
    """Whether the hook's own events show that an item the producer shows from ``first_seen`` had no cause
    the hook could see: the producer measured a first-threshold latency, and every attempt the hook saw on that
    broker up to then (within the sampling interval) stayed below that threshold and below the producer's."""
    near = [
        a
        for a in attempts
        if a["broker"] == broker
        and first_seen - SAMPLED_WITHIN_MS - SAME_INSTANT_MS <= a["event_time"] <= first_seen + SAME_INSTANT_MS
    ]
    return (
        producer_latency >= FIRST_THRESHOLD_MS
        and bool(near)
        and all(a["outcome"] == "OK" and a["latency_ms"] < min(FIRST_THRESHOLD_MS, producer_latency) for a in near)
    )


def assert_windows_match_the_producer(client: ClientProcess, windows: list[dict], attempts: list[dict]) -> int:
    """The monitor's windows of one producer against its own items; returns the number of samples compared.

    ``attempts`` are the send results the hook published for this producer."""
    samples = producer_items(client)
    latencies = producer_latencies(client)
    # A window that opens after the producer's last sample (an attempt failing as the producer shuts down) was
    # never shown by the producer: only the windows it could have shown are judged.
    last_sample = max(line["time"] for line in client.of_kind("faults"))
    intervals = {
        broker: [(start, end) for start, end in found if start <= last_sample - SAMPLED_WITHIN_MS]
        for broker, found in monitor_intervals(windows).items()
    }
    assert set(intervals) <= set(samples), "the monitor has windows for a broker the producer has no item for"
    compared = 0
    for broker, broker_samples in samples.items():
        ends = [end for _, end in intervals.get(broker, [])]
        # Ends: every isolation the producer held is a window end of the monitor, and the other way round.
        # An isolation is what the producer itself answered unavailable. The sample's time is read before its
        # items: an update in between (a send below the first threshold isolates for 0 ms, so its startTimestamp
        # is that instant) shows a startTimestamp after the time while the producer says available.
        held: dict[int, int] = {}
        for time_ms, start_timestamp, available in broker_samples:
            if start_timestamp > time_ms and not available:
                held.setdefault(start_timestamp, time_ms)  # the first sample that showed it
        unseen = {
            end: first_seen
            for end, first_seen in held.items()
            if not any(abs(end - e) <= SAME_INSTANT_MS for e in ends)
            and unseen_by_the_hook(attempts, broker, first_seen, latencies[(broker, end)])
        }
        for end in unseen:
            del held[end]
        for end, first_seen in held.items():
            assert any(abs(end - e) <= SAME_INSTANT_MS for e in ends), (broker, end, ends)
            (start,) = [s for s, e in intervals[broker] if abs(end - e) <= SAME_INSTANT_MS]
            assert start - SAME_INSTANT_MS <= first_seen <= start + SAMPLED_WITHIN_MS, (broker, start, first_seen)
        for end in ends:
            assert any(abs(end - h) <= SAME_INSTANT_MS for h in held), (broker, end, sorted(held))
        # Availability at every sample away from a boundary: the producer's isAvailable, the monitor's windows.
        boundaries = [t for interval in intervals.get(broker, []) for t in interval]
        for time_ms, _, available in broker_samples:
            if any(abs(time_ms - b) <= SAMPLED_WITHIN_MS for b in boundaries):
                continue
            if any(
                first_seen - SAMPLED_WITHIN_MS <= time_ms < end + SAMPLED_WITHIN_MS
                for end, first_seen in unseen.items()
            ):
                continue
            in_window = any(start <= time_ms < end for start, end in intervals.get(broker, []))
            assert available == (not in_window), (broker, time_ms, intervals.get(broker))
            compared += 1
    return compared


def run_through_a_freeze(rocketmq_cluster, clients: dict[str, ClientProcess]) -> None:  # type: ignore[no-untyped-def]
    """Start the producers, freeze broker-b once they send, wait for the 5.x producer's isolation to end, stop."""
    try:
        for client in clients.values():
            client.start()
        for client in clients.values():
            client.wait_for(lambda line: line["kind"] == "faults" and line["sends_ok"] >= 20, 60)
        frozen(rocketmq_cluster, FROZEN_BROKER, FREEZE_S)
        # After the freeze the 5.x producer's 10 s isolation ends and it sends to broker-b again.
        p5 = clients["p5"]
        p5.wait_for(
            lambda line: line["kind"] == "faults"
            and any(
                i["broker"] == FROZEN_BROKER and i["available"] and i["start_timestamp"] > 0 for i in line["items"]
            ),
            60,
        )
        time.sleep(3)
    finally:
        for client in clients.values():
            client.stop()


def assert_stopped_cleanly(clients: dict[str, ClientProcess]) -> dict[str, dict]:
    """Each producer's last line: nothing unexpected, every attempt published by the hook, none dropped."""
    stopped = {name: client.last("stopped") for name, client in clients.items()}
    for name, line in stopped.items():
        assert line is not None and line["unexpected"] == 0, (name, line, clients[name].of_kind("unexpected"))
        assert line["agent"]["dropped"] == 0 and line["agent"]["published"] == line["agent"]["send_attempts"], line
    return stopped


def assert_no_isolation_without_fault_enable(  # type: ignore[no-untyped-def]
    spark, config, client: ClientProcess, windows: list[dict], stopped: dict
) -> None:
    """Without sendLatencyFaultEnable: latency statistics of every attempt, timeouts included, but no isolation,
    in the producer (no fault item ever) and in the monitor (no window)."""
    assert all(line["items"] == [] for line in client.of_kind("faults"))
    assert windows == []
    minutes = [r for r in read(spark, config, "send_latency_minutes") if r["producer_group"] == "p5_off_group"]
    assert sum(r["sends"] for r in minutes) == stopped["agent"]["send_attempts"]
    assert sum(r["errors"] for r in minutes if r["broker"] == FROZEN_BROKER) >= 1
    status = [r for r in read(spark, config, "producer_broker_status_current") if r["producer_id"] == client.client_id]
    assert status and all(r["fault_table"] is None and r["unavailable_until_ms"] is None for r in status)


def assert_runbook_names_the_avoiding_producers(config, capsys, avoiding: set[str]) -> None:  # type: ignore[no-untyped-def]
    """The broker-avoided section's commands of the monitor, for the frozen broker: its fault windows, each of a
    producer whose own items isolated it (``avoiding``), every such producer named."""
    commands = [c for c in confirm_commands(f"{PREFIX}BrokerAvoidedByMostProducers") if c.startswith("query ")]
    assert commands, "the broker-avoided section names no query"
    for command in commands:
        words = [FROZEN_BROKER if w == "B" else w for w in command.split()]
        code = cli_main([*words, "--delta-root", str(config.paths.delta_root), "--json"])
        rows = json.loads(capsys.readouterr().out)
        assert code == 0 and {r["broker"] for r in rows} == {FROZEN_BROKER}, (command, rows)
        assert {r["producer_id"] for r in rows} == avoiding, (command, rows)


def avoids_every_broker(line: dict) -> bool:
    """Whether a producer's ``faults`` line has an item for every broker and each says unavailable."""
    return {i["broker"] for i in line["items"]} == set(BROKERS) and not any(i["available"] for i in line["items"])


def lines_between(client: ClientProcess, start_ms: int, end_ms: int) -> list[dict]:
    """The producer's ``faults`` lines sampled from ``start_ms`` to ``end_ms``, or its last one when it had stopped
    by then (its items as they were when it stopped)."""
    lines = client.of_kind("faults")
    return [line for line in lines if start_ms <= line["time"] <= end_ms] or lines[-1:]


def section_mqadmin(rocketmq_cluster) -> dict[tuple[str, str], str]:  # type: ignore[no-untyped-def]
    """What the all-brokers-unavailable section's mqadmin commands print, by (verb, broker address or "")."""
    printed = {}
    for command in confirm_commands(f"{PREFIX}ProducerAllBrokersUnavailable"):
        if command.startswith("mqadmin "):
            words = command.split()[1:]
            for address in [rocketmq_cluster.broker_addr(b) for b in BROKERS] if "BROKER_ADDR" in words else [""]:
                printed[(words[0], address)] = rocketmq_cluster.mqadmin(
                    *[address if w == "BROKER_ADDR" else w for w in words]
                )
    return printed


def assert_all_brokers_unavailable_section_names_them(  # type: ignore[no-untyped-def]
    rocketmq_cluster, config, capsys, clients: dict[str, ClientProcess], printed: dict[tuple[str, str], str]
) -> None:
    """The all-brokers-unavailable section's confirm, run while the strict producers avoid every broker: its query
    (``epoch_ms(now())``) names exactly the producers whose own items, sampled around it, mark every broker
    unavailable, each with its brokers and the end of its shortest window as the producer itself held it; each sends
    on; its mqadmin commands (``printed``, run while the job ran) show both brokers up: clusterList lists them,
    brokerStatus of each answers with its runtime info."""
    commands = confirm_commands(f"{PREFIX}ProducerAllBrokersUnavailable")
    (statement,) = [c for c in commands if c.startswith("query ")]
    asked_ms = int(time.time() * 1000)
    code = cli_main([*shlex.split(statement), "--delta-root", str(config.paths.delta_root), "--json"])
    answered_ms = int(time.time() * 1000)
    rows = json.loads(capsys.readouterr().out)
    assert code == 0, rows
    around = {
        client.client_id: lines_between(client, asked_ms - SAMPLED_WITHIN_MS, answered_ms + SAMPLED_WITHIN_MS)
        for client in clients.values()
    }
    everywhere = {client_id for client_id, lines in around.items() if all(avoids_every_broker(x) for x in lines)}
    assert everywhere == {clients[name].client_id for name in STRICT_PRODUCERS}, around
    assert {r["producer_id"] for r in rows} == everywhere, rows
    for row in rows:
        (client,) = [c for c in clients.values() if c.client_id == row["producer_id"]]
        assert row["brokers"] == len(BROKERS), row
        held_ends = {i["start_timestamp"] for line in client.of_kind("faults") for i in line["items"]}
        assert any(abs(row["until_ms"] - end) <= SAME_INSTANT_MS for end in held_ends), (row, sorted(held_ends)[-5:])
        # The client sends anyway, to a broker it holds unavailable: here they succeed (the brokers are fine).
        first = next(line for line in client.of_kind("faults") if avoids_every_broker(line))
        last = around[client.client_id][-1]
        assert last["sends_ok"] > first["sends_ok"], (first, last)
    addresses = {rocketmq_cluster.broker_addr(broker) for broker in BROKERS}
    assert {verb for verb, _ in printed} == {"clusterList", "brokerStatus"}, printed
    assert {address for verb, address in printed if verb == "brokerStatus"} == addresses, printed
    for (verb, address), out in printed.items():
        up = all(a in out for a in addresses) if verb == "clusterList" else "brokerVersionDesc" in out
        assert up and "Exception" not in out, (verb, address, out)


def test_fault_windows_match_each_producer_s_own_fault_items(rocketmq_cluster, kafka_broker, spark, tmp_path, capsys):
    config, topics = job_config(kafka_broker.bootstrap_servers, tmp_path, "agent-producers", **STRICT_ENV)
    rocketmq_cluster.create_topic("agent_sends", 4)
    agent = {"bootstrap.servers": kafka_broker.bootstrap_servers, "topic.send.results": topics["send_result"]}
    namesrv = rocketmq_cluster.namesrv_addr
    clients = {
        "p49": producer("4.9", "p49", namesrv, "agent_sends", tmp_path, agent, fault_enable=True),
        "p5": producer("5", "p5", namesrv, "agent_sends", tmp_path, agent, fault_enable=True),
        "p5_off": producer("5", "p5_off", namesrv, "agent_sends", tmp_path, agent, fault_enable=False),
    }
    run_through_a_freeze(rocketmq_cluster, clients)
    stopped = assert_stopped_cleanly(clients)

    published = sum(line["agent"]["published"] for line in stopped.values())
    attempts = defaultdict(list)
    for key, event in read_events(kafka_broker.bootstrap_servers, topics["send_result"], at_least=published):
        attempts[key].append(event)
    # Then the strict producers, until each avoids every broker; the job runs and the section's confirm while they
    # still do.
    strict = {
        name: producer(line, name, namesrv, "agent_sends", tmp_path, agent, fault_enable=True, **STRICT_TABLE)
        for name, line in STRICT_PRODUCERS.items()
    }
    try:
        for client in strict.values():
            client.start()
        for client in strict.values():
            client.wait_for(lambda line: line["kind"] == "faults" and avoids_every_broker(line), 60)
        with ThreadPoolExecutor(max_workers=1) as pool:  # the brokers' state while the job runs
            printed = pool.submit(section_mqadmin, rocketmq_cluster)
            run_available(spark, config)
            producers = {**clients, **strict}
            assert_all_brokers_unavailable_section_names_them(
                rocketmq_cluster, config, capsys, producers, printed.result()
            )
    finally:
        for client in strict.values():
            client.stop()
    windows = read(spark, config, "fault_windows")
    by_producer = defaultdict(list)
    for row in windows:
        by_producer[row["producer_id"]].append(row)
    ids = {name: client.client_id for name, client in clients.items()}
    for name in ("p49", "p5"):
        mine = by_producer[ids[name]]
        assert any(r["broker"] == FROZEN_BROKER and r["status"] == "OPENED" for r in mine), (name, mine)
        assert any(not available for _, _, available in producer_items(clients[name])[FROZEN_BROKER])
        assert assert_windows_match_the_producer(clients[name], mine, attempts[ids[name]]) > 0
    assert {r["fault_table"] for r in by_producer[ids["p49"]]} == {"rocketmq-4"}
    # The strict producers avoid broker-b too (from their first send to it), by their own items.
    strict_ids = {
        c.client_id for c in strict.values() if any(not available for *_, available in producer_items(c)[FROZEN_BROKER])
    }
    assert_runbook_names_the_avoiding_producers(config, capsys, {ids["p49"], ids["p5"], *strict_ids})
    assert {r["fault_table"] for r in by_producer[ids["p5"]]} == {"rocketmq-5"}
    assert_no_isolation_without_fault_enable(
        spark, config, clients["p5_off"], by_producer[ids["p5_off"]], stopped["p5_off"]
    )


def test_with_kafka_stopped_sends_succeed_and_the_hook_drops_and_counts(rocketmq_cluster, tmp_path):
    kafka = LocalKafkaBroker(tmp_path / "kafka")
    bootstrap = kafka.start().bootstrap_servers
    create_topics(bootstrap, ["agent.down"])
    agent = {
        "bootstrap.servers": bootstrap,
        "topic.send.results": "agent.down",
        "buffer.capacity": "20",
        "kafka.delivery.timeout.ms": "3000",
        "kafka.request.timeout.ms": "2000",
    }
    rocketmq_cluster.create_topic("agent_kafka_down", 4)
    namesrv = rocketmq_cluster.namesrv_addr
    clients = [
        producer(line, f"down{line.replace('.', '')}", namesrv, "agent_kafka_down", tmp_path, agent, fault_enable=True)
        for line in ("4.9", "5")
    ]
    try:
        for client in clients:
            client.start()
        before = [
            client.wait_for(lambda line: line["kind"] == "faults" and line["agent"]["published"] >= 20, 60)
            for client in clients
        ]
        kafka.stop()
        after = [
            client.wait_for(
                lambda line, b=b: line["kind"] == "faults"
                and line["agent"]["dropped"] >= b["agent"]["dropped"] + 100
                and line["sends_ok"] >= b["sends_ok"] + 100,
                90,
            )
            for client, b in zip(clients, before, strict=True)
        ]
    finally:
        for client in clients:
            client.stop()
        kafka.stop()
    for client, b, line in zip(clients, before, after, strict=True):
        # The application's sends went on (a RocketMQ failure of its own on a busy machine is not the hook's),
        # nothing the agent did reached it, and every event it could not publish is counted.
        assert line["sends_ok"] >= b["sends_ok"] + 100 and line["unexpected"] == 0, (line, client.of_kind("unexpected"))
        assert line["agent"]["agent_errors"] == 0
        assert line["agent"]["dropped"] >= b["agent"]["dropped"] + 100
        assert line["agent"]["published"] < line["agent"]["send_attempts"]
        assert client.last("stopped")["unexpected"] == 0
