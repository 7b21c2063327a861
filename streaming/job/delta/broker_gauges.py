"""The per-broker gauges of polled views and of producers' fault items, computed on the driver.

A sink keeps a current table's rows (``broker_views_current``, ``producer_broker_status_current``), or the
columns these gauges need of them, as ``CurrentRows``, applies each batch's rows to it as the table's write
will, and sets the gauges from it before that write; why: ``docs/design/metrics-restore.md``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from streaming.domain.vocabulary import ViewFreshness

# A change of a current table: a row (every column, or those kept), and whether it deletes the row's key.
Change = tuple[Mapping[str, Any], bool]


class CurrentRows:
    """A current table's rows, reduced to ``columns``, as its write leaves them after each batch: per key the
    batch's latest change (by ``event_time_ms``; at a tie a deletion, as the MERGE, else the last given: changes
    come in the order they were emitted) replaces the stored row or, a deletion, removes it."""

    def __init__(self, key: tuple[str, ...], columns: tuple[str, ...], rows: Iterable[Mapping[str, Any]] = ()) -> None:
        self.key = key
        self.columns = columns
        self._rows: dict[tuple[Any, ...], dict[str, Any]] = {}
        for row in rows:
            self._rows[self._key(row)] = {c: row.get(c) for c in columns}

    def _key(self, row: Mapping[str, Any]) -> tuple[Any, ...]:
        return tuple(row.get(k) for k in self.key)

    def apply(self, batch: Iterable[Change]) -> None:
        latest: dict[tuple[Any, ...], Change] = {}
        for row, gone in batch:
            key = self._key(row)
            held = latest.get(key)
            if held is None or (row.get("event_time_ms") or 0, gone) >= (held[0].get("event_time_ms") or 0, held[1]):
                latest[key] = row, gone
        for key, (row, gone) in latest.items():
            if gone:
                self._rows.pop(key, None)
            else:
                self._rows[key] = {c: row.get(c) for c in self.columns}

    def rows(self) -> list[dict[str, Any]]:
        return list(self._rows.values())


VIEW_KEY = ("cluster", "group", "broker")
VIEW_COLUMNS = ("cluster", "broker", "status", "polled_at_ms")
ITEM_KEY = ("cluster", "producer_id", "broker")
ITEM_COLUMNS = ("cluster", "producer_id", "broker", "unavailable_until_ms")


def view_summary(views: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per broker (of a cluster) of ``broker_views_current``: its polled group views, the stale ones, the latest
    poll."""
    per: dict[tuple[Any, str], dict[str, Any]] = {}
    for v in views:
        at = (v.get("cluster"), v["broker"])
        b = per.setdefault(at, {"cluster": at[0], "broker": at[1], "views": 0, "stale": 0, "last_poll_ms": None})
        b["views"] += 1
        b["stale"] += 1 if v["status"] == str(ViewFreshness.STALE) else 0
        if v["polled_at_ms"] is not None and (b["last_poll_ms"] is None or v["polled_at_ms"] > b["last_poll_ms"]):
            b["last_poll_ms"] = v["polled_at_ms"]
    return list(per.values())


def broker_status(items: Iterable[Mapping[str, Any]], now_ms: int) -> list[dict[str, Any]]:
    """Per broker of the producers' fault items at event time ``now_ms``: ``broker_status_current``'s columns
    but ``batch_id``. An item avoids its broker while ``unavailable_until_ms`` is after ``now_ms``."""
    per: dict[tuple[Any, str], dict[str, Any]] = {}
    for item in items:
        at = (item.get("cluster"), item["broker"])
        b = per.setdefault(at, {"cluster": at[0], "broker": at[1], "avoiding": 0, "seen": 0, "until": None})
        b["seen"] += 1
        until = item["unavailable_until_ms"]
        if until is not None and until > now_ms:
            b["avoiding"] += 1
            b["until"] = until if b["until"] is None else max(b["until"], until)
    return [
        {
            "cluster": b["cluster"],
            "broker": b["broker"],
            "producers_avoiding": b["avoiding"],
            "producers_seen": b["seen"],
            "avoiding_ratio": b["avoiding"] / b["seen"],
            "avoided_until_ms": b["until"],
            "isolated": b["avoiding"] > 0,
            "event_time_ms": now_ms,
        }
        for b in per.values()
    ]


def producers_all_down(items: Iterable[Mapping[str, Any]], now_ms: int) -> int:
    """Producers whose fault items (those with an end) make every broker they name unavailable at ``now_ms``;
    a producer none of whose items has an end is not counted."""
    return sum(producers_all_down_per_cluster(items, now_ms).values())


def producers_all_down_per_cluster(items: Iterable[Mapping[str, Any]], now_ms: int) -> dict[str, int]:
    """``producers_all_down`` per cluster of the items (0 for a cluster with items and no such producer)."""
    per: dict[str, int] = {}
    down: dict[tuple[Any, str], bool] = {}
    for item in items:
        per.setdefault(item.get("cluster"), 0)
        until = item["unavailable_until_ms"]
        if until is not None:
            producer = (item.get("cluster"), item["producer_id"])
            down[producer] = down.get(producer, True) and until > now_ms
    for (cluster, _producer), all_down in down.items():
        per[cluster] += all_down
    return per
