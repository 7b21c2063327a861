"""The one mapping from a fault shard's typed outcomes to the fault tables' rows, and back for the sink.

``faults.shard.FaultShard`` says what happened (``streaming.domain.faults.outcomes``); this module says where it
is kept: ``fault_windows`` (history), ``producer_broker_status_current`` (an upsert or a delete, ``_op``) and
the late sends the metrics count. The state function runs in Python workers and its rows reach the sink's
Delta writes (``from_json`` in the JVM) through Arrow, so they cross as JSON; the sink reads the few it needs
on the driver back as typed values here (``fault_values``), the exact inverse, tested as a round trip.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from streaming.contract.tables import Table
from streaming.domain.faults.outcomes import FaultOutcome, FaultWindowChanged, PairEvicted, PairStatus, SendsLate
from streaming.domain.faults.windows import FaultWindowEpisode, WindowStatus
from streaming.job.delta.table_rows import DELETE, OP, UPSERT, Row

FAULT_WINDOWS = Table.FAULT_WINDOWS
PAIR_STATUS = Table.PRODUCER_BROKER_STATUS_CURRENT
# Not a Delta table: the sends refused as late, which the metrics count.
LATE_SENDS = "late_sends"


def _window(changed: FaultWindowChanged) -> list[Row]:
    e = changed.episode
    return [
        (
            FAULT_WINDOWS,
            {
                "status": e.status.value,
                "producer_id": e.producer_id,
                "broker": e.broker,
                "event_time_ms": e.event_time_ms,
                "window_start_ms": e.window_start_ms,
                "window_end_ms": e.window_end_ms,
                "previous_end_ms": e.previous_end_ms,
                "trigger_latency_ms": e.trigger_latency_ms,
                "level": e.level,
                "cause": e.cause,
                "isolation": e.isolation,
                "fault_table": e.fault_table,
                "producer_group": changed.producer_group,
            },
        )
    ]


def _status(s: PairStatus) -> list[Row]:
    return [
        (
            PAIR_STATUS,
            {
                "producer_id": s.producer_id,
                "producer_group": s.producer_group,
                "broker": s.broker,
                "fault_table": s.fault_table,
                "unavailable_until_ms": s.unavailable_until_ms,
                "last_latency_ms": s.last_latency_ms,
                "last_send_ms": s.last_send_ms,
                "reachable": s.reachable,
                "event_time_ms": s.event_time_ms,
                OP: UPSERT,
            },
        )
    ]


def _evicted(e: PairEvicted) -> list[Row]:
    return [
        (PAIR_STATUS, {"producer_id": e.producer_id, "broker": e.broker, "event_time_ms": e.event_time_ms, OP: DELETE})
    ]


def _late(late: SendsLate) -> list[Row]:
    return [(LATE_SENDS, {"producer_id": late.producer_id, "broker": late.broker, "count": late.count})]


_MAPPERS: dict[type, Callable[[Any], list[Row]]] = {
    FaultWindowChanged: _window,
    PairStatus: _status,
    PairEvicted: _evicted,
    SendsLate: _late,
}


def fault_rows(outcomes: Iterable[FaultOutcome]) -> list[Row]:
    """The ``(table, row)`` pairs of the outcomes, in their order."""
    mappers = _MAPPERS
    return [row for outcome in outcomes for row in mappers[type(outcome)](outcome)]


def fault_value(table: str, row: Mapping[str, Any]) -> FaultOutcome:
    """The outcome a row ``(table, row)`` of ``fault_rows`` was mapped from."""
    if table == LATE_SENDS:
        return SendsLate(row["producer_id"], row["broker"], row["count"])
    if table == PAIR_STATUS and row.get(OP) == DELETE:
        return PairEvicted(row["producer_id"], row["broker"], row["event_time_ms"])
    if table == PAIR_STATUS:
        return PairStatus(**{k: v for k, v in row.items() if k != OP})
    episode = FaultWindowEpisode(
        **{k: v for k, v in row.items() if k not in ("status", "producer_group")}, status=WindowStatus(row["status"])
    )
    return FaultWindowChanged(episode, row["producer_group"])


def fault_values(rows: Iterable[tuple[str, str]]) -> list[FaultOutcome]:
    """The outcomes the JSON rows ``(table, payload)`` of ``fault_rows`` were mapped from, in order."""
    return [fault_value(table, json.loads(text)) for table, text in rows]


def pair_status_rows(values: Iterable[FaultOutcome]) -> list[dict[str, Any]]:
    """The ``producer_broker_status_current`` rows of ``values`` (upserts and deletes), in order."""
    return [
        row
        for value in values
        if isinstance(value, PairStatus | PairEvicted)
        for _, row in _MAPPERS[type(value)](value)
    ]
