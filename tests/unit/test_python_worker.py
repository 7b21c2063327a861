"""The consumer's stateful function freezes their Python worker's imported heap once (``streaming.job.runtime.python_worker``).

Spark's daemon collects garbage in a reused worker after every runner; a frozen heap is what keeps that
collection from walking every imported module again. Here the functions are called in this process, as a
worker calls them, with the module's flag reset, and ``gc.freeze`` is watched.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from streaming.domain.consumers.engine_settings import EngineSettings
from streaming.job.consumer import query as consumer_query
from streaming.job.runtime import python_worker


class FakeState:
    """The part of ``pyspark.sql.streaming.state.GroupState`` the consumer function's shortest path uses."""

    exists = False

    def getCurrentWatermarkMs(self) -> int:  # noqa: N802 (Spark's name)
        return 0

    def remove(self) -> None:
        pass


@pytest.fixture
def fresh_worker(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """A process that has not frozen its heap yet; the list receives the object count at each ``gc.freeze``."""
    freezes: list[int] = []
    real_freeze = gc.freeze

    def watched_freeze() -> None:
        real_freeze()
        freezes.append(gc.get_freeze_count())

    monkeypatch.setattr(python_worker, "_heap_frozen", False)
    monkeypatch.setattr(python_worker.gc, "freeze", watched_freeze)
    yield freezes
    gc.unfreeze()  # hand this test process its collector back as it was


def test_the_first_call_freezes_the_heap_and_later_calls_do_not(fresh_worker: list[int]) -> None:
    assert python_worker.freeze_imported_heap() is True
    assert python_worker.freeze_imported_heap() is False
    assert len(fresh_worker) == 1
    # Everything alive at the first call is out of the collector's sight: the imported modules included.
    assert fresh_worker[0] > 10_000


def test_the_consumer_function_freezes_its_worker_once(fresh_worker: list[int]) -> None:
    process = consumer_query.make_state_function(EngineSettings())
    for _ in range(2):
        # The dead-letter shard with no rows: the function's shortest path still runs in the worker.
        out = list(process((consumer_query.DEAD_LETTER_SHARD,), iter([]), FakeState()))
        assert [len(frame) for frame in out] == [0]
    assert len(fresh_worker) == 1


def test_the_collector_is_paused_through_a_call_and_left_as_it_was():
    import gc

    was = gc.isenabled()
    try:
        for before in (True, False):
            (gc.enable if before else gc.disable)()
            with python_worker.collector_paused():
                assert not gc.isenabled()
            assert gc.isenabled() is before
        gc.enable()
        try:
            with python_worker.collector_paused():
                raise KeyError("a failing call")
        except KeyError:
            pass
        assert gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()
