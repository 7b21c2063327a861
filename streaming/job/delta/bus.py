"""The consumer query's typed output: a tag naming each row's kind, and one struct column per kind.

The kinds and their fields are derived from the table catalogue: a row of each consumer table (its columns but
those the sink fills in), a deletion of each current table (its key and the event time), and the three rows
that are no table (late events, progress metrics, retracted cuts). ``table_rows`` fills them from the engine's
outcomes; the sink selects a kind's struct (``kind_rows``), the driver collects the few it reads as Spark rows.
Why: ``docs/design/consumer-query.md``.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from streaming.contract.columns import (
    BIGINT,
    BOOLEAN,
    DOUBLE,
    INT,
    STRING,
    Column,
    SqlType,
    array_of,
    columns,
    struct_of,
)
from streaming.contract.tables import TABLES, Table

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame
    from pyspark.sql.types import DataType, StructType

# The tag column: the kind of the row, the name of the one struct column it fills.
TAG = "table"
# The row's place in its state function call's output: of one key's changes of the same event time, the sink
# keeps the one emitted last (all changes of a key come from one call per batch).
SEQ = "seq"
# Columns the sink fills in itself: the micro-batch and the timestamp of ``event_time_ms``.
SINK_COLUMNS = frozenset({"batch_id", "event_time"})
# The tables the consumer query writes rows of, in the catalogue's order.
CONSUMER_TABLES = (
    Table.MEMBERSHIP_CHANGES,
    Table.GROUP_SNAPSHOTS,
    Table.EXPECTED_ASSIGNMENTS,
    Table.CURRENT_ASSIGNMENT,
    Table.ANOMALY_EPISODES,
    Table.ANOMALIES_CURRENT,
    Table.GROUP_STATUS_CURRENT,
    Table.QUEUE_HOLDERS_CURRENT,
    Table.BROKER_VIEWS_CURRENT,
    Table.BROKER_VIEW_CHANGES,
    Table.CONSUME_PROGRESS,
    Table.QUEUE_PROGRESS_CURRENT,
    Table.REBALANCE_COST,
    Table.DEAD_LETTERS,
)
# Not tables: the late input the metrics count, a group's progress per topic the metrics are set from, and the
# cuts whose history rows the sink deletes (``CutRetracted``) before the batch's appends.
LATE_EVENTS = "late_events"
PROGRESS_METRICS = "progress_metrics"
RETRACTED_CUTS = "retracted_cuts"
# A topic's queues moved by the analysis: the metrics count them, ``group_status_current`` does not keep them.
MOVED_QUEUES = "moved_queues"


def deleted(table: str) -> str:
    """The kind of a current table's deletions: its key and the event time."""
    return f"deleted_{table}"


def _table_fields(table: Table) -> tuple[Column, ...]:
    fields = tuple(c for c in TABLES[table].columns if c.name not in SINK_COLUMNS)
    if table != Table.GROUP_STATUS_CURRENT:
        return fields
    topics = TABLES[table].column("topics").type.element
    assert topics is not None
    moved = SqlType("STRUCT", fields=(*topics.fields, Column(MOVED_QUEUES, INT)))
    return tuple(Column(c.name, array_of(moved)) if c.name == "topics" else c for c in fields)


def _deletion_fields(table: Table) -> tuple[Column, ...]:
    spec = TABLES[table]
    return (*(spec.column(k) for k in spec.key), spec.column("event_time_ms"))


