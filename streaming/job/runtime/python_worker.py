"""What the job's stateful functions need from the Python worker process they run in: its heap frozen once, the
cyclic collector paused through a shard's call.

Spark's Python daemon runs ``gc.collect()`` in a reused worker after every task's runner, before the worker
takes the next one. A stateful operator runs two runners per partition and micro-batch (the batch's rows,
then the event-time timeout pass), and the second waits for the full collection that follows the first:
a traversal of everything the worker has imported (pandas, pyarrow, pyspark, the domain), about 30-50 ms
each time for nothing, since the state functions build no reference cycles. Freezing the heap the imports
built moves it out of the collector's sight (``gc.freeze``), so those collections only walk what a task left.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

_heap_frozen = False


def freeze_imported_heap() -> bool:
    """On the first call in this process, collect once and freeze every surviving object (the imported
    modules and their caches) so that later collections skip them; later calls do nothing. Whether this
    call froze the heap."""
    global _heap_frozen
    if _heap_frozen:
        return False
    gc.collect()
    gc.freeze()
    _heap_frozen = True
    return True


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while one shard is processed.

    Restoring a shard allocates tens of thousands of small long-lived objects (channels, views); each
    allocation burst makes the collector traverse them all again, for nothing: the engine builds no
    reference cycles. Measured: about a third of a steady batch's CPU. Reference counting still frees
    everything; the collector runs again once the call is over.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
