"""Adapters between the monitor and the systems around it: Kafka, Delta readers, Prometheus, RocketMQ.

The domain (``streaming.domain``) never imports this package, and this package never imports the local
tooling in ``localenv``. Constructing an adapter opens nothing; ``start()`` (or an explicit call) does.
``jvm_artifacts`` resolves the jars the job and the collector run with; ``processes`` stops what they start.
"""
