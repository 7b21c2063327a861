"""RocketMQ's ``MessageQueueSelector`` implementations, reproduced exactly (section 6.6).

What an application's ``send(msg, selector, arg)`` picks: by the argument's Java ``hashCode``, by a seeded
``java.util.Random``, or never (the machine-room selector was never implemented upstream). Frozen values;
the random selector carries the calls already made instead of mutable state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from streaming.domain.errors import IllegalArgument, NullPointer
from streaming.domain.javacompat import INT_MAX, INT_MIN, JavaRandom, int32, java_string_hash
from streaming.domain.queues import MessageQueue

from .java_arithmetic import java_rem


@dataclass(frozen=True)
class JavaLong:
    """A ``java.lang.Long`` argument (a Python int alone is taken as an ``Integer``)."""

    value: int

    def __post_init__(self) -> None:
        if not -(2**63) <= self.value <= 2**63 - 1:
            raise IllegalArgument("a Java long holds 64 bits", value=self.value)


def java_hash_code(arg: object) -> int:
    """``arg.hashCode()`` for the argument types a hash selector sees: String (UTF-16 code units),
    Integer (the value), Long (``(int)(v ^ (v >>> 32))``) and Boolean (1231/1237)."""
    if arg is None:
        raise NullPointer("arg is null")
    if isinstance(arg, bool):
        return 1231 if arg else 1237
    if isinstance(arg, str):
        return java_string_hash(arg)
    if isinstance(arg, JavaLong):
        unsigned = arg.value & 0xFFFFFFFFFFFFFFFF
        return int32(unsigned ^ (unsigned >> 32))
    if isinstance(arg, int):
        if not INT_MIN <= arg <= INT_MAX:
            raise IllegalArgument("an int argument must fit a Java Integer; wrap longs in JavaLong", value=arg)
        return arg
    raise IllegalArgument(f"no Java hashCode for {type(arg).__name__}")


class MessageQueueSelector(Protocol):
    def select(self, mqs: Sequence[MessageQueue], arg: object = None) -> MessageQueue | None: ...


@dataclass(frozen=True)
class SelectMessageQueueByHash:
    """``abs(arg.hashCode() % size)``; in Python terms ``abs(h) % size`` (also for ``MIN_VALUE``)."""

    def select(self, mqs: Sequence[MessageQueue], arg: object = None) -> MessageQueue:
        value = java_rem(java_hash_code(arg), len(mqs))
        return mqs[abs(value)]


@dataclass(frozen=True)
class SelectMessageQueueByRandom:
    """``random.nextInt(size)`` with ``new Random(seed)``, after the calls already made.

    ``seed`` is the ``System.currentTimeMillis()`` at construction; ``previous_sizes`` the list sizes of
    the earlier calls (``nextInt(bound)`` may consume more than one step, depending on the bound).
    """

    seed: int
    previous_sizes: tuple[int, ...] = ()

    @classmethod
    def after_calls(cls, seed: int, calls: int, size: int) -> SelectMessageQueueByRandom:
        return cls(seed, (size,) * calls)

    def _random(self) -> JavaRandom:
        random = JavaRandom(self.seed)
        for size in self.previous_sizes:
            random.next_int(size)
        return random

    def select(self, mqs: Sequence[MessageQueue], arg: object = None) -> MessageQueue:
        return mqs[self._random().next_int(len(mqs))]

    def after(self, mqs: Sequence[MessageQueue]) -> SelectMessageQueueByRandom:
        """The selector after one more ``select`` on ``mqs``."""
        return replace(self, previous_sizes=(*self.previous_sizes, len(mqs)))


@dataclass(frozen=True)
class SelectMessageQueueByMachineRoom:
    """Always None (never implemented upstream), so every send through it fails."""

    consumeridcs: frozenset[str] | None = field(default=None)

    def select(self, mqs: Sequence[MessageQueue], arg: object = None) -> MessageQueue | None:
        return None
