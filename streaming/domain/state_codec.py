"""Versioned snapshots of the state the job keeps in its Spark state stores.

Each kind of state (a group's membership, a shard of groups, a fault tracker, a shard of fault pairs) is
stored as one JSON-ready dict whose first key, ``schema_version``, is the version of its shape. ``wrap_state``
builds that dict; ``unwrap_state`` checks the version, migrates an older snapshot through the kind's chain of
per-version migrations, and raises ``StateVersionError`` on a version it cannot read.
The version rule and the migrations: ``docs/design/state-snapshots.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from streaming.domain.errors import MonitorError

VERSION_KEY = "schema_version"
# A migration: a snapshot of version N in, the payload of version N + 1 out (its version key is dropped).
Migration = Callable[[Mapping[str, Any]], Mapping[str, Any]]
# Where the operator reads what a new checkpoint loses when a snapshot cannot be migrated.
UPGRADING = "docs/deploy.md, Upgrading"


class StateVersionError(MonitorError, ValueError):
    """A snapshot of ``kind`` has schema version ``found``; this code reads ``oldest`` to ``expected``."""

    def __init__(self, kind: str, found: object, expected: int, oldest: int | None = None) -> None:
        reads = str(expected) if oldest is None or oldest >= expected else f"{oldest} to {expected}"
        super().__init__(
            f"{kind} snapshot schema_version {found!r} is not supported (this code reads {reads}); "
            f"a new checkpoint is needed, see {UPGRADING} for what it loses"
        )
        self.kind = kind
        self.found = found
        self.expected = expected
        self.oldest = expected if oldest is None else oldest


def wrap_state(kind: str, version: int, payload: Mapping[str, Any]) -> dict[str, Any]:
    """The snapshot of ``kind``: ``{"schema_version": version, **payload}``, the version first."""
    if VERSION_KEY in payload:
        raise ValueError(f"{kind} snapshot payload must not carry its own {VERSION_KEY!r}")
    return {VERSION_KEY: version, **payload}


def unwrap_state(
    kind: str, version: int, snapshot: Mapping[str, Any], migrations: Mapping[int, Migration] | None = None
) -> Mapping[str, Any]:
    """The snapshot's payload (the snapshot itself, its other keys read as before) once its version is
    ``version``. An older snapshot is migrated first: ``migrations[n]`` takes version ``n`` to ``n + 1``, applied
    from its version up to ``version``. ``StateVersionError`` naming ``kind`` and the versions when no chain
    leads from the snapshot's version to ``version`` (a newer one, a missing one, one older than the chain)."""
    found = snapshot.get(VERSION_KEY)
    if found == version:
        return snapshot
    steps = migrations or {}
    if type(found) is not int or not found < version or any(n not in steps for n in range(found, version)):
        raise StateVersionError(kind, found, version, oldest_readable(version, steps))
    for n in range(found, version):
        snapshot = wrap_state(kind, n + 1, {k: v for k, v in steps[n](snapshot).items() if k != VERSION_KEY})
    return snapshot


def oldest_readable(version: int, migrations: Mapping[int, Migration] | None = None) -> int:
    """The oldest version the chain ``migrations`` leads from to ``version`` (``version`` itself without one)."""
    oldest = version
    while oldest - 1 in (migrations or {}):
        oldest -= 1
    return oldest
