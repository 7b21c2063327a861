"""What the shard engine reports, as typed values of its own vocabulary.

``fleet.ShardEngine`` returns these (and ``membership.MembershipChange`` as it is) in the order it found
them; they say what happened to groups, views, assignments and episodes, not where it is stored. The job
maps each to its tables' rows in one place (``streaming.job.table_rows``), so a field the tables need and
the domain does not give fails a test instead of becoming a NULL. Frozen and slotted: one is built per
fact, on the path every changed group takes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from streaming.domain.consumers.episodes import Episode, Transition
from streaming.domain.consumers.membership import MembershipChange
from streaming.domain.consumers.observed import TopicObservation
from streaming.domain.consumers.polled_views import ViewStatus
from streaming.domain.progress.rebalance_cost import Handoff
from streaming.domain.progress.verdict import QueueSample, QueueState, QueueVerdict
from streaming.domain.queues import MessageQueue
from streaming.domain.vocabulary import AnomalyKind, IgnoredReason, LateReason, Trigger


@dataclass(frozen=True, slots=True)
class BrokerViewState:
    """A polled broker view's status, last poll and channels as of ``view.event_time_ms``."""

    view: ViewStatus


@dataclass(frozen=True, slots=True)
class BrokerViewChanged:
    """A polled view's status changed (its first poll, STALE, FRESH again); its ``BrokerViewState`` follows."""

    view: ViewStatus


@dataclass(frozen=True, slots=True)
class BrokerViewGone:
    """The group is gone from every broker: so is its polled view of ``broker``."""

    group: str
    broker: str
    event_time_ms: int


@dataclass(frozen=True, slots=True)
class GenerationSnapshot:
    """A group's merged membership at a new generation; ``details`` is JSON (views, topics, allocation)."""

    group: str
    generation: int
    event_time_ms: int
    triggers: tuple[Trigger, ...]
    members: int
    channels: int
    brokers: tuple[str, ...]
    cid_all: tuple[str, ...]
    topics: tuple[str, ...]
    strategy: str
    client_line: str
    views_diverge: bool
    anomalies: tuple[AnomalyKind, ...]
    details: str


@dataclass(frozen=True, slots=True)
class ExpectedAssignment:
    """The queues a client computes for a topic at a generation: also the client's current assignment."""

    group: str
    generation: int
    topic: str
    client_id: str
    queues: tuple[MessageQueue, ...]
    strategy: str
    event_time_ms: int


@dataclass(frozen=True, slots=True)
class AssignmentWithdrawn:
    """A client (or its topic) left the group's expected assignment at ``generation``."""

    group: str
    topic: str
    client_id: str
    generation: int
    event_time_ms: int


@dataclass(frozen=True, slots=True)
class EpisodeTransition:
    """An anomaly episode opened, updated or closed at the group's ``generation``."""

    transition: Transition
    generation: int


@dataclass(frozen=True, slots=True)
class CutRetracted:
    """The history rows a group's cut at ``event_time_ms`` wrote in an earlier call are withdrawn: that cut was
    made where a call ended, and later input of its coalescing window amended it (its outcomes follow)."""

    group: str
    event_time_ms: int


@dataclass(frozen=True, slots=True)
class EpisodeRestored:
    """An open episode's current row as it was before an amended cut touched it (``row_ms``, ``generation``:
    its last transition's); the cut that replaces the amended one leaves it unchanged."""

    episode: Episode
    row_ms: int
    generation: int


@dataclass(frozen=True, slots=True)
class EpisodeRetracted:
    """An episode only an amended cut opened: its current row is deleted."""

    group: str
    episode_id: str
    event_time_ms: int


@dataclass(frozen=True, slots=True)
class TopicSummary:
    """One subscribed topic of an analysed group: its queues by owner count, members and churn."""

    assigned: int
    orphaned: int
    double_owned: int
    idle: int
    non_subscribing: int
    skew: int
    moved: int


@dataclass(frozen=True, slots=True)
class GroupSummary:
    """A group's latest analysis in numbers (the per-group metrics and status row)."""

    group: str
    event_time_ms: int
    members: int
    channels: int
    generation: int
    duplicate_client_ids: int
    views_diverge: bool
    last_rebalance_ms: int | None
    open_anomalies: Mapping[AnomalyKind, int]
    topics: Mapping[str, TopicSummary]


