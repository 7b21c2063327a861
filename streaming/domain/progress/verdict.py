"""A queue's consume progress judged over a window of samples: one state, with a cause for a stuck holder.

Each sample is one master's ``GET_CONSUME_STATS`` row for the queue (broker, consumer and pull offsets, the
store time of the last consumed message) joined with who held the queue then (the holders' ``ProcessQueueInfo``
from their running info) and who should hold it. ``RULES`` is the ordered rule table (first match wins), after
Burrow's, adapted to RocketMQ: a live holder re-commits the same offset every 5 s and the broker keeps no
commit time, so a stuck holder is told from an idle queue by the holder's own fields; and two clients can hold
one queue (a Kafka partition has one owner), which is judged before the lag. Design and sources:
``docs/design/consume-progress.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import NamedTuple

from streaming.domain.vocabulary import AllocationMode, Severity


class QueueState(StrEnum):
    UNKNOWN = "UNKNOWN"
    NOT_OWNED_MODEL = "NOT_OWNED_MODEL"
    NO_OFFSET = "NO_OFFSET"
    INCOMPLETE = "INCOMPLETE"
    IDLE = "IDLE"
    OK = "OK"
    REWIND = "REWIND"
    REBALANCE_REWIND = "REBALANCE_REWIND"
    ORPHAN_CONFIRMED = "ORPHAN_CONFIRMED"
    HIDDEN_CONSUMER = "HIDDEN_CONSUMER"
    DOUBLE_OWNED = "DOUBLE_OWNED"
    STUCK_HOLDER = "STUCK_HOLDER"
    SLOW = "SLOW"


class StuckCause(StrEnum):
    """Why the one holder of a queue with a backlog does not advance it, from its ``ProcessQueueInfo``."""

    FLOW_CONTROL = "FLOW_CONTROL"  # too many or too large cached messages, or too wide a span: pulls paused
    OFFSET_HOLE = "OFFSET_HOLE"  # one unfinished message pins the committed offset while others complete
    NOT_LOCKED = "NOT_LOCKED"  # orderly consumer without the broker's lock: it does not pull
    PULL_DEAD = "PULL_DEAD"  # no pull started for longer than the client's pull idle time
    WRONG_HOLDER = "WRONG_HOLDER"  # held by a client the assignment does not give it to
    UNEXPLAINED = "UNEXPLAINED"


@dataclass(frozen=True)
class ProgressSettings:
    """The rule table's numbers (``docs/design/consume-progress.md`` says where each comes from)."""

    sample_interval_ms: int = 30_000  # the collector's progress cadence
    window: int = 10  # samples judged together (5 min at 30 s)
    allowed_lag: int = 0
    orphan_samples: int = 3  # no holder this many samples in a row, offset flat: confirmed
    double_owned_samples: int = 2
    slow_time_lag_s: float = 180.0  # at every sample of the window
    # The client's defaults (DefaultMQPushConsumer, ProcessQueue, RebalanceImpl).
    pull_threshold_for_queue: int = 1_000
    pull_threshold_size_mib: int = 100
    consume_concurrently_max_span: int = 2_000
    lock_max_live_ms: int = 30_000
    pull_max_idle_ms: int = 120_000


DEFAULT_SETTINGS = ProgressSettings()


class HolderView(NamedTuple):
    """One client's ``ProcessQueueInfo`` for the queue, from its running info. A tuple, as ``QueueSample``."""

    client_id: str
    commit_offset: int
    cached_msg_count: int
    cached_msg_size_mib: int
    cached_msg_min_offset: int
    cached_msg_max_offset: int
    last_pull_ms: int
    last_consume_ms: int
    orderly: bool = False
    locked: bool = True
    last_lock_ms: int = 0
    dropped: bool = False  # leaving the client's table: not a holder


