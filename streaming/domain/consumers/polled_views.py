"""Polled views: a broker's view of a group fed by a collector's admin polls instead of channel events.

A poll replaces the view whole (new channels JOIN, missing ones VANISH, the group's table is the poll's);
without a newer poll the view turns STALE, keeping its channels as last seen, and the analysis then reads
it only when no view with channels is fresh. The rules and their reasons: ``docs/design/snapshot-views.md``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, NamedTuple

from streaming.domain.consumers.membership import (
    DEFAULT_EXPIRY_MS,
    BrokerView,
    Channel,
    GroupMembership,
    MembershipChange,
    PollState,
    Subscription,
    is_live,
    notifies_clients,
    subscriptions_from_json,
    views_with_channels,
    with_view,
)
from streaming.domain.vocabulary import DEFAULT_CLUSTER, ChangeKind, ChangeReason, ViewFreshness


class Connection(NamedTuple):
    """One channel of a poll (a ``connections`` item of the ``consumer_connections`` event)."""

    channel: str
    client_id: str
    client_version: str | None = None
    allocate_strategy: str | None = None
    # The client's own subscriptions from its running info; None: unknown (the broker's table stands in).
    subscriptions: tuple[Subscription, ...] | None = None
    language: str | None = None
    # The client's own consume type from its running info (CONSUME_POP: the broker assigns its queues); None: the
    # group's, as the broker reports it, stands in.
    consume_type: str | None = None


class ConnectionPoll(NamedTuple):
    """One broker's whole view of one group at poll time (the ``consumer_connections`` event)."""

    event_time_ms: int
    broker: str
    group: str
    stale_after_ms: int
    subscriptions: tuple[Subscription, ...]
    connections: tuple[Connection, ...]
    message_model: str = "CLUSTERING"
    consume_type: str = "CONSUME_PASSIVELY"
    collector: str | None = None
    cluster: str = DEFAULT_CLUSTER
    # The poll without its time as its source gave it (``text_digest`` of the JSON of its fields), None: not given
    # (``poll_digest`` then digests the poll itself). Equal digests, equal polls but for their time.
    digest: str | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any], digest: str | None = None) -> ConnectionPoll:
        connections = tuple(
            Connection(
                str(c["channel"]),
                str(c["client_id"]),
                c.get("client_version"),
                c.get("allocate_strategy"),
                None if c.get("subscriptions") is None else subscriptions_from_json(c["subscriptions"]),
                c.get("language"),
                c.get("consume_type"),
            )
            for c in data.get("connections") or ()
        )
        return cls(
            int(data["event_time"]),
            str(data["broker"]),
            str(data["group"]),
            int(data["stale_after_ms"]),
            subscriptions_from_json(data.get("subscriptions")),
            connections,
            str(data.get("message_model") or "CLUSTERING"),
            str(data.get("consume_type") or "CONSUME_PASSIVELY"),
            data.get("collector"),
            data.get("cluster") or DEFAULT_CLUSTER,
            digest,
        )


class NotedPoll(NamedTuple):
    """A poll not parsed yet, whose digest (``ConnectionPoll.digest``) is one the shard noted with a view that poll
    settled (``ShardEngine.noted_poll``): equal digests, equal texts, so its group, broker and ``stale_after_ms``
    are that poll's, known without reading it. ``text`` is the JSON of its fields without its time; ``parsed`` is
    the poll the engine applies when it cannot only note it (``ShardEngine._touch``)."""

    event_time_ms: int
    cluster: str
    group: str
    broker: str
    stale_after_ms: int
    digest: str
    text: str

    def parsed(self) -> ConnectionPoll:
        fields = json.loads(self.text)
        fields["event_time"] = self.event_time_ms
        return ConnectionPoll.from_json(fields, self.digest)


# Either form of a poll where a plan only reads its view, times and staleness (``poll_runs``, ``heartbeat_plan``).
POLLS = (ConnectionPoll, NotedPoll)


def lists_connections(poll: ConnectionPoll | NotedPoll) -> bool:
    """The poll lists a connection (a noted one does: only a poll with connections settles a view)."""
    return isinstance(poll, NotedPoll) or bool(poll.connections)


def text_digest(text: str) -> str:
    """The digest of a poll's fields without its time, from their JSON text (``ConnectionPoll.digest``)."""
    return hashlib.blake2b(text.encode(), digest_size=10).hexdigest()


