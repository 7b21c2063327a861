"""The consumer query's typed output: every kind's fields come from the table catalogue, and ``table_rows`` fills
each of them from the outcomes, with no other key.

One outcome of every kind the engine returns, each field set, is mapped; the rows of each kind must carry exactly
its struct's fields, so a column the mapping forgot, or a key the struct does not have (a misspelling), fails here;
and the rows convert to the output schema as the Python worker converts them (Arrow, no JVM).
"""

from __future__ import annotations

import typing
from typing import Any

import pytest

from streaming.contract.tables import TABLES, Table, column_names
from streaming.domain.consumers import outcomes
from streaming.domain.consumers.episodes import Episode, Transition
from streaming.domain.consumers.membership import MembershipChange
from streaming.domain.consumers.observed import QueueHolding, TopicObservation
from streaming.domain.consumers.outcomes import (
    AssignmentWithdrawn,
    BrokerViewChanged,
    BrokerViewGone,
    BrokerViewState,
    CutRetracted,
    EpisodeRestored,
    EpisodeRetracted,
    EpisodeTransition,
    ExpectedAssignment,
    GenerationSnapshot,
    GroupGone,
    GroupSummary,
    IgnoredEvent,
    LateEvent,
    ProgressSummary,
    QueueHolders,
    QueueHoldersGone,
    QueueProgress,
    QueueProgressGone,
    RebalanceCost,
    TopicProgress,
    TopicSummary,
)
from streaming.domain.consumers.polled_views import ViewStatus
from streaming.domain.progress.rebalance_cost import Handoff
from streaming.domain.progress.verdict import HolderView, QueueSample, QueueState, QueueVerdict, StuckCause, TimeLag
from streaming.domain.queues import MessageQueue
from streaming.domain.vocabulary import (
    AnomalyKind,
    ChangeKind,
    ChangeReason,
    EpisodeStatus,
    IgnoredReason,
    LateReason,
    ObservedState,
    Severity,
    Trigger,
    ViewFreshness,
)
from streaming.job.delta import bus, table_rows
from streaming.job.delta.bus import KINDS, MOVED_QUEUES, SINK_COLUMNS, deleted
from streaming.job.delta.metric_rows import group_summary, metric_values
from streaming.job.delta.table_rows import dead_letter, ignored_letter, rows_of

STALE = ViewStatus(9, "G", "broker-a", ViewFreshness.STALE, 1, 5, 2, "collector-1")
EPISODE = Episode("e1", "G", "T", AnomalyKind.ORPHANED_QUEUES, 3, Severity.CRITICAL, "2 orphaned", "{}")
# One of every outcome the engine returns (an ignored event maps through ``ignored_letter``, below).
EVERY_OUTCOME = [
    MembershipChange(
        1, "G", "broker-a", ChangeKind.SUBSCRIPTION_CHANGED, ChangeReason.HEARTBEAT, "c1", "ch1", True, ("T",), ("U",)
    ),
    BrokerViewState(STALE),
    BrokerViewChanged(STALE),
    BrokerViewGone("G", "broker-a", 10),
    GenerationSnapshot(
        "G",
        2,
        4,
        (Trigger.JOIN,),
        2,
        3,
        ("broker-a",),
        ("c1", "c2"),
        ("T",),
        "AVG",
        "5",
        False,
        (AnomalyKind.ORPHANED_QUEUES,),
        "{}",
    ),
    ExpectedAssignment("G", 2, "T", "c1", (MessageQueue("T", "broker-a", 0),), "AVG", 4),
    AssignmentWithdrawn("G", "T", "c2", 2, 4),
    EpisodeTransition(Transition(EpisodeStatus.CLOSED, EPISODE, 5, closed_at_ms=5), 2),
    CutRetracted("G", 4),
    EpisodeRestored(EPISODE, 3, 1),
    EpisodeRetracted("G", "e2", 4),
    GroupSummary(
        "G", 4, 2, 3, 2, 0, False, 4, {AnomalyKind.ORPHANED_QUEUES: 1}, {"T": TopicSummary(3, 1, 0, 0, 0, 1, 2)}
    ),
    QueueHolders(
        "G",
        2,
        5,
        TopicObservation(
            "T",
            4,
            (
                QueueHolding(MessageQueue("T", "broker-a", 0), ("c1",), ("c1", "c2"), ObservedState.DOUBLE_HELD, 4, ()),
                QueueHolding(MessageQueue("T", "broker-a", 1), ("c2",), (), ObservedState.UNKNOWN, None, ("c3",)),
            ),
            ("c3",),
            (),
            False,
        ),
    ),
    QueueHoldersGone("G", "T", "broker-b", 3, 6),
    GroupGone("G", 6),
    LateEvent(LateReason.STALE_POLL, "consumer_connections", 7, group="G", broker="broker-a", topic="T"),
    QueueProgress(
        "G",
        "T",
        "broker-a",
        0,
        QueueSample(8, True, 20, 10, 5, 12, 0, (HolderView("c1", 10, 3, 1, 10, 19, 7, 7),), "c2", True),
        QueueVerdict(
            QueueState.STUCK_HOLDER,
            Severity.CRITICAL,
            "6",
            10,
            1.0,
            TimeLag(3.0, 2.5, False),
            StuckCause.WRONG_HOLDER,
            False,
            frozenset({"c1"}),
        ),
        2,
        True,
        True,
    ),
    QueueProgressGone("G", "T", "broker-a", 1, 9),
    ProgressSummary("G", 8, {"T": TopicProgress(10, 2.5, {QueueState.STUCK_HOLDER: 1})}),
    RebalanceCost(
        "G",
        "T",
        "broker-a",
        1,
        Handoff(3, 4, "c0", "c1", 2, False, 5, 10, 14, 9, 12, 10, 2, 1, 0, 8, 9, 9),
        "RECOVERED",
        9,
    ),
]
DERIVED = {Table.ANOMALIES_CURRENT: Table.ANOMALY_EPISODES}  # the open episodes, from the episodes' history too