class QueueSample(NamedTuple):
    """The queue at one progress sample. ``answered``: the master answered for it (else every offset is
    unknown, never 0). ``pull_offset`` only from 5.1.0; ``min_offset`` when retention was read;
    ``last_timestamp_ms`` 0 when the broker has none. A tuple, not a frozen dataclass: a group's window is built
    again from its state at every call, and a frozen dataclass costs several times a tuple to build."""

    at_ms: int
    answered: bool
    broker_offset: int = 0
    consumer_offset: int = 0
    last_timestamp_ms: int = 0
    pull_offset: int | None = None
    min_offset: int | None = None
    holders: tuple[HolderView, ...] = ()
    expected_owner: str | None = None
    view_fresh: bool = True  # the broker's view of the group is not stale

    @property
    def lag(self) -> int:
        return max(0, self.broker_offset - self.consumer_offset)

    def holder_ids(self) -> frozenset[str]:
        return frozenset(h.client_id for h in self.holders if not h.dropped)


@dataclass(frozen=True)
class TimeLag:
    """Seconds behind: ``upper`` from the store time of the last consumed message (free, an upper bound on the
    first unconsumed one); ``estimate`` interpolated over the window's (offset, time) points, never
    extrapolated: when the consumer offset is older than every point it is a lower bound (``bounded``)."""

    upper_s: float | None
    estimate_s: float | None
    bounded: bool = False


@dataclass(frozen=True)
class QueueVerdict:
    state: QueueState
    severity: Severity | None  # None: never alerts; INFO: counted, not alerted
    rule: str  # the RULES entry that matched
    lag: int | None
    complete: float
    time_lag: TimeLag
    cause: StuckCause | None = None
    expired_unconsumed: bool = False  # the consumer offset is below the queue's min offset: messages lost
    holders: frozenset[str] = field(default_factory=frozenset)


# (number, state, when), in the order ``evaluate`` tries them: first match wins. A rule keeps its number when it
# moves (the number is recorded with every verdict), so the numbers are names, not positions.
RULES: tuple[tuple[str, QueueState, str], ...] = (
    ("0", QueueState.UNKNOWN, "no answer from the queue's master in the last 2 samples, or its view is stale"),
    ("1", QueueState.NOT_OWNED_MODEL, "POP, proxy or BROADCASTING group: group-level lag only"),
    ("1b", QueueState.NO_OFFSET, "consumer offset 0 and no last timestamp with messages: nothing committed yet"),
    ("2", QueueState.IDLE, "lag 0 through the window and no new message"),
    # Before the lag rules: two holders both pull and consume every message, however well they keep up (the
    # lag is small because both consume), and their interleaved commits are what would look like a rewind.
    ("5", QueueState.DOUBLE_OWNED, "two or more holders for the double-owned samples, whatever the lag"),
    ("2b", QueueState.OK, "lag within the allowed lag at some sample of the window"),
    ("3", QueueState.REWIND, "the consumer offset went back and did not recover within the window"),
    ("3b", QueueState.REBALANCE_REWIND, "rule 3 within one sample interval of the group's generation change"),
    ("4", QueueState.ORPHAN_CONFIRMED, "no holder for the orphan samples, offset flat, lag > 0"),
    ("4b", QueueState.HIDDEN_CONSUMER, "no holder for the orphan samples, yet the offset advances"),
    ("6", QueueState.STUCK_HOLDER, "one holder through the window, offset flat, lag > 0 (with a cause)"),
    ("7", QueueState.SLOW, "offset advances, lag never falls, time lag over the threshold at every sample"),
    ("8", QueueState.INCOMPLETE, "an alerting state without enough answered samples in the window"),
    ("9", QueueState.OK, "none of the above"),
)
_STATE_BY_RULE = {number: state for number, state, _ in RULES}
_SEVERITY: dict[QueueState, Severity | None] = {
    QueueState.UNKNOWN: None,
    QueueState.NOT_OWNED_MODEL: None,
    QueueState.NO_OFFSET: None,
    QueueState.INCOMPLETE: None,
    QueueState.IDLE: None,
    QueueState.OK: None,
    QueueState.REWIND: Severity.CRITICAL,
    QueueState.REBALANCE_REWIND: Severity.INFO,
    QueueState.ORPHAN_CONFIRMED: Severity.CRITICAL,
    QueueState.HIDDEN_CONSUMER: Severity.WARNING,
    QueueState.DOUBLE_OWNED: Severity.CRITICAL,
    QueueState.STUCK_HOLDER: Severity.CRITICAL,
    QueueState.SLOW: Severity.WARNING,
}


