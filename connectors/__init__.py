"""Adapters between the monitor and the systems around it.

The domain (``streaming.domain``) never imports this package. Constructing an adapter opens nothing;
``start()`` (or an explicit call) does.

* ``jvm_artifacts`` -- the Maven-resolved jar sets (Spark connectors, Kafka broker, RocketMQ clients).
* ``kafka_broker`` -- a single-node KRaft Kafka broker the project runs itself on 127.0.0.1.
"""
