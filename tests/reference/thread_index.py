"""``ThreadLocalIndex`` as it changed over the RocketMQ releases: one producer thread's counter.

A frozen value per thread: ``increment_and_get`` returns the value and the index after it, so the
selections in ``producer`` can return the thread state they leave behind. The start is random in Java (an
unseeded ``java.util.Random``), so it is given (the golden vectors set it by reflection) or drawn from an
explicit ``JavaRandom``. The variants: section 6.2 of ``rocketmq-semantics.md``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace

from streaming.domain.errors import IllegalArgument
from streaming.domain.javacompat import INT_MAX, INT_MIN, JavaRandom, int32
from streaming.domain.versions import ClientLine

from .java_arithmetic import java_abs

_POSITIVE_MASK = 0x7FFFFFFF


class IndexVariant(enum.Enum):
    """``ThreadLocalIndex`` as it changed over the releases (section 6.2)."""

    GET_AND_INCREMENT_4_8 = "<=4.8.0"  # x = abs(x + 1); returns x (MIN_VALUE once)
    ABS_4_9_0 = "4.9.0-4.9.3"  # x = x + 1; returns abs(x) (MIN_VALUE once, then counts down)
    MASK_4_9_4 = "4.9.4-4.9.8"  # x = x + 1; returns x & 0x7FFFFFFF; first x = abs(nextInt())
    MASK_5 = "5.x"  # as 4.9.4 but the first x = nextInt(); develop adds reset()

    @classmethod
    def for_line(cls, line: ClientLine) -> IndexVariant:
        return cls.MASK_4_9_4 if line is ClientLine.V4_9 else cls.MASK_5


@dataclass(frozen=True)
class ThreadLocalIndex:
    """One thread's value of a ``ThreadLocalIndex`` (``stored`` = the Integer in the ThreadLocal, None
    before the first call)."""

    variant: IndexVariant
    stored: int | None = None

    def __post_init__(self) -> None:
        if self.stored is not None and not INT_MIN <= self.stored <= INT_MAX:
            raise IllegalArgument("a ThreadLocalIndex holds a Java int", stored=self.stored)

    @classmethod
    def starting_at(cls, line: ClientLine, stored: int | None) -> ThreadLocalIndex:
        return cls(IndexVariant.for_line(line), stored)

    def increment_and_get(self, random: JavaRandom | None = None) -> tuple[int, ThreadLocalIndex]:
        """``incrementAndGet()`` (``getAndIncrement()`` up to 4.8.0): the value and the index after it.

        ``random`` replaces the index's own unseeded ``Random`` for the first call; without it a first
        call cannot be reproduced and raises.
        """
        x = self.stored
        if x is None:
            if random is None:
                raise IllegalArgument("the index has no value yet and no JavaRandom was given for its start")
            first = random.next_int()
            x = first if self.variant is IndexVariant.MASK_5 else java_abs(first)
        if self.variant is IndexVariant.GET_AND_INCREMENT_4_8:
            x = java_abs(int32(x + 1))
            return x, replace(self, stored=x)
        x = int32(x + 1)
        if self.variant is IndexVariant.ABS_4_9_0:
            return java_abs(x), replace(self, stored=x)
        return x & _POSITIVE_MASK, replace(self, stored=x)

    def reset(self, random: JavaRandom) -> ThreadLocalIndex:
        """develop ``reset()``: stores ``abs(nextInt(Integer.MAX_VALUE))``."""
        if self.variant is not IndexVariant.MASK_5:
            raise IllegalArgument("reset() exists only in the 5.x ThreadLocalIndex")
        return replace(self, stored=java_abs(random.next_int(INT_MAX)))
