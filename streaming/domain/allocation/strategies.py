"""RocketMQ's consumer allocation strategies, reproduced exactly, one client's share at a time.

Each strategy is a frozen value named as RocketMQ names it (``getName()``) whose ``allocate`` behaves like
the Java ``allocate(consumerGroup, currentCID, mqAll, cidAll)``: it uses the lists **in the order given**
(``RebalanceImpl`` sorts them before calling; the strategies never do), applies the same argument checks
(``AbstractAllocateMessageQueueStrategy.check``), raises the typed equivalents of the Java exceptions,
and returns an empty share for a client that is not in cidAll.

What the monitor computes with them, the whole group in one pass, is ``streaming.domain.allocation.group``;
``tests.reference.vectors.replay_conformance_case`` replays a golden vector against these strategies as given
(``tests/data/conformance/README.md``), so any vector, present or future, can be checked.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from streaming.domain.errors import IllegalArgument, NullPointer
from streaming.domain.javacompat import java_split
from streaming.domain.queues import MessageQueue
from streaming.domain.versions import ClientLine


class AllocationStrategy(Protocol):
    @property
    def name(self) -> str: ...

    def allocate(
        self,
        consumer_group: str,
        current_cid: str | None,
        mq_all: Sequence[MessageQueue] | None,
        cid_all: Sequence[str] | None,
    ) -> list[MessageQueue] | None: ...


def check(current_cid: str | None, mq_all: Sequence[MessageQueue] | None, cid_all: Sequence[str] | None) -> bool:
    """``AbstractAllocateMessageQueueStrategy.check`` (4.9.4+ and 5.x), checks in Java's order.

    Raises for an empty current id, mqAll or cidAll; returns False (the caller then returns an empty
    share, after RocketMQ logs "[BUG] ... not in cidAll") when the client is not in cidAll.
    """
    if not current_cid:
        raise IllegalArgument("currentCID is empty")
    if not mq_all:
        raise IllegalArgument("mqAll is null or mqAll empty")
    if not cid_all:
        raise IllegalArgument("cidAll is null or cidAll empty")
    return current_cid in cid_all


def averagely_range(index: int, n: int, m: int) -> tuple[int, int]:
    """[start, end) of ``AllocateMessageQueueAveragely`` for the consumer at ``index`` of ``m``."""
    mod = n % m
    if n <= m:
        size = 1
    elif mod > 0 and index < mod:
        size = n // m + 1
    else:
        size = n // m
    start = index * size if (mod > 0 and index < mod) else index * size + mod
    take = min(size, n - start)
    return (start, start + take) if take > 0 else (start, start)


@dataclass(frozen=True)
class Averagely:
    """``AllocateMessageQueueAveragely``: contiguous blocks, the first ``n % m`` consumers one larger."""

    name: str = "AVG"

    def allocate(
        self,
        consumer_group: str,
        current_cid: str | None,
        mq_all: Sequence[MessageQueue] | None,
        cid_all: Sequence[str] | None,
    ) -> list[MessageQueue]:
        if not check(current_cid, mq_all, cid_all):
            return []
        assert mq_all is not None and cid_all is not None
        start, end = averagely_range(list(cid_all).index(current_cid), len(mq_all), len(cid_all))  # type: ignore[arg-type]
        return list(mq_all[start:end])


@dataclass(frozen=True)
class AveragelyByCircle:
    """``AllocateMessageQueueAveragelyByCircle``: queue ``i`` goes to consumer ``i % m``."""

    name: str = "AVG_BY_CIRCLE"

    def allocate(
        self,
        consumer_group: str,
        current_cid: str | None,
        mq_all: Sequence[MessageQueue] | None,
        cid_all: Sequence[str] | None,
    ) -> list[MessageQueue]:
        if not check(current_cid, mq_all, cid_all):
            return []
        assert mq_all is not None and cid_all is not None
        index = list(cid_all).index(current_cid)  # type: ignore[arg-type]
        return list(mq_all[index :: len(cid_all)])


def md5_hash(key: str, charset: str = "UTF-8") -> int:
    """``ConsistentHashRouter.MD5Hash``: the first 4 digest bytes, big-endian, as an unsigned 32-bit value."""
    if charset.upper() in ("UTF-8", "UTF8"):
        data = key.encode("utf-8", "surrogatepass")
    else:
        # A single-byte default charset (e.g. ANSI_X3.4-1968 under LANG=C): Java replaces each
        # unmappable character with '?'.
        data = key.encode("ascii", "replace")
    return int.from_bytes(hashlib.md5(data).digest()[:4], "big")


@dataclass(frozen=True)
class HashRing:
    """A consistent-hash ring built as ``ConsistentHashRouter`` builds it (collisions overwrite)."""

    keys: tuple[int, ...]
    owners: tuple[str, ...]

    @classmethod
    def build(cls, cid_all: Sequence[str], virtual_node_count: int, charset: str = "UTF-8") -> HashRing:
        ring: dict[int, str] = {}
        present: Counter[str] = Counter()  # entries of each physical node currently in the ring
        for cid in cid_all:
            existing = present[cid]
            for i in range(virtual_node_count):
                h = md5_hash(f"{cid}-{i + existing}", charset)
                previous = ring.get(h)
                if previous is not None:
                    present[previous] -= 1
                ring[h] = cid
                present[cid] += 1
        keys = tuple(sorted(ring))
        return cls(keys, tuple(ring[k] for k in keys))

    def route(self, object_key: str, charset: str = "UTF-8") -> str | None:
        if not self.keys:
            return None
        index = bisect_left(self.keys, md5_hash(object_key, charset))
        return self.owners[index if index < len(self.keys) else 0]


@dataclass(frozen=True)
class ConsistentHash:
    """``AllocateMessageQueueConsistentHash`` with the default MD5 hash.

    ``charset`` is how key strings become bytes: 5.x always uses UTF-8; 4.9.x uses the JVM default
    charset (UTF-8 on most systems and on JDK 18+; "US-ASCII" reproduces ``LANG=C`` on older JDKs).
    """

    virtual_node_count: int = 10
    charset: str = "UTF-8"
    name: str = "CONSISTENT_HASH"

    def __post_init__(self) -> None:
        if self.virtual_node_count < 0:
            raise IllegalArgument(f"illegal virtualNodeCnt :{self.virtual_node_count}")

    def allocate(
        self,
        consumer_group: str,
        current_cid: str | None,
        mq_all: Sequence[MessageQueue] | None,
        cid_all: Sequence[str] | None,
    ) -> list[MessageQueue]:
        if not check(current_cid, mq_all, cid_all):
            return []
        assert mq_all is not None and cid_all is not None
        ring = HashRing.build(cid_all, self.virtual_node_count, self.charset)
        return [mq for mq in mq_all if ring.route(str(mq), self.charset) == current_cid]


@dataclass(frozen=True)
class ByConfig:
    """``AllocateMessageQueueByConfig``: the configured list for everyone, no checks; None drops all."""

    queues: tuple[MessageQueue, ...] | None = None
    name: str = "CONFIG"

    def allocate(
        self,
        consumer_group: str,
        current_cid: str | None,
        mq_all: Sequence[MessageQueue] | None,
        cid_all: Sequence[str] | None,
    ) -> list[MessageQueue] | None:
        return None if self.queues is None else list(self.queues)


@dataclass(frozen=True)
class ByMachineRoom:
    """``AllocateMessageQueueByMachineRoom``: only queues of brokers named ``<idc>@<name>`` with a served idc.

    The room comes from the broker name alone (``split("@")`` with Java semantics: exactly two parts);
    client ids are never parsed. None for ``consumer_idcs`` reproduces the unset Java field.
    """

    consumer_idcs: frozenset[str] | None = frozenset()
    name: str = "MACHINE_ROOM"

    def qualifying(self, mq_all: Sequence[MessageQueue]) -> list[MessageQueue]:
        result = []
        for mq in mq_all:
            parts = java_split(mq.broker_name, "@")
            if len(parts) == 2:
                if self.consumer_idcs is None:
                    raise NullPointer("consumeridcs is null")
                if parts[0] in self.consumer_idcs:
                    result.append(mq)
        return result

    def allocate(
        self,
        consumer_group: str,
        current_cid: str | None,
        mq_all: Sequence[MessageQueue] | None,
        cid_all: Sequence[str] | None,
    ) -> list[MessageQueue]:
        if not check(current_cid, mq_all, cid_all):
            return []
        assert mq_all is not None and cid_all is not None
        premq = self.qualifying(mq_all)
        index, m = list(cid_all).index(current_cid), len(cid_all)  # type: ignore[arg-type]
        q, r = divmod(len(premq), m)
        result = list(premq[index * q : index * q + q])
        if r > index:
            result.append(premq[index + q * m])
        return result


class MachineRoomResolver(Protocol):
    """RocketMQ's ``MachineRoomResolver``: user code that names the room of a broker and of a client."""

    def broker_deploy_in(self, mq: MessageQueue) -> str | None: ...

    def consumer_deploy_in(self, client_id: str) -> str | None: ...