def severity_of(state: QueueState) -> Severity | None:
    """A state's severity (None: never alerts; INFO: counted, not alerted), as the rule table gives it."""
    return _SEVERITY[state]


def alerts_on(state: QueueState) -> bool:
    """Whether the state's severity pages or warns (an alert for it exists), rather than only recording."""
    return _SEVERITY[state] in (Severity.CRITICAL, Severity.WARNING)


# Share of the window's samples answered that each severity needs (Burrow's ``complete``).
_COMPLETE_NEEDED: dict[Severity | None, float] = {Severity.CRITICAL: 1.0, Severity.WARNING: 0.5}


def time_lag(samples: Sequence[QueueSample], now_ms: int) -> TimeLag:
    """The time lag at ``now_ms`` of the last answered sample (``samples`` oldest first): how long ago the
    first message not consumed (the one at the consumer offset) was stored."""
    answered = [s for s in samples if s.answered]
    if not answered:
        return TimeLag(None, None)
    last = answered[-1]
    if last.lag == 0:
        return TimeLag(0.0, 0.0)
    upper = (now_ms - last.last_timestamp_ms) / 1000 if last.last_timestamp_ms > 0 else None
    # (write position, a time it had been reached): each sample's broker offset at its time, and each consumer
    # offset at the store time of the message before it (exact, from the broker's last timestamp).
    points = {(s.broker_offset, s.at_ms) for s in answered} | {
        (s.consumer_offset, s.last_timestamp_ms) for s in answered if s.last_timestamp_ms > 0
    }
    stored_ms = _reached(points, last.consumer_offset + 1)
    if stored_ms is None:  # stored before the oldest point: at least that long ago
        return TimeLag(upper, (now_ms - min(t for _, t in points)) / 1000, bounded=True)
    estimate = max(0.0, (now_ms - stored_ms) / 1000)
    return TimeLag(upper, estimate if upper is None else min(estimate, upper))


def _reached(points: set[tuple[int, int]], position: int) -> float | None:
    """When the queue's write position reached ``position``: linear between the points around it, never
    extrapolated (None when every point is past it)."""
    exact = [t for p, t in points if p == position]
    if exact:
        return float(min(exact))
    below = [(p, t) for p, t in points if p < position]
    above = [(p, t) for p, t in points if p > position]
    if not below:
        return None
    low = max(below)  # the highest position below, at the latest time it was still there
    if not above:
        return float(low[1])
    high = min(above)  # the lowest position above, at the earliest time it was reached
    return low[1] + (high[1] - low[1]) * (position - low[0]) / (high[0] - low[0])


