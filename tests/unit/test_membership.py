"""The broker's membership rules, case by case (a numbered table: the rules' correctness proof)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streaming.domain.consumers.membership import (
    ChannelEvent,
    GroupMembership,
    Subscription,
    apply_all,
    apply_event,
    cid_all,
    expire,
    next_expiry_ms,
)
from streaming.domain.consumers.membership_snapshot import restore, snapshot

T = (Subscription("T", "*", 1),)


def hb(t, channel="10.0.0.1:5000", cid="10.0.0.1@1#1", broker="b1", subs=T, **kw):
    return ChannelEvent(t, broker, "HEARTBEAT", channel, cid, "G", subscriptions=subs, **kw)


def ev(kind, t, channel="10.0.0.1:5000", cid="10.0.0.1@1#1", broker="b1"):
    return ChannelEvent(t, broker, kind, channel, cid, "G")


def changes_of(events, expiry_ms=120_000):
    _, changes = apply_all(GroupMembership("G"), events, expiry_ms)
    return [(c.change, c.reason, c.event_time_ms, c.notifies_clients) for c in changes]


CASES = [
    # 1. a new channel joins: CHANGE; its first subscription list adds topic T: CHANGE
    ([hb(0)], [("JOIN", "HEARTBEAT", 0, True), ("SUBSCRIPTION_CHANGED", "HEARTBEAT", 0, True)]),
    # 2. the same channel heartbeats again: nothing
    ([hb(0), hb(30_000)], [("JOIN", "HEARTBEAT", 0, True), ("SUBSCRIPTION_CHANGED", "HEARTBEAT", 0, True)]),
    # 3. a higher sub_version of the same topic replaces silently
    (
        [hb(0), hb(30_000, subs=(Subscription("T", "tagA", 2),))],
        [("JOIN", "HEARTBEAT", 0, True), ("SUBSCRIPTION_CHANGED", "HEARTBEAT", 0, True)],
    ),
    # 4. a topic added is a CHANGE
    (
        [hb(0), hb(30_000, subs=(*T, Subscription("U")))],
        [
            ("JOIN", "HEARTBEAT", 0, True),
            ("SUBSCRIPTION_CHANGED", "HEARTBEAT", 0, True),
            ("SUBSCRIPTION_CHANGED", "HEARTBEAT", 30_000, True),
        ],
    ),
    # 5. UNREGISTER removes the channel: CHANGE
    (
        [hb(0), ev("UNREGISTER", 5_000)],
        [
            ("JOIN", "HEARTBEAT", 0, True),
            ("SUBSCRIPTION_CHANGED", "HEARTBEAT", 0, True),
            ("LEAVE", "UNREGISTER", 5_000, True),
        ],
    ),
    # 6-8. close, exception and idle remove the channel: CHANGE
    *[
        (
            [hb(0), ev(kind, 7_000)],
            [
                ("JOIN", "HEARTBEAT", 0, True),
                ("SUBSCRIPTION_CHANGED", "HEARTBEAT", 0, True),
                ("LEAVE", kind, 7_000, True),
            ],
        )
        for kind in ("CHANNEL_CLOSE", "CHANNEL_EXCEPTION", "CHANNEL_IDLE")
    ],
    # 9. silent for exactly 120 s: still there (the scan needs MORE than the expiry)
    (
        [hb(0), hb(120_000, channel="10.0.0.2:1", cid="c2")],
        [
            ("JOIN", "HEARTBEAT", 0, True),
            ("SUBSCRIPTION_CHANGED", "HEARTBEAT", 0, True),
            ("JOIN", "HEARTBEAT", 120_000, True),
        ],
    ),
    # 10. silent for 120 s + 1 ms: EXPIRED, without a CHANGE notification
    (
        [hb(0), hb(120_001, channel="10.0.0.2:1", cid="c2")],
        [
            ("JOIN", "HEARTBEAT", 0, True),
            ("SUBSCRIPTION_CHANGED", "HEARTBEAT", 0, True),
            ("EXPIRED", "SCAN", 120_001, False),
            ("JOIN", "HEARTBEAT", 120_001, True),
            ("SUBSCRIPTION_CHANGED", "HEARTBEAT", 120_001, True),
        ],
    ),
    # 11. UNREGISTER of an id the channel does not carry: ignored
    (
        [hb(0), ev("UNREGISTER", 5_000, cid="someone-else")],
        [("JOIN", "HEARTBEAT", 0, True), ("SUBSCRIPTION_CHANGED", "HEARTBEAT", 0, True)],
    ),
    # 12. a heartbeat older than the channel's removal does not resurrect it
    (
        [hb(0), ev("CHANNEL_CLOSE", 10_000), hb(9_000)],
        [
            ("JOIN", "HEARTBEAT", 0, True),
            ("SUBSCRIPTION_CHANGED", "HEARTBEAT", 0, True),
            ("LEAVE", "CHANNEL_CLOSE", 10_000, True),
        ],
    ),
    # 13. a 5.x broadcasting consumer joins without a CHANGE notification
    ([hb(0, message_model="BROADCASTING", client_version="V5_3_3", subs=())], [("JOIN", "HEARTBEAT", 0, False)]),
]


@pytest.mark.parametrize(("events", "expected"), CASES, ids=[f"case-{i}" for i in range(1, len(CASES) + 1)])
def test_membership_rules(events, expected):
    assert changes_of(events) == expected


def test_duplicate_client_id_on_two_channels_stays_twice_in_cid_all():
    m, _ = apply_all(
        GroupMembership("G"),
        [hb(0, "10.0.0.1:1", "172.17.0.1@1"), hb(1, "10.0.0.2:1", "172.17.0.1@1"), hb(2, "10.0.0.3:1", "10.0.0.3@7")],
    )
    assert sorted(cid_all(m.views["b1"])) == ["10.0.0.3@7", "172.17.0.1@1", "172.17.0.1@1"]


def test_empty_group_is_dropped_and_views_are_per_broker():
    m, _ = apply_all(GroupMembership("G"), [hb(0, broker="b1"), hb(0, broker="b2", channel="10.0.0.1:6000")])
    assert set(m.views) == {"b1", "b2"}
    m, _ = apply_event(m, ev("CHANNEL_CLOSE", 1, broker="b1"))
    assert cid_all(m.views["b1"]) == [] and m.views["b1"].subscriptions == {}  # only a tombstone remains
    m, _ = expire(m, 200_000)
    assert m.is_empty  # no channel anywhere: the group is gone (tombstones alone keep stale input out)
    m, _ = expire(m, 400_000)
    assert m.views == {}


def test_next_expiry_is_the_first_millisecond_past_the_expiry():
    m, _ = apply_all(GroupMembership("G"), [hb(1_000), hb(5_000, channel="x:1", cid="c2")])
    assert next_expiry_ms(m) == 121_001
    assert expire(m, 121_000)[1] == [] and len(expire(m, 121_001)[1]) == 1


events = st.lists(
    st.builds(
        ChannelEvent,
        st.integers(0, 400_000),
        st.sampled_from(["b1", "b2"]),
        st.sampled_from(["HEARTBEAT", "HEARTBEAT", "UNREGISTER", "CHANNEL_CLOSE"]),
        st.sampled_from(["a:1", "a:2", "b:1"]),
        st.sampled_from(["c1", "c2"]),
        st.just("G"),
        subscriptions=st.lists(
            st.builds(Subscription, st.sampled_from(["T", "U"]), st.just("*"), st.integers(0, 3)),
            max_size=2,
            unique_by=lambda s: s.topic,
        ).map(tuple),
    ),
    max_size=25,
)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(events)
def test_snapshot_round_trip(sequence):
    m, _ = apply_all(GroupMembership("G"), sorted(sequence, key=lambda e: e.event_time_ms))
    assert restore(snapshot(m)) == m


def test_a_held_heartbeat_keeps_its_channel_alive_to_the_run_s_end_only_if_it_applied():
    """``held_until_ms``: applied, the channel is last updated at the run's end (no scan inside the run finds it
    silent); ignored as stale input (older than the channel's update or removal), it holds nothing."""
    m, _ = apply_event(GroupMembership("G"), hb(0, held_until_ms=300_000))
    assert m.views["b1"].channels["10.0.0.1:5000"].last_update_ms == 300_000
    assert expire(m, 400_000)[1] == [] and next_expiry_ms(m) == 420_001
    newer, _ = apply_event(GroupMembership("G"), hb(50_000))
    stale, changes = apply_event(newer, hb(10_000, held_until_ms=300_000))
    assert changes == [] and stale.views["b1"].channels["10.0.0.1:5000"].last_update_ms == 50_000
    removed, _ = apply_event(newer, ev("UNREGISTER", 60_000))
    behind, changes = apply_event(removed, hb(55_000, held_until_ms=300_000))
    assert changes == [] and "10.0.0.1:5000" not in behind.views["b1"].channels
