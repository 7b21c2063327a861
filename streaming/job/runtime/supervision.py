"""Keeps a long-running job's queries alive: a failed query restarts from its checkpoint after a backoff.

Structured Streaming ends a query for good on any error (Kafka unreachable beyond the source's retries, a
Delta commit refused). Restarting it from its checkpoint neither loses nor repeats anything (the checkpoint
and the idempotent Delta writes see to that), so the job waits 1, 2, 4 ... seconds up to a maximum and
starts it again. A query that fails ``max_consecutive_failures`` times without completing a trigger in
between is beyond help from inside: the job then exits non-zero and the supervisor around it takes over.
Kafka refusing the job's credentials or its TLS handshake is never retried: a restart cannot fix it, so the job
ends at once with one line saying so (``KafkaRefused``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from streaming.config import SupervisionConfig

log = logging.getLogger(__name__)
_PYTHON_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)\b")  # a Python traceback's last line


_KAFKA_REFUSAL = re.compile(r"org\.apache\.kafka\.common\.errors\.((?:Sasl|Ssl)?AuthenticationException): ?([^\n]*)")


class QueryFailedRepeatedly(RuntimeError):
    """A query failed too many times in a row; the job must exit so an outer supervisor restarts it."""


class KafkaRefused(QueryFailedRepeatedly):
    """Kafka refused the job's authentication (SASL credentials, TLS trust): one line, the job ends."""


def kafka_refusal(error: Any, query: str) -> KafkaRefused | None:
    """``KafkaRefused`` when a query's exception is, anywhere in its causes, Kafka refusing authentication."""
    found = _KAFKA_REFUSAL.search(str(getattr(error, "desc", None) or error) + "\n" + str(error))
    if found is None:
        return None
    reason = f"{found.group(1)}: {found.group(2).strip()}"[:300]
    return KafkaRefused(
        f"job: Kafka refused the job's query {query} ({reason}); check [kafka.options]: the SASL credentials "
        "and the trust store"
    )


@dataclass
class _Health:
    failures: int = 0  # in a row: reset once a restarted query completes a trigger
    restart_at: float | None = None  # monotonic time of the scheduled restart, while one is pending


def error_summary(error: Any) -> str:
    """One line for a query's exception: its first line, or for a Python error the traceback's exception."""
    lines = [line.strip() for line in str(getattr(error, "desc", None) or error).splitlines() if line.strip()]
    tracebacks = [i for i, line in enumerate(lines) if line.endswith("Traceback (most recent call last):")]
    if tracebacks:
        raised = [line for line in lines[tracebacks[-1] + 1 :] if _PYTHON_EXCEPTION.match(line)]
        if raised:
            return raised[0][:500]
    return lines[0][:500] if lines else type(error).__name__


class QuerySupervisor:
    """Watches the job's queries (``check`` once a second) and restarts failed ones through ``restart``."""

    def __init__(
        self, policy: SupervisionConfig, restart: Callable[[str], None], on_restart: Callable[[str], None]
    ) -> None:
        self._policy = policy
        self._restart = restart
        self._on_restart = on_restart
        self._health: dict[str, _Health] = {}

    def backoff_s(self, failures: int) -> float:
        p = self._policy
        return float(min(p.restart_backoff_max_seconds, p.restart_backoff_initial_seconds * 2 ** (failures - 1)))

    def check(self, queries: dict[str, Any], now: float) -> None:
        """Restart the failed queries whose backoff is over; raise ``QueryFailedRepeatedly`` past the limit."""
        for name, query in list(queries.items()):
            health = self._health.setdefault(name, _Health())
            if health.restart_at is None:
                if query.isActive:
                    if health.failures and query.lastProgress is not None:
                        log.warning("query %s is running again after %d failure(s)", name, health.failures)
                        health.failures = 0
                    continue
                error = query.exception()
                if error is None:
                    continue  # stopped on purpose
                refused = kafka_refusal(error, name)
                if refused is not None:
                    raise refused
                self._failed(name, health, error_summary(error), now)
            elif now >= health.restart_at:
                health.restart_at = None
                try:
                    self._restart(name)
                except Exception as error:  # noqa: BLE001 - a refused start is one more failure
                    self._failed(name, health, error_summary(error), now)
                    continue
                self._on_restart(name)

    def _failed(self, name: str, health: _Health, summary: str, now: float) -> None:
        health.failures += 1
        limit = self._policy.max_consecutive_failures
        if health.failures >= limit:
            raise QueryFailedRepeatedly(f"query {name} failed {health.failures} times in a row; last error: {summary}")
        delay = self.backoff_s(health.failures)
        health.restart_at = now + delay
        log.error(
            "query %s failed (%d of %d in a row): %s -- restarting it from its checkpoint in %.0f s",
            name,
            health.failures,
            limit,
            summary,
            delay,
        )
