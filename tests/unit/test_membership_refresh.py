"""The steady-heartbeat shortcut (``membership._refresh``) answers exactly what the full rule answers.

Proven against the full path (the shortcut switched off) on random event sequences: heartbeats that repeat
or change the client id, version, strategy, message model, expressions, topics and ``sub_version``,
out-of-order times, removals (tombstones) and expiry scans. After every step both memberships and their
changes must be equal; the sequences are built so that the shortcut is taken often.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from streaming.domain.consumers import membership as ms
from streaming.domain.consumers import membership_snapshot as msnap

EXPIRY_MS = 120_000
TOPIC_SETS = (
    (("T", "*", 1),),
    (("T", "*", 2),),
    (("T", "tag", 1),),
    (("T", "*", 1), ("U", "*", 1)),
    (("U", "*", 1), ("T", "*", 1)),
    (("T", "*", 1), ("T", "*", 3)),
    (),
)

step_strategy = st.tuples(
    st.integers(-5_000, 70_000),  # time step: sometimes backwards, sometimes past the expiry
    st.sampled_from(("HEARTBEAT",) * 6 + ("UNREGISTER", "CHANNEL_CLOSE", "SCAN")),
    st.integers(0, 2),  # channel
    st.sampled_from(("b1", "b2")),
    st.integers(0, 12),  # variant: 0..6 repeat the usual heartbeat, the rest change one field
)


def event_for(time_ms, kind, channel, broker, variant):
    topics, client, version, strategy, model = TOPIC_SETS[0], f"c{channel}", "V5_3_3", None, None
    if variant == 7:
        client = f"other{channel}"
    elif variant == 8:
        version = "V4_9_8"
    elif variant == 9:
        strategy = "AVG_BY_CIRCLE"
    elif variant == 10:
        model = "BROADCASTING"
    elif variant >= 11:
        topics = TOPIC_SETS[1 + (time_ms + channel) % (len(TOPIC_SETS) - 1)]
    subscriptions = tuple(ms.Subscription(t, e, v) for t, e, v in topics)
    return ms.ChannelEvent.from_fields(
        time_ms, broker, kind, f"10.0.0.{channel}:1", client, "G", model, None, version, subscriptions, strategy
    )


def run(steps, shortcut, monkeypatch):
    if not shortcut:
        monkeypatch.setattr(ms, "_refresh", lambda view, event: None)
    try:
        membership, t, trace = ms.GroupMembership("G"), 1_700_000_000_000, []
        for gap, kind, channel, broker, variant in steps:
            t += gap
            if kind == "SCAN":
                membership, changes = ms.expire(membership, t, EXPIRY_MS)
            else:
                membership, changes = ms.apply_event(
                    membership, event_for(t, kind, channel, broker, variant), EXPIRY_MS
                )
            trace.append((msnap.snapshot(membership), changes))
        return trace
    finally:
        monkeypatch.undo()


@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.lists(step_strategy, min_size=1, max_size=50))
def test_shortcut_equals_full_rule(steps):
    import pytest

    with pytest.MonkeyPatch.context() as monkeypatch:
        assert run(steps, True, monkeypatch) == run(steps, False, monkeypatch)


def test_shortcut_is_taken_for_a_repeated_heartbeat_only():
    # The property above holds trivially if the shortcut never applies: pin down that it does, and when not.
    membership, _ = ms.apply_event(ms.GroupMembership("G"), event_for(1_000, "HEARTBEAT", 0, "b1", 0), EXPIRY_MS)
    view = ms._refresh(membership.views["b1"], event_for(31_000, "HEARTBEAT", 0, "b1", 0))
    assert view is not None and view.channels["10.0.0.0:1"].last_update_ms == 31_000
    for variant in (7, 8, 9, 10):  # another client id, version, strategy, message model
        assert ms._refresh(membership.views["b1"], event_for(31_000, "HEARTBEAT", 0, "b1", variant)) is None
    assert ms._refresh(membership.views["b1"], event_for(500, "HEARTBEAT", 0, "b1", 0)) is None  # older
    higher = ms.ChannelEvent.from_fields(
        31_000, "b1", "HEARTBEAT", "10.0.0.0:1", "c0", "G", None, None, "V5_3_3", (ms.Subscription("T", "*", 2),), None
    )
    assert ms._refresh(membership.views["b1"], higher) is None  # a higher sub_version replaces the table entry
