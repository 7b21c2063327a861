"""Output and what-if helpers for ``rebalance-monitor query`` and ``allocate``.

The queries themselves (SQL over the Delta tables, read without a JVM by ``connectors.delta_reader``) are
in ``streaming.app.cli``; here are their times (epoch ms or ISO-8601), their output (aligned table, JSON with
``--json``, CSV with ``--csv``) and ``what_if``, every client's share under a strategy computed with the
domain's strategies.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from typing import Any


def parse_time_ms(text: str | None) -> int | None:
    """Epoch ms, or an ISO-8601 time (UTC when no zone is given)."""
    if text is None:
        return None
    if text.isdigit():
        return int(text)
    from datetime import UTC, datetime

    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def format_table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    if not rows:
        return "(no rows)"
    cells = [[_cell(r.get(c)) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.1f}"  # seconds and ratios: a tenth is what a reader compares (JSON keeps every digit)
    if isinstance(value, list):
        if value and isinstance(value[0], dict) and "queue_id" in value[0]:
            return " ".join(f"{q['broker']}/{q['queue_id']}" for q in value)
        return ",".join(map(str, value))
    return "" if value is None else str(value)


def emit(rows: list[dict[str, Any]], columns: Sequence[str], output: str = "table") -> str:
    """``rows`` as an aligned table of ``columns``, JSON (every column) or CSV (``columns``, with a header)."""
    if output == "json":
        return json.dumps(rows, default=str, indent=2)
    if output == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows([_csv_cell(r.get(c)) for c in columns] for r in rows)
        return buffer.getvalue().rstrip("\n")
    return format_table(rows, columns)


def _csv_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool | list | dict):
        return json.dumps(value, default=str)
    return str(value)


def what_if(
    strategy: str,
    client_ids: Sequence[str],
    queues: Sequence[tuple[str, str, int]],
    line: str = "5",
    virtual_node_count: int = 10,
    consumer_idcs: Sequence[str] = (),
    config_queues: Sequence[tuple[str, str, int]] | None = None,
    machine_room_regex: str | None = None,
    machine_room_separator: str = "-",
) -> dict[str, Any]:
    from streaming.domain.allocation.group import allocate_group
    from streaming.domain.allocation.strategies import RegexResolver, SplitResolver, strategy_from_name
    from streaming.domain.queues import MessageQueue
    from streaming.domain.versions import ClientLine

    chosen = strategy_from_name(
        strategy,
        virtual_node_count=virtual_node_count,
        consumer_idcs=list(consumer_idcs),
        config_queues=None if config_queues is None else [MessageQueue(t, b, q) for t, b, q in config_queues],
        resolver=RegexResolver(machine_room_regex) if machine_room_regex else SplitResolver(machine_room_separator),
        line=ClientLine.parse(line),
    )
    group = allocate_group(chosen, client_ids, [MessageQueue(t, b, q) for t, b, q in queues])

    def ref(mq: Any) -> str:
        return f"{mq.broker_name}/{mq.queue_id}"

    return {
        "strategy": chosen.name,
        "cid_all": list(group.cid_all),
        "shares": [
            {
                "client_id": c,
                "queues": [ref(q) for q in group.shares[c]],
                "count": len(group.shares[c]),
                "error": str(group.errors[c]) if c in group.errors else None,
            }
            for c in dict.fromkeys(group.cid_all)
        ],
        "orphaned": [ref(q) for q in group.orphaned()],
        "double_owned": [ref(q) for q in group.double_owned()],
    }
