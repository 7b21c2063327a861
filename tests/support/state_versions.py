"""A consumer shard's snapshot as the previous state version wrote it, for the tests that upgrade a checkpoint.

Version 7 added each group's ``provisional`` cut and ``episode_rows`` and changed nothing else of the document:
version 6's snapshot of the same input is the version-7 one without them
(``tests/unit/test_state_migrations.py`` checks that against a snapshot version 6's own code wrote).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PREVIOUS_VERSION = 6
_ADDED_IN_7 = ("provisional", "episode_rows")


def shard_as_previous(snapshot: Mapping[str, Any]) -> dict[str, Any]:
    """A version-7 shard snapshot as version 6 wrote it."""
    assert snapshot["schema_version"] == PREVIOUS_VERSION + 1, snapshot["schema_version"]
    groups = {g: {k: v for k, v in s.items() if k not in _ADDED_IN_7} for g, s in snapshot["groups"].items()}
    return {**snapshot, "schema_version": PREVIOUS_VERSION, "groups": groups}
