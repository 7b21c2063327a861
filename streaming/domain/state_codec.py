"""Versioned snapshots of the state the job keeps in its Spark state stores.

Each kind of state (a group's membership, a shard of groups, a fault tracker, a shard of fault pairs) is
stored as one JSON-ready dict whose first key, ``schema_version``, is the version of its shape. ``wrap_state``
builds that dict; ``unwrap_state`` checks the version and raises ``StateVersionError`` on any other.
The version rule: ``docs/design/state-snapshots.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from streaming.domain.errors import MonitorError

VERSION_KEY = "schema_version"


class StateVersionError(MonitorError, ValueError):
    """A snapshot of ``kind`` has schema version ``found``; this code reads only ``expected``."""

    def __init__(self, kind: str, found: object, expected: int) -> None:
        super().__init__(
            f"{kind} snapshot schema_version {found!r} is not supported (this code reads {expected}); "
            "restart the query from a new checkpoint"
        )
        self.kind = kind
        self.found = found
        self.expected = expected


def wrap_state(kind: str, version: int, payload: Mapping[str, Any]) -> dict[str, Any]:
    """The snapshot of ``kind``: ``{"schema_version": version, **payload}``, the version first."""
    if VERSION_KEY in payload:
        raise ValueError(f"{kind} snapshot payload must not carry its own {VERSION_KEY!r}")
    return {VERSION_KEY: version, **payload}


def unwrap_state(kind: str, version: int, snapshot: Mapping[str, Any]) -> Mapping[str, Any]:
    """The snapshot's payload (the snapshot itself, its other keys read as before) once its version is
    ``version``; ``StateVersionError`` naming ``kind`` and both versions otherwise."""
    found = snapshot.get(VERSION_KEY)
    if found != version:
        raise StateVersionError(kind, found, version)
    return snapshot
