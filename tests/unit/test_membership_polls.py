"""A broker's poll of a group as that broker's view, case by case (numbered tables), and staleness."""

from __future__ import annotations

import json

import pytest

from streaming.domain.allocation.strategies import strategy_from_name
from streaming.domain.consumers.analysis import BROKER_SIDE, CLIENT_SIDE, analyze_group
from streaming.domain.consumers.membership import (
    GroupMembership,
    Subscription,
    apply_event,
    cid_all,
    expire,
    next_expiry_ms,
)
from streaming.domain.consumers.membership_snapshot import restore, snapshot
from streaming.domain.consumers.polled_views import Connection, ConnectionPoll, apply_poll, mark_stale, next_stale_ms
from streaming.domain.queues import MessageQueue
from tests.unit.test_membership import hb

T = (Subscription("T", "*", 1),)
A = Connection("10.0.0.1:5000", "c1")
B = Connection("10.0.0.2:5000", "c2")
STALE_AFTER = 30_000


def poll(t, *connections, broker="b1", subs=T, stale_after=STALE_AFTER, **kw):
    return ConnectionPoll(t, broker, "G", stale_after, subs, tuple(connections), **kw)


def replay(steps):
    """Apply polls, channel events and ("scan", t) / ("stale", t) steps; the changes and statuses, in order."""
    membership, out = GroupMembership("G"), []
    for step in steps:
        if isinstance(step, ConnectionPoll):
            membership, changes, status = apply_poll(membership, step)
            out += [(c.change, c.reason, c.event_time_ms, c.client_id) for c in changes]
            out += [("IGNORED", step.event_time_ms)] if status is None else []
        elif step[0] == "scan":
            membership, changes = expire(membership, step[1])
            out += [(c.change, c.reason, c.event_time_ms, c.client_id) for c in changes]
        elif step[0] == "stale":
            membership, statuses = mark_stale(membership, step[1])
            out += [(s.status, s.broker, s.event_time_ms, s.channels) for s in statuses]
        else:
            membership, changes = apply_event(membership, step)
            out += [(c.change, c.reason, c.event_time_ms, c.client_id) for c in changes]
    return membership, out


