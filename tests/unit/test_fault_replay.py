"""send-ingest's fault replay without Spark: shards, Spark's event-time rules, and a replayed batch.

``replay_batch`` is what send-ingest calls on the driver with each batch's reduced sends; here it is called
batch by batch with hand-made sends, so the effect of ``[producers] start_detector_enable``, of sends without a
fault table, of several pairs sharing a shard (each with its own wake-up time), of the watermark and of a batch
replayed after a crash is checked row by row.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from streaming.config import load_config
from streaming.domain.faults.outcomes import FaultWindowChanged, PairEvicted, PairStatus
from streaming.domain.faults.settings import FaultSettings
from streaming.domain.faults.shard import ClusterFaultShards, PairSend
from streaming.domain.faults.tolerance import SendOutcome
from streaming.job.delta.fault_table_rows import pair_changes, window_row
from streaming.job.runtime.checkpoint_layout import CheckpointLayoutError
from streaming.job.sends.fault_replay import FaultReplayer, FaultReplayState, KeptSend, kept_send, replay_batch

NO_DELAY_EFFECT = 10**15  # a delay no send moves the watermark past: the tests set it by hand


def settings(**producers: object) -> FaultSettings:
    env = {f"RRM__PRODUCERS__{k.upper()}": json.dumps(v) for k, v in producers.items()}
    return load_config(None, env=env).fault_settings


def kept(t, latency, outcome, table, pair=("P", "b"), shard=0, offset=0, group="PG"):
    send = PairSend(t, group, latency, SendOutcome.parse(outcome), table)
    return KeptSend(shard, pair[0], pair[1], 0, offset, send)


class Replay:
    """Batches 0, 1, 2, ... of one replay, its state carried from batch to batch as send-ingest carries it."""

    def __init__(self, fault_settings: FaultSettings, delay_ms: int = NO_DELAY_EFFECT) -> None:
        self.settings, self.delay_ms = fault_settings, delay_ms
        self.state, self.batch_id, self.late = FaultReplayState(), 0, 0

    def set_watermark(self, ms: int) -> None:
        """The watermark the next batch applies, as if earlier sends had set it."""
        self.state = replace(self.state, next_watermark_ms=ms)

    def run(self, sends, pair=("P", "b"), shard=0):
        """One batch with ``sends`` (t, latency, outcome, table) of ``pair``: its outcomes as ``(table, row)``."""
        batch = [kept(*s, pair=pair, shard=shard, offset=i) for i, s in enumerate(sends)]
        step = replay_batch(self.state, self.batch_id, batch, self.settings, self.delay_ms)
        self.batch_id += 1
        self.late += step.late_sends
        if step.state is not None:
            self.state = step.state
        return as_rows(step.outcomes)

    def timeout_ms(self, shard=0):
        return self.state.shards[shard].timeout_ms

    def holds(self, shard=0):
        return shard in self.state.shards


def as_rows(outcomes):
    """A window's ``fault_windows`` row; a pair's ``producer_broker_status_current`` row or its key, ``evicted``
    saying which."""
    rows = []
    for o in outcomes:
        if isinstance(o, FaultWindowChanged):
            rows.append(("fault_windows", window_row(o)))
        elif isinstance(o, PairStatus | PairEvicted):
            ((row, evicted),) = pair_changes([o])
            rows.append(("producer_broker_status_current", {**row, "evicted": evicted}))
    return rows


def status(rows):
    return [p for t, p in rows if t == "producer_broker_status_current"][-1]


def test_start_detector_enable_makes_a_remoting_error_unreachable_on_5x():
    for detector, reachable in ((False, True), (True, False)):
        replay = Replay(settings(start_detector_enable=detector))
        row = status(replay.run([(1_000, 5, "REMOTING_ERROR", "rocketmq-5")]))
        assert (row["reachable"], row["unavailable_until_ms"]) == (reachable, 11_000), detector


def test_a_restart_with_another_detector_setting_applies_it_to_the_stored_item():
    replay = Replay(settings(start_detector_enable=False))
    replay.run([(1_000, 5, "OK", "rocketmq-5")])
    replay.settings = settings(start_detector_enable=True)
    assert status(replay.run([(2_000, 5, "TIMEOUT", "rocketmq-5")]))["reachable"] is False


def test_sends_without_a_fault_table_keep_the_pair_known_and_avoid_nothing():
    replay = Replay(settings())
    rows = replay.run([(1_000, 20_000, "BROKER_ERROR", None), (2_000, 5, "OK", None)])
    assert [t for t, _ in rows] == ["producer_broker_status_current"]  # no fault window
    row = status(rows)
    assert (row["fault_table"], row["unavailable_until_ms"], row["last_latency_ms"], row["reachable"]) == (
        None,
        None,
        None,
        None,
    )
    assert row["last_send_ms"] == 2_000 and replay.holds()
    # the same producer with the feature on (e.g. restarted with it): windows as usual
    rows = replay.run([(3_000, 5, "BROKER_ERROR", "rocketmq-5")])
    assert [(t, p.get("status")) for t, p in rows][0] == ("fault_windows", "OPENED")
    assert status(rows)["unavailable_until_ms"] == 13_000


def test_pairs_of_one_shard_keep_their_own_windows_wake_ups_and_eviction():
    replay = Replay(settings(state_ttl_ms=600_000))
    # P/b: a slow send opens a window until 1_000 + 30_000 (rocketmq-4: 550 ms and up -> 30 s); Q/b: fast.
    replay.run([(1_000, 600, "OK", "rocketmq-4")], pair=("P", "b"))
    replay.run([(2_000, 5, "OK", "rocketmq-4")], pair=("Q", "b"))
    assert replay.timeout_ms() == 31_000  # the earliest wake-up: P/b's window end, not Q/b's TTL (602_000)

    # The watermark reaches the window's end exactly: Spark would not time the shard out yet.
    replay.set_watermark(31_000)
    assert replay.run([]) == []
    # Past it: P/b's window expires at its end, Q/b (due at 602_000) is not touched.
    replay.set_watermark(31_001)
    rows = replay.run([])
    assert [(t, p.get("producer_id"), p.get("status"), p.get("event_time_ms")) for t, p in rows] == [
        ("fault_windows", "P", "EXPIRED", 31_000),
        ("producer_broker_status_current", "P", None, 31_000),
    ]
    assert replay.timeout_ms() == 601_000  # P/b's TTL (last send 1_000), before Q/b's

    # P/b idles out; Q/b sends again and stays; then Q/b idles out and the shard's state is gone.
    replay.set_watermark(601_001)
    rows = replay.run([(601_001, 5, "OK", "rocketmq-4")], pair=("Q", "b"))
    assert sorted((p["producer_id"], p["evicted"]) for t, p in rows if t == "producer_broker_status_current") == [
        ("P", True),
        ("Q", False),
    ]
    assert replay.holds() and replay.timeout_ms() == 1_201_001
    replay.set_watermark(1_201_002)
    rows = replay.run([])
    assert [(p["producer_id"], p["evicted"]) for _, p in rows] == [("Q", True)] and not replay.holds()


def test_shards_are_called_alone_and_a_quiet_shard_only_when_its_timeout_passes():
    replay = Replay(settings())
    replay.run([(1_000, 600, "OK", "rocketmq-4")], pair=("P", "b"), shard=0)  # window until 31_000
    replay.run([(2_000, 600, "OK", "rocketmq-4")], pair=("Q", "b"), shard=1)  # window until 32_000
    replay.set_watermark(31_500)
    rows = replay.run([])
    assert [(p["producer_id"], p.get("status")) for t, p in rows if t == "fault_windows"] == [("P", "EXPIRED")]
    assert (replay.timeout_ms(0), replay.timeout_ms(1)) == (3_601_000, 32_000)  # P/b: its TTL (an hour)


def test_the_watermark_is_the_newest_send_of_earlier_batches_less_the_delay():
    replay = Replay(settings(), delay_ms=10_000)
    replay.run([(1_000, 600, "OK", "rocketmq-4"), (50_000, 5, "OK", "rocketmq-4")], pair=("Q", "b"), shard=1)
    assert replay.state.next_watermark_ms == 40_000
    replay.run([(30_000, 5, "OK", "rocketmq-4")], pair=("R", "b"), shard=2)  # older: the watermark stays
    assert replay.state.next_watermark_ms == 40_000 and replay.state.applied_watermark_ms == 40_000


def test_a_send_at_or_before_the_previous_batchs_watermark_is_late_and_not_applied():
    replay = Replay(settings(), delay_ms=10_000)
    replay.run([(100_000, 5, "OK", "rocketmq-4")])  # batch 0: applies 0, sets 90_000 for the next
    replay.run([(100_500, 5, "OK", "rocketmq-4")])  # batch 1: applies 90_000; its late threshold is still 0
    assert replay.late == 0
    # batch 2: late at or before batch 1's 90_000
    rows = replay.run([(90_000, 600, "OK", "rocketmq-4"), (90_001, 5, "OK", "rocketmq-4")], pair=("Q", "b"))
    assert replay.late == 1
    assert status(rows)["last_send_ms"] == 90_001 and not [t for t, _ in rows if t == "fault_windows"]


def test_after_batches_without_work_the_late_threshold_is_the_watermark_they_kept():
    replay = Replay(settings(), delay_ms=10_000)
    replay.run([(100_000, 5, "OK", "rocketmq-4")])  # batch 0 sets 90_000 for the next
    assert replay.run([]) == [] and replay.state.batch_id == 0  # batch 1: nothing to do, nothing stored
    replay.run([(89_999, 5, "OK", "rocketmq-4"), (95_000, 5, "OK", "rocketmq-4")])  # batch 2: batch 1's 90_000
    assert replay.late == 1


def test_a_batch_the_state_already_holds_changes_nothing():
    replay = Replay(settings())
    sends = [kept(1_000, 600, "OK", "rocketmq-4")]
    first = replay_batch(FaultReplayState(), 7, sends, replay.settings, NO_DELAY_EFFECT)
    assert first.state is not None and first.outcomes
    again = replay_batch(first.state, 7, sends, replay.settings, NO_DELAY_EFFECT)
    assert (again.state, again.outcomes, again.already_written) == (None, (), True)
    # The batch after the state's is replayed from it, to the same rows as in one uninterrupted run.
    later = [kept(40_000, 5, "OK", "rocketmq-4")]
    stored = FaultReplayState.from_document(json.loads(json.dumps(first.state.to_document())))
    assert (
        replay_batch(stored, 8, later, replay.settings, 0).outcomes
        == replay_batch(first.state, 8, later, replay.settings, 0).outcomes
    )


def test_the_state_document_round_trips_every_shard():
    replay = Replay(settings())
    replay.run([(1_000, 600, "OK", "rocketmq-4")], pair=("P", "b"), shard=3)
    replay.run([(2_000, 5, "OK", "rocketmq-5")], pair=("Q", "c"), shard=5)
    document = json.loads(json.dumps(replay.state.to_document()))
    assert FaultReplayState.from_document(document) == replay.state
    pairs = ClusterFaultShards.restore(replay.state.shards[3].snapshot, replay.settings).shards["DefaultCluster"].pairs
    assert list(pairs) == [("P", "b")]


def test_a_kept_send_row_reads_a_null_fault_table_as_none():
    row = {
        "shard": 2,
        "producer_id": "P",
        "producer_group": "PG",
        "broker": "b",
        "event_time_ms": 5,
        "latency_ms": 7,
        "outcome": "OK",
        "fault_table": None,
        "kafka_partition": 1,
        "kafka_offset": 9,
    }
    assert kept_send(row) == KeptSend(2, "P", "b", 1, 9, PairSend(5, "PG", 7, SendOutcome.OK, None))
    assert kept_send(row | {"fault_table": float("nan")}).send.fault_table is None


class StoredFiles:
    """``FaultStateFiles``' two methods over a list, as the checkpoint's directory would hold them."""

    def __init__(self, *states: FaultReplayState) -> None:
        self.saved = list(states)

    def load(self) -> FaultReplayState:
        return self.saved[-1] if self.saved else FaultReplayState()

    def save(self, state: FaultReplayState) -> None:
        self.saved.append(state)


def test_a_checkpoint_made_with_another_shard_count_is_refused_by_name_and_an_empty_one_takes_the_setting():
    replay = Replay(settings())
    replay.run([(1_000, 600, "OK", "rocketmq-4")], shard=3)
    held = replace(replay.state, shard_count=8)
    refusing = FaultReplayer(StoredFiles(held), replay.settings, 4, 0, outputs=None)  # type: ignore[arg-type]
    with pytest.raises(CheckpointLayoutError, match=r"\[producers\] state_shards is 4.* in 8 shards"):
        refusing.prepare(None, [], 1)  # type: ignore[arg-type]
    empty = FaultReplayer(StoredFiles(), replay.settings, 4, 0, outputs=None)  # type: ignore[arg-type]
    assert empty.prepare(None, [], 0) == ([], None)  # type: ignore[arg-type]
    assert empty.state is not None and empty.state.shard_count == 4
