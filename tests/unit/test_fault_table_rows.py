"""Every column of the fault tables has a source in ``fault_table_rows``, and no other key.

One outcome of every kind a fault shard returns, each field set, is mapped; the rows of each table must carry
exactly the table's columns (but those the sink fills in), so a column the mapping forgot, or a key the table
does not have (which the sink's ``from_json`` would drop or turn into a NULL), fails here. The sink reads the
rows back as the values they came from.
"""

from __future__ import annotations

import json
import typing

import pytest

from streaming.contract.tables import column_names
from streaming.domain.faults import outcomes as fault_outcomes
from streaming.domain.faults.outcomes import FaultWindowChanged, PairEvicted, PairStatus, SendsLate
from streaming.domain.faults.windows import FaultWindowEpisode, WindowStatus
from streaming.job.delta import fault_table_rows
from streaming.job.delta.broker_gauges import ITEM_COLUMNS, ITEM_KEY, broker_status
from streaming.job.delta.fault_table_rows import FAULT_WINDOWS, PAIR_STATUS, fault_rows, fault_values, pair_status_rows
from streaming.job.delta.table_rows import OP
from tests.unit.test_table_rows import assert_rows_fill_the_table, struct_fields

EPISODE = FaultWindowEpisode(WindowStatus.EXTENDED, "P", "broker-a", 5, 1, 9, 7, 600, 2, "OK", False, "rocketmq-4")
# One of every outcome a fault shard returns.
EVERY_OUTCOME = [
    FaultWindowChanged(EPISODE, "PG"),
    PairStatus("P", "PG", "broker-a", "rocketmq-4", 9, 600, 5, True, 5),
    PairEvicted("Q", "broker-b", 11),
    SendsLate("P", "broker-a", 3),
]
FAULT_TABLES = (FAULT_WINDOWS, PAIR_STATUS)


def mapped_rows() -> dict[str, list[dict]]:
    by_table: dict[str, list[dict]] = {}
    for table, row in fault_rows(EVERY_OUTCOME):
        by_table.setdefault(table, []).append(row)
    return by_table


def test_every_outcome_kind_is_mapped_and_every_kind_is_in_the_sample():
    kinds = set(typing.get_args(fault_outcomes.FaultOutcome))
    assert kinds == {type(o) for o in EVERY_OUTCOME}
    assert set(fault_table_rows._MAPPERS) == kinds


@pytest.mark.parametrize("table", FAULT_TABLES)
def test_every_column_of_a_fault_table_has_a_source_and_no_key_is_unknown(table):
    assert_rows_fill_the_table(table, mapped_rows().get(table))
    assert not struct_fields(table)  # no struct column whose fields would need a source too


def test_the_broker_rows_and_the_items_they_read_are_columns_of_their_tables():
    items = set(column_names(PAIR_STATUS))
    assert set(ITEM_COLUMNS) <= items and set(ITEM_KEY) <= items
    (row,) = broker_status([{"producer_id": "P", "broker": "broker-a", "unavailable_until_ms": 9}], 5)
    assert set(row) == set(column_names("broker_status_current")) - {"batch_id"}


def test_the_sink_reads_the_json_rows_back_as_the_outcomes_they_came_from():
    text = [(table, json.dumps(row)) for table, row in fault_rows(EVERY_OUTCOME)]
    assert fault_values(text) == EVERY_OUTCOME
    assert [r[OP] for r in pair_status_rows(EVERY_OUTCOME)] == ["upsert", "delete"]