POLL_CASES = [
    # 1. a first poll: each listed channel JOINs, the table's topic is added
    ([poll(0, A, B)], [("JOIN", "POLL", 0, "c1"), ("JOIN", "POLL", 0, "c2"), ("SUBSCRIPTION_CHANGED", "POLL", 0, "")]),
    # 2. the same list again: a refresh, nothing changes
    (
        [poll(0, A, B), poll(10_000, A, B)],
        [("JOIN", "POLL", 0, "c1"), ("JOIN", "POLL", 0, "c2"), ("SUBSCRIPTION_CHANGED", "POLL", 0, "")],
    ),
    # 3. a channel missing from the next poll VANISHED at that poll's time
    (
        [poll(0, A, B), poll(10_000, A)],
        [
            ("JOIN", "POLL", 0, "c1"),
            ("JOIN", "POLL", 0, "c2"),
            ("SUBSCRIPTION_CHANGED", "POLL", 0, ""),
            ("VANISHED", "POLL", 10_000, "c2"),
        ],
    ),
    # 4. a new channel in a later poll JOINs then
    (
        [poll(0, A), poll(10_000, A, B)],
        [("JOIN", "POLL", 0, "c1"), ("SUBSCRIPTION_CHANGED", "POLL", 0, ""), ("JOIN", "POLL", 10_000, "c2")],
    ),
    # 5. a poll older than the view's last poll is ignored (it would resurrect c2)
    (
        [poll(0, A, B), poll(10_000, A), poll(5_000, A, B)],
        [
            ("JOIN", "POLL", 0, "c1"),
            ("JOIN", "POLL", 0, "c2"),
            ("SUBSCRIPTION_CHANGED", "POLL", 0, ""),
            ("VANISHED", "POLL", 10_000, "c2"),
            ("IGNORED", 5_000),
        ],
    ),
    # 6. the poll's table replaces the group's: a topic removed and one added are one change
    (
        [poll(0, A), poll(10_000, A, subs=(Subscription("U"),))],
        [
            ("JOIN", "POLL", 0, "c1"),
            ("SUBSCRIPTION_CHANGED", "POLL", 0, ""),
            ("SUBSCRIPTION_CHANGED", "POLL", 10_000, ""),
        ],
    ),
    # 7. an empty poll: every channel VANISHED
    (
        [poll(0, A, B), poll(10_000)],
        [
            ("JOIN", "POLL", 0, "c1"),
            ("JOIN", "POLL", 0, "c2"),
            ("SUBSCRIPTION_CHANGED", "POLL", 0, ""),
            ("VANISHED", "POLL", 10_000, "c1"),
            ("VANISHED", "POLL", 10_000, "c2"),
        ],
    ),
    # 8. a polled view is never expired by the scan, however long it is silent
    ([poll(0, A), ("scan", 10_000_000)], [("JOIN", "POLL", 0, "c1"), ("SUBSCRIPTION_CHANGED", "POLL", 0, "")]),
    # 9. the polls stop: STALE once the watermark passes the last poll + stale_after_ms, channels kept, no removal
    (
        [poll(0, A, B), ("stale", STALE_AFTER), ("stale", STALE_AFTER + 1), ("stale", 500_000)],
        [
            ("JOIN", "POLL", 0, "c1"),
            ("JOIN", "POLL", 0, "c2"),
            ("SUBSCRIPTION_CHANGED", "POLL", 0, ""),
            ("STALE", "b1", STALE_AFTER + 1, 2),
        ],
    ),
    # 10. polls resume after a long silence: the first is diffed against the last seen state
    (
        [poll(0, A, B), ("stale", 500_000), poll(500_000, A, Connection("10.0.0.3:1", "c3"))],
        [
            ("JOIN", "POLL", 0, "c1"),
            ("JOIN", "POLL", 0, "c2"),
            ("SUBSCRIPTION_CHANGED", "POLL", 0, ""),
            ("STALE", "b1", STALE_AFTER + 1, 2),
            ("JOIN", "POLL", 500_000, "c3"),
            ("VANISHED", "POLL", 500_000, "c2"),
        ],
    ),
    # 11. another client id on the same channel is a JOIN (as for a heartbeat)
    (
        [poll(0, A), poll(10_000, Connection(A.channel, "c9"))],
        [("JOIN", "POLL", 0, "c1"), ("SUBSCRIPTION_CHANGED", "POLL", 0, ""), ("JOIN", "POLL", 10_000, "c9")],
    ),
    # 12. a channel vanished and listed again by a later poll JOINs again
    (
        [poll(0, A), poll(10_000), poll(20_000, A)],
        [
            ("JOIN", "POLL", 0, "c1"),
            ("SUBSCRIPTION_CHANGED", "POLL", 0, ""),
            ("VANISHED", "POLL", 10_000, "c1"),
            ("JOIN", "POLL", 20_000, "c1"),
            ("SUBSCRIPTION_CHANGED", "POLL", 20_000, ""),
        ],
    ),
    # 13. a heartbeat-fed view taken over by a poll: the poll is the whole view (c2 vanished)
    (
        [hb(0, channel=A.channel, cid="c1"), hb(0, channel=B.channel, cid="c2"), poll(10_000, A)],
        [
            ("JOIN", "HEARTBEAT", 0, "c1"),
            ("SUBSCRIPTION_CHANGED", "HEARTBEAT", 0, "c1"),
            ("JOIN", "HEARTBEAT", 0, "c2"),
            ("VANISHED", "POLL", 10_000, "c2"),
        ],
    ),
    # 14. a removal observed after the poll was taken is not undone by that poll
    (
        [poll(0, A), hb(1_000, channel=B.channel, cid="c2", broker="b1"), poll(500, A, B)],
        [("JOIN", "POLL", 0, "c1"), ("SUBSCRIPTION_CHANGED", "POLL", 0, ""), ("JOIN", "HEARTBEAT", 1_000, "c2")],
    ),
    # 15. a fresh view does not turn stale while polls keep coming
    (
        [poll(0, A), poll(STALE_AFTER, A), ("stale", STALE_AFTER + 1)],
        [("JOIN", "POLL", 0, "c1"), ("SUBSCRIPTION_CHANGED", "POLL", 0, "")],
    ),
]


@pytest.mark.parametrize(("steps", "expected"), POLL_CASES, ids=[f"case-{i}" for i in range(1, len(POLL_CASES) + 1)])
def test_poll_rules(steps, expected):
    assert replay(steps)[1] == expected


