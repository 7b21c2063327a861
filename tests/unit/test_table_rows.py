"""Every column of every table the consumer path writes has a source in ``table_rows``, and no other key.

One outcome of every kind the engine returns, each field set, is mapped; the rows of each table must carry
exactly the table's columns (but those the sink fills in), so a column the mapping forgot, or a key the
table does not have (a misspelling the sink's ``from_json`` would turn into a NULL), fails here.
"""

from __future__ import annotations

import json
import re
import typing

import pytest

from streaming.contract.tables import TABLES, column_names, split_columns
from streaming.domain.consumers import outcomes
from streaming.domain.consumers.episodes import Episode, Transition
from streaming.domain.consumers.membership import MembershipChange
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
    Severity,
    Trigger,
    ViewFreshness,
)
from streaming.job.delta import table_rows
from streaming.job.delta.outputs import HISTORY_OUTPUTS
from streaming.job.delta.table_rows import (
    MOVED_QUEUES,
    OP,
    SINK_COLUMNS,
    dead_letter,
    group_summary,
    ignored_letter,
    metric_values,
    rows_of,
)

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
# The consumer sink's Delta tables: written from these rows, or derived by the sink from another table's.
CONSUMER_TABLES = {*HISTORY_OUTPUTS} - {"fault_windows"} | {
    "current_assignment",
    "broker_views_current",
    "group_status_current",
    "anomalies_current",
    "queue_progress_current",
}
DERIVED = {"anomalies_current": "anomaly_episodes"}  # the open episodes, from the episodes' history


def mapped_rows() -> dict[str, list[dict]]:
    ignored = IgnoredEvent({"type": "reported_assignment"}, "reported_assignment", IgnoredReason.UNKNOWN_GROUP, "why")
    pairs = [pair for outcome in EVERY_OUTCOME for pair in rows_of(outcome)]
    pairs.append(ignored_letter(ignored, "rmq.reports", 0, 1, "2026-11-24 10:00:00", "{}"))
    pairs.append(("dead_letters", dead_letter("consumer", "rmq", 0, 2, None, "{", "INVALID_JSON", "detail")))
    by_table: dict[str, list[dict]] = {}
    for table, row in pairs:
        by_table.setdefault(table, []).append(row)
    return by_table


def test_every_outcome_kind_is_mapped_and_every_kind_is_in_the_sample():
    kinds = set(typing.get_args(outcomes.Outcome))
    assert kinds - {IgnoredEvent} == {type(o) for o in EVERY_OUTCOME}
    assert set(table_rows._MAPPERS) == kinds - {IgnoredEvent}


@pytest.mark.parametrize("table", sorted(CONSUMER_TABLES - set(DERIVED)))
def test_every_column_of_a_consumer_table_has_a_source_and_no_key_is_unknown(table):
    assert_rows_fill_the_table(table, mapped_rows().get(table))


def assert_rows_fill_the_table(table: str, rows: list[dict] | None) -> None:
    """Every mapped row of ``table`` names only its columns and, but for a delete's key-only row, all of them;
    ``_op`` exactly on the rows of a current table."""
    columns = set(column_names(table)) - SINK_COLUMNS
    assert rows, f"nothing maps to {table}"
    key = set(TABLES[table].key)
    for row in rows:
        keys = set(row) - {OP}
        assert keys <= columns, f"{table}: no such column {sorted(keys - columns)}"
        if row.get(OP) == table_rows.DELETE:
            assert key <= keys, f"{table}: a delete without its key"
        else:
            assert keys == columns, f"{table}: no source for {sorted(columns - keys)}"
        assert (OP in row) == (TABLES[table].kind == "current")


def struct_fields(table: str) -> dict[str, set[str]]:
    """Per ``ARRAY<STRUCT<...>>`` column of the table, its fields."""
    fields = {}
    for entry in split_columns(TABLES[table].schema_ddl):
        name, _, type_ = entry.partition(" ")
        if type_.startswith("ARRAY<STRUCT<"):
            fields[name] = set(re.findall(r"(\w+):", type_))
    return fields


# Fields the metrics read that the table does not keep (the sink's schema drops them).
METRICS_ONLY = {("group_status_current", "topics"): {MOVED_QUEUES}}