def mapped_rows() -> dict[str, list[dict]]:
    ignored = IgnoredEvent({"type": "reported_assignment"}, "reported_assignment", IgnoredReason.UNKNOWN_GROUP, "why")
    pairs = [pair for outcome in EVERY_OUTCOME for pair in rows_of(outcome)]
    pairs.append(ignored_letter(ignored, "rmq.reports", 0, 1, "2026-11-24 10:00:00", "{}"))
    pairs.append((Table.DEAD_LETTERS, dead_letter("consumer", "rmq", 0, 2, None, "{", "INVALID_JSON", "detail")))
    by_kind: dict[str, list[dict]] = {}
    for kind, row in pairs:
        by_kind.setdefault(kind, []).append(row)
    return by_kind


def collected(kind: str, row: dict[str, Any]) -> dict[str, Any]:
    """A mapped row as the driver collects it from the output: its kind's struct fields only."""
    return dict(zip((c.name for c in KINDS[kind]), bus.values(kind, row), strict=True))


def test_every_outcome_kind_is_mapped_and_every_kind_is_in_the_sample():
    kinds = set(typing.get_args(outcomes.Outcome))
    assert kinds - {IgnoredEvent} == {type(o) for o in EVERY_OUTCOME}
    assert set(table_rows._MAPPERS) == kinds - {IgnoredEvent}
    assert set(mapped_rows()) == set(bus.EMITTED_KINDS)  # the sample fills every kind of the output


def test_each_tables_kind_is_its_columns_and_each_current_table_has_a_deletion_kind():
    for table in bus.CONSUMER_TABLES:
        fields = {c.name: c.type for c in KINDS[table]}
        columns = {c.name: c.type for c in TABLES[table].columns if c.name not in SINK_COLUMNS}
        if table == Table.GROUP_STATUS_CURRENT:  # the moves ride along for the metrics
            topics = fields.pop("topics")
            assert topics.element is not None and topics.element.fields[-1].name == MOVED_QUEUES
            assert topics.element.fields[:-1] == columns.pop("topics").element.fields
        assert fields == columns, table
    for table in bus.CURRENT_TABLES:
        spec = TABLES[table]
        assert KINDS[deleted(table)] == (*(spec.column(k) for k in spec.key), spec.column("event_time_ms"))
    assert {t for t in TABLES if TABLES[t].kind == "current"} & set(bus.CONSUMER_TABLES) == set(bus.CURRENT_TABLES)


