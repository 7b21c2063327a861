"""The broker's consumer-group membership rules, as a pure state machine per group and broker view.

Each broker keeps its own channels and one subscription table per group; heartbeats, unregisters, channel
closes and the expiry scan change them exactly as RocketMQ's ``ConsumerManager`` does, and out-of-order input
never resurrects a channel that left. Views fed by a collector's polls: ``polled_views``; the snapshot form:
``membership_snapshot``. The rules and their reasons: ``docs/design/membership-rules.md``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from streaming.domain.versions import ClientLine
from streaming.domain.vocabulary import DEFAULT_CLUSTER, ChangeKind, ChangeReason, ChannelEventKind

DEFAULT_EXPIRY_MS = 120_000
REMOVAL_KINDS = (
    ChannelEventKind.UNREGISTER,
    ChannelEventKind.CHANNEL_CLOSE,
    ChannelEventKind.CHANNEL_EXCEPTION,
    ChannelEventKind.CHANNEL_IDLE,
)


# Subscription, ChannelEvent, Channel and MembershipChange are NamedTuples rather than frozen dataclasses:
# the Spark job builds one event and one channel per heartbeat, and a NamedTuple is built in a third of the time.


class Subscription(NamedTuple):
    topic: str
    expression: str = "*"
    sub_version: int = 0


class ChannelEvent(NamedTuple):
    """One observation by one broker (the ``consumer_channel`` event of the contract)."""

    event_time_ms: int
    broker: str
    kind: str
    channel: str
    client_id: str
    group: str
    message_model: str = "CLUSTERING"
    consume_type: str = "CONSUME_PASSIVELY"
    client_version: str | None = None
    subscriptions: tuple[Subscription, ...] = ()
    allocate_strategy: str | None = None
    # Set on the first heartbeat of a steady run: the run's last time (see the module docstring).
    held_until_ms: int | None = None
    cluster: str = DEFAULT_CLUSTER  # the RocketMQ cluster of the broker (``shard.Shard`` keeps clusters apart)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ChannelEvent:
        return cls.from_fields(
            data["event_time"],
            data["broker"],
            data["kind"],
            data["channel"],
            data["client_id"],
            data["group"],
            data.get("message_model"),
            data.get("consume_type"),
            data.get("client_version"),
            subscriptions_from_json(data.get("subscriptions")),
            data.get("allocate_strategy"),
            data.get("cluster"),
        )

    @classmethod
    def from_fields(
        cls,
        event_time: Any,
        broker: Any,
        kind: Any,
        channel: Any,
        client_id: Any,
        group: Any,
        message_model: str | None,
        consume_type: str | None,
        client_version: str | None,
        subscriptions: tuple[Subscription, ...],
        allocate_strategy: str | None,
        cluster: str | None = None,
    ) -> ChannelEvent:
        """The event from the contract's fields (absent optional ones as None), with the contract's defaults.

        The Spark job passes typed columns here rather than the JSON, parsing each distinct subscription
        list once (``subscriptions_from_json``); ``from_json`` goes through the same defaults."""
        return cls(
            int(event_time),
            str(broker),
            str(kind),
            str(channel),
            str(client_id),
            str(group),
            str(message_model or "CLUSTERING"),
            str(consume_type or "CONSUME_PASSIVELY"),
            client_version,
            subscriptions,
            allocate_strategy,
            None,
            cluster or DEFAULT_CLUSTER,
        )


def subscriptions_from_json(items: Iterable[Mapping[str, Any]] | None) -> tuple[Subscription, ...]:
    """A heartbeat's ``subscriptions`` (JSON objects) with the contract's defaults."""
    return tuple(
        Subscription(str(s["topic"]), str(s.get("expression") or "*"), int(s.get("sub_version") or 0))
        for s in items or ()
    )


class Channel(NamedTuple):
    channel: str
    client_id: str
    last_update_ms: int
    client_version: str | None = None
    allocate_strategy: str | None = None
    message_model: str = "CLUSTERING"
    topics: tuple[tuple[str, str], ...] = ()  # (topic, expression) as this client reported them
    consume_type: str = "CONSUME_PASSIVELY"


class PollState(NamedTuple):
    """What a view fed by polls knows about them: the last poll's time, when it counts as stale, whether it is."""

    polled_at_ms: int
    stale_after_ms: int
    stale: bool = False
    collector: str | None = None

    @property
    def stale_at_ms(self) -> int:
        """The first event time at which the view is stale without a newer poll."""
        return self.polled_at_ms + self.stale_after_ms + 1