@dataclass(frozen=True)
class SplitResolver:
    """Room = the part before the first ``separator`` (Java ``split``), on broker names and client ids."""

    separator: str = "-"

    def broker_deploy_in(self, mq: MessageQueue) -> str | None:
        return java_split(mq.broker_name, _regex_literal(self.separator))[0]

    def consumer_deploy_in(self, client_id: str) -> str | None:
        return java_split(client_id, _regex_literal(self.separator))[0]


@dataclass(frozen=True)
class RegexResolver:
    """Room = the first capturing group of the first match of ``pattern`` (Python ``re.search``), on broker
    names and client ids; no match, or a group that did not take part, is no room (a Java resolver returning
    null), which ``MachineRoomNearby`` rejects as RocketMQ does ("Machine room is null ...").

    For fleets whose names do not put the room before a fixed separator: ``"^([A-Z0-9]+)-"``,
    ``"@(idc[0-9]+)"``, ``"-(?:az|zone)([0-9]+)$"``.
    """

    pattern: str

    def _room(self, text: str) -> str | None:
        import re

        match = re.search(self.pattern, text)
        return None if match is None else match.group(1)

    def broker_deploy_in(self, mq: MessageQueue) -> str | None:
        return self._room(mq.broker_name)

    def consumer_deploy_in(self, client_id: str) -> str | None:
        return self._room(client_id)


