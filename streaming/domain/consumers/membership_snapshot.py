"""The snapshot form of a group's membership, kept in the job's state store.

Channels are stored by column and each distinct topic list once per view; ``state_codec`` puts the schema
version in front and checks it on restore.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from streaming.domain.consumers.membership import BrokerView, Channel, GroupMembership, PollState, Subscription
from streaming.domain.state_codec import unwrap_state, wrap_state

SNAPSHOT_KIND = "membership"
SCHEMA_VERSION = 2  # 2: channels by column


def snapshot(membership: GroupMembership) -> dict[str, Any]:
    """JSON-ready state. Channels are stored by column, and each distinct topic list once per view: the
    job restores and stores every channel of its shard in every micro-batch, and this layout makes the
    JSON several times smaller in objects (so faster both ways) than one list per channel."""
    views = {}
    for broker, view in membership.views.items():
        channels = list(view.channels.values())
        topic_lists: dict[tuple[tuple[str, str], ...], int] = {}
        for c in channels:
            topic_lists.setdefault(c.topics, len(topic_lists))
        views[broker] = {
            "channels": [c.channel for c in channels],
            "client_ids": [c.client_id for c in channels],
            "last_update_ms": [c.last_update_ms for c in channels],
            "client_versions": [c.client_version for c in channels],
            "allocate_strategies": [c.allocate_strategy for c in channels],
            "message_models": [c.message_model for c in channels],
            "consume_types": [c.consume_type for c in channels],
            "topics": [topic_lists[c.topics] for c in channels],  # an index into topic_lists
            "topic_lists": [[list(t) for t in topics] for topics in topic_lists],
            "subscriptions": [[s.topic, s.expression, s.sub_version] for s in view.subscriptions.values()],
            "removed_at_ms": dict(view.removed_at_ms),
            "poll": None if view.poll is None else list(view.poll),
        }
    return wrap_state(SNAPSHOT_KIND, SCHEMA_VERSION, {"group": membership.group, "views": views})


def restore(data: Mapping[str, Any]) -> GroupMembership:
    """The membership ``snapshot`` gave; ``StateVersionError`` for a snapshot of another schema version."""
    data = unwrap_state(SNAPSHOT_KIND, SCHEMA_VERSION, data)
    views = {}
    for broker, view in data["views"].items():
        topic_lists = [tuple((t[0], t[1]) for t in topics) for topics in view["topic_lists"]]
        names = view["channels"]
        consume_types = view.get("consume_types") or ["CONSUME_PASSIVELY"] * len(names)
        channels = dict(
            zip(
                names,
                map(
                    Channel,
                    names,
                    view["client_ids"],
                    map(int, view["last_update_ms"]),
                    view["client_versions"],
                    view["allocate_strategies"],
                    view["message_models"],
                    [topic_lists[i] for i in view["topics"]],
                    consume_types,
                ),
                strict=True,
            )
        )
        subscriptions = {s[0]: Subscription(s[0], s[1], int(s[2])) for s in view["subscriptions"]}
        poll = view.get("poll")
        views[broker] = BrokerView(
            channels,
            subscriptions,
            {k: int(v) for k, v in view["removed_at_ms"].items()},
            None if poll is None else PollState(int(poll[0]), int(poll[1]), bool(poll[2]), poll[3]),
        )
    return GroupMembership(data["group"], views)