@dataclass(frozen=True)
class BrokerView:
    channels: Mapping[str, Channel] = field(default_factory=dict)
    subscriptions: Mapping[str, Subscription] = field(default_factory=dict)
    removed_at_ms: Mapping[str, int] = field(default_factory=dict)  # channel -> removal time (tombstones)
    poll: PollState | None = None  # None: fed by heartbeats (channel events)


@dataclass(frozen=True)
class GroupMembership:
    group: str
    views: Mapping[str, BrokerView] = field(default_factory=dict)

    @property
    def is_empty(self) -> bool:
        return not any(view.channels for view in self.views.values())


class MembershipChange(NamedTuple):
    event_time_ms: int
    group: str
    broker: str
    change: ChangeKind
    reason: ChangeReason  # the input kind, SCAN for expiry, POLL for a poll
    client_id: str
    channel: str
    notifies_clients: bool
    topics_added: tuple[str, ...] = ()
    topics_removed: tuple[str, ...] = ()


def notifies_clients(message_model: str, client_version: str | None) -> bool:
    """Whether the broker tells the group's clients of a change: 5.x brokers send no CHANGE for broadcasting
    groups; 4.9.x brokers always do."""
    return not (message_model == "BROADCASTING" and ClientLine.parse(client_version) is ClientLine.V5)


def apply_event(
    membership: GroupMembership, event: ChannelEvent, expiry_ms: int = DEFAULT_EXPIRY_MS
) -> tuple[GroupMembership, list[MembershipChange]]:
    """The broker's reaction to one event (rules 1, 2 and 4)."""
    view = membership.views.get(event.broker)
    if view is None:
        view = BrokerView()
    tombstone = view.removed_at_ms.get(event.channel)
    if tombstone is not None and event.event_time_ms < tombstone:
        return membership, []  # older than the channel's removal: must not resurrect it
    if event.kind == ChannelEventKind.HEARTBEAT:
        refreshed = _refresh(view, event)
        if refreshed is not None:
            return GroupMembership(membership.group, {**membership.views, event.broker: _held(refreshed, event)}), []
        view, changes = _heartbeat(membership.group, view, event)
        view = _held(view, event)
    elif event.kind in REMOVAL_KINDS:
        view, changes = _remove(membership.group, view, event)
    else:
        return membership, []
    return with_view(membership, event.broker, view, event.event_time_ms, expiry_ms), changes


def _held(view: BrokerView, event: ChannelEvent) -> BrokerView:
    """The view after a held heartbeat: its channel last updated at the end of the run it stands for."""
    if event.held_until_ms is None:
        return view
    channel = view.channels.get(event.channel)
    if channel is None or channel.last_update_ms != event.event_time_ms:
        return view  # the heartbeat was not applied (stale input): neither is the run
    return _last_updated(view, {event.channel: event.held_until_ms})


def _last_updated(view: BrokerView, last_updates: Mapping[str, int]) -> BrokerView:
    """The view with these (present) channels last updated at the given times, nothing else changed."""
    channels = dict(view.channels)
    for name, last_update_ms in last_updates.items():
        channels[name] = channels[name]._replace(last_update_ms=last_update_ms)
    return BrokerView(channels, view.subscriptions, view.removed_at_ms, view.poll)


def is_live(channel: Channel, now_ms: int, expiry_ms: int = DEFAULT_EXPIRY_MS) -> bool:
    """The channel is still registered at ``now_ms``: the scan (rule 3) would not remove it yet."""
    return now_ms - channel.last_update_ms <= expiry_ms


def repeats(view: BrokerView, existing: Channel, event: ChannelEvent) -> bool:
    """The heartbeat says again what the view holds for its channel (``existing``): it is not older than the
    channel's last update, the client id, version, strategy, message model and reported topics are the ones
    stored, and the view's subscription table would not change (the same topics, no higher ``sub_version``).
    Applied, it would only move the channel's last update."""
    if (
        event.event_time_ms < existing.last_update_ms
        or existing.client_id != event.client_id
        or existing.client_version != event.client_version
        or existing.allocate_strategy != event.allocate_strategy
        or existing.message_model != event.message_model
        or existing.consume_type != event.consume_type
    ):
        return False
    table = view.subscriptions
    incoming = {s.topic: s for s in event.subscriptions}
    if incoming.keys() != table.keys():
        return False
    for topic, subscription in incoming.items():
        if subscription.sub_version > table[topic].sub_version:
            return False
    return tuple(sorted([(s.topic, s.expression) for s in event.subscriptions])) == existing.topics


