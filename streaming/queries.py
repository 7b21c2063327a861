"""History queries and what-if allocations for people: ``rebalance-monitor query`` and ``allocate``.

``assignment_at`` reads ``expected_assignments`` (history) for a group's last generation at or before a
time; ``anomalies`` lists episodes in a time range; ``fault_windows`` a broker's windows. Results are plain
rows, printed as aligned tables or JSON (``--json``). ``what_if`` computes every client's share with the
domain's strategies, without Spark.
"""

from __future__ import annotations

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
    if isinstance(value, list):
        if value and isinstance(value[0], dict) and "queue_id" in value[0]:
            return " ".join(f"{q['broker']}/{q['queue_id']}" for q in value)
        return ",".join(map(str, value))
    return "" if value is None else str(value)


def emit(rows: list[dict[str, Any]], columns: Sequence[str], as_json: bool) -> str:
    if as_json:
        return json.dumps(rows, default=str, indent=2)
    return format_table(rows, columns)


def what_if(
    strategy: str,
    client_ids: Sequence[str],
    queues: Sequence[tuple[str, str, int]],
    line: str = "5",
    virtual_node_count: int = 10,
    consumer_idcs: Sequence[str] = (),
) -> dict[str, Any]:
    from streaming.domain.allocation import allocate_group, strategy_from_name
    from streaming.domain.queues import MessageQueue
    from streaming.domain.versions import ClientLine

    chosen = strategy_from_name(
        strategy, virtual_node_count=virtual_node_count, consumer_idcs=list(consumer_idcs), line=ClientLine.parse(line)
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