@pytest.mark.parametrize("kind", sorted(bus.EMITTED_KINDS))
def test_every_field_of_a_kind_has_a_source_and_no_key_is_unknown(kind):
    assert_rows_fill_the_kind(kind, mapped_rows().get(kind))


def assert_rows_fill_the_kind(kind: str, rows: list[dict] | None) -> None:
    """Every mapped row of ``kind`` names exactly its struct's fields."""
    fields = {c.name for c in KINDS[kind]}
    assert rows, f"nothing maps to {kind}"
    for row in rows:
        assert set(row) <= fields, f"{kind}: no such field {sorted(set(row) - fields)}"
        assert set(row) == fields, f"{kind}: no source for {sorted(fields - set(row))}"


def struct_fields(kind: str) -> dict[str, set[str]]:
    """Per array-of-struct field of the kind, its fields."""
    return {
        c.name: {f.name for f in c.type.element.fields}
        for c in KINDS[kind]
        if c.type.element is not None and c.type.element.fields
    }


@pytest.mark.parametrize("kind", sorted(bus.EMITTED_KINDS))
def test_every_field_of_a_struct_column_has_a_source(kind):
    for column, fields in struct_fields(kind).items():
        for row in mapped_rows()[kind]:
            for element in row.get(column) or ():
                assert set(element) == fields, f"{kind}.{column}"


def test_metric_values_are_the_summaries_and_late_events_mapped():
    sample = [o for o in EVERY_OUTCOME if isinstance(o, GroupSummary | GroupGone | LateEvent | ProgressSummary)]
    assert len(sample) == 4
    rows = [(kind, collected(kind, row)) for outcome in sample for kind, row in rows_of(outcome, "east")]
    assert metric_values(rows) == [("east", o) for o in sample]


def test_a_summary_read_back_from_the_table_has_no_moves():
    (summary,) = [o for o in EVERY_OUTCOME if isinstance(o, GroupSummary)]
    ((_, row),) = rows_of(summary)
    columns = set(column_names(Table.GROUP_STATUS_CURRENT))
    stored = {k: v for k, v in row.items() if k in columns}
    stored["topics"] = [{k: v for k, v in t.items() if k != MOVED_QUEUES} for t in stored["topics"]]
    restored = group_summary(stored)
    assert restored.topics["T"].moved == 0 and summary.topics["T"].moved == 2
    assert restored.open_anomalies == summary.open_anomalies and restored.generation == summary.generation


def test_an_amended_cuts_episode_rows_fill_the_open_episodes_table():
    """``EpisodeRestored`` puts an episode's row back as it was, ``EpisodeRetracted`` deletes one by its key."""
    restored, retracted = (rows_of(o) for o in EVERY_OUTCOME if isinstance(o, EpisodeRestored | EpisodeRetracted))
    assert [k for k, _ in restored + retracted] == [Table.ANOMALIES_CURRENT, deleted(Table.ANOMALIES_CURRENT)]
    assert_rows_fill_the_kind(Table.ANOMALIES_CURRENT, [restored[0][1]])
    assert_rows_fill_the_kind(deleted(Table.ANOMALIES_CURRENT), [retracted[0][1]])
    row = restored[0][1]
    assert row["event_time_ms"] == 3 and row["generation"] == 1 and row["opened_at_ms"] == 3
    assert retracted[0][1] == {"cluster": "DefaultCluster", "episode_id": "e2", "event_time_ms": 4}


@pytest.mark.parametrize(("table", "source"), sorted(DERIVED.items()))
def test_a_derived_table_reads_only_columns_its_source_has(table, source):
    assert set(column_names(table)) - SINK_COLUMNS <= set(column_names(source))


