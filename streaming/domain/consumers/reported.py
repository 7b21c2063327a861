"""A client's reported assignment: the event, and the holders the shard engine keeps from it.

A ``reported_assignment`` (``ReportedAssignment``) says which queues of a topic a client holds, with each queue's
``ProcessQueueInfo``; the engine compares the held queues with the expected assignment and keeps them, per
(client, topic), as ``held_queues`` says, for the progress samples to read back (``holder_view``). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from streaming.domain.progress.verdict import HolderView
from streaming.domain.vocabulary import DEFAULT_CLUSTER

# A reported queue's ProcessQueueInfo as stored: [broker, queue_id, commit_offset, cached_msg_count,
# cached_msg_size_mib, cached_msg_min_offset, cached_msg_max_offset, locked, last_lock_ms, last_pull_ms,
# last_consume_ms], None where the report did not say (an agent without the fields).
_PQI_FIELDS = (
    "commit_offset",
    "cached_msg_count",
    "cached_msg_size_mib",
    "cached_msg_min_offset",
    "cached_msg_max_offset",
    "locked",
    "last_lock_timestamp",
    "last_pull_timestamp",
    "last_consume_timestamp",
)


class ReportedQueue(NamedTuple):
    """A queue in a client's report: whether it dropped it, and its ``ProcessQueueInfo`` (None: not said). A tuple,
    as ``QueueSample``: every report's queues are built from the event's JSON."""

    broker: str
    queue_id: int
    dropped: bool = False
    commit_offset: int | None = None
    cached_msg_count: int | None = None
    cached_msg_size_mib: int | None = None
    cached_msg_min_offset: int | None = None
    cached_msg_max_offset: int | None = None
    locked: bool | None = None
    last_lock_timestamp: int | None = None
    last_pull_timestamp: int | None = None
    last_consume_timestamp: int | None = None


@dataclass(frozen=True, slots=True)
class ReportedAssignment:
    """A ``reported_assignment`` event: the queues of one topic a client holds, as its own rebalance left them."""

    event_time_ms: int
    group: str
    client_id: str
    topic: str
    queues: tuple[ReportedQueue, ...] = ()
    consume_orderly: bool = False
    cluster: str = DEFAULT_CLUSTER

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ReportedAssignment:
        """The event from the JSON of its validated fields."""
        queues = tuple(
            ReportedQueue(
                str(q["broker"]),
                int(q["queue_id"]),
                bool(q.get("dropped")),
                *(optional(q.get(f), bool if f == "locked" else int) for f in _PQI_FIELDS),
            )
            for q in data.get("queues") or ()
        )
        return cls(
            int(data["event_time"]),
            str(data["group"]),
            str(data["client_id"]),
            str(data["topic"]),
            queues,
            bool(data.get("consume_orderly")),
            data.get("cluster") or DEFAULT_CLUSTER,
        )

    def held(self) -> list[list[Any]]:
        """The queues not dropped, ``[broker, queue_id]`` each, sorted: what the client holds."""
        return sorted([q.broker, q.queue_id] for q in self.queues if not q.dropped)


def optional(value: Any, kind: type) -> Any:
    """A JSON field's value as ``kind``, None when absent or null."""
    return None if value is None else kind(value)


def held_queues(report: ReportedAssignment) -> dict[str, Any]:
    """A report's held (not dropped) queues with their ``ProcessQueueInfo``, as kept per (client, topic):
    ``{"orderly": bool, "queues": [[broker, queue_id, *fields]]}``."""
    queues = [[q.broker, q.queue_id, *(getattr(q, f) for f in _PQI_FIELDS)] for q in report.queues if not q.dropped]
    return {"orderly": report.consume_orderly, "queues": sorted(queues, key=lambda q: (q[0], q[1]))}


def holder_view(client_id: str, orderly: bool, entry: Sequence[Any], at_ms: int) -> HolderView:
    """A stored queue entry (``held_queues``) as the rule table reads it at ``at_ms``. A field the report did not
    carry is no evidence: no cached messages, locked, and a pull and consume at the sample's time (so a holder
    without ``ProcessQueueInfo`` is never FLOW_CONTROL, OFFSET_HOLE, NOT_LOCKED or PULL_DEAD)."""
    _, _, commit, count, size, low, high, locked, last_lock, last_pull, last_consume = entry

    def known(value: Any, default: int) -> int:
        return default if value is None else int(value)

    return HolderView(
        client_id,
        known(commit, 0),
        known(count, 0),
        known(size, 0),
        known(low, 0),
        known(high, 0),
        known(last_pull, at_ms),
        known(last_consume, at_ms),
        orderly=orderly,
        locked=True if locked is None else bool(locked),
        last_lock_ms=known(last_lock, at_ms),
    )


def presumed_holder(client_id: str, queue: tuple[str, str, int], at_ms: int) -> HolderView:
    """The expected owner of a queue, presumed to hold it because it has no counted report of the topic (no running
    info: no agent, or the collector's call failed; or only a report from before the group's latest generation
    plus the rebalance delay): a holder without ``ProcessQueueInfo`` (``holder_view``).
    Without it every queue of a group whose members report nothing would look orphaned."""
    topic, broker, queue_id = queue
    return holder_view(client_id, False, [broker, queue_id, *([None] * len(_PQI_FIELDS))], at_ms)
