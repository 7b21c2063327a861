"""Benchmark (not a test): one poll cycle of ``collect`` against the way rocketmq-exporter collects.

Run: ``.venv/bin/python -m bench.bench_collector [--groups 1000 --channels 10]`` -> prints the figures and records
them in ``bench/results/collector.json`` (one run per fleet size, the latest of each). On the local real cluster
(5.3.3, two brokers, RocketMQ's default timings) the groups' subscription groups and ``%RETRY%`` topics are created
on both brokers through the admin client's list calls (1,000 a call: one configuration write per call, where a
first heartbeat writes it once per group), then a heartbeat generator registers ``--groups`` groups with
``--channels`` channels each on both brokers through the RocketMQ 5.3.3 client's own API (``--channels`` client
instances, each heartbeating every group, in parallel). Then:

* the collector (its JVM, running info off, ``[collector]`` defaults otherwise, ``--in-flight-per-broker`` calls in
  flight per broker) runs six cycles, publishing to the project's Kafka broker; its own log gives each cycle's
  time and admin calls; the last three that polled groups are reported (the first are its JVM warming up, or its
  first calls timing out on a busy machine);
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
from concurrent.futures import ThreadPoolExecutor
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
CREATE_CHUNK = 1000
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
        """One heartbeat round: the instances in parallel (a round must stay well within the brokers' 120 s
        channel expiry at 10,000 groups)."""

        def one(index: int) -> None:
            instance, heartbeats = self.instances[index], self.heartbeats[index]
            for broker in self.brokers:
                for heartbeat in heartbeats:
                    for attempt in range(5):  # a busy broker may answer late; it registered the groups anyway
                        try:
                            instance.getMQClientAPIImpl().sendHeartbeat(broker, heartbeat, 30_000)
                            break
                        except Exception:  # noqa: BLE001 - a remoting timeout: send it again
                            if attempt == 4:
                                raise

        with ThreadPoolExecutor(len(self.instances)) as pool:
            list(pool.map(one, range(len(self.instances))))

    def _run(self) -> None:
        while True:
            start = time.monotonic()
            self.send()
            self.last_round_s = time.monotonic() - start
            if self.stopping.wait(max(0.0, 30 - self.last_round_s)):
                return

    def start(self) -> None:
        start = time.monotonic()
        self.send()
        self.first_round_s = self.last_round_s = time.monotonic() - start
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()
        for instance in self.instances:
            instance.shutdown()


def create_groups(namesrv: str, brokers: list[str], groups: list[str]) -> float:
    """Each group's subscription group and ``%RETRY%`` topic (one queue, read-write) on every broker, through the
    admin client's list calls; the seconds it took."""
    import jpype

    admin = jpype.JClass("org.apache.rocketmq.tools.admin.DefaultMQAdminExt")(60_000)
    admin.setNamesrvAddr(namesrv)
    admin.setInstanceName(f"bench-create-{os.getpid()}")
    admin.start()
    GroupConfig = jpype.JClass("org.apache.rocketmq.remoting.protocol.subscription.SubscriptionGroupConfig")
    TopicConfig = jpype.JClass("org.apache.rocketmq.common.TopicConfig")
    ArrayList = jpype.JClass("java.util.ArrayList")
    start = time.monotonic()
    try:
        for i in range(0, len(groups), CREATE_CHUNK):
            chunk = groups[i : i + CREATE_CHUNK]
            group_configs, topic_configs = ArrayList(), ArrayList()
            for group in chunk:
                config = GroupConfig()
                config.setGroupName(group)
                group_configs.add(config)
                topic_configs.add(TopicConfig(f"%RETRY%{group}", 1, 1, 6))
            for broker in brokers:
                admin.createAndUpdateSubscriptionGroupConfigList(broker, group_configs)
                admin.createAndUpdateTopicConfigList(broker, topic_configs)
    finally:
        admin.shutdown()
    return time.monotonic() - start


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
    parser.add_argument(
        "--in-flight-per-broker", type=int, default=None, help="calls in flight per broker (default: the config's)"
    )
    parser.add_argument("--heap", default=None, help="the collector JVM's heap (default: the config's)")
    parser.add_argument("--broker-heap", default="512m", help="each broker JVM's heap (the local cluster's default)")
    return parser.parse_args()