@dataclass(frozen=True, slots=True)
class QueueHolders:
    """A topic's queues at an analysis: who should pull each and who the counted reports show holding it
    (``observed.TopicObservation``), as of the group's ``generation``."""

    group: str
    generation: int
    event_time_ms: int
    observation: TopicObservation


@dataclass(frozen=True, slots=True)
class QueueHoldersGone:
    """A queue of the group's topic has no holders row any more (its topic no longer analysed, the group gone)."""

    group: str
    topic: str
    broker: str
    queue_id: int
    event_time_ms: int


@dataclass(frozen=True, slots=True)
class GroupGone:
    """The group's last channel left every broker at ``event_time_ms``."""

    group: str
    event_time_ms: int


@dataclass(frozen=True, slots=True)
class LateEvent:
    """Input that came too late to apply: one event, or ``count`` of one type."""

    reason: LateReason
    event_type: str
    event_time_ms: int | None = None
    count: int = 1
    group: str | None = None
    broker: str | None = None
    topic: str | None = None


@dataclass(frozen=True, slots=True)
class IgnoredEvent:
    """A valid event the engine refused: ``event`` is the typed event it was given, handed back as is (its caller
    keeps where it came from, e.g. its Kafka coordinates, by the event's identity)."""

    event: object
    event_type: str
    reason: IgnoredReason
    detail: str


@dataclass(frozen=True, slots=True)
class QueueProgress:
    """One queue at one progress sample: the sample as joined with ownership, and the window's verdict then.
    ``state_since_ms``: when the queue entered ``verdict.state``; ``changed``: this sample changed it (or is the
    queue's first); ``online``: the group had a member on some broker."""

    group: str
    topic: str
    broker: str
    queue_id: int
    sample: QueueSample
    verdict: QueueVerdict
    state_since_ms: int
    changed: bool
    online: bool
    holders_reported: bool = True  # False: its expected owner reported nothing of the topic and is presumed to hold it


@dataclass(frozen=True, slots=True)
class QueueProgressGone:
    """The monitor stopped tracking the queue's progress at ``event_time_ms`` (no sample for a whole window, or
    its group offline without backlog)."""

    group: str
    topic: str
    broker: str
    queue_id: int
    event_time_ms: int


@dataclass(frozen=True, slots=True)
class TopicProgress:
    """A topic's tracked queues of a group in numbers (the per-(group, topic) progress metrics)."""

    lag: int  # sum over queues whose latest answer is known
    max_time_lag_s: float | None  # the largest time-lag estimate, None when no queue has one
    queues_by_state: Mapping[QueueState, int]


@dataclass(frozen=True, slots=True)
class ProgressSummary:
    """A group's tracked progress after a call that sampled it; no topics: nothing tracked any more."""

    group: str
    event_time_ms: int
    topics: Mapping[str, TopicProgress]
    offline_backlog: bool = False  # its OFFLINE_GROUP_BACKLOG episode is open


@dataclass(frozen=True, slots=True)
class RebalanceCost:
    """A moved queue's final hand-off cost for one generation change (``rebalance_cost.Handoff``); ``reason``:
    why it is final (RECOVERED, SAMPLE_BOUND, MOVED_AGAIN, UNTRACKED); ``event_time_ms``: when it became final."""

    group: str
    topic: str
    broker: str
    queue_id: int
    handoff: Handoff
    reason: str
    event_time_ms: int


Outcome = (
    MembershipChange
    | BrokerViewState
    | BrokerViewChanged
    | BrokerViewGone
    | GenerationSnapshot
    | ExpectedAssignment
    | AssignmentWithdrawn
    | EpisodeTransition
    | CutRetracted
    | EpisodeRestored
    | EpisodeRetracted
    | GroupSummary
    | QueueHolders
    | QueueHoldersGone
    | GroupGone
    | LateEvent
    | IgnoredEvent
    | QueueProgress
    | QueueProgressGone
    | ProgressSummary
    | RebalanceCost
)
