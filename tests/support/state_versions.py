"""A consumer shard's state as older state versions wrote it, for the tests that upgrade a checkpoint.

Versions 11 and 12 hold engine snapshots of versions 10 and 11 and changed nothing else; version 10 kept one engine
snapshot per RocketMQ cluster: version 9's snapshot of the same input (one cluster, the default one) is the default
cluster's engine snapshot (``tests/unit/test_clusters.py`` migrates one). The engine's version 11 notes each polled
view's channel count and collector with its last poll; version 10's snapshot of the same input is the same without
them (``engine_as_previous``, checked against a snapshot version 10's own code wrote in
``tests/unit/test_state_migrations.py``). The engine's version 10 notes each polled view's
last poll with its group's times, apart from the group's text, which keeps the view as the text was last written:
version 9's snapshot of the same input has each text with its views' last polls in it and the times without the
views' (``engine_as_v9``). Version 9 keeps each group's state and progress as its own JSON text, with
the times each wakes, and changed nothing else of the document: version 8's snapshot of the same input is the
version-9 one with those texts as objects and without the times, and the ``holders`` of a provisional cut's marks
left out (version 8 wrote none; its code reads a mark without them). The previous release wrote version 8.
``consumer_state_as_previous`` makes the consumer queries a job starts keep that snapshot in their state store, so
that the checkpoint holds what the previous release would have left; ``consumer_state`` reads a checkpoint's shards
back through Spark's state data source.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any
from unittest import mock

from streaming.domain.consumers.encoded_states import encode_text
from streaming.domain.vocabulary import DEFAULT_CLUSTER
from streaming.job.runtime import state_blob

PREVIOUS_VERSION = 8  # the previous release's
# The engine's own chain (one cluster's snapshot inside a version 12 document): 11 is the newest, 10 the one before.
ENGINE_PREVIOUS_VERSION = 10
SHARD_VERSION = 12
_ADDED_IN_9 = ("group_times", "progress_times")


def engine_as_previous(snapshot: Mapping[str, Any]) -> dict[str, Any]:
    """A version-11 engine snapshot as version 10 wrote it: each noted view without its channels and collector."""
    assert snapshot["schema_version"] == ENGINE_PREVIOUS_VERSION + 1, snapshot["schema_version"]
    times = {
        group: [wake, quiet, {b: entry[:3] for b, entry in views.items()}, fed]
        for group, (wake, quiet, views, fed) in snapshot["group_times"].items()
    }
    return {**snapshot, "schema_version": ENGINE_PREVIOUS_VERSION, "group_times": times}


def engine_as_v9(snapshot: Mapping[str, Any]) -> dict[str, Any]:
    """A version-10 engine snapshot as version 9 wrote it: each polled view's last poll in its group's text, the
    group's ``[wake, quiet]`` counting the views' staleness."""
    assert snapshot["schema_version"] == 10, snapshot["schema_version"]
    groups, times = {}, {}
    for group, text in snapshot["groups"].items():
        wake, quiet, views, _ = snapshot["group_times"][group]
        stale = [at + after + 1 for at, after, _ in views.values()]
        times[group] = [_earliest(wake, stale), _earliest(quiet, stale)]
        state = json.loads(text)
        held = state["membership"]["views"]
        polled = {b: at for b, (at, _, _) in views.items() if at > held[b]["poll"][0]}
        for broker, at in polled.items():
            held[broker]["poll"][0] = at
            held[broker]["last_update_ms"] = [at] * len(held[broker]["last_update_ms"])
        groups[group] = encode_text(state) if polled else text
    return {**snapshot, "schema_version": 9, "groups": groups, "group_times": times}


def _earliest(time_ms: int | None, others: list[int]) -> int | None:
    known = [t for t in (time_ms, *others) if t is not None]
    return min(known) if known else None


def engine_as_v8(snapshot: Mapping[str, Any]) -> dict[str, Any]:
    """A version-11 engine snapshot as version 8 (the previous release) wrote it."""
    return v9_as_v8(engine_as_v9(engine_as_previous(snapshot)))


def v9_as_v8(previous: Mapping[str, Any]) -> dict[str, Any]:
    """A version-9 engine snapshot as version 8 wrote it."""
    kept = {k: v for k, v in previous.items() if k not in _ADDED_IN_9}
    groups = {g: _group_as_v8(json.loads(text)) for g, text in previous["groups"].items()}
    progress = {g: json.loads(text) for g, text in previous["progress"].items()}
    return {**kept, "schema_version": PREVIOUS_VERSION, "groups": groups, "progress": progress}


def _group_as_v8(state: Mapping[str, Any]) -> dict[str, Any]:
    group = dict(state)
    cut = group.get("provisional")
    if cut:
        group["provisional"] = [cut[0], cut[1], {k: v for k, v in cut[2].items() if k != "holders"}]
    return group


def shard_as_previous(snapshot: Mapping[str, Any]) -> dict[str, Any]:
    """A version-12 shard snapshot of the default cluster alone as version 8 (the previous release) wrote it."""
    assert snapshot["schema_version"] == SHARD_VERSION, snapshot["schema_version"]
    (engine,) = snapshot["clusters"].values()  # the previous release knew one cluster
    assert list(snapshot["clusters"]) == [DEFAULT_CLUSTER] and engine["schema_version"] == ENGINE_PREVIOUS_VERSION + 1
    return engine_as_v8(engine)


class _PreviousVersionState:
    """A shard's ``GroupState`` whose updates keep the previous version's snapshot of what the engine stores."""

    def __init__(self, state: Any) -> None:
        self._state = state

    def __getattr__(self, name: str) -> Any:
        return getattr(self._state, name)

    def update(self, value: tuple[bytes]) -> None:
        (blob,) = value
        self._state.update((state_blob.compress(shard_as_previous(state_blob.decode(blob))),))


@contextmanager
def consumer_state_as_previous() -> Iterator[None]:
    """A block in which the consumer query a job starts stores each shard's state as version 8 wrote it: the job's
    own state function, handed a state whose updates are ``shard_as_previous`` of the engine's snapshot (this
    module pickled by value, so the Python workers need not import the tests)."""
    from pyspark import cloudpickle

    from streaming.job.consumer import query as consumer_query

    job_function = consumer_query.make_state_function

    def make_state_function(settings: Any) -> Any:
        process = job_function(settings)

        def previous(key: Any, frames: Any, state: Any) -> Any:
            return process(key, frames, _PreviousVersionState(state))

        return previous

    module = sys.modules[__name__]
    cloudpickle.register_pickle_by_value(module)
    try:
        with mock.patch.object(consumer_query, "make_state_function", make_state_function):
            yield
    finally:
        cloudpickle.unregister_pickle_by_value(module)


def consumer_state(spark: Any, checkpoint: str) -> dict[int, dict[str, Any]]:
    """Each shard's state document in the consumer checkpoint's latest committed state, by shard."""
    rows = spark.read.format("statestore").load(checkpoint).collect()
    return {int(r["key"]["shard"]): state_blob.decode(_blob(r["value"].asDict(recursive=True))) for r in rows}


def _blob(value: Mapping[str, Any]) -> bytes:
    """The ``blob`` of a state row's value (the state data source nests it in ``groupState``)."""
    if "blob" in value:
        return bytes(value["blob"])
    return _blob(value["groupState"])
