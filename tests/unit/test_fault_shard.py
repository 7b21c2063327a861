"""A shard of producers' fault items without Spark or pandas: sends in, typed outcomes and a snapshot out."""

from __future__ import annotations

from streaming.domain.faults.outcomes import FaultWindowChanged, PairEvicted, PairStatus, SendsLate
from streaming.domain.faults.settings import FaultSettings
from streaming.domain.faults.shard import FaultShard, PairSend
from streaming.domain.faults.tolerance import SendOutcome
from streaming.domain.faults.windows import WindowStatus

SETTINGS = FaultSettings(state_ttl_ms=600_000)


def send(t: int, latency: int, table: str | None = "rocketmq-4") -> PairSend:
    return PairSend(t, "PG", latency, SendOutcome.OK, table)


def test_a_window_opens_expires_at_its_end_and_the_idle_pair_is_evicted():
    step = FaultShard.restore(None, SETTINGS).apply({("P", "b"): [send(1_000, 600)]}, 0)
    opened, status = step.outcomes
    assert isinstance(opened, FaultWindowChanged) and opened.episode.status is WindowStatus.OPENED
    assert status == PairStatus("P", "PG", "b", "rocketmq-4", 31_000, 600, 1_000, True, 1_000)
    shard = FaultShard.restore(step.shard.snapshot(), SETTINGS)  # as the state store keeps it
    assert shard.next_wakeup_ms() == 31_000
    assert shard.apply({}, 31_000).outcomes == ()  # the watermark at the end: not due yet
    expired, status = shard.apply({}, 31_001).outcomes
    assert expired.episode.status is WindowStatus.EXPIRED and status.event_time_ms == 31_000
    step = shard.apply({}, 31_001).shard.apply({}, 601_001)
    assert step.outcomes == (PairEvicted("P", "b", 601_001),) and step.shard.is_empty()


def test_late_sends_and_sends_without_a_fault_table():
    shard = FaultShard.restore(None, SETTINGS).apply({("P", "b"): [send(2_000, 5)]}, 0).shard
    outcomes = shard.apply({("P", "b"): [send(1_000, 5), send(3_000, 20_000, None)]}, 0).outcomes
    assert outcomes[0] == SendsLate("P", "b", 1)
    assert outcomes[-1] == PairStatus("P", "PG", "b", None, None, None, 3_000, None, 3_000)
