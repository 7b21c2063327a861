"""Anomaly episodes open, update and close from successive analyses; storms and flapping by sliding window."""

from __future__ import annotations

from streaming.domain.consumers.episodes import Finding, StormDetector, close_all, episode_id, reconcile


def orphan(queues, topic="T"):
    return Finding("G", topic, "ORPHANED_QUEUES", f"{len(queues)} orphaned", {"queues": queues})


def test_episode_lifecycle_open_update_close():
    # 1. first finding opens an episode at the analysis time
    episodes, transitions = reconcile({}, [orphan([2, 5])], now_ms=1_000)
    assert [(t.status, t.event_time_ms) for t in transitions] == [("OPENED", 1_000)]
    opened = transitions[0].episode
    assert opened.opened_at_ms == 1_000 and opened.episode_id == episode_id("G", "T", "ORPHANED_QUEUES", 1_000)
    # 2. same finding again: nothing happens
    same, transitions = reconcile(episodes, [orphan([2, 5])], now_ms=2_000)
    assert transitions == [] and same == episodes
    # 3. details change: UPDATED, same id, still opened at 1000
    updated, transitions = reconcile(same, [orphan([2])], now_ms=3_000)
    assert [t.status for t in transitions] == ["UPDATED"]
    assert transitions[0].episode.episode_id == opened.episode_id
    assert transitions[0].episode.opened_at_ms == 1_000
    # 4. finding gone: CLOSED at the analysis time
    closed, transitions = reconcile(updated, [], now_ms=4_000)
    assert closed == {}
    assert [(t.status, t.closed_at_ms) for t in transitions] == [("CLOSED", 4_000)]


def test_analysis_of_one_topic_leaves_other_topics_episodes_alone():
    episodes, _ = reconcile({}, [orphan([1], topic="A"), orphan([1], topic="B")], now_ms=10)
    remaining, transitions = reconcile(episodes, [], now_ms=20, topics_in_scope=["A"])
    assert [(t.status, t.episode.topic) for t in transitions] == [("CLOSED", "A")]
    assert [key[1] for key in remaining] == ["B"]


def test_replay_gives_identical_ids_and_transitions():
    first = reconcile({}, [orphan([3]), orphan([4], topic="U")], now_ms=77)
    second = reconcile({}, [orphan([4], topic="U"), orphan([3])], now_ms=77)
    assert first == second


def test_close_all_closes_every_open_episode():
    episodes, _ = reconcile({}, [orphan([1], topic="A"), orphan([1], topic="B")], now_ms=10)
    assert [(t.status, t.closed_at_ms) for t in close_all(episodes, 99)] == [("CLOSED", 99), ("CLOSED", 99)]


def test_storm_needs_more_than_threshold_unconverged_changes_inside_the_window():
    """A short-lived member (joins, then leaves again) wastes both its changes; more than the threshold of them
    within the window is a storm. A change strictly older than now - window has left the window."""
    detector = StormDetector(window_ms=60_000, threshold=3)
    changes: list = []
    changes = detector.record_change(changes, "c0", "JOIN", 0)
    changes = detector.record_change(changes, "c0", "LEAVE", 10_000)
    changes = detector.record_change(changes, "c1", "JOIN", 20_000)
    assert detector.findings("G", changes, 20_000) == []  # 2 unconverged (c1 may stay): not above 3
    changes = detector.record_change(changes, "c1", "LEAVE", 30_000)
    (storm,) = detector.findings("G", changes, 30_000)
    assert storm.anomaly == "REBALANCE_STORM" and storm.severity == "warning"
    assert storm.details["unconverged_in_window"] == 4 and storm.details["rebalances_in_window"] == 4
    assert storm.details["unconverged_by_subject"] == {"c0": 2, "c1": 2}
    assert detector.prune_changes(changes, 60_000) == [
        [10_000, "c0", "LEAVE"],
        [20_000, "c1", "JOIN"],
        [30_000, "c1", "LEAVE"],
    ]
    assert detector.findings("G", changes, 60_000) == []  # c0's join left: its leave alone converged
    assert detector.next_expiry_ms(changes) == 60_001


def test_changes_of_one_burst_are_one_rebalance():
    detector = StormDetector(window_ms=60_000, threshold=3, coalesce_ms=1_000)
    times: tuple[int, ...] = ()
    # A client joins through two brokers 3 ms apart, a second one 999 ms after the first change: one rebalance.
    for t in (0, 3, 999):
        times = detector.record(times, t)
    assert times == (0,)
    # 1 s after the counted one is a new rebalance, and the burst is measured from it, not from each change.
    for t in (1_000, 1_500, 2_000, 2_999):
        times = detector.record(times, t)
    assert times == (0, 1_000, 2_000)


def test_flapping_detector_coalesces_across_brokers_counts_in_any_order_and_prunes():
    from streaming.domain.consumers.episodes import FlappingDetector

    detector = FlappingDetector(window_ms=60_000, threshold=3, coalesce_ms=1_000)
    changes: dict = {}
    # a join through broker-a and broker-b 300 ms apart is one join; a leave right after it is not coalesced
    for t, direction in ((0, "JOIN"), (300, "JOIN"), (500, "LEAVE"), (20_000, "JOIN"), (10_000, "LEAVE")):
        changes = detector.record(changes, "c1", direction, t)
    assert changes["c1"] == [[0, "JOIN"], [500, "LEAVE"], [10_000, "LEAVE"], [20_000, "JOIN"]]  # time order
    finding = detector.finding("G", changes, 20_000)
    assert finding is not None and finding.key == ("G", "", "FLAPPING_MEMBERS")
    assert finding.details["members"] == {"c1": {"joins": 2, "leaves": 2, "first_ms": 0, "last_ms": 20_000}}
    assert detector.finding("G", changes, 60_000) is None  # the join at 0 left the window: 3 changes
    assert detector.next_expiry_ms(changes) == 60_000
    assert detector.prune(changes, 60_000) == {"c1": [[500, "LEAVE"], [10_000, "LEAVE"], [20_000, "JOIN"]]}
    assert detector.prune(changes, 80_000) == {}


def test_hold_in_grace_keeps_new_mismatches_closed_until_the_clients_could_have_converged():
    from streaming.domain.consumers.episodes import hold_in_grace

    mismatch = Finding("G", "T", "ASSIGNMENT_MISMATCH", "differs", {"clients": {}})
    others = [orphan([1]), mismatch]
    assert hold_in_grace(others, {}, 10_000, 20_000, ["ASSIGNMENT_MISMATCH"]) == [orphan([1])]
    assert hold_in_grace(others, {}, 20_000, 20_000, ["ASSIGNMENT_MISMATCH"]) == others
    assert hold_in_grace(others, {}, 10_000, None, ["ASSIGNMENT_MISMATCH"]) == others
    opened, _ = reconcile({}, [mismatch], 0)
    assert hold_in_grace(others, opened, 10_000, 20_000, ["ASSIGNMENT_MISMATCH"]) == others  # stays judged