def poll_digest(poll: ConnectionPoll | NotedPoll) -> str:
    """What a poll says but for its time, as a digest: the one its source gave, else one of the poll itself."""
    if poll.digest is not None:
        return poll.digest
    return "p" + text_digest(repr(poll._replace(event_time_ms=0)))


def settled_by(view: BrokerView | None, poll: ConnectionPoll) -> bool:
    """The view, as ``poll`` just left it, is exactly its connections (each listed once, none held out by a removal,
    no other channel kept): the same poll again, later, with nothing else of the view in between, changes only its
    times (the poll's time, each channel's last update), its status row aside (``ShardEngine._touch``)."""
    if view is None or view.poll is None or view.poll.stale or not poll.connections:
        return False
    return len(view.channels) == len(poll.connections) and all(c.channel in view.channels for c in poll.connections)


def polled_at(view: BrokerView, time_ms: int) -> BrokerView:
    """A settled view (``settled_by``) as the same poll again at ``time_ms`` leaves it."""
    assert view.poll is not None
    # each channel with its third field, last_update_ms, moved (positionally: a view is polled at every cycle)
    channels = {name: Channel(ch[0], ch[1], time_ms, *ch[3:]) for name, ch in view.channels.items()}
    return BrokerView(channels, view.subscriptions, view.removed_at_ms, view.poll._replace(polled_at_ms=time_ms))


class ViewStatus(NamedTuple):
    """A polled view's state after a poll (FRESH) or when its polls stopped (STALE), at ``event_time_ms``."""

    event_time_ms: int
    group: str
    broker: str
    status: ViewFreshness
    polled_at_ms: int
    stale_after_ms: int
    channels: int
    collector: str | None


PollOutcome = tuple[GroupMembership, list[MembershipChange], ViewStatus | None]


def view_status(group: str, broker: str, view: BrokerView) -> ViewStatus:
    """A polled view's status as its last poll (FRESH) or its turning stale (STALE) left it."""
    poll = view.poll
    assert poll is not None
    status, at_ms = (ViewFreshness.STALE, poll.stale_at_ms) if poll.stale else (ViewFreshness.FRESH, poll.polled_at_ms)
    return ViewStatus(
        at_ms, group, broker, status, poll.polled_at_ms, poll.stale_after_ms, len(view.channels), poll.collector
    )


def apply_poll(membership: GroupMembership, poll: ConnectionPoll, expiry_ms: int = DEFAULT_EXPIRY_MS) -> PollOutcome:
    """The broker's view of the group replaced by its poll: listed channels are registered (a new one JOINs) or
    refreshed, the view's other channels VANISHED at the poll's time, the group's table is the poll's. A poll
    older than the view's last poll changes nothing (status None): replaying polls in another order gives the
    same view."""
    view = membership.views.get(poll.broker) or BrokerView()
    if view.poll is not None and poll.event_time_ms < view.poll.polled_at_ms:
        return membership, [], None
    now, group = poll.event_time_ms, membership.group
    channels, changes = _polled_channels(view, poll, group)
    removed_at = dict(view.removed_at_ms)
    for name, existing in sorted(view.channels.items()):
        if name in channels:
            continue
        if existing.last_update_ms > now:
            channels[name] = existing  # registered by a heartbeat after the poll was taken
            continue
        removed_at[name] = now
        # How it left (expiry, close, unregister) does not show in a poll: whether clients were told is unknown.
        changes.append(
            MembershipChange(
                now, group, poll.broker, ChangeKind.VANISHED, ChangeReason.POLL, existing.client_id, name, False
            )
        )
    for name in channels:
        removed_at.pop(name, None)
    incoming = {s.topic: s for s in poll.subscriptions}
    changes += _table_change(view, poll, group, incoming)
    state = PollState(now, poll.stale_after_ms, False, poll.collector)
    result = with_view(membership, poll.broker, BrokerView(channels, incoming, removed_at, state), now, expiry_ms)
    status = ViewStatus(
        now, group, poll.broker, ViewFreshness.FRESH, now, poll.stale_after_ms, len(channels), poll.collector
    )
    return result, changes, status


