"""Every column of the fault tables has a source in ``fault_table_rows``, and no other key.

One outcome of every kind a fault shard returns, each field set, is mapped; a fault window's row must carry
exactly the table's columns (but those the sink fills in), as must a pair's row, and an evicted pair's deletion
its key, so a column the mapping forgot, or a key the table does not have, fails here.
"""

from __future__ import annotations

import typing

import pytest

from streaming.contract.tables import TABLES, column_names
from streaming.domain.faults import outcomes as fault_outcomes
from streaming.domain.faults.outcomes import FaultWindowChanged, PairEvicted, PairStatus, SendsLate
from streaming.domain.faults.windows import FaultWindowEpisode, WindowStatus
from streaming.job.delta.broker_gauges import ITEM_COLUMNS, ITEM_KEY, broker_status
from streaming.job.delta.bus import SINK_COLUMNS
from streaming.job.delta.fault_table_rows import (
    FAULT_WINDOWS,
    PAIR_STATUS,
    WINDOW_FIELDS,
    pair_changes,
    window_row,
    window_values,
)

EPISODE = FaultWindowEpisode(WindowStatus.EXTENDED, "P", "broker-a", 5, 1, 9, 7, 600, 2, "OK", False, "rocketmq-4")
# One of every outcome a fault shard returns.
EVERY_OUTCOME = [
    FaultWindowChanged(EPISODE, "PG"),
    PairStatus("P", "PG", "broker-a", "rocketmq-4", 9, 600, 5, True, 5),
    PairEvicted("Q", "broker-b", 11),
    SendsLate("P", "broker-a", 3),
]


def test_every_outcome_kind_is_in_the_sample():
    assert set(typing.get_args(fault_outcomes.FaultOutcome)) == {type(o) for o in EVERY_OUTCOME}


def test_every_column_of_the_fault_windows_has_a_source_and_no_key_is_unknown():
    (changed,) = [o for o in EVERY_OUTCOME if isinstance(o, FaultWindowChanged)]
    assert set(window_row(changed)) == set(column_names(FAULT_WINDOWS)) - SINK_COLUMNS
    assert [c.name for c in WINDOW_FIELDS] == [c for c in column_names(FAULT_WINDOWS) if c not in SINK_COLUMNS]
    values = dict(zip((c.name for c in WINDOW_FIELDS), window_values(changed), strict=True))
    assert values == {**window_row(changed), "status": "EXTENDED"} and type(values["status"]) is str
    assert not [c for c in WINDOW_FIELDS if c.type.element is not None]  # no struct column needing a source too


@pytest.mark.parametrize("table", [PAIR_STATUS])
def test_a_pairs_row_fills_every_column_and_an_evicted_pairs_deletion_names_its_key(table):
    changes = pair_changes(EVERY_OUTCOME)
    assert [gone for _, gone in changes] == [False, True]  # the evicted pair deletes, in order
    (row, _), (key, _) = changes
    assert set(row) == set(column_names(table)) - {"batch_id"}
    assert set(key) == {*TABLES[table].key, "event_time_ms"} and key["producer_id"] == "Q"


def test_the_broker_rows_and_the_items_they_read_are_columns_of_their_tables():
    items = set(column_names(PAIR_STATUS))
    assert set(ITEM_COLUMNS) <= items and set(ITEM_KEY) <= items
    (row,) = broker_status([{"producer_id": "P", "broker": "broker-a", "unavailable_until_ms": 9}], 5)
    assert set(row) == set(column_names("broker_status_current")) - {"batch_id"}
