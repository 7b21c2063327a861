"""Heartbeat runs: the consumer query's steady heartbeats folded into one row per channel, in the JVM.

Between ``consumer_query.shard_input`` and the stateful operator, ``compress`` (the JVM class
``io.github.rrm.ingest.HeartbeatRuns``, a per-partition ``mapPartitions``, so it works on streaming plans)
replaces the typed heartbeats of a Spark partition -- ``reason`` and ``raw_value`` NULL, ``event_type``
``consumer_channel``, ``c_kind`` ``HEARTBEAT`` -- by one row per key (shard, the channel's fields, Kafka topic
and partition; NULL equal to NULL): the key's first heartbeat in (``event_time_ms``, ``kafka_offset``) order,
with ``event_time`` set to the key's latest event time (a watermark downstream sees the same maximum), and
every heartbeat's time and offset in ``RUN_TIMES`` / ``RUN_OFFSETS`` (sorted together by time, then offset;
duplicates kept). Every other row passes through unchanged, with both arrays NULL. The output has the input's
columns in their order, then the two arrays.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

RUN_TIMES = "run_times"
RUN_OFFSETS = "run_offsets"


def compress(sharded: DataFrame) -> DataFrame:
    """``sharded`` (``shard_input``'s columns, batch or streaming) with its heartbeats folded into runs."""
    from pyspark.sql import DataFrame

    session = sharded.sparkSession
    jvm = session.sparkContext._jvm
    assert jvm is not None
    return DataFrame(jvm.io.github.rrm.ingest.HeartbeatRuns.compress(sharded._jdf), session)
