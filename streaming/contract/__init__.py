"""The event contract: versioned JSON events the monitor reads from Kafka, shipped as JSON Schema files.

``schemas/<type>.v<version>.schema.json`` is the single source of truth. ``events.validate_event`` checks
an event with ``jsonschema`` (publishers, the simulator, tests); the Spark job compiles the same files into
SQL (``streaming.job.validation``). ``docs/events.md`` documents them for publishers.
"""
