"""Driving the pure consumer engine in tests: what a later batch's clock cuts of a batch's last changes.

A group's changes become a generation (or a re-analysis) once the event-time clock is the coalescing window past
the last of them (``docs/design/batch-invariance.md``); ``settle`` moves the clock just that far.
"""

from __future__ import annotations

from typing import Any

from streaming.domain.consumers.shard_engine import ShardEngine


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
