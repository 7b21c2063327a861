"""The monitor's known start-up / per-broker REBALANCE_STORM false positive, recognised precisely.

The storm detector (``streaming/domain/fleet.py``: ``ShardEngine._mark`` feeding ``StormDetector``) counts
every channel change on every broker as one rebalance: one client joining a 2-broker cluster is two
"rebalances", and the monitor's first sight of a 4-member group is 4 x 2 JOINs + the subscriptions + the
route. RocketMQ clients do not rebalance that often: the notifications of one membership change arrive
together and ``RebalanceService`` coalesces them (its ``wakeup`` only ends the current wait). So a storm
reported for a group whose membership changed at no more than ``threshold`` distinct instants within any
``window_ms`` is that false positive -- the scenario tests mark exactly that as an expected failure, and
nothing else.
"""

from __future__ import annotations

from collections.abc import Iterable

STORM_WINDOW_MS = 300_000
STORM_THRESHOLD = 10


def distinct_change_instants_peak(change_times_ms: Iterable[int], window_ms: int = STORM_WINDOW_MS) -> int:
    """The most distinct change instants within any window of ``window_ms`` (inclusive at both ends)."""
    times = sorted(set(change_times_ms))
    best, start = 0, 0
    for end, t in enumerate(times):
        while times[start] < t - window_ms:
            start += 1
        best = max(best, end - start + 1)
    return best


def is_known_storm_false_positive(anomaly: str, change_times_ms: Iterable[int]) -> bool:
    return anomaly == "REBALANCE_STORM" and distinct_change_instants_peak(change_times_ms) <= STORM_THRESHOLD
