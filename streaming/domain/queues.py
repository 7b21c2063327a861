"""``MessageQueue``: RocketMQ's (topic, broker name, queue id) with Java's ordering and ``toString``."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

from streaming.domain.javacompat import int32, java_sort_key, java_string_hash


@dataclass(frozen=True, slots=False)
class MessageQueue:
    """One queue of a topic on a broker.

    Instances order exactly like ``MessageQueue.compareTo``: topic, then broker name (both by UTF-16
    code units), then queue id. ``str()`` is the Java ``toString``, which the consistent-hash strategy
    hashes, so it must match to the character.
    """

    topic: str
    broker_name: str
    queue_id: int

    @cached_property
    def sort_key(self) -> tuple[bytes, bytes, int]:
        return (java_sort_key(self.topic), java_sort_key(self.broker_name), self.queue_id)

    def __lt__(self, other: MessageQueue) -> bool:
        return self.sort_key < other.sort_key

    def __le__(self, other: MessageQueue) -> bool:
        return self.sort_key <= other.sort_key

    def __gt__(self, other: MessageQueue) -> bool:
        return self.sort_key > other.sort_key

    def __ge__(self, other: MessageQueue) -> bool:
        return self.sort_key >= other.sort_key

    def __str__(self) -> str:
        return f"MessageQueue [topic={self.topic}, brokerName={self.broker_name}, queueId={self.queue_id}]"

    def java_hash_code(self) -> int:
        """``MessageQueue.hashCode`` (brokerName, queueId, topic with 31 multipliers)."""
        h = 31 + java_string_hash(self.broker_name)
        h = 31 * h + self.queue_id
        h = 31 * h + java_string_hash(self.topic)
        return int32(h)

    def as_tuple(self) -> tuple[str, str, int]:
        return (self.topic, self.broker_name, self.queue_id)


def sorted_queues(queues: Iterable[MessageQueue]) -> list[MessageQueue]:
    """mqAll as ``RebalanceImpl`` sorts it (``Collections.sort`` with ``compareTo``)."""
    return sorted(queues, key=lambda mq: mq.sort_key)


def sorted_client_ids(client_ids: Iterable[str]) -> list[str]:
    """cidAll as ``RebalanceImpl`` sorts it: String order, duplicates kept."""
    return sorted(client_ids, key=java_sort_key)