def refreshed(membership: GroupMembership, broker: str, last_updates: Mapping[str, int]) -> GroupMembership:
    """The membership with these channels of ``broker``'s view last updated at the given times: what steady
    heartbeats (``repeats``) up to then do, applied at once (``shard_engine.ShardEngine.apply_runs``)."""
    views = {**membership.views, broker: _last_updated(membership.views[broker], last_updates)}
    return GroupMembership(membership.group, views)


def _refresh(view: BrokerView, event: ChannelEvent) -> BrokerView | None:
    """The view after a *steady* heartbeat, or None when ``_heartbeat`` must decide.

    Most heartbeats repeat what the channel already said; for them ``_heartbeat`` would only move the
    channel's last update, so this answers the same without building the subscription table anew. Steady
    means: the channel is known and the heartbeat ``repeats`` it. A view with tombstones is left to the full
    path, which prunes them. ``tests/unit/test_membership_refresh.py`` checks both paths agree on random event
    sequences.
    """
    existing = view.channels.get(event.channel)
    if existing is None or view.removed_at_ms or not repeats(view, existing, event):
        return None
    return _last_updated(view, {event.channel: event.event_time_ms})


def _heartbeat(group: str, view: BrokerView, event: ChannelEvent) -> tuple[BrokerView, list[MembershipChange]]:
    changes: list[MembershipChange] = []
    existing = view.channels.get(event.channel)
    notifies = notifies_clients(event.message_model, event.client_version)
    channels = dict(view.channels)
    if existing is not None and event.event_time_ms < existing.last_update_ms:
        return view, []  # out of order: a newer heartbeat of this channel was applied already
    reported = tuple(sorted((s.topic, s.expression) for s in event.subscriptions))
    channels[event.channel] = Channel(
        event.channel,
        event.client_id,
        event.event_time_ms,
        event.client_version,
        event.allocate_strategy,
        event.message_model,
        reported,
        event.consume_type,
    )
    if existing is None or existing.client_id != event.client_id:
        changes.append(
            MembershipChange(
                event.event_time_ms,
                group,
                event.broker,
                ChangeKind.JOIN,
                ChangeReason.HEARTBEAT,
                event.client_id,
                event.channel,
                notifies,
            )
        )
    # The heartbeat's list overwrites the group's table on this broker.
    table = dict(view.subscriptions)
    incoming = {s.topic: s for s in event.subscriptions}
    added = tuple(sorted(t for t in incoming if t not in table))
    removed = tuple(sorted(t for t in table if t not in incoming))
    for topic, subscription in incoming.items():
        old = table.get(topic)
        if old is None or subscription.sub_version > old.sub_version:
            table[topic] = subscription
    for topic in removed:
        del table[topic]
    if added or removed:
        changes.append(
            MembershipChange(
                event.event_time_ms,
                group,
                event.broker,
                ChangeKind.SUBSCRIPTION_CHANGED,
                ChangeReason.HEARTBEAT,
                event.client_id,
                event.channel,
                notifies,
                added,
                removed,
            )
        )
    removed_at = {k: v for k, v in view.removed_at_ms.items() if k != event.channel}
    return BrokerView(channels, table, removed_at, view.poll), changes


def _remove(group: str, view: BrokerView, event: ChannelEvent) -> tuple[BrokerView, list[MembershipChange]]:
    existing = view.channels.get(event.channel)
    if existing is None or (event.kind == ChannelEventKind.UNREGISTER and existing.client_id != event.client_id):
        return view, []
    if event.event_time_ms < existing.last_update_ms:
        return view, []  # the channel heartbeated after this removal was observed: stale input
    channels = {k: v for k, v in view.channels.items() if k != event.channel}
    removed_at = {**view.removed_at_ms, event.channel: event.event_time_ms}
    change = MembershipChange(
        event.event_time_ms,
        group,
        event.broker,
        ChangeKind.LEAVE,
        ChangeReason(event.kind),
        existing.client_id,
        event.channel,
        notifies_clients(existing.message_model, existing.client_version),
    )
    return BrokerView(channels, view.subscriptions, removed_at, view.poll), [change]