def evaluate(
    samples: Sequence[QueueSample],
    now_ms: int,
    settings: ProgressSettings = DEFAULT_SETTINGS,
    model: AllocationMode = AllocationMode.CLIENT,
    generation_changes_ms: Sequence[int] = (),
) -> QueueVerdict:
    """The queue's state from its last ``settings.window`` samples (oldest first) at ``now_ms``."""
    window = list(samples)[-settings.window :]
    answered = [s for s in window if s.answered]
    complete = len(answered) / settings.window
    last = answered[-1] if answered else None
    lag = last.lag if last else None
    lagged = time_lag(window, now_ms)
    holders = last.holder_ids() if last else frozenset()
    expired = last is not None and last.min_offset is not None and last.consumer_offset < last.min_offset

    def verdict(number: str, cause: StuckCause | None = None) -> QueueVerdict:
        state = _STATE_BY_RULE[number]
        if complete < _COMPLETE_NEEDED.get(_SEVERITY[state], 0.0):
            number, state, cause = "8", QueueState.INCOMPLETE, None
        return QueueVerdict(state, _SEVERITY[state], number, lag, complete, lagged, cause, expired, holders)

    unanswered_tail = len(window) >= 2 and not window[-1].answered and not window[-2].answered
    if last is None or unanswered_tail or not window[-1].view_fresh:
        return verdict("0")
    if model is not AllocationMode.CLIENT:
        return verdict("1")
    if last.consumer_offset == 0 and last.last_timestamp_ms == 0 and last.broker_offset > 0:
        return verdict("1b")
    # (the broker offsets first: on a topic with traffic they differ, and the lags need not be read)
    if len({s.broker_offset for s in answered}) == 1 and all(s.lag == 0 for s in answered):
        return verdict("2")
    doubled = answered[-settings.double_owned_samples :]
    if len(doubled) == settings.double_owned_samples and all(len(s.holder_ids()) >= 2 for s in doubled):
        return verdict("5")
    if any(s.lag <= settings.allowed_lag for s in answered):
        return verdict("2b")
    rewound_at = _unrecovered_rewind(answered)
    if rewound_at is not None:
        near = settings.sample_interval_ms
        if any(abs(change - rewound_at) <= near for change in generation_changes_ms):
            return verdict("3b")
        return verdict("3")
    recent = answered[-settings.orphan_samples :]
    if len(recent) == settings.orphan_samples and all(not s.holder_ids() for s in recent):
        if len({s.consumer_offset for s in recent}) == 1:
            return verdict("4")
        return verdict("4b")
    held_by = {s.holder_ids() for s in answered}
    if len(held_by) == 1 and len(next(iter(held_by))) == 1 and len({s.consumer_offset for s in answered}) == 1:
        return verdict("6", stuck_cause(answered, now_ms, settings))
    if _slow(answered, settings):
        return verdict("7")
    return verdict("9")


def _unrecovered_rewind(answered: Sequence[QueueSample]) -> int | None:
    """When the consumer offset last fell below the highest it had reached, if it is still below it."""
    highest, fell_at = answered[0].consumer_offset, None
    for sample in answered[1:]:
        if sample.consumer_offset < highest:
            fell_at = sample.at_ms if fell_at is None else fell_at
        else:
            highest, fell_at = sample.consumer_offset, None
    return fell_at


def stuck_cause(answered: Sequence[QueueSample], now_ms: int, settings: ProgressSettings) -> StuckCause:
    """The cause of rule 6 from the one holder's ``ProcessQueueInfo`` in the latest and first samples."""
    last = answered[-1]
    view = next(h for h in last.holders if not h.dropped)
    first = next(h for h in answered[0].holders if not h.dropped)
    if (
        view.cached_msg_count > settings.pull_threshold_for_queue
        or view.cached_msg_size_mib > settings.pull_threshold_size_mib
        or view.cached_msg_max_offset - view.cached_msg_min_offset > settings.consume_concurrently_max_span
    ):
        return StuckCause.FLOW_CONTROL
    if (
        view.cached_msg_count > 0
        and view.cached_msg_min_offset == last.consumer_offset == first.cached_msg_min_offset
        and now_ms - view.last_consume_ms < 2 * settings.sample_interval_ms
    ):
        return StuckCause.OFFSET_HOLE
    if view.orderly and (not view.locked or now_ms - view.last_lock_ms > settings.lock_max_live_ms):
        return StuckCause.NOT_LOCKED
    if now_ms - view.last_pull_ms > settings.pull_max_idle_ms:
        return StuckCause.PULL_DEAD
    if last.expected_owner is not None and view.client_id != last.expected_owner:
        return StuckCause.WRONG_HOLDER
    return StuckCause.UNEXPLAINED


def _slow(answered: Sequence[QueueSample], settings: ProgressSettings) -> bool:
    """Rule 7: the offset advances, the lag never falls between samples, and at every sample the first unconsumed
    message was older than ``slow_time_lag_s`` (an estimate bounded below counts only when the bound is)."""
    if answered[-1].consumer_offset <= answered[0].consumer_offset:
        return False
    if any(later.lag < earlier.lag for earlier, later in zip(answered, answered[1:], strict=False)):
        return False
    for i in range(len(answered)):
        lag = time_lag(answered[: i + 1], answered[i].at_ms).estimate_s
        if lag is None or lag <= settings.slow_time_lag_s:
            return False
    return True
