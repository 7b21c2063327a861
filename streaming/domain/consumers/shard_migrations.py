"""Older consumer shard snapshots read by the current code: one migration per version step.

``ShardEngine.restore`` hands ``MIGRATIONS`` to ``state_codec.unwrap_state``, which applies them from a snapshot's
version up to ``shard_engine.SCHEMA_VERSION`` (one cluster's engine); ``Shard.restore`` hands it ``migrations``,
which go on to ``shard.SCHEMA_VERSION`` (an engine per cluster). Each is tested with a snapshot the code of its
version wrote (``tests/unit/test_state_migrations.py``); why each keeps the state's truth:
``docs/design/state-snapshots.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any


def _groups(snapshot: Mapping[str, Any], added: Callable[[Mapping[str, Any]], dict[str, Any]]) -> dict[str, Any]:
    """The snapshot with ``added(group state)``'s keys added to each group's state."""
    groups = {group: {**state, **added(state)} for group, state in snapshot["groups"].items()}
    return {**snapshot, "groups": groups}


def v5_to_v6(snapshot: Mapping[str, Any]) -> dict[str, Any]:
    """6 keeps each group's changes not cut into a generation yet (``pending``). Version 5 cut every change at the
    end of the batch that brought it, so a version-5 state holds none: ``pending`` is None."""
    return _groups(snapshot, lambda state: {"pending": None})


def v6_to_v7(snapshot: Mapping[str, Any]) -> dict[str, Any]:
    """7 keeps the cut of the pending changes made where a call ended (``provisional``) and each open episode's
    current row (``episode_rows``). Version 6 made no such cut (pending changes were written only once cut for
    good), so there is none to amend: ``provisional`` is None. An open episode's row time is not in a version-6
    state: ``episode_rows`` starts empty, and an episode a later amended cut puts back is written as of its
    opening at the group's generation then (``ShardEngine._cut``), until its next transition records its row."""
    return _groups(snapshot, lambda state: {"provisional": None, "episode_rows": {}})


def v7_to_v8(snapshot: Mapping[str, Any]) -> dict[str, Any]:
    """8 keeps each report's times (``reported_ms``), the latest generation's time (``generation_ms``), whether an
    observed candidate waits for its grace (``observing``) and the holders rows written (``holder_rows``). Version 7
    kept no report's time: its reports are kept and count from each client's next report on (``{}``: no time, not
    counted); the generation's time is unknown (``None``: the next report of each client counts, as version 7
    compared every report); nothing waits (``False``) and no holders row was written (``{}``)."""
    return _groups(
        snapshot, lambda state: {"reported_ms": {}, "generation_ms": None, "observing": False, "holder_rows": {}}
    )


MIGRATIONS: Mapping[int, Callable[[Mapping[str, Any]], Mapping[str, Any]]] = {
    5: v5_to_v6,
    6: v6_to_v7,
    7: v7_to_v8,
}


def in_default_cluster(default_cluster: str, snapshot: Mapping[str, Any]) -> dict[str, Any]:
    """``shard.SCHEMA_VERSION`` (9) keeps one engine snapshot per RocketMQ cluster (``clusters``). An engine snapshot
    (version 8) knew one cluster, the job's default one: the whole snapshot, unchanged (generations, open episodes,
    assignments, pending cuts), becomes ``default_cluster``'s engine snapshot."""
    return {"clusters": {default_cluster: dict(snapshot)}}


def migrations(default_cluster: str) -> Mapping[int, Callable[[Mapping[str, Any]], Mapping[str, Any]]]:
    """``MIGRATIONS`` (older engine snapshots to the engine's version) and the step from the engine's version to
    ``shard.SCHEMA_VERSION``, whose only cluster is ``default_cluster``."""
    from streaming.domain.consumers.shard_engine import SCHEMA_VERSION as ENGINE_VERSION

    return {**MIGRATIONS, ENGINE_VERSION: partial(in_default_cluster, default_cluster)}
