"""The client agent's hook and publisher with the real RocketMQ client classes of both lines and real Kafka.

The hook is driven here the way ``DefaultMQProducerImpl.sendKernelImpl`` drives it (one context object per
attempt, before then after; ASYNC's after twice), with the line's own context, message, queue, result and
exception classes, and a real producer (started, so it has its client id) that never reaches a name server.
Sends through a real cluster are in ``tests/rocketmq/``.
"""

from __future__ import annotations

import json
import time

import jpype
import pytest

from connectors import jvm_artifacts
from connectors.kafka_topics import create_topics
from connectors.processes import free_port
from localenv import agent_artifacts
from streaming.contract.validator import Rejection, validate_event
from tests.support import rocketmq_jvm
from tests.support.agent_events import read_events

VERSION_BY_LINE = {"4.9": "V4_9_8", "5": "V5_3_3"}
# The agent's ``cluster`` setting per line's test: set, its events are version 2 naming it; unset, version 1.
CLUSTER_BY_LINE = {"4.9": None, "5": "east"}


class AgentLine:
    """One client line's classes with the agent, from their own class loader in the test JVM."""

    def __init__(self, line: str) -> None:
        rocketmq_jvm._start_jvm()
        build = agent_artifacts.agent()
        rocketmq = jvm_artifacts.jars(agent_artifacts.CLIENT_PROFILE_BY_LINE[line])
        present = {jvm_artifacts._artifact_name(p.name) for p in rocketmq}
        jars = [
            build.jar,
            *rocketmq,
            *(p for p in build.libraries if jvm_artifacts._artifact_name(p.name) not in present),
        ]
        URL = jpype.JClass("java.net.URL")
        parent = jpype.JClass("java.lang.ClassLoader").getPlatformClassLoader()
        self.loader = jpype.JClass("java.net.URLClassLoader")(
            jpype.JArray(URL)([URL(p.resolve().as_uri()) for p in jars]), parent
        )

    def cls(self, name: str):
        return jpype.JClass(name, loader=self.loader)


@pytest.fixture(scope="module", params=["4.9", "5"])
def line(request):
    return request.param, AgentLine(request.param)


def start_producer(classes: AgentLine, group: str, fault_enable: bool):
    producer = classes.cls("org.apache.rocketmq.client.producer.DefaultMQProducer")(group)
    producer.setNamesrvAddr(f"127.0.0.1:{free_port()}")  # nothing listens: the hook is driven directly
    producer.setInstanceName(f"{group}-{time.monotonic_ns()}")
    producer.setSendLatencyFaultEnable(fault_enable)
    producer.start()
    return producer


def agent_for(classes: AgentLine, bootstrap: str, topic: str, **settings):
    builder = (
        classes.cls("io.github.rrm.agent.AgentConfig").builder().bootstrapServers(bootstrap).sendResultsTopic(topic)
    )
    for name, value in settings.items():
        builder = getattr(builder, name)(value)
    return classes.cls("io.github.rrm.agent.RebalanceAgent")(builder.build())


class Attempts:
    """Send attempts of one producer as sendKernelImpl makes them, against the hook."""

    def __init__(self, classes: AgentLine, producer, hook) -> None:
        self.c, self.producer, self.hook = classes, producer, hook
        self.mode = classes.cls("org.apache.rocketmq.client.impl.CommunicationMode")

    def message(self, topic: str):
        message = self.c.cls("org.apache.rocketmq.common.message.Message")(topic, b"x")
        self.c.cls("org.apache.rocketmq.common.message.MessageClientIDSetter").setUniqID(message)
        return message

    def context(self, message, broker: str, queue_id: int, mode: str = "SYNC"):
        context = self.c.cls("org.apache.rocketmq.client.hook.SendMessageContext")()
        context.setProducer(self.producer.getDefaultMQProducerImpl())
        context.setProducerGroup(self.producer.getProducerGroup())
        context.setMessage(message)
        context.setMq(
            self.c.cls("org.apache.rocketmq.common.message.MessageQueue")(message.getTopic(), broker, queue_id)
        )
        context.setCommunicationMode(getattr(self.mode, mode))
        return context

    def result(self, context):
        status = self.c.cls("org.apache.rocketmq.client.producer.SendStatus")
        return self.c.cls("org.apache.rocketmq.client.producer.SendResult")(
            status.SEND_OK, "id", "offset-id", context.getMq(), 7
        )

    def attempt(self, message, broker: str, queue_id: int, error=None, hold_s: float = 0.0) -> None:
        context = self.context(message, broker, queue_id)
        self.hook.sendMessageBefore(context)
        time.sleep(hold_s)
        if error is None:
            context.setSendResult(self.result(context))
        else:
            context.setException(error)
        self.hook.sendMessageAfter(context)


