"""RocketMQ rebalance monitor.

Layout (a picture of the architecture):

* ``streaming.domain`` -- pure RocketMQ semantics: allocation strategies, producer selection, fault
  tables, broker membership rules and group analysis. Plain Python; time is always a parameter.
* ``streaming.job`` -- the Spark Structured Streaming job: ingest, stateful adapters, Delta sinks.
* ``streaming.app.cli`` -- the ``rebalance-monitor`` command.
* ``connectors`` -- adapters to the outside world (local Kafka broker, event emitter, metrics).
"""

__version__ = "0.1.0"
