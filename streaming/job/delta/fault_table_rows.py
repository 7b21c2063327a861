"""The one mapping from a fault shard's typed outcomes to the fault tables' typed rows.

``faults.shard.FaultShard`` says what happened (``streaming.domain.faults.outcomes``); this module says where it
is kept: ``fault_windows`` (history, as values in the table's column order, which the sink hands to Spark as they
are) and ``producer_broker_status_current`` (a row, or a deletion of its key, which the driver applies to the
table it holds). The late sends are counted from the outcomes themselves.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable
from typing import Any

from streaming.contract.tables import TABLES, Table
from streaming.domain.faults.outcomes import FaultOutcome, FaultWindowChanged, PairEvicted, PairStatus
from streaming.job.delta.broker_gauges import Change
from streaming.job.delta.bus import SINK_COLUMNS

FAULT_WINDOWS = Table.FAULT_WINDOWS
PAIR_STATUS = Table.PRODUCER_BROKER_STATUS_CURRENT
# The fault windows' columns the replay fills (the sink adds the event time's timestamp and the batch).
WINDOW_FIELDS = tuple(c for c in TABLES[FAULT_WINDOWS].columns if c.name not in SINK_COLUMNS)
_WINDOW_VALUES = operator.itemgetter(*(c.name for c in WINDOW_FIELDS))


def window_row(changed: FaultWindowChanged) -> dict[str, Any]:
    e = changed.episode
    return {
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
        "cluster": changed.cluster,
    }


def window_values(changed: FaultWindowChanged) -> tuple[Any, ...]:
    """A ``fault_windows`` row as values in ``WINDOW_FIELDS`` order (a column not filled raises)."""
    return _WINDOW_VALUES(window_row(changed))


def pair_row(s: PairStatus) -> dict[str, Any]:
    """A ``producer_broker_status_current`` row, every column but ``batch_id``."""
    return {
        "producer_id": s.producer_id,
        "producer_group": s.producer_group,
        "broker": s.broker,
        "fault_table": s.fault_table,
        "unavailable_until_ms": s.unavailable_until_ms,
        "last_latency_ms": s.last_latency_ms,
        "last_send_ms": s.last_send_ms,
        "reachable": s.reachable,
        "event_time_ms": s.event_time_ms,
        "cluster": s.cluster,
    }


def pair_changes(outcomes: Iterable[FaultOutcome]) -> list[Change]:
    """The changes of ``producer_broker_status_current`` among ``outcomes``: a pair's row, an evicted pair's key
    (a deletion), in order."""
    changes: list[Change] = []
    for o in outcomes:
        if type(o) is PairStatus:
            changes.append((pair_row(o), False))
        elif type(o) is PairEvicted:
            key = {"cluster": o.cluster, "producer_id": o.producer_id, "broker": o.broker}
            changes.append(({**key, "event_time_ms": o.event_time_ms}, True))
    return changes