def test_every_row_converts_to_the_output_schema_with_the_words_as_text():
    """As the Python worker converts the state function's frame (``PandasToArrowConversion``, Arrow only)."""
    import datetime

    from pyspark.sql.conversion import PandasToArrowConversion

    records = [(kind, row) for kind, rows in mapped_rows().items() for row in rows]
    letter = {**records[-1][1], "kafka_timestamp": datetime.datetime(2026, 11, 24, 10)}  # as pandas hands it over
    records[-1] = (Table.DEAD_LETTERS, letter)
    frame = bus.output_frame(records)
    batch = PandasToArrowConversion.convert(
        frame, bus.output_schema(), timezone="UTC", safecheck=True, arrow_cast=True, assign_cols_by_name=True
    )
    table = batch.to_pydict()
    assert table[bus.TAG] == [kind for kind, _ in records]
    for i, (kind, row) in enumerate(records):
        assert all(table[k][i] is None for k in bus.EMITTED_KINDS if k != kind)
        if kind != Table.DEAD_LETTERS:
            assert table[kind][i] == collected(kind, row), kind
    views = table[Table.BROKER_VIEWS_CURRENT]
    (current,) = [v for v in views if v is not None]
    assert current["status"] == "STALE" and type(current["status"]) is str
    assert current["stale_since_ms"] == STALE.event_time_ms
    assert str(table[Table.DEAD_LETTERS][-1]["kafka_timestamp"]).startswith("2026-11-24 10:00:00")


def test_a_mapping_that_misses_a_field_raises_instead_of_writing_a_null():
    row = dict(mapped_rows()[Table.MEMBERSHIP_CHANGES][0])
    del row["channel"]
    with pytest.raises(KeyError):
        bus.output_frame([(Table.MEMBERSHIP_CHANGES, row)])


@pytest.mark.parametrize(("kind", "source"), sorted(bus.DERIVED_KINDS.items()))
def test_a_derived_kind_is_its_sources_fields_less_some_and_is_not_emitted(kind, source):
    assert [c for c in KINDS[source] if c in KINDS[kind]] == list(KINDS[kind])
    assert kind not in bus.output_schema().names and kind not in bus.EMITTED_KINDS
    assert kind not in {k for rows in [rows_of(o) for o in EVERY_OUTCOME] for k, _ in rows}


def test_a_progress_row_keeps_the_sample_and_the_verdict_and_unknown_offsets_are_null():
    (progress,) = [o for o in EVERY_OUTCOME if isinstance(o, QueueProgress)]
    ((kind, history),) = rows_of(progress)
    assert (history["lag"], history["state"], history["cause"], history["holders"], history["expected_owner"]) == (
        10,
        "STUCK_HOLDER",
        "WRONG_HOLDER",
        ["c1"],
        "c2",
    )
    assert (history["time_lag_upper_s"], history["time_lag_estimate_s"], history["state_changed"]) == (3.0, 2.5, True)
    assert kind == Table.CONSUME_PROGRESS and bus.DERIVED_KINDS[Table.QUEUE_PROGRESS_CURRENT] == kind
    unanswered = QueueProgress("G", "T", "broker-a", 0, QueueSample(9, False), progress.verdict, 2, False, True)
    ((_, row),) = rows_of(unanswered)
    assert (row["answered"], row["broker_offset"], row["consumer_offset"], row["lag"]) == (False, None, None, 10)


@pytest.mark.parametrize("online", [True, False])
def test_progress_summaries_read_back_from_the_current_rows_are_the_trackers_summary(online):
    from streaming.domain.consumers.progress_tracker import ConsumeProgress, ProgressContext, apply_progress, summary
    from streaming.job.delta.metric_rows import progress_summaries

    tracked = None
    current = {}
    for i in range(3):
        event = {
            "group": "G",
            "broker": "broker-a",
            "event_time": 1_000 + i * 30_000,
            "queues": [
                {"topic": "T", "queue_id": 0, "broker_offset": 10 + i, "consumer_offset": 5, "last_timestamp": 900},
                {"topic": "T", "queue_id": 1, "broker_offset": 7, "consumer_offset": 7},
                {"topic": "U", "queue_id": 0, "broker_offset": 3, "consumer_offset": 1 + i},
            ],
        }
        tracked, found = apply_progress(tracked, ConsumeProgress.from_json(event), ProgressContext(online))
        for o in found:
            for table, row in rows_of(o, "east"):
                if table == bus.DERIVED_KINDS[Table.QUEUE_PROGRESS_CURRENT]:
                    current[(row["topic"], row["queue_id"])] = collected(Table.QUEUE_PROGRESS_CURRENT, row)
    ((cluster, restored),) = progress_summaries(current.values(), 61_000)
    assert cluster == "east" and restored == summary("G", tracked, 61_000)
    assert restored.topics["T"].lag == 7 and restored.topics["U"].lag == 0
    assert restored.offline_backlog is (not online)
