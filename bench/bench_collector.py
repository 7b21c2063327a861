"""Benchmark (not a test): one poll cycle of ``collect`` against the way rocketmq-exporter collects.

Run: ``.venv/bin/python -m bench.bench_collector [--groups 1000 --channels 10]`` -> prints the figures and writes
``bench/results/collector.json``. On the local real cluster (5.3.3, two brokers, RocketMQ's default timings) a
heartbeat generator registers ``--groups`` groups with ``--channels`` channels each on both brokers through the
RocketMQ 5.3.3 client's own API (``--channels`` client instances, each heartbeating every group). Then:

* the collector (its JVM, running info off, ``[collector]`` defaults otherwise) runs six cycles, publishing to
  the project's Kafka broker; its own log gives each cycle's time and admin calls; the last three that polled
  groups are reported (the first are its JVM warming up, or its first calls timing out on a busy machine);
* the exporter's way, from one admin client: the one-argument ``examineConsumerConnectionInfo(group)`` per group,
  one after the other, twice (the second is reported), its calls counted by an RPC hook. It sees one broker's
  view per group (a random one), the collector every broker's, with routes and the group list besides.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path

from connectors import jvm_artifacts
from connectors.kafka_topics import create_topics
from connectors.rocketmq_collector import CollectorProcess
from localenv.kafka_broker import LocalKafkaBroker
from localenv.rocketmq_cluster import LocalRocketMQCluster
from streaming.config import load_config

RESULTS = Path(__file__).parent / "results" / "collector.json"
TOPIC = "bench-collector-topic"
CYCLES = 6
CHUNK = 100
_CYCLE = re.compile(r"cycle (?P<n>\d+) took (?P<ms>\d+) ms; \{(?P<counters>.*)\}")
_RPC = re.compile(r'rmqcol_rpc_total\{call="(?P<call>\w+)"\}=(?P<n>\d+)')


class HeartbeatGenerator:
    """``channels`` RocketMQ client instances, each heartbeating all ``groups`` to every broker (so each group has
    ``channels`` channels on each broker), again every 30 s until stopped."""

    def __init__(self, namesrv: str, brokers: list[str], groups: list[str], channels: int) -> None:
        import jpype

        self.brokers, self.stopping = brokers, threading.Event()
        ClientConfig = jpype.JClass("org.apache.rocketmq.client.ClientConfig")
        Manager = jpype.JClass("org.apache.rocketmq.client.impl.MQClientManager")
        self.instances = []
        for index in range(channels):
            config = ClientConfig()
            config.setNamesrvAddr(namesrv)
            config.setInstanceName(f"bench-heartbeat-{index}")
            instance = Manager.getInstance().getOrCreateMQClientInstance(config)
            instance.start()
            self.instances.append(instance)
        # A broker registers a new group's subscription group and retry topic on its first heartbeat: chunks of
        # CHUNK groups keep each heartbeat's work within its timeout.
        chunks = [groups[i : i + CHUNK] for i in range(0, len(groups), CHUNK)]
        self.heartbeats = [
            [self._heartbeat(instance.getClientId(), chunk) for chunk in chunks] for instance in self.instances
        ]
        self.thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def _heartbeat(client_id: str, groups: list[str]):  # type: ignore[no-untyped-def]
        import jpype

        pkg = "org.apache.rocketmq.remoting.protocol.heartbeat."
        HeartbeatData, ConsumerData = jpype.JClass(pkg + "HeartbeatData"), jpype.JClass(pkg + "ConsumerData")
        SubscriptionData = jpype.JClass(pkg + "SubscriptionData")
        heartbeat = HeartbeatData()
        heartbeat.setClientID(client_id)
        for group in groups:
            data = ConsumerData()
            data.setGroupName(group)
            data.setConsumeType(jpype.JClass(pkg + "ConsumeType").CONSUME_PASSIVELY)
            data.setMessageModel(jpype.JClass(pkg + "MessageModel").CLUSTERING)
            data.setConsumeFromWhere(
                jpype.JClass("org.apache.rocketmq.common.consumer.ConsumeFromWhere").CONSUME_FROM_LAST_OFFSET
            )
            for topic in (TOPIC, f"%RETRY%{group}"):
                data.getSubscriptionDataSet().add(SubscriptionData(topic, "*"))
            heartbeat.getConsumerDataSet().add(data)
        return heartbeat

    def send(self) -> None:
        for instance, heartbeats in zip(self.instances, self.heartbeats, strict=True):
            for broker in self.brokers:
                for heartbeat in heartbeats:
                    for attempt in range(5):  # a busy broker may answer late; it registered the groups anyway
                        try:
                            instance.getMQClientAPIImpl().sendHeartbeat(broker, heartbeat, 30_000)
                            break
                        except Exception:  # noqa: BLE001 - a remoting timeout: send it again
                            if attempt == 4:
                                raise

    def _run(self) -> None:
        while not self.stopping.wait(30):
            self.send()

    def start(self) -> None:
        self.send()
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()
        for instance in self.instances:
            instance.shutdown()


def exporter_way(namesrv: str, groups: list[str]) -> dict[str, float]:
    """One-argument connection call per group, serially, from one admin client; calls counted by an RPC hook."""
    import jpype

    calls = [0]
    RPCHook = jpype.JClass("org.apache.rocketmq.remoting.RPCHook")

    def before(address, request):  # type: ignore[no-untyped-def]
        calls[0] += 1

    hook = jpype.JProxy(RPCHook, dict={"doBeforeRequest": before, "doAfterResponse": lambda a, q, r: None})
    admin = jpype.JClass("org.apache.rocketmq.tools.admin.DefaultMQAdminExt")(hook, 3000)
    admin.setNamesrvAddr(namesrv)
    admin.setInstanceName(f"bench-exporter-{os.getpid()}")
    admin.start()
    try:
        rounds = []
        for _ in range(2):
            calls[0] = 0
            start = time.perf_counter()
            channels = sum(admin.examineConsumerConnectionInfo(group).getConnectionSet().size() for group in groups)
            rounds.append({"cycle_s": time.perf_counter() - start, "rpcs": calls[0], "channels_seen": channels})
        return rounds[-1]
    finally:
        admin.shutdown()


def collector_cycles(config, work_dir: Path) -> list[dict[str, float]]:  # type: ignore[no-untyped-def]
    collector = CollectorProcess(config, work_dir, max_cycles=CYCLES, metrics_port=0)
    collector.start()
    collector.wait(900)
    cycles, previous = [], {}
    for match in _CYCLE.finditer(collector.log_text()):
        totals = {m.group("call"): int(m.group("n")) for m in _RPC.finditer(match.group("counters"))}
        per_call = {call: n - previous.get(call, 0) for call, n in totals.items()}
        previous = totals
        cycles.append({"cycle_s": int(match.group("ms")) / 1000, "rpcs": sum(per_call.values()), "by_call": per_call})
    full = [c for c in cycles if c["by_call"].get("consumer_connections")]
    if len(full) < 3:
        raise RuntimeError(
            f"the collector polled groups in {len(full)} of {len(cycles)} cycles; see {collector.log_path}"
        )
    return cycles


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--channels", type=int, default=10)
    return parser.parse_args()


def collector_config(bootstrap: str, namesrv: str):  # type: ignore[no-untyped-def]
    """The collector's configuration: polling every second, running info and the progress cycle off (the bench
    measures the membership cycle), the bench's groups only."""
    return load_config(
        env={
            "RRM__KAFKA__BOOTSTRAP_SERVERS": bootstrap,
            "RRM__COLLECTOR__NAMESRV_ADDR": namesrv,
            "RRM__COLLECTOR__POLL_INTERVAL_MS": "1000",
            "RRM__COLLECTOR__RUNNING_INFO_INTERVAL_MS": "0",
            "RRM__COLLECTOR__PROGRESS_INTERVAL_MS": "0",
            "RRM__COLLECTOR__INCLUDE_GROUPS": '["bench-*"]',
        }
    )


