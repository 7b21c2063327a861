"""A query's metrics count each batch once in a process, whichever of its sinks meets the batch."""

from __future__ import annotations

import threading

from streaming.job.runtime.metered import MeteredBatches


def test_each_counter_counts_a_batch_once_and_never_an_older_one():
    metered = MeteredBatches()
    assert metered.first_time("consumer", 0)
    assert not metered.first_time("consumer", 0)  # the replay of batch 0
    assert metered.first_time("consumer", 2)
    assert not metered.first_time("consumer", 1)  # older than one counted
    assert metered.first_time("send-ingest:dead_letters", 0)  # another counter keeps its own record


def test_concurrent_sinks_count_a_batch_exactly_once():
    metered = MeteredBatches()
    counted: list[bool] = []
    start = threading.Barrier(8)

    def sink() -> None:
        start.wait()
        counted.append(metered.first_time("send-ingest", 5))

    threads = [threading.Thread(target=sink) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(counted) == [False] * 7 + [True]
