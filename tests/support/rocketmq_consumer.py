"""A real RocketMQ push consumer in its own process (JVM through JPype), driven over standard input.

``python -m tests.support.rocketmq_consumer --line 5 --namesrv ADDR --group G --topic T [--topic T2]
[--instance NAME] [--client-ip IP] [--strategy AVG|AVG_BY_CIRCLE|CONSISTENT_HASH]`` starts the consumer and
prints ``{"client_id": ...}``; then each line ``queues`` on standard input prints the queues the client itself
holds (its rebalance table, dropped ones left out) as JSON, and ``quit`` (or end of input) shuts it down.
Two such processes with the same ``--instance`` and ``--client-ip`` share one client id, as in production.
``ConsumerProcess`` runs one from a test and can freeze it (SIGSTOP) or kill it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

STRATEGY_CLASSES = {
    "AVG": "AllocateMessageQueueAveragely",
    "AVG_BY_CIRCLE": "AllocateMessageQueueAveragelyByCircle",
    "CONSISTENT_HASH": "AllocateMessageQueueConsistentHash",
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--line", choices=["5", "4.9"], default="5")
    parser.add_argument("--namesrv", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", action="append", required=True)
    parser.add_argument("--instance", default=None)
    parser.add_argument("--client-ip", default=None)
    parser.add_argument("--strategy", choices=sorted(STRATEGY_CLASSES), default="AVG")
    parser.add_argument("--heartbeat-ms", type=int, default=3000)
    parser.add_argument("--rebalance-wait-ms", type=int, default=2000)
    args = parser.parse_args()

    import jpype

    home = tempfile.mkdtemp(prefix="rrm-consumer-")
    jpype.startJVM(
        "-Xmx128m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        f"-Duser.home={home}",
        f"-Drocketmq.client.logRoot={home}",
        "-Drocketmq.client.logLevel=WARN",
        f"-Drocketmq.client.rebalance.waitInterval={args.rebalance_wait_ms}",
        "-Dcom.rocketmq.remoting.client.closeSocketIfTimeout=false",  # see TEST_SPEED
        convertStrings=True,
    )
    from tests.support.rocketmq_jvm import rocketmq

    classes = rocketmq(args.line)
    consumer = classes.cls("org.apache.rocketmq.client.consumer.DefaultMQPushConsumer")(args.group)
    consumer.setNamesrvAddr(args.namesrv)
    if args.instance:
        consumer.setInstanceName(args.instance)
    if args.client_ip:
        consumer.setClientIP(args.client_ip)
    consumer.setHeartbeatBrokerInterval(args.heartbeat_ms)
    strategy = classes.cls(f"org.apache.rocketmq.client.consumer.rebalance.{STRATEGY_CLASSES[args.strategy]}")
    consumer.setAllocateMessageQueueStrategy(strategy())
    for topic in args.topic:
        consumer.subscribe(topic, "*")
    listener_class = classes.cls("org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently")
    success = classes.cls("org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus").CONSUME_SUCCESS
    listener = jpype.JProxy(listener_class, dict={"consumeMessage": lambda messages, context: success})
    consumer.registerMessageListener(listener)
    consumer.start()
    print(json.dumps({"client_id": str(consumer.buildMQClientId())}), flush=True)
    rebalance = consumer.getDefaultMQPushConsumerImpl().getRebalanceImpl()
    for line in sys.stdin:
        command = line.strip()
        if command == "queues":
            held = []
            for entry in rebalance.getProcessQueueTable().entrySet():
                if not entry.getValue().isDropped():
                    queue = entry.getKey()
                    held.append([str(queue.getTopic()), str(queue.getBrokerName()), int(queue.getQueueId())])
            print(json.dumps(sorted(held)), flush=True)
        elif command == "quit":
            break
    consumer.shutdown()


class ConsumerProcess:
    """A consumer process started from a test; ``queues()`` asks it what it holds."""

    def __init__(
        self,
        line: str,
        namesrv: str,
        group: str,
        topics: list[str],
        instance: str | None = None,
        client_ip: str | None = None,
        strategy: str = "AVG",
    ) -> None:
        command = [
            sys.executable,
            "-m",
            "tests.support.rocketmq_consumer",
            "--line",
            line,
            "--namesrv",
            namesrv,
            "--group",
            group,
            "--strategy",
            strategy,
        ]
        for topic in topics:
            command += ["--topic", topic]
        if instance:
            command += ["--instance", instance]
        if client_ip:
            command += ["--client-ip", client_ip]
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            stderr=subprocess.DEVNULL,
            cwd=Path(__file__).parents[2],
            env=dict(os.environ),
            start_new_session=True,
        )
        self.group = group
        self._client_id: str | None = None

    @property
    def client_id(self) -> str:
        """The client's id, once it has started (waits for it: start several processes first, then ask)."""
        if self._client_id is None:
            assert self.process.stdout is not None
            first = self.process.stdout.readline()
            if not first:
                raise RuntimeError(f"consumer of group {self.group} exited at start (code {self.process.wait()})")
            self._client_id = json.loads(first)["client_id"]
        return self._client_id

    def queues(self) -> set[tuple[str, str, int]]:
        self.client_id  # noqa: B018 - the start line comes first
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write("queues\n")
        self.process.stdin.flush()
        return {tuple(q) for q in json.loads(self.process.stdout.readline())}  # type: ignore[misc]

    def freeze(self) -> None:
        os.kill(self.process.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        os.kill(self.process.pid, signal.SIGCONT)

    def stop(self) -> None:
        """Shut the consumer down (it unregisters), or SIGKILL it when it does not exit in time."""
        if self.process.poll() is not None:
            return
        self.thaw()
        try:
            assert self.process.stdin is not None
            self.process.stdin.write("quit\n")
            self.process.stdin.close()
            self.process.wait(20)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait(10)


if __name__ == "__main__":
    main()
