"""RocketMQ client classes reproduced for the conformance and differential tests, and the golden-vector replays.

The job does not use them: it needs allocation (``streaming.domain.allocation``) and the latency fault
tolerance (``streaming.domain.faults``), not which queue a producer thread picks. They stay in the domain,
pure and exact, so the vectors and the live Java classes keep checking the shared pieces they build on.
"""
