"""Typed errors of the domain.

The real RocketMQ classes signal bad arguments with Java exceptions; the monitor must report the same
failure *kind* (the conformance vectors record the Java simple class name), so each Java exception maps to
one subclass here, carrying the Java class name in ``java_exception`` and the message Java would give.
"""

from __future__ import annotations


class MonitorError(Exception):
    """Root of every error the monitor raises on purpose."""


class DomainError(MonitorError):
    """A RocketMQ rule rejected its input, exactly where the Java client would throw."""

    java_exception: str = "RuntimeException"

    def __init__(self, message: str, **context: object) -> None:
        super().__init__(message)
        self.message = message
        self.context = context

    def __str__(self) -> str:
        return f"{self.java_exception}: {self.message}"


class IllegalArgument(DomainError):
    """Java ``IllegalArgumentException``."""

    java_exception = "IllegalArgumentException"


class NullPointer(DomainError):
    """Java ``NullPointerException`` (e.g. MACHINE_ROOM without consumer IDCs)."""

    java_exception = "NullPointerException"


class IndexOutOfBounds(DomainError):
    """Java ``IndexOutOfBoundsException`` / ``ArrayIndexOutOfBoundsException``."""

    java_exception = "IndexOutOfBoundsException"


class ConfigurationError(MonitorError):
    """A fault table, strategy parameter or other setting is invalid; raised at load time."""