def results_document(  # type: ignore[no-untyped-def]
    args: argparse.Namespace, config, cycles: list[dict], baseline: dict[str, float], registered: dict[str, int]
) -> dict:
    """The collector's warm cycles (the last three that polled groups) beside the exporter's way."""
    warm = [c for c in cycles if c["by_call"].get("consumer_connections")][-3:]
    collector = {
        "cycle_s": statistics.mean(c["cycle_s"] for c in warm),
        "rpcs": warm[-1]["rpcs"],
        "by_call": warm[-1]["by_call"],
        "cycles": cycles,
        "concurrency": config.collector.concurrency,
    }
    return {
        "groups": args.groups,
        "channels_per_group_per_broker": args.channels,
        "brokers": 2,
        "collector": collector,
        "exporter_way": baseline,
        "cycle_time_ratio_collector_over_exporter": round(collector["cycle_s"] / baseline["cycle_s"], 2),
        "rpc_ratio_collector_over_exporter": round(collector["rpcs"] / baseline["rpcs"], 2),
        "broker_views_per_group": {"collector": 2, "exporter_way": 1},
        "channels_of_the_last_group_per_broker": registered,
        "load_average": os.getloadavg()[0],
    }


def main() -> None:
    args = parse_args()
    import jpype

    work = Path(tempfile.mkdtemp(prefix="rrm-bench-collector-"))
    kafka, cluster = LocalKafkaBroker(work / "kafka"), LocalRocketMQCluster("5", work / "rocketmq")
    generator = None
    try:
        bootstrap = kafka.start(timeout_s=300).bootstrap_servers
        info = cluster.start(timeout_s=300)
        cluster.create_topic(TOPIC, 4)
        create_topics(
            bootstrap, ["rocketmq.consumer-channels", "rocketmq.reported-assignments", "rocketmq.topic-routes"]
        )
        jpype.startJVM(
            "-Xmx512m",
            f"-Duser.home={work}",
            classpath=[str(p) for p in jvm_artifacts.jars("collector")],
            convertStrings=True,
        )
        groups = [f"bench-g{i:05d}" for i in range(args.groups)]
        generator = HeartbeatGenerator(
            info.namesrv_addr, [info.broker_addr(b) for b in info.brokers], groups, args.channels
        )
        generator.start()
        print(f"{args.groups} groups x {args.channels} channels registered on both brokers", flush=True)
        registered = {broker: len(cluster.connections(groups[-1], broker)) for broker in info.brokers}
        config = collector_config(bootstrap, info.namesrv_addr)
        cycles = collector_cycles(config, work / "collector")
        baseline = exporter_way(info.namesrv_addr, groups)
    finally:
        if generator is not None:
            generator.stop()
        cluster.stop()
        kafka.stop()
        shutil.rmtree(work, ignore_errors=True)
    results = results_document(args, config, cycles, baseline, registered)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