def with_view(
    membership: GroupMembership, broker: str, view: BrokerView, now_ms: int, expiry_ms: int
) -> GroupMembership:
    """The membership with ``view`` as ``broker``'s at ``now_ms``: tombstones older than ``expiry_ms`` pruned, a
    view with neither channels, tombstones nor poll state dropped."""
    views = dict(membership.views)
    tombstones = {k: v for k, v in view.removed_at_ms.items() if v > now_ms - expiry_ms}
    if view.channels:
        views[broker] = BrokerView(view.channels, view.subscriptions, tombstones, view.poll)
    elif tombstones or view.poll is not None:
        # Rule 4: no channel left, so the broker forgets the table; only tombstones remain, to reject stale input
        # (and a polled view's poll state, so that it can still turn stale).
        views[broker] = BrokerView({}, {}, tombstones, view.poll)
    else:
        views.pop(broker, None)
    return GroupMembership(membership.group, views)


def expire(
    membership: GroupMembership, now_ms: int, expiry_ms: int = DEFAULT_EXPIRY_MS
) -> tuple[GroupMembership, list[MembershipChange]]:
    """The housekeeping scan at ``now_ms``: channels silent for more than ``expiry_ms`` go (rule 3)."""
    changes: list[MembershipChange] = []
    result = membership
    for broker in sorted(membership.views):
        view = result.views[broker]
        # A polled view is never scanned: the broker's own expiry shows as the channel's absence from a poll.
        stale = (
            []
            if view.poll is not None
            else sorted(c for c, ch in view.channels.items() if not is_live(ch, now_ms, expiry_ms))
        )
        if not stale and not view.removed_at_ms:
            continue
        channels = dict(view.channels)
        removed_at = dict(view.removed_at_ms)
        for channel in stale:
            gone = channels.pop(channel)
            expired_at = gone.last_update_ms + expiry_ms + 1
            removed_at[channel] = expired_at
            changes.append(
                MembershipChange(
                    expired_at,
                    membership.group,
                    broker,
                    ChangeKind.EXPIRED,
                    ChangeReason.SCAN,
                    gone.client_id,
                    channel,
                    False,
                )
            )
        result = with_view(
            result, broker, BrokerView(channels, view.subscriptions, removed_at, view.poll), now_ms, expiry_ms
        )
    # In time order: one scan then reports what several earlier scans would have, in the same order (the
    # flapping detector's coalescing depends on it), so how often the engine scans never shows.
    changes.sort(key=lambda c: (c.event_time_ms, c.broker, c.channel))
    return result, changes


def next_expiry_ms(membership: GroupMembership, expiry_ms: int = DEFAULT_EXPIRY_MS) -> int | None:
    """The earliest event time at which ``expire`` would remove a channel or a tombstone."""
    times = [
        ch.last_update_ms + expiry_ms + 1
        for v in membership.views.values()
        if v.poll is None
        for ch in v.channels.values()
    ]
    times += [t + expiry_ms for v in membership.views.values() for t in v.removed_at_ms.values()]
    return min(times) if times else None


def cid_all(view: BrokerView) -> list[str]:
    """What the broker returns for GET_CONSUMER_LIST_BY_GROUP: one id per channel, duplicates kept."""
    return [channel.client_id for _, channel in sorted(view.channels.items())]


def views_with_channels(membership: GroupMembership) -> dict[str, BrokerView]:
    return {b: v for b, v in sorted(membership.views.items()) if v.channels}


def apply_all(
    membership: GroupMembership, events: Iterable[ChannelEvent], expiry_ms: int = DEFAULT_EXPIRY_MS
) -> tuple[GroupMembership, list[MembershipChange]]:
    """Apply events in the given order, running the expiry scan at each event's time first."""
    changes: list[MembershipChange] = []
    for event in events:
        membership, expired = expire(membership, event.event_time_ms, expiry_ms)
        membership, happened = apply_event(membership, event, expiry_ms)
        changes += expired + happened
    return membership, changes
