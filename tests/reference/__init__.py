"""RocketMQ client classes reproduced for the conformance and differential tests, and the golden-vector replays.

The job does not use them: it needs allocation (``streaming.domain.allocation.strategies``) and the latency fault
tolerance (``streaming.domain.faults.tolerance``), not which queue a producer thread picks. They are pure and exact like
the domain they build on, so the vectors (``tests/data/conformance``) and the live Java classes check both.
"""