def _polled_channels(
    view: BrokerView, poll: ConnectionPoll, group: str
) -> tuple[dict[str, Channel], list[MembershipChange]]:
    """The poll's connections as channels of the view (one removed after the poll was taken stays out), and a
    JOIN for each channel the view did not have with the same client id."""
    now = poll.event_time_ms
    table_topics = tuple(sorted((s.topic, s.expression) for s in poll.subscriptions))
    previous_table = tuple(sorted((s.topic, s.expression) for s in view.subscriptions.values()))
    channels: dict[str, Channel] = {}
    joins: list[MembershipChange] = []
    for c in poll.connections:
        tombstone = view.removed_at_ms.get(c.channel)
        if tombstone is not None and now < tombstone:
            continue  # removed after this poll was taken: must not come back
        existing = view.channels.get(c.channel)
        same_client = existing is not None and existing.client_id == c.client_id
        if c.subscriptions is not None:
            topics = tuple(sorted((s.topic, s.expression) for s in c.subscriptions))
        elif same_client and existing.topics != previous_table:  # type: ignore[union-attr]
            topics = existing.topics  # type: ignore[union-attr]  # the client's own, from an earlier poll
        else:
            topics = table_topics  # unknown: the broker's table for the group stands in
        channels[c.channel] = Channel(
            c.channel,
            c.client_id,
            now,
            c.client_version,
            c.allocate_strategy,
            poll.message_model,
            topics,
            c.consume_type or poll.consume_type,
        )
        if not same_client:
            joins.append(
                MembershipChange(
                    now,
                    group,
                    poll.broker,
                    ChangeKind.JOIN,
                    ChangeReason.POLL,
                    c.client_id,
                    c.channel,
                    notifies_clients(poll.message_model, c.client_version),
                )
            )
    return channels, joins


def _table_change(
    view: BrokerView, poll: ConnectionPoll, group: str, incoming: Mapping[str, Subscription]
) -> list[MembershipChange]:
    """A SUBSCRIPTION_CHANGED when the topics of the broker's table for the group differ from the view's."""
    added = tuple(sorted(t for t in incoming if t not in view.subscriptions))
    removed = tuple(sorted(t for t in view.subscriptions if t not in incoming))
    if not (added or removed):
        return []
    return [
        MembershipChange(
            poll.event_time_ms,
            group,
            poll.broker,
            ChangeKind.SUBSCRIPTION_CHANGED,
            ChangeReason.POLL,
            "",
            "",
            notifies_clients(poll.message_model, None),
            added,
            removed,
        )
    ]


def mark_stale(membership: GroupMembership, now_ms: int) -> tuple[GroupMembership, list[ViewStatus]]:
    """Polled views without a poll newer than their ``stale_after_ms`` by ``now_ms`` turn STALE: their channels
    stay as last seen (no removal), only the status changes, at the first time it holds."""
    statuses: list[ViewStatus] = []
    views = dict(membership.views)
    for broker, view in sorted(membership.views.items()):
        poll = view.poll
        if poll is None or poll.stale or now_ms < poll.stale_at_ms:
            continue
        views[broker] = BrokerView(view.channels, view.subscriptions, view.removed_at_ms, poll._replace(stale=True))
        statuses.append(
            ViewStatus(
                poll.stale_at_ms,
                membership.group,
                broker,
                ViewFreshness.STALE,
                poll.polled_at_ms,
                poll.stale_after_ms,
                len(view.channels),
                poll.collector,
            )
        )
    if not statuses:
        return membership, []
    return GroupMembership(membership.group, views), statuses


def next_stale_ms(membership: GroupMembership) -> int | None:
    """The earliest event time at which ``mark_stale`` would find a fresh polled view stale."""
    times = [v.poll.stale_at_ms for v in membership.views.values() if v.poll is not None and not v.poll.stale]
    return min(times) if times else None


def is_registered(view: BrokerView, channel: Channel, now_ms: int, expiry_ms: int = DEFAULT_EXPIRY_MS) -> bool:
    """The channel counts as registered at ``now_ms``: always in a polled view (its polls say), else ``is_live``."""
    return view.poll is not None or is_live(channel, now_ms, expiry_ms)


def fresh_views(membership: GroupMembership) -> dict[str, BrokerView]:
    """The views with channels that are not stale; when every view with channels is stale, all of them (the last
    seen state is then the best there is)."""
    views = views_with_channels(membership)
    fresh = {b: v for b, v in views.items() if v.poll is None or not v.poll.stale}
    return fresh or views