def test_a_stale_view_keeps_its_channels_and_a_resumed_poll_makes_it_fresh():
    membership, _ = replay([poll(0, A, B), ("stale", 1_000_000)])
    view = membership.views["b1"]
    assert view.poll.stale and cid_all(view) == ["c1", "c2"]
    assert next_stale_ms(membership) is None  # already stale: nothing to wait for
    membership, _, status = apply_poll(membership, poll(1_000_000, A, B))
    assert status.status == "FRESH" and not membership.views["b1"].poll.stale
    assert next_stale_ms(membership) == 1_000_000 + STALE_AFTER + 1


def test_polled_views_have_no_expiry_deadline_but_their_tombstones_do():
    membership, _ = replay([poll(0, A, B), poll(10_000, A)])
    assert next_expiry_ms(membership) == 10_000 + 120_000  # c2's tombstone, not a channel's expiry
    assert next_stale_ms(membership) == 10_000 + STALE_AFTER + 1


def test_the_poll_carries_group_level_model_and_type_and_the_clients_own_topics():
    own = Connection("10.0.0.1:5000", "c1", "479", "AVG_BY_CIRCLE", (Subscription("U"),), "JAVA")
    membership, _, _ = apply_poll(
        GroupMembership("G"), poll(0, own, B, message_model="BROADCASTING", consume_type="CONSUME_POP")
    )
    channels = membership.views["b1"].channels
    assert channels[A.channel].topics == (("U", "*"),) and channels[B.channel].topics == (("T", "*"),)
    assert channels[A.channel].client_version == "479" and channels[A.channel].allocate_strategy == "AVG_BY_CIRCLE"
    assert {c.message_model for c in channels.values()} == {"BROADCASTING"}
    assert {c.consume_type for c in channels.values()} == {"CONSUME_POP"}
    # A later poll that does not know c1's own subscriptions (running info throttled) keeps them.
    membership, _, _ = apply_poll(membership, poll(10_000, A, B))
    assert membership.views["b1"].channels[A.channel].topics == (("U", "*"),)


def test_poll_state_survives_the_snapshot():
    membership, _ = replay([poll(0, A, B, collector="collector-1", consume_type="CONSUME_POP"), ("stale", 10**6)])
    restored = restore(json.loads(json.dumps(snapshot(membership))))
    assert restored == membership


def test_a_snapshot_without_poll_fields_restores_as_heartbeat_views():
    membership, _ = replay([hb(0, channel=A.channel, cid="c1")])
    data = snapshot(membership)
    for view in data["views"].values():
        del view["poll"], view["consume_types"]
    assert restore(data) == membership


def test_a_clients_own_consume_type_stands_for_its_channel_and_makes_the_group_broker_side():
    """5.x push consumers without client rebalance are listed by the brokers as CONSUME_PASSIVELY; the collector
    reads from their running info that the broker assigns their queues (CONSUME_POP)."""
    pops = [Connection(f"10.0.0.{i}:5000", f"c{i}", "479", "AVG", T, "JAVA", "CONSUME_POP") for i in (1, 2)]
    membership, _, _ = apply_poll(GroupMembership("G"), poll(0, *pops, consume_type="CONSUME_PASSIVELY"))
    assert {c.consume_type for c in membership.views["b1"].channels.values()} == {"CONSUME_POP"}
    mq_all = {"T": [MessageQueue("T", "b1", q) for q in range(4)]}
    analysis = analyze_group(membership, mq_all, lambda name, version: strategy_from_name(name or "AVG"), 0)
    assert (analysis.allocation, analysis.topics, analysis.findings) == (BROKER_SIDE, {}, ())
    # Without the clients' own consume type the broker's stands, and the clients allocate.
    membership, _, _ = apply_poll(GroupMembership("G"), poll(0, A, B, consume_type="CONSUME_PASSIVELY"))
    analysis = analyze_group(membership, mq_all, lambda name, version: strategy_from_name(name or "AVG"), 0)
    assert analysis.allocation == CLIENT_SIDE and set(analysis.topics) == {"T"}
    parsed = ConnectionPoll.from_json(
        {
            "event_time": 1,
            "broker": "b1",
            "group": "G",
            "stale_after_ms": 1000,
            "connections": [
                {"channel": "x:1", "client_id": "c", "consume_type": "CONSUME_POP"},
                {"channel": "y:1", "client_id": "d"},
            ],
        }
    )
    assert [c.consume_type for c in parsed.connections] == ["CONSUME_POP", None]
