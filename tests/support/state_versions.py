"""A consumer shard's state as the previous state version wrote it, for the tests that upgrade a checkpoint.

Version 9 keeps one engine snapshot per RocketMQ cluster and changed nothing else: version 8's snapshot of the
same input (one cluster, the default one) is the default cluster's engine snapshot (``tests/unit/test_clusters.py``
migrates one). ``consumer_state_as_previous`` makes the consumer queries a job starts keep that snapshot in their
state store, so that the checkpoint holds what the previous release would have left; ``consumer_state`` reads a checkpoint's shards back through Spark's state data source.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any
from unittest import mock

from streaming.domain.consumers.shard import SCHEMA_VERSION
from streaming.domain.vocabulary import DEFAULT_CLUSTER
from streaming.job.runtime import state_blob

PREVIOUS_VERSION = SCHEMA_VERSION - 1  # a single-cluster engine snapshot of the engine's own version
# The engine's own chain (one cluster's snapshot inside a version 9 document): 8 is the newest, 7 the one before.
ENGINE_PREVIOUS_VERSION = 7
_ADDED_IN_8 = ("reported_ms", "generation_ms", "observing", "holder_rows")


def engine_as_previous(snapshot: Mapping[str, Any]) -> dict[str, Any]:
    """A version-8 engine snapshot as version 7 wrote it (it added each group's report times and holders rows and
    changed nothing else: ``tests/unit/test_state_migrations.py`` checks that against version 7's own snapshot)."""
    assert snapshot["schema_version"] == ENGINE_PREVIOUS_VERSION + 1, snapshot["schema_version"]
    groups = {g: {k: v for k, v in s.items() if k not in _ADDED_IN_8} for g, s in snapshot["groups"].items()}
    return {**snapshot, "schema_version": ENGINE_PREVIOUS_VERSION, "groups": groups}


def shard_as_previous(snapshot: Mapping[str, Any]) -> dict[str, Any]:
    """A version-9 shard snapshot of the default cluster alone as version 8 wrote it."""
    assert snapshot["schema_version"] == PREVIOUS_VERSION + 1, snapshot["schema_version"]
    (engine,) = snapshot["clusters"].values()  # the previous version knew one cluster
    assert list(snapshot["clusters"]) == [DEFAULT_CLUSTER] and engine["schema_version"] == PREVIOUS_VERSION
    return dict(engine)


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