CURRENT_TABLES = tuple(t for t in CONSUMER_TABLES if TABLES[t].kind == "current")
# Every kind of row, with its fields in order: the output schema's struct columns.
KINDS: dict[str, tuple[Column, ...]] = {
    **{t: _table_fields(t) for t in CONSUMER_TABLES},
    **{deleted(t): _deletion_fields(t) for t in CURRENT_TABLES},
    LATE_EVENTS: columns(
        reason=STRING,
        event_type=STRING,
        event_time_ms=BIGINT,
        count=BIGINT,
        group=STRING,
        broker=STRING,
        topic=STRING,
        cluster=STRING,
    ),
    PROGRESS_METRICS: columns(
        cluster=STRING,
        group=STRING,
        event_time_ms=BIGINT,
        topics=array_of(
            struct_of(
                topic=STRING,
                lag=BIGINT,
                max_time_lag_s=DOUBLE,
                queues_by_state=array_of(struct_of(state=STRING, queues=INT)),
            )
        ),
        offline_backlog=BOOLEAN,
    ),
    RETRACTED_CUTS: columns(cluster=STRING, group=STRING, event_time_ms=BIGINT),
}
# Kinds the state function does not emit, each read from the rows of the kind whose projection it is: a queue's
# current progress is its latest history row, less ``state_changed`` (half the rows a progress sample gives).
DERIVED_KINDS: dict[str, str] = {Table.QUEUE_PROGRESS_CURRENT: Table.CONSUME_PROGRESS}
# The kinds the state function emits: the output schema's struct columns.
EMITTED_KINDS = {kind: fields for kind, fields in KINDS.items() if kind not in DERIVED_KINDS}
# A row's values in its kind's field order; a field the mapping did not fill raises (KeyError), never a NULL.
_VALUES: dict[str, Callable[[Any], tuple[Any, ...]]] = {
    kind: operator.itemgetter(*(c.name for c in fields)) for kind, fields in KINDS.items()
}


def spark_type(sql_type: SqlType) -> DataType:
    """The Spark type of a catalogue type."""
    from pyspark.sql import types as T

    if sql_type.element is not None:
        return T.ArrayType(spark_type(sql_type.element))
    if sql_type.name == "STRUCT":
        return struct_type(sql_type.fields)
    scalars = {
        "STRING": T.StringType,
        "BIGINT": T.LongType,
        "INT": T.IntegerType,
        "BOOLEAN": T.BooleanType,
        "DOUBLE": T.DoubleType,
        "TIMESTAMP": T.TimestampType,
    }
    return scalars[sql_type.name]()


def struct_type(fields: Sequence[Column]) -> StructType:
    from pyspark.sql import types as T

    return T.StructType([T.StructField(c.name, spark_type(c.type)) for c in fields])


def output_schema() -> StructType:
    """The consumer query's output: ``TAG``, ``SEQ`` and one struct column per emitted kind (NULL but the tagged
    one)."""
    from pyspark.sql import types as T

    kinds = [T.StructField(kind, struct_type(fields)) for kind, fields in EMITTED_KINDS.items()]
    return T.StructType([T.StructField(TAG, T.StringType()), T.StructField(SEQ, T.LongType()), *kinds])


def values(kind: str, row: Any) -> tuple[Any, ...]:
    """A mapped row (a dict) as its kind's struct value."""
    return _VALUES[kind](row)


def output_frame(records: Iterable[tuple[str, dict[str, Any]]]) -> pd.DataFrame:
    """``(kind, row)`` records as the state function returns them (``output_schema``)."""
    import pandas as pd

    records = list(records)
    n = len(records)
    data: dict[str, list[Any]] = {TAG: [kind for kind, _ in records], SEQ: list(range(n))}
    data.update((kind, [None] * n) for kind in EMITTED_KINDS)
    for i, (kind, row) in enumerate(records):
        data[kind][i] = _VALUES[kind](row)
    return pd.DataFrame(data)


def output_rows(records: Iterable[tuple[str, dict[str, Any]]]) -> list[tuple[Any, ...]]:
    """``(kind, row)`` records as rows of ``output_schema``, for a local DataFrame of the output (benchmarks)."""
    return [
        (kind, seq, *(_VALUES[k](row) if k == kind else None for k in EMITTED_KINDS))
        for seq, (kind, row) in enumerate(records)
    ]


def kind_rows(batch: DataFrame, kind: str, with_seq: bool = False) -> DataFrame:
    """The batch's rows of ``kind``, as its struct's columns (and ``SEQ``, ``with_seq``); a derived kind's from
    its source's rows (``DERIVED_KINDS``)."""
    from pyspark.sql import functions as F

    source = DERIVED_KINDS.get(kind)
    fields = [f"`{source}`.`{c.name}`" for c in KINDS[kind]] if source else [f"`{kind}`.*"]
    return batch.where(F.col(TAG) == (source or kind)).select(*fields, *([SEQ] if with_seq else []))


def with_derived(present: Mapping[str, int]) -> dict[str, int]:
    """The batch's row count per kind (``present``: per emitted kind), with the derived kinds' counts."""
    return {**present, **{kind: present[source] for kind, source in DERIVED_KINDS.items() if source in present}}
