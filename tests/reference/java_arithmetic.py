"""Java ``int`` arithmetic the producer's queue selection depends on, with Java's signs and exceptions.

``Math.abs`` of ``Integer.MIN_VALUE`` stays negative and ``%`` keeps the dividend's sign; the index paths of
the reproduced classes hit both (section 6 of ``rocketmq-semantics.md``), and ``x % 0`` on an empty queue
list raises ``ArithmeticException``, which the 4.9.x fault strategy catches. Shared by the thread index, the
strategy and the hash selector.
"""

from __future__ import annotations

from streaming.domain.errors import DomainError
from streaming.domain.javacompat import INT_MIN


class ArithmeticException(DomainError):
    """Java ``ArithmeticException`` (``x % 0`` on an empty queue list)."""

    java_exception = "ArithmeticException"


def java_abs(value: int) -> int:
    """``Math.abs(int)``: ``abs(MIN_VALUE)`` is ``MIN_VALUE``."""
    return value if value == INT_MIN else abs(value)


def java_rem(dividend: int, divisor: int) -> int:
    """Java ``%`` on ints: the result has the sign of the dividend."""
    if divisor == 0:
        raise ArithmeticException("/ by zero")
    remainder = abs(dividend) % abs(divisor)
    return -remainder if dividend < 0 else remainder
