"""Driving the pure consumer engine in tests: its pending changes cut for good, and the tables its outcomes make.

A group's changes become a generation (or a re-analysis) once the event-time clock is the coalescing window past
the last of them, and are cut as they are at the end of every call meanwhile (``docs/design/batch-invariance.md``);
``settle`` moves the clock just that far; ``TableModel`` applies outcomes as the job's sink does; ``typed`` parses
events written as JSON objects as the job does.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from streaming.contract.tables import TABLES, Table, column_names
from streaming.domain.consumers.outcomes import IgnoredEvent, Outcome
from streaming.domain.consumers.shard_engine import ShardEngine
from streaming.domain.vocabulary import DEFAULT_CLUSTER
from streaming.job.consumer.events import parsed_event
from streaming.job.delta.bus import DERIVED_KINDS, RETRACTED_CUTS, deleted
from streaming.job.delta.table_rows import CUT_TABLES, table_rows


def pending_until_ms(engine: ShardEngine) -> int | None:
    """The time from which every pending change of the engine may be cut, or None when none is pending."""
    due = [engine.cut_ms(s.pending) for s in engine.groups.values() if s.pending]
    return max(due) if due else None


def settle(engine: ShardEngine) -> list[Any]:
    """The outcomes of an empty batch whose watermark passes the window of every pending change (the channel
    scan goes that far too: only a channel silent for the whole expiry by then expires)."""
    out: list[Any] = []
    while (until_ms := pending_until_ms(engine)) is not None:
        out += engine.apply([], until_ms)
    return out


class TableModel:
    """The consumer tables as the job's sink leaves them after each call's outcomes, without Spark: history rows
    appended (a ``CutRetracted`` deletes the rows its cut wrote in earlier calls), current tables upserted and
    deleted by key (a deletion winning a tie), the latest row per key of a call winning, each row reduced to its
    table's columns (``streaming.job.delta.outputs``). What a reader sees; batch ids are left out."""

    def __init__(self) -> None:
        self.history: dict[str, list[tuple[int, dict[str, Any]]]] = {}
        self.current: dict[str, dict[tuple[Any, ...], dict[str, Any]]] = {}
        self.calls = 0

    def apply(self, outcomes: Iterable[Outcome]) -> None:
        self.apply_rows(
            json.loads(json.dumps(table_rows(o for o in outcomes if type(o) is not IgnoredEvent), default=str))
        )

    def apply_rows(self, rows: Iterable[tuple[str, dict[str, Any]]]) -> None:
        """One call's ``(kind, row)`` pairs (``table_rows``, as JSON gives them back), as ``apply`` applies them.
        Rows recorded before the typed output (``tests/data/state``) mark a current table's deletion with
        ``_op``: read as the deletion kind; rows recorded before clusters name none: the default cluster's."""
        self.calls += 1
        batch: dict[str, list[dict[str, Any]]] = {}
        for kind, row in rows:
            row.setdefault("cluster", DEFAULT_CLUSTER)
            if "_op" in row:
                op = row.pop("_op")
                kind = deleted(kind) if op == "delete" else kind
            batch.setdefault(kind, []).append(row)
        for kind, source in DERIVED_KINDS.items():  # as the sink reads them (``bus.kind_rows``)
            batch.setdefault(kind, []).extend(batch.get(source, []))
        for row in batch.pop(RETRACTED_CUTS, []):
            for table in CUT_TABLES:
                self.history[table] = [
                    (b, r)
                    for b, r in self.history.get(table, [])
                    if b == self.calls
                    or (r["cluster"], r["group"], r["event_time_ms"])
                    != (row["cluster"], row["group"], row["event_time_ms"])
                ]
        episodes = [(r, r["status"] == "CLOSED") for r in batch.get(Table.ANOMALY_EPISODES, [])]
        for table, kept in batch.items():
            spec = TABLES.get(table)
            if spec is not None and spec.kind == "history":
                columns = set(column_names(table))
                self.history.setdefault(table, []).extend((self.calls, _only(r, columns)) for r in kept)
        for table, spec in TABLES.items():
            changes = [(r, False) for r in batch.get(table, [])] + [(r, True) for r in batch.get(deleted(table), [])]
            if table == Table.ANOMALIES_CURRENT:
                changes = episodes + changes
            if spec.kind == "current" and changes:
                self._merge(table, spec.key, changes)

    def _merge(self, table: str, key: tuple[str, ...], changes: list[tuple[dict[str, Any], bool]]) -> None:
        latest: dict[tuple[Any, ...], tuple[dict[str, Any], bool]] = {}
        for row, gone in changes:
            k = tuple(row.get(c) for c in key)
            held = latest.get(k)
            # of the same time a deletion wins, else the one emitted last (the sink's ``_latest_per_key``)
            if held is None or (row.get("event_time_ms") or 0, gone) >= (held[0].get("event_time_ms") or 0, held[1]):
                latest[k] = row, gone
        current = self.current.setdefault(table, {})
        columns = set(column_names(table))
        for k, (row, gone) in latest.items():
            if gone:
                current.pop(k, None)
            else:
                current[k] = _only(row, columns)

    def tables(self) -> dict[str, list[str]]:
        """Every table's rows as sorted JSON."""
        out = {t: sorted(json.dumps(r, sort_keys=True) for _, r in rows) for t, rows in self.history.items()}
        out.update(
            {t: sorted(json.dumps(r, sort_keys=True) for r in rows.values()) for t, rows in self.current.items()}
        )
        return {t: rows for t, rows in out.items() if rows}


def _only(row: dict[str, Any], columns: set[str]) -> dict[str, Any]:
    return {c: v for c, v in row.items() if c in columns and c != "batch_id"}


def typed(events: Iterable[Any]) -> list[Any]:
    """Events as ``ShardEngine.apply`` takes them: each JSON object parsed as the job parses it
    (``consumer.events.parsed_event``), an already typed event as it is."""
    return [parsed_event(e["type"], e) if isinstance(e, Mapping) else e for e in events]


class EveryPollInFull(ShardEngine):
    """The engine parsing and applying in full every poll of a group it has read (``ShardEngine._repolled``
    always declines): the reference the shortcut is compared with."""

    def _repolled(self, poll: Any, records: list[Any]) -> bool:
        return False


def read_everything(engine: ShardEngine) -> ShardEngine:
    """The engine with every group's state and progress decoded, as the engine did before it kept them as text."""
    for states in (engine.groups, engine.progress):
        for group in list(states):
            states[group]  # noqa: B018 (the read decodes it)
    return engine


def decoded_snapshot(snapshot: Mapping[str, Any], settings: Any) -> dict[str, Any]:
    """A shard snapshot with every group's text written again from its state: what it means, whichever groups the
    call that wrote it left as their text (a view polled again unchanged is in the times noted, not in the text)."""
    return read_everything(ShardEngine.restore(json.loads(json.dumps(snapshot)), settings)).snapshot()
