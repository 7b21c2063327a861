"""Group analysis: expected shares and the anomalies they reveal, on worked examples."""

from __future__ import annotations

from streaming.domain.allocation.strategies import Averagely, strategy_from_name
from streaming.domain.consumers.analysis import analyze_group, owners_by_topic
from streaming.domain.consumers.membership import ChannelEvent, GroupMembership, Subscription, apply_all
from streaming.domain.queues import MessageQueue

Q8 = [MessageQueue("T", "broker-a", i) for i in range(4)] + [MessageQueue("T", "broker-b", i) for i in range(4)]


def hb(channel, cid, topics=("T",), broker="broker-a", t=0):
    subs = tuple(Subscription(x) for x in topics)
    return ChannelEvent(t, broker, "HEARTBEAT", channel, cid, "G", subscriptions=subs)


def analyse(events, queues=None, previous=None, reported=None):
    membership, _ = apply_all(GroupMembership("G"), events)
    return analyze_group(
        membership,
        {"T": queues or Q8, "U": Q8},
        lambda name, version: strategy_from_name(name or "AVG"),
        1_000,
        previous,
        reported,
    )


def ids(queues):
    return [(q.broker_name[-1], q.queue_id) for q in queues]


def test_two_containers_sharing_a_client_id_with_avg():
    # cidAll sorted: [10.0.0.9@12#3, 172.17.0.1@1, 172.17.0.1@1]; 8 queues, sizes 3/3/2 (mod 2).
    # indexOf gives both duplicates index 1: both pull queues 3..5 (a3, b0, b1); block 2 (b2, b3) has no consumer.
    a = analyse(
        [hb("10.1.0.1:4000", "172.17.0.1@1"), hb("10.1.0.2:4000", "172.17.0.1@1"), hb("10.1.0.3:4000", "10.0.0.9@12#3")]
    )
    topic = a.topics["T"]
    assert ids(topic.orphaned) == [("b", 2), ("b", 3)]
    assert ids(topic.double_owned) == [("a", 3), ("b", 0), ("b", 1)]
    kinds = {f.anomaly: f for f in a.findings}
    assert set(kinds) == {"ORPHANED_QUEUES", "DOUBLE_OWNED_QUEUES", "DUPLICATE_CLIENT_ID"}
    assert kinds["DUPLICATE_CLIENT_ID"].details["client_ids"] == {"172.17.0.1@1": ["10.1.0.1:4000", "10.1.0.2:4000"]}
    assert kinds["ORPHANED_QUEUES"].details["causes"] == ["duplicate client id"]


# Queues nobody pulls because they are the share of a member not subscribing the topic are the inconsistent
# subscription's (its episode names them), never an orphaned queues episode: a subscription rolled out member by
# member makes them for as long as the rollout lasts (docs/design/group-analysis.md).


def test_1_member_that_does_not_subscribe_leaves_its_share_to_the_inconsistent_subscription():
    a = analyse([hb("c1:1", "c1"), hb("c2:1", "c2", topics=("U",))])
    topic = a.topics["T"]
    assert topic.non_subscribers == ("c2",)
    assert ids(topic.unsubscribed) == [("b", 0), ("b", 1), ("b", 2), ("b", 3)]  # c2's half of T
    assert topic.orphaned == []
    findings = {f.anomaly: f for f in a.findings if f.topic == "T"}
    assert set(findings) == {"INCONSISTENT_SUBSCRIPTION"}
    unpulled = findings["INCONSISTENT_SUBSCRIPTION"].details["unpulled_queues"]
    assert [(q["broker"][-1], q["queue_id"]) for q in unpulled] == ids(topic.unsubscribed)


def test_2_a_subscription_midway_through_its_rollout_opens_no_orphaned_queues():
    # c0 and c1 already run the new subscription (T and U), c2 and c3 not yet: their halves of U go to nobody.
    a = analyse([hb(f"c{i}:1", f"c{i}", topics=("T", "U") if i < 2 else ("T",)) for i in range(4)])
    u = a.topics["U"]
    assert u.non_subscribers == ("c2", "c3") and ids(u.unsubscribed) == [("b", 0), ("b", 1), ("b", 2), ("b", 3)]
    assert u.orphaned == [] and a.topics["T"].orphaned == a.topics["T"].unsubscribed == []
    assert {(f.topic, f.anomaly) for f in a.findings} == {("U", "INCONSISTENT_SUBSCRIPTION")}


def test_3_a_duplicate_client_id_beside_a_non_subscriber_still_orphans_its_own_queues():
    # cidAll [10.0.0.9@12#3, 172.17.0.1@1, 172.17.0.1@1, c9]: sizes 2/2/2/2; both duplicates compute block 1
    # (a2, a3), block 2 (b0, b1) is nobody's share: orphaned by the duplicate; c9 does not subscribe T, so its
    # block (b2, b3) is the inconsistent subscription's.
    a = analyse(
        [
            hb("10.1.0.1:4000", "172.17.0.1@1"),
            hb("10.1.0.2:4000", "172.17.0.1@1"),
            hb("10.1.0.3:4000", "10.0.0.9@12#3"),
            hb("10.1.0.4:4000", "c9", topics=("U",)),
        ]
    )
    topic = a.topics["T"]
    assert ids(topic.orphaned) == [("b", 0), ("b", 1)]
    assert ids(topic.unsubscribed) == [("b", 2), ("b", 3)]
    kinds = {f.anomaly: f for f in a.findings if f.topic == "T"}
    assert set(kinds) == {"ORPHANED_QUEUES", "DOUBLE_OWNED_QUEUES", "INCONSISTENT_SUBSCRIPTION"}
    assert kinds["ORPHANED_QUEUES"].details["causes"] == ["duplicate client id"]
    assert [q["queue_id"] for q in kinds["ORPHANED_QUEUES"].details["queues"]] == [0, 1]


