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

from streaming.domain.consumers.encoded_states import encode_text


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


def v8_to_v9(snapshot: Mapping[str, Any]) -> dict[str, Any]:
    """9 keeps each group's state and progress as its own JSON text (``encoded_states``), with the times each
    wakes (``group_times``, ``progress_times``). The texts are version 8's objects encoded as they are; version 8
    noted no times: none (``{}``), so the first call decodes every group once and notes them."""
    return {
        **snapshot,
        "groups": {g: encode_text(state) for g, state in snapshot["groups"].items()},
        "group_times": {},
        "progress": {g: encode_text(progress) for g, progress in snapshot["progress"].items()},
        "progress_times": {},
    }


def v9_to_v10_engine(snapshot: Mapping[str, Any]) -> dict[str, Any]:
    """An engine's 10 notes each polled view's last poll with the group's times (``group_times``: its time and the
    digest of what it said, apart from the group's text) and whether a view is fed by heartbeats. Version 9 noted
    neither: no times (``{}``), so the first call decodes every group once and notes them, as version 9 did after
    version 8; the texts are kept as they are."""
    return {**snapshot, "group_times": {}}


def v10_to_v11_engine(snapshot: Mapping[str, Any]) -> dict[str, Any]:
    """An engine's 11 notes with each polled view its channel count and collector too. Version 10's notes lack them:
    none are kept (``{}``), so the first call decodes every group once and notes them, as after 9 -> 10; the texts
    are kept as they are (each view as the text last wrote it: a poll noted since only moved its times, and an
    unchanged poll of it is applied in full once)."""
    return {**snapshot, "group_times": {}}


MIGRATIONS: Mapping[int, Callable[[Mapping[str, Any]], Mapping[str, Any]]] = {
    5: v5_to_v6,
    6: v6_to_v7,
    7: v7_to_v8,
    8: v8_to_v9,
    9: v9_to_v10_engine,
    10: v10_to_v11_engine,
}


def v9_to_v10(default_cluster: str, snapshot: Mapping[str, Any]) -> dict[str, Any]:
    """10 keeps one engine snapshot per RocketMQ cluster (``clusters``). Version 9 knew one cluster, the job's
    default one: the whole snapshot, unchanged (generations, open episodes, assignments, pending cuts), becomes
    ``default_cluster``'s engine snapshot of version 9."""
    return {"clusters": {default_cluster: dict(snapshot)}}


def v10_to_v11(snapshot: Mapping[str, Any]) -> dict[str, Any]:
    """11 holds engine snapshots of version 10; each engine snapshot of version 9 a version 10 document holds is
    migrated by the engine's own chain when restored (``v9_to_v10_engine``): the document is kept as it is."""
    return dict(snapshot)


def v11_to_v12(snapshot: Mapping[str, Any]) -> dict[str, Any]:
    """12 holds engine snapshots of version 11; an older engine snapshot inside takes the engine's own chain when
    restored (``v10_to_v11_engine``): the document is kept as it is."""
    return dict(snapshot)


def migrations(default_cluster: str) -> Mapping[int, Callable[[Mapping[str, Any]], Mapping[str, Any]]]:
    """The steps to ``shard.SCHEMA_VERSION``: ``MIGRATIONS`` up to version 9 (one cluster's engine), then that
    engine as ``default_cluster``'s (9 -> 10), then 10 -> 11 -> 12. (``MIGRATIONS[9]`` and ``[10]``, the engine's
    own steps, apply inside: ``ShardEngine.restore``.)"""
    return {**MIGRATIONS, 9: partial(v9_to_v10, default_cluster), 10: v10_to_v11, 11: v11_to_v12}
