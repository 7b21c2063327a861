"""The fault-window query's state function without Spark: the settings it is given reach the tracker.

``make_state_function`` is what ``applyInPandasWithState`` calls per (producer, broker); here it is called
with a minimal stand-in for Spark's ``GroupState`` (the methods the function uses), so the effect of
``[producers] start_detector_enable`` and of sends without a fault table is checked row by row.
"""

from __future__ import annotations

import json

import pandas as pd

from streaming.config import load_config
from streaming.job.fault_query import make_state_function
from streaming.job.runner import MonitorJob


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


def settings(**producers: object) -> dict[str, object]:
    env = {f"RRM__PRODUCERS__{k.upper()}": json.dumps(v) for k, v in producers.items()}
    job = MonitorJob(load_config(None, env=env))
    c = job.config
    return {"fault_tables": job.fault_tables(), "default_fault_table": c.producers.default_fault_table,
            "state_ttl_ms": c.producers.state_ttl_ms, "start_detector_enable": c.producers.start_detector_enable}  # fmt: skip


def run(process, state, sends):
    frame = pd.DataFrame([
        {"producer_id": "P", "producer_group": "PG", "broker": "b", "event_time_ms": t, "latency_ms": latency,
         "outcome": outcome, "client_version": "5.3.3", "fault_table": table, "kafka_partition": 0, "kafka_offset": i}
        for i, (t, latency, outcome, table) in enumerate(sends)
    ])  # fmt: skip
    out = pd.concat(list(process(("P", "b"), iter([frame]), state)))
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
    row = status(run(make_state_function(settings(start_detector_enable=True)), state,
                     [(2_000, 5, "TIMEOUT", "rocketmq-5")]))  # fmt: skip
    assert row["reachable"] is False


def test_sends_without_a_fault_table_keep_the_pair_known_and_avoid_nothing():
    process = make_state_function(settings())
    state = FakeState()
    rows = run(process, state, [(1_000, 20_000, "BROKER_ERROR", None), (2_000, 5, "OK", None)])
    assert [t for t, _ in rows] == ["producer_broker_status_current"]  # no fault window
    row = status(rows)
    assert (row["fault_table"], row["unavailable_until_ms"], row["last_latency_ms"], row["reachable"]) == (
        None, None, None, None)  # fmt: skip
    assert row["last_send_ms"] == 2_000 and state.exists
    # the same producer with the feature on (e.g. restarted with it): windows as usual
    rows = run(process, state, [(3_000, 5, "BROKER_ERROR", "rocketmq-5")])
    assert [(t, p.get("status")) for t, p in rows][0] == ("fault_windows", "OPENED")
    assert status(rows)["unavailable_until_ms"] == 13_000
