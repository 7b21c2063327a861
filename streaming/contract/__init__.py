"""The event contract: the versioned JSON events the monitor reads from Kafka.

``schemas/<type>.v<version>.schema.json`` (JSON Schema draft 2020-12, shipped as package data) is the single
source of truth. ``events`` holds the event types, default topics, Kafka keys, limits and dead-letter reasons,
and ``validate_event``, which classifies a raw value exactly as the Spark job does (the job compiles the same
files into SQL in ``streaming.job.validation``). ``docs/events.md`` documents the events for publishers.

Plain Python: importable without a JVM; nothing here imports Spark or Kafka.
"""
