"""Which batches a query's metrics have counted in this process.

A query that fails is restarted from its checkpoint (``supervision``) with a new sink, and replays the batch that
failed; its counters (rebalances, dead letters, late events, isolation episodes, latency histogram) must not count
that batch twice. The job keeps one ``MeteredBatches`` for all its sinks, so the record outlives any one of them.
A new process starts its counters from zero, which Prometheus reads as a counter reset.
"""

from __future__ import annotations

import threading


class MeteredBatches:
    """The highest batch id each counter has counted, thread-safe (the sinks' writes run concurrently)."""

    def __init__(self) -> None:
        self._through: dict[str, int] = {}
        self._lock = threading.Lock()

    def first_time(self, counter: str, batch_id: int) -> bool:
        """True the first time ``counter`` meets ``batch_id`` (or a later batch): the caller counts it then."""
        with self._lock:
            if batch_id <= self._through.get(counter, -1):
                return False
            self._through[counter] = batch_id
            return True