def _regex_literal(text: str) -> str:
    import re

    return re.escape(text)


@dataclass(frozen=True)
class MachineRoomNearby:
    """``AllocateMachineRoomNearby``: allocate within each room; rooms without consumers go to everyone."""

    inner: AllocationStrategy
    resolver: MachineRoomResolver = field(default_factory=SplitResolver)

    @property
    def name(self) -> str:
        return "MACHINE_ROOM_NEARBY-" + self.inner.name

    def allocate(
        self,
        consumer_group: str,
        current_cid: str | None,
        mq_all: Sequence[MessageQueue] | None,
        cid_all: Sequence[str] | None,
    ) -> list[MessageQueue]:
        if not check(current_cid, mq_all, cid_all):
            return []
        assert mq_all is not None and cid_all is not None and current_cid is not None
        rooms_to_queues: dict[str, list[MessageQueue]] = {}
        for mq in mq_all:
            room = self.resolver.broker_deploy_in(mq)
            if not room:
                raise IllegalArgument(f"Machine room is null for mq {mq}")
            rooms_to_queues.setdefault(room, []).append(mq)
        rooms_to_consumers: dict[str, list[str]] = {}
        for cid in cid_all:
            room = self.resolver.consumer_deploy_in(cid)
            if not room:
                raise IllegalArgument(f"Machine room is null for consumer id {cid}")
            rooms_to_consumers.setdefault(room, []).append(cid)
        result: list[MessageQueue] = []
        my_room = self.resolver.consumer_deploy_in(current_cid)
        mine = rooms_to_queues.pop(my_room, None) if my_room is not None else None
        if mine and my_room is not None:
            result += self.inner.allocate(consumer_group, current_cid, mine, rooms_to_consumers.get(my_room)) or []
        for room in sorted(rooms_to_queues, key=_java_key):  # TreeMap: rooms in String order
            if room not in rooms_to_consumers:
                result += self.inner.allocate(consumer_group, current_cid, rooms_to_queues[room], cid_all) or []
        return result


def _java_key(text: str) -> bytes:
    from streaming.domain.javacompat import java_sort_key

    return java_sort_key(text)


STRATEGY_NAMES = ("AVG", "AVG_BY_CIRCLE", "CONSISTENT_HASH", "CONFIG", "MACHINE_ROOM", "MACHINE_ROOM_NEARBY-<inner>")


def strategy_from_name(
    name: str,
    *,
    virtual_node_count: int = 10,
    consumer_idcs: Sequence[str] | None = (),
    config_queues: Sequence[MessageQueue] | None = None,
    resolver: MachineRoomResolver | None = None,
    line: ClientLine = ClientLine.V5,
    charset_4_9: str = "UTF-8",
) -> AllocationStrategy:
    """The strategy RocketMQ names ``name`` (``getName()``), with its parameters."""
    if name.startswith("MACHINE_ROOM_NEARBY-"):
        inner = strategy_from_name(
            name[len("MACHINE_ROOM_NEARBY-") :],
            virtual_node_count=virtual_node_count,
            consumer_idcs=consumer_idcs,
            config_queues=config_queues,
            line=line,
            charset_4_9=charset_4_9,
        )
        return MachineRoomNearby(inner, resolver or SplitResolver())
    if name == "AVG":
        return Averagely()
    if name == "AVG_BY_CIRCLE":
        return AveragelyByCircle()
    if name == "CONSISTENT_HASH":
        return ConsistentHash(virtual_node_count, "UTF-8" if line is ClientLine.V5 else charset_4_9)
    if name == "CONFIG":
        return ByConfig(None if config_queues is None else tuple(config_queues))
    if name == "MACHINE_ROOM":
        return ByMachineRoom(None if consumer_idcs is None else frozenset(consumer_idcs))
    raise IllegalArgument(f"unknown allocation strategy {name!r}; expected one of {', '.join(STRATEGY_NAMES)}")
