"""The real RocketMQ client processes of the tests: ``localenv.rocketmq_clients``, which the demo shares."""

from localenv.rocketmq_clients import (
    SMALL_JVM,
    ClientProcess,
    ClientProcessError,
    ConsumerSpec,
    HostedConsumer,
    Line,
    consumer_host,
    consumer_process,
    planned_consumers,
    process_plan,
    start_all,
    stop_all,
)

__all__ = [
    "SMALL_JVM",
    "ClientProcess",
    "ClientProcessError",
    "ConsumerSpec",
    "HostedConsumer",
    "Line",
    "consumer_host",
    "consumer_process",
    "planned_consumers",
    "process_plan",
    "start_all",
    "stop_all",
]