def test_4_a_non_subscriber_without_a_share_is_an_inconsistent_subscription_with_no_unconsumed_queue():
    queues = [MessageQueue("T", "broker-a", 0)]  # one queue, two members: c2 (not subscribing T) gets none
    a = analyse([hb("c1:1", "c1"), hb("c2:1", "c2", topics=("U",))], queues)
    topic = a.topics["T"]
    assert topic.unsubscribed == [] and topic.orphaned == []
    assert {f.anomaly for f in a.findings if f.topic == "T"} == {"INCONSISTENT_SUBSCRIPTION"}


def test_healthy_group_has_no_findings_and_even_shares():
    a = analyse([hb(f"c{i}:1", f"c{i}") for i in range(4)])
    assert a.findings == ()
    assert sorted(len(s) for s in a.topics["T"].expected_shares().values()) == [2, 2, 2, 2]
    assert a.topics["T"].skew_queues == 0


def test_skew_with_ten_queues_over_four_members():
    queues = [MessageQueue("T", "broker-a", i) for i in range(10)]
    t = analyse([hb(f"c{i}:1", f"c{i}") for i in range(4)], queues).topics["T"]
    assert t.skew_queues == 1 and t.skew_ratio == 1.2  # 3 queues vs a fair 2.5


def test_churn_counts_queues_whose_owner_changed():
    before = analyse([hb(f"c{i}:1", f"c{i}") for i in range(4)])
    after = analyse([hb(f"c{i}:1", f"c{i}") for i in range(3)], previous=owners_by_topic(before))
    # before: c0 {0,1} c1 {2,3} c2 {4,5} c3 {6,7}; after: c0 {0,1,2} c1 {3,4,5} c2 {6,7}
    # queue 3 stays with c1; 2, 4, 5, 6 and 7 change owner.
    assert [q.queue_id for q in after.topics["T"].moved_queues] == [2, 0, 1, 2, 3]  # a2, b0, b1, b2, b3


def test_diverging_broker_views():
    a = analyse([hb("c1:1", "c1"), hb("c2:1", "c2"), hb("c1:2", "c1", broker="broker-b")])
    finding = next(f for f in a.findings if f.anomaly == "DIVERGING_BROKER_VIEWS")
    assert finding.details["views"] == {"broker-a": ["c1", "c2"], "broker-b": ["c1"]}
    assert a.primary_broker == "broker-a"


def test_reported_assignment_mismatch():
    reported = {("c1", "T"): frozenset(Q8[:4]), ("c2", "T"): frozenset(Q8[3:])}
    a = analyse([hb("c1:1", "c1"), hb("c2:1", "c2")], reported=reported)
    mismatch = next(f for f in a.findings if f.anomaly == "ASSIGNMENT_MISMATCH")
    assert mismatch.details["clients"] == {"c2": {"missing": [], "unexpected": [{"broker": "broker-a", "queue_id": 3}]}}


def test_strategy_reported_by_clients_is_used():
    membership, _ = apply_all(
        GroupMembership("G"),
        [
            ChannelEvent(
                0,
                "b",
                "HEARTBEAT",
                "c1:1",
                "c1",
                "G",
                subscriptions=(Subscription("T"),),
                allocate_strategy="AVG_BY_CIRCLE",
            ),
            ChannelEvent(
                0,
                "b",
                "HEARTBEAT",
                "c2:1",
                "c2",
                "G",
                subscriptions=(Subscription("T"),),
                allocate_strategy="AVG_BY_CIRCLE",
            ),
        ],
    )
    seen = []

    def factory(name, version):
        seen.append(name)
        return strategy_from_name(name) if name else Averagely()

    a = analyze_group(membership, {"T": Q8}, factory, 0)
    assert seen == ["AVG_BY_CIRCLE"] and [q.queue_id for q in a.topics["T"].allocation.shares["c1"]] == [0, 2, 0, 2]


def test_a_strategy_of_the_application_s_own_is_reported_and_nothing_is_expected():
    """A custom strategy's getName() can be anything: the analysis cannot compute it, so it names it and
    expects no queue of anyone (no orphaned queues), instead of failing the group's analysis."""
    membership, _ = apply_all(
        GroupMembership("G"),
        [
            ChannelEvent(
                0,
                "b",
                "HEARTBEAT",
                f"c{i}:1",
                f"c{i}",
                "G",
                subscriptions=(Subscription("T"),),
                allocate_strategy="com.example.RackAwareStrategy",
            )
            for i in range(2)
        ],
    )
    a = analyze_group(membership, {"T": Q8}, lambda name, version: strategy_from_name(name or "AVG"), 0)
    assert [f.anomaly for f in a.findings] == ["UNKNOWN_STRATEGY"]
    assert a.findings[0].details["strategy"] == "com.example.RackAwareStrategy"
    assert a.topics == {}