@pytest.mark.parametrize("table", sorted(CONSUMER_TABLES - set(DERIVED)))
def test_every_field_of_a_struct_column_has_a_source(table):
    for column, fields in struct_fields(table).items():
        extra = METRICS_ONLY.get((table, column), set())
        for row in mapped_rows()[table]:
            for element in row.get(column) or ():
                assert set(element) - extra == fields, f"{table}.{column}"


def test_metric_values_are_the_summaries_and_late_events_mapped():
    sample = [o for o in EVERY_OUTCOME if isinstance(o, GroupSummary | GroupGone | LateEvent | ProgressSummary)]
    assert len(sample) == 4
    text = [(table, json.dumps(row)) for outcome in sample for table, row in rows_of(outcome)]
    assert metric_values(text) == sample


def test_a_summary_read_back_from_the_table_has_no_moves():
    (summary,) = [o for o in EVERY_OUTCOME if isinstance(o, GroupSummary)]
    ((_, row),) = rows_of(summary)
    columns = set(column_names("group_status_current"))
    stored = {k: v for k, v in row.items() if k in columns}
    stored["topics"] = [{k: v for k, v in t.items() if k != MOVED_QUEUES} for t in stored["topics"]]
    restored = group_summary(stored)
    assert restored.topics["T"].moved == 0 and summary.topics["T"].moved == 2
    assert restored.open_anomalies == summary.open_anomalies and restored.generation == summary.generation


def test_an_amended_cuts_episode_rows_fill_the_open_episodes_table():
    """``EpisodeRestored`` puts an episode's row back as it was, ``EpisodeRetracted`` deletes one by its key."""
    rows = mapped_rows()["anomalies_current"]
    assert_rows_fill_the_table("anomalies_current", rows)
    assert [r[OP] for r in rows] == [table_rows.UPSERT, table_rows.DELETE]
    assert rows[0]["event_time_ms"] == 3 and rows[0]["generation"] == 1 and rows[0]["opened_at_ms"] == 3


@pytest.mark.parametrize(("table", "source"), sorted(DERIVED.items()))
def test_a_derived_table_reads_only_columns_its_source_has(table, source):
    assert set(column_names(table)) - SINK_COLUMNS <= set(column_names(source))


def test_every_row_is_json_with_the_words_as_text():
    for table, rows in mapped_rows().items():
        for row in rows:
            text = json.dumps(row)
            assert "ViewFreshness" not in text and "AnomalyKind" not in text, table
    (current,) = mapped_rows()["broker_views_current"][:1]
    assert current["status"] == "STALE" and current["stale_since_ms"] == STALE.event_time_ms


def test_a_progress_row_keeps_the_sample_and_the_verdict_and_unknown_offsets_are_null():
    (progress,) = [o for o in EVERY_OUTCOME if isinstance(o, QueueProgress)]
    (_, history), (_, current) = rows_of(progress)
    assert (history["lag"], history["state"], history["cause"], history["holders"], history["expected_owner"]) == (
        10,
        "STUCK_HOLDER",
        "WRONG_HOLDER",
        ["c1"],
        "c2",
    )
    assert (history["time_lag_upper_s"], history["time_lag_estimate_s"], history["state_changed"]) == (3.0, 2.5, True)
    assert current[OP] == table_rows.UPSERT and "state_changed" not in current
    unanswered = QueueProgress("G", "T", "broker-a", 0, QueueSample(9, False), progress.verdict, 2, False, True)
    (_, row), _ = rows_of(unanswered)
    assert (row["answered"], row["broker_offset"], row["consumer_offset"], row["lag"]) == (False, None, None, 10)


@pytest.mark.parametrize("online", [True, False])
def test_progress_summaries_read_back_from_the_current_rows_are_the_trackers_summary(online):
    from streaming.domain.consumers.progress_tracker import ProgressContext, apply_progress, summary
    from streaming.job.delta.table_rows import progress_summaries

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
        tracked, found = apply_progress(tracked, event, ProgressContext(online))
        for o in found:
            for table, row in rows_of(o):
                if table == "queue_progress_current":
                    current[(row["topic"], row["queue_id"])] = row
    (restored,) = progress_summaries(current.values(), 61_000)
    assert restored == summary("G", tracked, 61_000)
    assert restored.topics["T"].lag == 7 and restored.topics["U"].lag == 0
    assert restored.offline_backlog is (not online)
