"""The event contract: the versioned JSON events the monitor reads from Kafka.

``schemas/<type>.v<version>.schema.json`` (JSON Schema draft 2020-12, shipped as package data) is the single
source of truth. ``events`` holds the event types, default topics, Kafka keys, limits, dead-letter reasons and
the schema loader; ``validator.validate_event`` classifies a raw value exactly as the Spark job does, reading
JSON as Spark does (``spark_json``) and applying the schemas' rules in the job's order (``schema_rules``); the
job compiles the same files into SQL in ``streaming.job.ingest.validation``. ``docs/events.md`` documents the events.

Plain Python: importable without a JVM; nothing here imports Spark or Kafka.
"""
