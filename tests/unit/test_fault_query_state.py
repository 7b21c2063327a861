"""The fault-window query's state function without Spark: the settings it is given reach the tracker.

``make_state_function`` is what ``applyInPandasWithState`` calls per shard of producers; here it is called
with a minimal stand-in for Spark's ``GroupState`` (the methods the function uses), so the effect of
``[producers] start_detector_enable``, of sends without a fault table, and of several pairs sharing a shard
(each with its own wake-up time) is checked row by row.
"""

from __future__ import annotations

import json

import pandas as pd

from streaming.config import load_config
from streaming.domain.rules import FaultSettings
from streaming.job.fault_query import make_state_function


class FakeState:
    """The part of ``pyspark.sql.streaming.state.GroupState`` the function uses."""

    def __init__(self, watermark_ms: int = 0) -> None:
        self.value: tuple[str, str] | None = None
        self.watermark_ms = watermark_ms
        self.timeout_ms: int | None = None

    @property
    def exists(self) -> bool:
        return self.value is not None

    @property
    def get(self) -> tuple[str, str]:
        assert self.value is not None
        return self.value

    def update(self, value: tuple[str, str]) -> None:
        self.value = value

    def remove(self) -> None:
        self.value = None

    def setTimeoutTimestamp(self, ms: int) -> None:  # noqa: N802 (Spark's name)
        self.timeout_ms = ms

    def getCurrentWatermarkMs(self) -> int:  # noqa: N802 (Spark's name)
        return self.watermark_ms


def settings(**producers: object) -> FaultSettings:
    env = {f"RRM__PRODUCERS__{k.upper()}": json.dumps(v) for k, v in producers.items()}
    return load_config(None, env=env).fault_settings


def run(process, state, sends, pair=("P", "b")):
    """Call the function for shard 0 with ``sends`` of ``pair`` (none: the shard's timeout fired)."""
    frame = pd.DataFrame(
        [
            {
                "producer_id": pair[0],
                "producer_group": "PG",
                "broker": pair[1],
                "event_time_ms": t,
                "latency_ms": latency,
                "outcome": outcome,
                "client_version": "5.3.3",
                "fault_table": table,
                "kafka_partition": 0,
                "kafka_offset": i,
            }
            for i, (t, latency, outcome, table) in enumerate(sends)
        ],
        columns=[
            "producer_id",
            "producer_group",
            "broker",
            "event_time_ms",
            "latency_ms",
            "outcome",
            "client_version",
            "fault_table",
            "kafka_partition",
            "kafka_offset",
        ],
    )
    out = pd.concat(list(process((0,), iter([frame] if sends else []), state)))
    return [(t, json.loads(p)) for t, p in zip(out["table"], out["payload"], strict=True)]


def status(rows):
    return [p for t, p in rows if t == "producer_broker_status_current"][-1]


def test_start_detector_enable_makes_a_remoting_error_unreachable_on_5x():
    for detector, reachable in ((False, True), (True, False)):
        process = make_state_function(settings(start_detector_enable=detector))
        row = status(run(process, FakeState(), [(1_000, 5, "REMOTING_ERROR", "rocketmq-5")]))
        assert (row["reachable"], row["unavailable_until_ms"]) == (reachable, 11_000), detector


def test_a_restart_with_another_detector_setting_applies_it_to_the_stored_item():
    state = FakeState()
    run(make_state_function(settings(start_detector_enable=False)), state, [(1_000, 5, "OK", "rocketmq-5")])
    row = status(
        run(make_state_function(settings(start_detector_enable=True)), state, [(2_000, 5, "TIMEOUT", "rocketmq-5")])
    )
    assert row["reachable"] is False


def test_sends_without_a_fault_table_keep_the_pair_known_and_avoid_nothing():
    process = make_state_function(settings())
    state = FakeState()
    rows = run(process, state, [(1_000, 20_000, "BROKER_ERROR", None), (2_000, 5, "OK", None)])
    assert [t for t, _ in rows] == ["producer_broker_status_current"]  # no fault window
    row = status(rows)
    assert (row["fault_table"], row["unavailable_until_ms"], row["last_latency_ms"], row["reachable"]) == (
        None,
        None,
        None,
        None,
    )
    assert row["last_send_ms"] == 2_000 and state.exists
    # the same producer with the feature on (e.g. restarted with it): windows as usual
    rows = run(process, state, [(3_000, 5, "BROKER_ERROR", "rocketmq-5")])
    assert [(t, p.get("status")) for t, p in rows][0] == ("fault_windows", "OPENED")
    assert status(rows)["unavailable_until_ms"] == 13_000


def test_pairs_of_one_shard_keep_their_own_windows_wake_ups_and_eviction():
    process = make_state_function(settings(state_ttl_ms=600_000))
    state = FakeState(watermark_ms=0)
    # P/b: a slow send opens a window until 1_000 + 30_000 (rocketmq-4: 550 ms and up -> 30 s); Q/b: fast.
    run(process, state, [(1_000, 600, "OK", "rocketmq-4")], pair=("P", "b"))
    run(process, state, [(2_000, 5, "OK", "rocketmq-4")], pair=("Q", "b"))
    assert state.timeout_ms == 31_000  # the earliest wake-up: P/b's window end, not Q/b's TTL (602_000)

    # The watermark reaches the window's end exactly: Spark would not time the key out yet.
    state.watermark_ms = 31_000
    assert run(process, state, []) == []
    # Past it: P/b's window expires at its end, Q/b (due at 602_000) is not touched.
    state.watermark_ms = 31_001
    rows = run(process, state, [])
    assert [(t, p.get("producer_id"), p.get("status"), p.get("event_time_ms")) for t, p in rows] == [
        ("fault_windows", "P", "EXPIRED", 31_000),
        ("producer_broker_status_current", "P", None, 31_000),
    ]
    assert state.timeout_ms == 601_000  # P/b's TTL (last send 1_000), before Q/b's

    # P/b idles out; Q/b sends again and stays; then Q/b idles out and the shard's state is gone.
    state.watermark_ms = 601_001
    rows = run(process, state, [(601_001, 5, "OK", "rocketmq-4")], pair=("Q", "b"))
    assert sorted((p["producer_id"], p["_op"]) for t, p in rows if t == "producer_broker_status_current") == [
        ("P", "delete"),
        ("Q", "upsert"),
    ]
    assert state.exists and state.timeout_ms == 1_201_001
    state.watermark_ms = 1_201_002
    rows = run(process, state, [])
    assert [(p["producer_id"], p["_op"]) for _, p in rows] == [("Q", "delete")] and not state.exists
