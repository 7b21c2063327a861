"""What a shard of producers' fault items reports, as typed values of its own vocabulary.

``faults.shard.FaultShard`` returns these in the order it found them; they say what happened to a (producer,
broker) pair's fault window and fault item, not where it is stored. The job maps each to its tables' rows in
one place (``streaming.job.delta.fault_table_rows``), so a column the tables need and the domain does not give
fails a test instead of becoming a NULL.
"""

from __future__ import annotations

from dataclasses import dataclass

from streaming.domain.faults.windows import FaultWindowEpisode
from streaming.domain.vocabulary import DEFAULT_CLUSTER


@dataclass(frozen=True, slots=True)
class FaultWindowChanged:
    """A pair's fault window opened, moved or closed (``episode.status``); ``producer_group`` is the pair's."""

    episode: FaultWindowEpisode
    producer_group: str
    cluster: str = DEFAULT_CLUSTER  # the RocketMQ cluster of the pair (each cluster's pairs are their own)


@dataclass(frozen=True, slots=True)
class PairStatus:
    """A pair's fault item after its sends or its window's expiry, as of ``event_time_ms``.

    The fault columns are None while the producer runs without sendLatencyFaultEnable: it keeps no item."""

    producer_id: str
    producer_group: str
    broker: str
    fault_table: str | None
    unavailable_until_ms: int | None
    last_latency_ms: int | None
    last_send_ms: int
    reachable: bool | None
    event_time_ms: int
    cluster: str = DEFAULT_CLUSTER


@dataclass(frozen=True, slots=True)
class PairEvicted:
    """A pair idle for the state TTL with no open window (or with no item left) is forgotten at the watermark."""

    producer_id: str
    broker: str
    event_time_ms: int
    cluster: str = DEFAULT_CLUSTER


@dataclass(frozen=True, slots=True)
class SendsLate:
    """``count`` sends of a pair older than its tracker's clock were refused, not applied."""

    producer_id: str
    broker: str
    count: int
    cluster: str = DEFAULT_CLUSTER


FaultOutcome = FaultWindowChanged | PairStatus | PairEvicted | SendsLate
