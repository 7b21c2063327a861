"""The real RocketMQ client processes of the tests: ``localenv.rocketmq_clients``, which the demo shares."""

from localenv.rocketmq_clients import SMALL_JVM, ClientProcess, ClientProcessError, Line, consumer_process

__all__ = ["SMALL_JVM", "ClientProcess", "ClientProcessError", "Line", "consumer_process"]
