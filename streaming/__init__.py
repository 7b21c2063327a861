"""RocketMQ rebalance monitor.

Layers, top to bottom (``docs/design/package-layers.md``; ``lint-imports`` checks them):

* ``streaming.app`` -- the ``rebalance-monitor`` command, the demos and the simulated fleet.
* ``streaming.job`` -- the Spark Structured Streaming job (beside ``localenv``, the local services).
* ``connectors`` -- adapters to the outside world (Kafka, the event emitter, metrics, the Delta reader).
* ``streaming.config``, ``streaming.contract`` -- the configuration; the events' and tables' contracts.
* ``streaming.domain`` -- pure RocketMQ semantics and what the monitor derives from them.
"""

__version__ = "0.1.0"
