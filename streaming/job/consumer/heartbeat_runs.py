"""Heartbeat runs: the consumer query's steady heartbeats folded into one row per channel, in the JVM.

Between ``consumer.query.shard_input`` and the stateful operator, ``compress`` (the JVM class
``io.github.rrm.ingest.HeartbeatRuns``, a per-partition ``mapPartitions``, so it works on streaming plans)
replaces the typed heartbeats of a Spark partition -- ``reason`` and ``raw_value`` NULL, ``event_type``
``consumer_channel``, ``c_kind`` ``HEARTBEAT`` -- by one row per key (shard, the channel's fields, Kafka topic
and partition; NULL equal to NULL): the key's first heartbeat in (``event_time_ms``, ``kafka_offset``) order,
with ``event_time`` set to the key's latest event time (a watermark downstream sees the same maximum), and
every heartbeat's time and offset in ``RUN``, packed (``unpack_run``) -- unless the key was seen once: then its
row stays as it was. Polls fold the same way, keyed by their ``typed_json`` (their fields but their time, NULL for
a heartbeat; ``docs/design/poll-runs.md``), the first poll's raw value kept. Every other row passes through
unchanged. The output has the input's columns in their order, then ``RUN`` (NULL but for runs).
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

RUN = "run"


def unpack_run(packed: bytes) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """A run's heartbeats as (event times, Kafka offsets), sorted by time then offset: ``RUN`` holds them as
    little-endian int64 pairs (one bytes object per run crosses Arrow to pandas far cheaper than two arrays)."""
    values = struct.unpack(f"<{len(packed) // 8}q", packed)
    return values[0::2], values[1::2]


def compress(sharded: DataFrame) -> DataFrame:
    """``sharded`` (``shard_input``'s columns, batch or streaming) with its heartbeats folded into runs."""
    from pyspark.sql import DataFrame

    session = sharded.sparkSession
    jvm = session.sparkContext._jvm
    assert jvm is not None
    return DataFrame(jvm.io.github.rrm.ingest.HeartbeatRuns.compress(sharded._jdf), session)