def test_each_attempt_is_one_contract_event_with_the_client_s_own_facts(kafka_broker, line):
    name, classes = line
    topic = f"agent-sends-{name.replace('.', '')}"
    create_topics(kafka_broker.bootstrap_servers, [topic])
    cluster = CLUSTER_BY_LINE[name]
    agent = agent_for(classes, kafka_broker.bootstrap_servers, topic, attemptField=True, cluster=cluster)
    producer = start_producer(classes, "agent_test_pg", fault_enable=True)
    try:
        hook = agent.register(producer)
        sends = Attempts(classes, producer, hook)
        exceptions = {
            "REMOTING_ERROR": classes.cls("org.apache.rocketmq.remoting.exception.RemotingConnectException")(
                "127.0.0.1:1"
            ),
            "TIMEOUT": classes.cls("org.apache.rocketmq.remoting.exception.RemotingTimeoutException")(
                "127.0.0.1:1", 3000
            ),
            "BROKER_ERROR": classes.cls("org.apache.rocketmq.client.exception.MQBrokerException")(14, "busy"),
            "CLIENT_ERROR": classes.cls("org.apache.rocketmq.client.exception.MQClientException")("no", None),
            "INTERRUPTED": jpype.JClass("java.lang.InterruptedException")("stop"),
        }
        # One message retried through every failure kind, then a success: attempts 1..6 of one UNIQ_KEY.
        retried = sends.message("orders")
        for error in exceptions.values():
            sends.attempt(retried, "broker-b", 1, error)
        sends.attempt(retried, "broker-a", 2, hold_s=0.06)
        # An ASYNC send: the after-hook at dispatch (no result), at completion, and once more (ignored).
        async_message = sends.message("orders")
        context = sends.context(async_message, "broker-a", 3, mode="ASYNC")
        hook.sendMessageBefore(context)
        hook.sendMessageAfter(context)
        context.setSendResult(sends.result(context))
        hook.sendMessageAfter(context)
        hook.sendMessageAfter(context)

        events = read_events(kafka_broker.bootstrap_servers, topic, at_least=7)
        client_id = producer.getDefaultMQProducerImpl().getMqClientFactory().getClientId()
        assert [key for key, _ in events] == [client_id] * 7  # keyed by producer_id
        for _, event in events:
            raw = json.dumps(event).encode()
            assert not isinstance(validate_event(raw, now_ms=int(time.time() * 1000)), Rejection), event
            assert (event["schema_version"], event.get("cluster")) == (1 if cluster is None else 2, cluster)
            assert (event["type"], event["producer_id"], event["producer_group"], event["topic"]) == (
                "send_result",
                client_id,
                "agent_test_pg",
                "orders",
            )
            assert event["client_version"] == VERSION_BY_LINE[name]
            assert event["send_latency_fault_enable"] is True
        got = [(e["outcome"], e["broker"], e["queue_id"], e["attempt"]) for _, e in events]
        assert got == [(o, "broker-b", 1, i + 1) for i, o in enumerate(exceptions)] + [
            ("OK", "broker-a", 2, 6),
            ("OK", "broker-a", 3, 1),
        ]
        assert events[5][1]["latency_ms"] >= 60  # measured between the before and after calls
        counters = agent.counters()
        assert (counters.sendAttempts(), counters.retryAttempts(), counters.asyncDispatches()) == (7, 5, 1)
        assert (counters.published(), counters.dropped(), counters.agentErrors()) == (7, 0, 0)
    finally:
        producer.shutdown()
        agent.close(2000)


def test_without_kafka_the_buffer_drops_and_counts_and_the_hook_never_throws(line):
    name, classes = line
    # Nothing listens on the bootstrap port: every event is either dropped at the full buffer or lost in Kafka.
    agent = agent_for(classes, f"127.0.0.1:{free_port()}", "agent-nowhere", bufferCapacity=8)
    producer = start_producer(classes, "agent_test_down", fault_enable=False)
    try:
        sends = Attempts(classes, producer, agent.register(producer))
        for _ in range(200):
            sends.attempt(sends.message("orders"), "broker-a", 0)  # raises if the hook ever throws
        counters = agent.counters()
        assert counters.sendAttempts() == 200
        assert counters.enqueued() + counters.droppedBufferFull() == 200
        assert counters.droppedBufferFull() > 0
    finally:
        producer.shutdown()
        agent.close(3000)
    counters = agent.counters()
    assert counters.published() == 0
    assert counters.dropped() == 200  # everything accounted for: the buffer's drops plus Kafka's losses
    assert counters.agentErrors() == 0


def test_the_attached_agent_s_settings_file_then_system_properties_then_arguments(tmp_path):
    """``-javaagent`` settings as ``AgentMain.premain`` reads them, from the -javaagent jar alone."""
    rocketmq_jvm._start_jvm()
    URL = jpype.JClass("java.net.URL")
    loader = jpype.JClass("java.net.URLClassLoader")(
        jpype.JArray(URL)([URL(agent_artifacts.agent().javaagent.resolve().as_uri())]),
        jpype.JClass("java.lang.ClassLoader").getPlatformClassLoader(),
    )
    file = tmp_path / "agent.properties"
    file.write_text("bootstrap.servers=file:9092\ntopic.send.results=from-file\nbuffer.capacity=5\ncluster=west\n")
    system = jpype.JClass("java.util.Properties")()
    for name, value in {
        "java.version": "not an agent setting",
        "rrm.agent.topic.send.results": "from-system",
        "rrm.agent.report.interval.ms": "700",
    }.items():
        system.setProperty(name, value)
    arguments = f"config={file},bootstrap.servers=k1:9092,k2:9092,report.interval.ms=900"
    settings = jpype.JClass("io.github.rrm.agent.AgentMain", loader=loader).settings(arguments, system)
    config = jpype.JClass("io.github.rrm.agent.AgentConfig", loader=loader).fromProperties(settings)
    assert str(config.bootstrapServers()) == "k1:9092,k2:9092"  # arguments over the file, commas kept
    assert str(config.sendResultsTopic()) == "from-system"  # system properties over the file
    assert config.bufferCapacity() == 5 and config.reportIntervalMs() == 900
    assert str(config.cluster()) == "west"
    unset = jpype.JClass("io.github.rrm.agent.AgentConfig", loader=loader).builder().bootstrapServers("k:9092")
    assert unset.build().cluster() is None  # no cluster: version 1 events, the job's default cluster
    # Kafka is inside the jar under the agent's own package, not where the application's would be.
    assert loader.getResource("org/apache/kafka/clients/producer/KafkaProducer.class") is None
    assert loader.getResource("io/github/rrm/agent/shaded/kafka/clients/producer/KafkaProducer.class") is not None
