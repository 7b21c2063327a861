"""The RocketMQ domain: what the real client and broker compute, reproduced exactly.

Everything in this package is plain Python. It must never import pyspark, pandas, pyarrow, py4j,
Kafka clients or anything from ``streaming.job`` / ``connectors`` (an import-linter contract in
pyproject.toml and a unit test enforce it). Nothing here reads a clock: time comes in as ``now_ms``.

Modules:

* ``javacompat`` -- Java ``String`` semantics the client relies on (hashCode, compareTo, split) and
  ``java.util.Random``.
* ``queues`` -- ``MessageQueue`` with Java ordering and ``toString``.
* ``versions`` -- the client lines whose semantics differ (4.9.x, 5.x).
* ``vocabulary`` -- the fixed words (change kinds, triggers, anomalies, statuses) as string-valued enums.
* ``errors`` -- the domain's typed errors (Java exceptions become these).
* ``allocation`` -- the six consumer allocation strategies and the whole-group form.
* ``producer`` / ``faults`` -- producer queue selection and latency fault tolerance.
* ``membership`` -- the broker's consumer-group membership rules as a state machine.
* ``analysis`` -- per-topic findings for a group (orphans, double owners, duplicates, skew, churn...).
* ``rules`` -- configured group and producer rules, their one matcher, and the fault engine's settings.
"""
