"""The monitor's fixed words: membership changes, view statuses, triggers, anomalies, severities, reasons.

Each vocabulary is a ``StrEnum``: a member *is* its text (equal to it, hashed like it, written as it by
``json``, ``str`` and ``format``), so the Delta tables and metric labels keep exactly the words they had,
while the code names a word once and a misspelling fails at import instead of writing a silent new value.
Membership and analysis speak these words; ``streaming.job`` maps them to table rows unchanged.
"""

from __future__ import annotations

from enum import StrEnum

# The RocketMQ cluster of what names none (the job's ``[ingest] default_cluster`` unless configured otherwise):
# broker, group and topic names are unique within a cluster only (``docs/design/clusters.md``).
DEFAULT_CLUSTER = "DefaultCluster"  # RocketMQ's own default broker cluster name


def in_cluster(cluster: str, name: str) -> str:
    """A group or broker as a person reads it: its name, after its cluster's (``east:broker-a``) unless that
    is the default."""
    return name if cluster == DEFAULT_CLUSTER else f"{cluster}:{name}"


class EventType(StrEnum):
    """The contract's event types (``type``); the contract (``streaming.contract.events``) gives them their
    schemas, topics and keys. Written here, the bottom layer, so the engine names them without the contract."""

    CONSUMER_CHANNEL = "consumer_channel"
    CONSUMER_CONNECTIONS = "consumer_connections"
    REPORTED_ASSIGNMENT = "reported_assignment"
    TOPIC_ROUTE = "topic_route"
    SEND_RESULT = "send_result"
    CONSUME_PROGRESS = "consume_progress"


class ChannelEventKind(StrEnum):
    """What a broker saw of a channel (``consumer_channel.kind``)."""

    HEARTBEAT = "HEARTBEAT"
    UNREGISTER = "UNREGISTER"
    CHANNEL_CLOSE = "CHANNEL_CLOSE"
    CHANNEL_EXCEPTION = "CHANNEL_EXCEPTION"
    CHANNEL_IDLE = "CHANNEL_IDLE"


class ChangeKind(StrEnum):
    """A change of a group's membership as one broker saw it."""

    JOIN = "JOIN"  # a new channel
    LEAVE = "LEAVE"  # a channel removed (UNREGISTER, close, exception, idle)
    EXPIRED = "EXPIRED"  # silent past the channel expiry
    VANISHED = "VANISHED"  # missing from a poll of the broker's connection list
    SUBSCRIPTION_CHANGED = "SUBSCRIPTION_CHANGED"  # a topic added or removed


class ChangeReason(StrEnum):
    """What revealed a membership change: the channel event's kind, an expiry scan or a poll."""

    HEARTBEAT = "HEARTBEAT"
    UNREGISTER = "UNREGISTER"
    CHANNEL_CLOSE = "CHANNEL_CLOSE"
    CHANNEL_EXCEPTION = "CHANNEL_EXCEPTION"
    CHANNEL_IDLE = "CHANNEL_IDLE"
    SCAN = "SCAN"
    POLL = "POLL"


class MemberDirection(StrEnum):
    """How a membership change counts towards a member's flapping."""

    JOIN = "JOIN"
    LEAVE = "LEAVE"


class ViewFreshness(StrEnum):
    """The status of a broker view fed by polls."""

    FRESH = "FRESH"
    STALE = "STALE"


class Trigger(StrEnum):
    """Why a group was re-analysed: a membership change kind, or one of the changes below."""

    JOIN = "JOIN"
    LEAVE = "LEAVE"
    EXPIRED = "EXPIRED"
    VANISHED = "VANISHED"
    SUBSCRIPTION_CHANGED = "SUBSCRIPTION_CHANGED"
    ROUTE_CHANGED = "ROUTE_CHANGED"
    REPORTED_ASSIGNMENT = "REPORTED_ASSIGNMENT"
    STORM_WINDOW = "STORM_WINDOW"
    FLAPPING_WINDOW = "FLAPPING_WINDOW"
    CONVERGENCE_GRACE = "CONVERGENCE_GRACE"
    VIEW_STALE = "VIEW_STALE"
    VIEW_FRESH = "VIEW_FRESH"


class AnomalyKind(StrEnum):
    """What an analysis finds about a group (or one of its topics): what is wrong, and what is only recorded
    (severity info). Each kind's severity, meaning and alert: ``anomaly_catalogue``."""

    ORPHANED_QUEUES = "ORPHANED_QUEUES"
    DOUBLE_OWNED_QUEUES = "DOUBLE_OWNED_QUEUES"
    DUPLICATE_CLIENT_ID = "DUPLICATE_CLIENT_ID"
    INCONSISTENT_SUBSCRIPTION = "INCONSISTENT_SUBSCRIPTION"
    DIVERGING_BROKER_VIEWS = "DIVERGING_BROKER_VIEWS"
    REBALANCE_STORM = "REBALANCE_STORM"
    FLAPPING_MEMBERS = "FLAPPING_MEMBERS"
    ASSIGNMENT_MISMATCH = "ASSIGNMENT_MISMATCH"
    OBSERVED_DOUBLE_HOLDING = "OBSERVED_DOUBLE_HOLDING"  # two clients' counted reports hold one queue
    OBSERVED_UNHELD_QUEUES = "OBSERVED_UNHELD_QUEUES"  # every subscriber's counted report leaves a queue unheld
    UNKNOWN_STRATEGY = "UNKNOWN_STRATEGY"
    OFFLINE_GROUP_BACKLOG = "OFFLINE_GROUP_BACKLOG"  # no member on any broker, messages waiting (consume progress)
    ROLLING_DEPLOY = "ROLLING_DEPLOY"  # members replaced one by one: recorded, never alerted


class ObservedState(StrEnum):
    """A queue as the clients' counted reports show it (``queue_holders_current.state``)."""

    HELD = "HELD"  # one holder, every subscriber reported
    DOUBLE_HELD = "DOUBLE_HELD"  # two or more holders
    UNHELD = "UNHELD"  # no holder, every subscriber reported
    UNKNOWN = "UNKNOWN"  # a subscriber's report is missing, older than the evidence bound, or ambiguous


class Severity(StrEnum):
    INFO = "info"  # recorded, never alerted
    WARNING = "warning"
    CRITICAL = "critical"


class EpisodeStatus(StrEnum):
    """An anomaly episode's transition."""

    OPENED = "OPENED"
    UPDATED = "UPDATED"
    CLOSED = "CLOSED"


class AllocationMode(StrEnum):
    """Who allocates a group's queues."""

    CLIENT = "CLIENT"  # every CLUSTERING client computes its share with the group's strategy
    BROADCAST = "BROADCAST"  # every client consumes every queue (BROADCASTING)
    BROKER = "BROKER"  # the broker hands out queues (CONSUME_POP: POP-mode push and gRPC clients)


class LateReason(StrEnum):
    """Why input came too late to apply."""

    STALE_ROUTE = "stale_route"  # a route older than the topic's applied one
    STALE_POLL = "stale_poll"  # a poll older than its view's last poll
    WATERMARK = "watermark"  # an event at or before the batch's watermark
    STALE_PROGRESS = "stale_progress"  # a progress sample older than its queue's latest


class IgnoredReason(StrEnum):
    """Why the engine refused a valid event."""

    UNKNOWN_GROUP = "UNKNOWN_GROUP"  # a report of a group no broker of the shard knows
    INCONSISTENT_PROGRESS = "INCONSISTENT_PROGRESS"  # a progress event contradicting itself (error with queues, ...)
