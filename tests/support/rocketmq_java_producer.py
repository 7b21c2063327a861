"""The real RocketMQ producer-side classes, driven deterministically through JPype.

Shared by the differential test and the golden-vector check: ``JavaProducer`` holds one
``MQFaultStrategy`` of a client line (5.x: the 3-argument constructor), builds a ``TopicPublishInfo`` through
the real ``MQClientInstance.topicRouteData2TopicPublishInfo``, seeds fault items and selects with either
line's signature; ``set_index`` / ``get_index`` reach a ``ThreadLocalIndex``'s value for the calling thread by
reflection.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import jpype

from tests.reference.producer import QueueData
from tests.support.rocketmq_jvm import RocketMQClasses, rocketmq

TOPIC = "TopicTest"
ROUTE_PACKAGE = {"4.9": "org.apache.rocketmq.common.protocol.route", "5": "org.apache.rocketmq.remoting.protocol.route"}


def java_int(value: int):
    return jpype.JClass("java.lang.Integer").valueOf(jpype.JInt(value))


def java_long(value: int):
    return jpype.JClass("java.lang.Long").valueOf(jpype.JLong(value))


def java_exception_name(error: BaseException) -> str:
    return str(error.getClass().getSimpleName())  # type: ignore[attr-defined]


def set_index(jvm: RocketMQClasses, thread_local_index, value: int | None) -> None:
    """Set a ThreadLocalIndex's value for *this* thread (the one that will call the strategy)."""
    thread_local = jvm.get_private(thread_local_index, "threadLocalIndex")
    if value is None:
        thread_local.remove()
    else:
        thread_local.set(java_int(value))


def get_index(jvm: RocketMQClasses, thread_local_index) -> int | None:
    value = jvm.get_private(thread_local_index, "threadLocalIndex").get()
    return None if value is None else int(value)


class JavaProducer:
    """One reusable MQFaultStrategy per line; each case clears its fault table."""

    def __init__(self, line: str) -> None:
        self.line = line
        self.jvm = rocketmq(line)
        strategy_cls = self.jvm.cls("org.apache.rocketmq.client.latency.MQFaultStrategy")
        if line == "4.9":
            self.strategy = strategy_cls()
        else:
            client_config = self.jvm.cls("org.apache.rocketmq.client.ClientConfig")()
            self.strategy = strategy_cls(client_config, None, None)
        self.tolerance = self.jvm.get_private(self.strategy, "latencyFaultTolerance")
        self.table = self.jvm.get_private(self.tolerance, "faultItemTable")
        self.which_item_worst = self.jvm.get_private(self.tolerance, "whichItemWorst")
        long_type = jpype.JClass("java.lang.Long").TYPE
        self.compute = self.strategy.getClass().getDeclaredMethod("computeNotAvailableDuration", long_type)
        self.compute.setAccessible(True)

    def route(self, queue_datas: Iterable[QueueData], masters: Mapping[str, bool | None], order_conf: str | None):
        """The publish info of ``TOPIC``; ``masters`` maps a broker to whether it has a master (None: no BrokerData)."""
        pkg = ROUTE_PACKAGE[self.line]
        qds = []
        for qd in queue_datas:
            j = self.jvm.cls(f"{pkg}.QueueData")()
            j.setBrokerName(qd.broker_name)
            j.setReadQueueNums(qd.read_queue_nums)
            j.setWriteQueueNums(qd.write_queue_nums)
            j.setPerm(qd.perm)
            qds.append(j)
        bds = []
        for name, has_master in masters.items():
            if has_master is None:
                continue  # no BrokerData at all
            addrs = jpype.JClass("java.util.HashMap")()
            addrs.put(java_long(0 if has_master else 1), "127.0.0.1:10911")
            bds.append(self.jvm.cls(f"{pkg}.BrokerData")("DefaultCluster", name, addrs))
        route = self.jvm.cls(f"{pkg}.TopicRouteData")()
        route.setQueueDatas(self.jvm.array_list(qds))
        route.setBrokerDatas(self.jvm.array_list(bds))
        if order_conf is not None:
            route.setOrderTopicConf(order_conf)
        factory = self.jvm.cls("org.apache.rocketmq.client.impl.factory.MQClientInstance")
        return factory.topicRouteData2TopicPublishInfo(TOPIC, route)

    def reset(self, enable: bool) -> None:
        self.table.clear()
        self.strategy.setSendLatencyFaultEnable(enable)

    def update_fault_item(self, broker: str, latency_ms: int, duration_ms: int, reachable: bool = True) -> None:
        """``LatencyFaultToleranceImpl.updateFaultItem`` (4.9.x has no ``reachable`` argument)."""
        args = [broker, jpype.JLong(latency_ms), jpype.JLong(duration_ms)]
        if self.line == "5":
            args.append(jpype.JBoolean(reachable))
        self.tolerance.updateFaultItem(*args)

    def select_one_message_queue(self, info, last_broker: str | None):
        """One ``MQFaultStrategy.selectOneMessageQueue`` call on this thread (5.x with ``resetIndex = false``)."""
        if self.line == "4.9":
            return self.strategy.selectOneMessageQueue(info, last_broker)
        return self.strategy.selectOneMessageQueue(info, last_broker, False)

    def item(self, name: str) -> tuple[int, int, bool] | None:
        item = self.table.get(name)
        if item is None:
            return None
        reachable = bool(self.jvm.get_private(item, "reachableFlag")) if self.line == "5" else True
        return (
            int(self.jvm.get_private(item, "currentLatency")),
            int(self.jvm.get_private(item, "startTimestamp")),
            reachable,
        )
