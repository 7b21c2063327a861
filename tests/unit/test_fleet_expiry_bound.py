"""The engine skips the expiry scan before an event when no deadline has come (``expiry_bound_ms``).

Proven against the plain rule: for any sequence of channel events, in any number of batches, the engine's
membership and its membership changes equal those of running ``expire`` then ``apply_event`` before every
event, as the broker does.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from streaming.domain.consumers import membership as ms
from streaming.domain.consumers import membership_snapshot as msnap
from streaming.domain.consumers.engine_settings import EngineSettings
from streaming.domain.consumers.outcomes import GroupGone
from streaming.domain.consumers.shard_engine import ShardEngine
from tests.support.engine import typed

EXPIRY_MS = 120_000
KINDS = ("HEARTBEAT", "HEARTBEAT", "HEARTBEAT", "UNREGISTER", "CHANNEL_CLOSE", "CHANNEL_IDLE")

event_strategy = st.tuples(
    st.integers(0, 40_000),  # gap to the previous event: sometimes past the expiry, sometimes not
    st.sampled_from(KINDS),
    st.integers(0, 3),  # channel
    st.sampled_from(("broker-a", "broker-b")),
    st.sampled_from((("T",), ("T", "U"), ())),
)


def to_events(steps):
    events, t = [], 1_700_000_000_000
    for gap, kind, channel, broker, topics in steps:
        t += gap * 7  # gaps up to 280 s: expiries happen inside and between batches
        event = {
            "type": "consumer_channel",
            "schema_version": 1,
            "event_time": t,
            "broker": broker,
            "kind": kind,
            "channel": f"10.0.0.{channel}:1",
            "client_id": f"c{channel}",
            "group": "G",
        }
        if kind == "HEARTBEAT":
            event["subscriptions"] = [{"topic": x, "expression": "*", "sub_version": 1} for x in topics]
        events.append(event)
    return events


def reference(batches):
    """The broker's rule applied literally: the scan, then the event, for every event; a scan per batch end."""
    membership, changes = ms.GroupMembership("G"), []
    for events, watermark in batches:
        for event in events:
            parsed = ms.ChannelEvent.from_json(event)
            membership, expired = ms.expire(membership, parsed.event_time_ms, EXPIRY_MS)
            membership, applied = ms.apply_event(membership, parsed, EXPIRY_MS)
            changes += expired + applied
        membership, expired = ms.expire(membership, watermark, EXPIRY_MS)
        changes += expired
    return msnap.snapshot(membership), [(c.event_time_ms, c.change, c.broker, c.channel) for c in changes]


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(event_strategy, min_size=1, max_size=40), st.lists(st.integers(1, 39), max_size=3))
def test_skipped_scans_change_nothing(steps, cuts):
    events = to_events(steps)
    bounds = sorted({0, *(c % len(events) for c in cuts), len(events)})
    batches = []
    for start, end in zip(bounds, bounds[1:], strict=False):
        chunk = events[start:end]
        if chunk:
            batches.append((chunk, chunk[-1]["event_time"] - 60_000))  # watermark one minute behind
    engine, snapshot, rows, retired_once = None, None, [], False
    for chunk, watermark in batches:
        engine = ShardEngine.restore(snapshot, EngineSettings(expiry_ms=EXPIRY_MS))
        out = engine.apply(typed(chunk), watermark)
        rows += [c for c in out if type(c) is ms.MembershipChange]
        # retired, or gone and back within the batch (a group empty for longer than the coalescing window is gone)
        retired_once |= "G" in engine.retired or any(type(c) is GroupGone for c in out)
        snapshot = engine.snapshot()
    expected_membership, expected_changes = reference(batches)
    group = engine.groups.get("G")
    got_membership = msnap.snapshot(group.membership) if group else None
    if not retired_once:
        assert got_membership == expected_membership
    else:  # the group emptied on the way and the engine retired it with its tombstones: compare channels

        def channels(snapshot):
            views = msnap.restore(snapshot).views if snapshot else {}
            return {b: dict(v.channels) for b, v in views.items() if v.channels}

        assert channels(got_membership) == channels(expected_membership)
    assert [(c.event_time_ms, c.change, c.broker, c.channel) for c in rows] == expected_changes