def collector_config(  # type: ignore[no-untyped-def]
    bootstrap: str, namesrv: str, in_flight_per_broker: int | None = None, heap: str | None = None
):
    """The collector's configuration: polling every second, running info and the progress cycle off (the bench
    measures the membership cycle), the bench's groups only."""
    extra = {} if in_flight_per_broker is None else {"RRM__COLLECTOR__IN_FLIGHT_PER_BROKER": str(in_flight_per_broker)}
    extra.update({} if heap is None else {"RRM__COLLECTOR__HEAP": heap})
    return load_config(
        env={
            **extra,
            "RRM__KAFKA__BOOTSTRAP_SERVERS": bootstrap,
            "RRM__COLLECTOR__NAMESRV_ADDR": namesrv,
            "RRM__COLLECTOR__POLL_INTERVAL_MS": "1000",
            "RRM__COLLECTOR__RUNNING_INFO_INTERVAL_MS": "0",
            "RRM__COLLECTOR__PROGRESS_INTERVAL_MS": "0",
            "RRM__COLLECTOR__INCLUDE_GROUPS": '["bench-*"]',
        }
    )


def results_document(  # type: ignore[no-untyped-def]
    args: argparse.Namespace,
    config,
    cycles: list[dict],
    baseline: dict[str, float],
    registered: dict[str, int],
    fleet: dict[str, float],
) -> dict:
    """The collector's warm cycles (the last three that polled groups) beside the exporter's way."""
    warm = [c for c in cycles if c["by_call"].get("consumer_connections")][-3:]
    collector = {
        "cycle_s": statistics.mean(c["cycle_s"] for c in warm),
        "rpcs": warm[-1]["rpcs"],
        "by_call": warm[-1]["by_call"],
        "cycles": cycles,
        "concurrency": config.collector.concurrency,
        "in_flight_per_broker": config.collector.in_flight_per_broker,
        "poll_interval_ms": config.collector.poll_interval_ms,
        "heap": config.collector.heap,
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
        "fleet_build_s": fleet,
        "load_average": os.getloadavg()[0],
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def record(results: dict) -> None:
    """``results`` into ``RESULTS``: one run per (groups, channels), the latest of each."""
    runs = []
    if RESULTS.exists():
        previous = json.loads(RESULTS.read_text())
        runs = previous.get("runs", [previous])  # a file of one run, before runs were kept per fleet size
    key = (results["groups"], results["channels_per_group_per_broker"])
    runs = [r for r in runs if (r["groups"], r["channels_per_group_per_broker"]) != key] + [results]
    runs.sort(key=lambda r: (r["groups"], r["channels_per_group_per_broker"]))
    RESULTS.write_text(json.dumps({"runs": runs}, indent=2) + "\n")


def main() -> None:
    args = parse_args()
    import jpype

    work = Path(tempfile.mkdtemp(prefix="rrm-bench-collector-"))
    kafka = LocalKafkaBroker(work / "kafka")
    cluster = LocalRocketMQCluster("5", work / "rocketmq", heap=args.broker_heap)
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
        addresses = [info.broker_addr(b) for b in info.brokers]
        created_s = create_groups(info.namesrv_addr, addresses, groups)
        print(f"{args.groups} subscription groups and retry topics created in {created_s:.1f} s", flush=True)
        generator = HeartbeatGenerator(info.namesrv_addr, addresses, groups, args.channels)
        generator.start()
        print(
            f"{args.groups} groups x {args.channels} channels registered on both brokers "
            f"({generator.first_round_s:.1f} s)",
            flush=True,
        )
        registered = {broker: len(cluster.connections(groups[-1], broker)) for broker in info.brokers}
        config = collector_config(bootstrap, info.namesrv_addr, args.in_flight_per_broker, args.heap)
        cycles = collector_cycles(config, work / "collector")
        baseline = exporter_way(info.namesrv_addr, groups)
        fleet = {
            "create_s": round(created_s, 1),
            "first_heartbeat_round_s": round(generator.first_round_s, 1),
            "last_heartbeat_round_s": round(generator.last_round_s, 1),
        }
    finally:
        if generator is not None:
            generator.stop()
        cluster.stop()
        kafka.stop()
        shutil.rmtree(work, ignore_errors=True)
    results = results_document(args, config, cycles, baseline, registered, fleet)
    record(results)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
