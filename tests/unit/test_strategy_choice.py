"""Reported strategy names completed by the group's rule, through the pure engine as the collector reports them."""

from __future__ import annotations

import json

import pytest

from streaming.domain.allocation.group_rules import GroupRule
from streaming.domain.allocation.strategies import MachineRoomNearby, RegexResolver, strategy_from_name
from streaming.domain.consumers.strategy_choice import StrategyIncomplete, choose_strategy
from streaming.domain.queues import MessageQueue
from streaming.domain.versions import ClientLine
from tests.unit.test_fleet import episodes_of, hb, route, rows, run

# The documented rule (conf/monitor.toml, [[allocation.groups]]) for an AllocateMachineRoomNearby group.
ROOM_REGEX = "^([A-Z0-9]+)-"
NEARBY_RULE = {"group": "G", "strategy": "MACHINE_ROOM_NEARBY-AVG", "machine_room_regex": ROOM_REGEX}
# semantics §2.7's Java-verified example: three rooms of 3 queues each, consumers in two of them.
ROOM_BROKERS = (("IDC1-broker", 3), ("IDC2-broker", 3), ("IDC3-broker", 3))
ROOM_CLIENTS = ("IDC1-c0", "IDC1-c1", "IDC2-c0")


def fleet(strategy, clients=("c1", "c2"), brokers=(("broker-a", 4), ("broker-b", 4)), **extra):
    """A group whose clients report ``strategy`` as the collector does (running info's class, by name)."""
    events = [route(0, brokers=brokers)]
    events += [hb(0, f"10.0.0.{i}:1", cid, allocate_strategy=strategy, **extra) for i, cid in enumerate(clients)]
    return events


def shares_of(out):
    return {
        r["client_id"]: [(q["broker"], q["queue_id"]) for q in r["queues"]] for r in rows(out, "expected_assignments")
    }


def snapshot_of(out):
    (snapshot,) = rows(out, "group_snapshots")
    return snapshot


def test_a_bare_machine_room_nearby_with_the_documented_rule_is_analysed_as_the_java_example():
    out, _ = run([(fleet("MACHINE_ROOM_NEARBY", ROOM_CLIENTS, ROOM_BROKERS), 0)], {"group_rules": [NEARBY_RULE]})
    assert shares_of(out) == {
        "IDC1-c0": [("IDC1-broker", 0), ("IDC1-broker", 1), ("IDC3-broker", 0)],
        "IDC1-c1": [("IDC1-broker", 2), ("IDC3-broker", 1)],
        "IDC2-c0": [("IDC2-broker", 0), ("IDC2-broker", 1), ("IDC2-broker", 2), ("IDC3-broker", 2)],
    }
    assert rows(out, "anomaly_episodes") == []
    snapshot = snapshot_of(out)
    assert snapshot["strategy"] == "MACHINE_ROOM_NEARBY-AVG" and snapshot["topics"] == ["T"]
    assert json.loads(snapshot["details"])["strategy_sources"] == {
        "strategy": "reported",
        "inner": "rule 'G' strategy 'MACHINE_ROOM_NEARBY-AVG'",
        "resolver": f"rule 'G': machine_room_regex {ROOM_REGEX!r}",
    }


def test_the_engine_computes_what_the_strategy_itself_gives_each_client():
    out, _ = run([(fleet("MACHINE_ROOM_NEARBY", ROOM_CLIENTS, ROOM_BROKERS), 0)], {"group_rules": [NEARBY_RULE]})
    strategy = MachineRoomNearby(strategy_from_name("AVG"), RegexResolver(ROOM_REGEX))
    mq_all = [MessageQueue("T", b, q) for b, n in ROOM_BROKERS for q in range(n)]
    expected = {
        cid: [(mq.broker_name, mq.queue_id) for mq in strategy.allocate("G", cid, mq_all, list(ROOM_CLIENTS))]
        for cid in ROOM_CLIENTS
    }
    assert shares_of(out) == {cid: sorted(share) for cid, share in expected.items()}


@pytest.mark.parametrize(
    "rule",
    [
        None,
        {"group": "G", "machine_room_regex": ROOM_REGEX},  # parameters without the inner strategy
        {"group": "G", "strategy": "AVG", "machine_room_regex": ROOM_REGEX},  # a strategy, not a nearby one
    ],
)
def test_a_bare_machine_room_nearby_no_rule_completes_stays_unknown_and_says_which_option(rule):
    settings = {"group_rules": [rule]} if rule else None
    out, _ = run([(fleet("MACHINE_ROOM_NEARBY", ROOM_CLIENTS, ROOM_BROKERS), 0)], settings)
    (episode,) = episodes_of(out, "UNKNOWN_STRATEGY")
    details = json.loads(episode["details"])
    assert details["strategy"] == "MACHINE_ROOM_NEARBY"
    assert 'strategy = "MACHINE_ROOM_NEARBY-<inner>"' in details["error"] and "machine_room_regex" in details["error"]
    assert rows(out, "expected_assignments") == []
    snapshot = snapshot_of(out)  # the minor values: what the clients run and subscribe, not '' and []
    assert (snapshot["strategy"], snapshot["topics"]) == ("MACHINE_ROOM_NEARBY", ["T"])


def test_a_full_nearby_name_takes_only_the_resolver_from_the_rule():
    rule = {"group": "G", "strategy": "MACHINE_ROOM_NEARBY-AVG_BY_CIRCLE", "machine_room_regex": ROOM_REGEX}
    out, _ = run([(fleet("MACHINE_ROOM_NEARBY-AVG", ROOM_CLIENTS, ROOM_BROKERS), 0)], {"group_rules": [rule]})
    snapshot = snapshot_of(out)
    assert snapshot["strategy"] == "MACHINE_ROOM_NEARBY-AVG"  # what the clients report wins over the rule's name
    assert json.loads(snapshot["details"])["strategy_sources"] == {
        "strategy": "reported",
        "resolver": f"rule 'G': machine_room_regex {ROOM_REGEX!r}",
    }
    assert shares_of(out)["IDC1-c0"] == [("IDC1-broker", 0), ("IDC1-broker", 1), ("IDC3-broker", 0)]


def test_config_takes_its_list_from_the_rule_and_without_one_stays_unknown():
    listed = [["T", "broker-b", 1], ["T", "broker-a", 0]]
    out, _ = run([(fleet("CONFIG"), 0)], {"group_rules": [{"group": "G", "config_queues": listed}]})
    # every client takes the configured list, as configured (ByConfig returns it whatever the arguments)
    assert shares_of(out) == {"c1": [("broker-b", 1), ("broker-a", 0)], "c2": [("broker-b", 1), ("broker-a", 0)]}
    assert json.loads(snapshot_of(out)["details"])["strategy_sources"] == {
        "strategy": "reported",
        "config_queues": "rule 'G'",
    }
    out, _ = run([(fleet("CONFIG"), 0)])
    (episode,) = episodes_of(out, "UNKNOWN_STRATEGY")
    error = json.loads(episode["details"])["error"]
    assert "config_queues" in error and "takes no queue" in error
    assert not episodes_of(out, "ORPHANED_QUEUES")  # not every queue reported orphaned on a guess


def test_machine_room_takes_its_rooms_from_the_rule_and_without_them_stays_unknown():
    brokers = (("IDC1@broker-a", 2), ("IDC2@broker-b", 2), ("broker-c", 2))
    rule = {"group": "G", "consumer_idcs": ("IDC1", "IDC2")}
    out, _ = run([(fleet("MACHINE_ROOM", brokers=brokers), 0)], {"group_rules": [rule]})
    assert shares_of(out) == {
        "c1": [("IDC1@broker-a", 0), ("IDC1@broker-a", 1)],
        "c2": [("IDC2@broker-b", 0), ("IDC2@broker-b", 1)],
    }
    assert json.loads(snapshot_of(out)["details"])["strategy_sources"]["consumer_idcs"] == "rule 'G'"
    out, _ = run([(fleet("MACHINE_ROOM", brokers=brokers), 0)], {"group_rules": [{"group": "G"}]})
    (episode,) = episodes_of(out, "UNKNOWN_STRATEGY")
    assert "consumer_idcs" in json.loads(episode["details"])["error"]


def test_a_custom_name_is_computed_as_the_rule_says_and_unknown_without_one():
    out, _ = run([(fleet("RackAwareStrategy"), 0)], {"group_rules": [{"group": "G", "strategy": "AVG_BY_CIRCLE"}]})
    assert shares_of(out) == {
        "c1": [("broker-a", i) for i in (0, 2)] + [("broker-b", i) for i in (0, 2)],
        "c2": [("broker-a", i) for i in (1, 3)] + [("broker-b", i) for i in (1, 3)],
    }
    snapshot = snapshot_of(out)
    assert snapshot["strategy"] == "AVG_BY_CIRCLE"
    assert json.loads(snapshot["details"])["strategy_sources"] == {
        "strategy": "rule 'G' (the clients report 'RackAwareStrategy')"
    }
    out, _ = run([(fleet("RackAwareStrategy"), 0)])
    assert [e["anomaly"] for e in rows(out, "anomaly_episodes")] == ["UNKNOWN_STRATEGY"]
    assert (snapshot_of(out)["strategy"], snapshot_of(out)["topics"]) == ("RackAwareStrategy", ["T"])


def test_client_line_is_the_line_of_the_reported_versions_not_the_codes():
    events = [route(0), hb(0, "a:1", "c1", client_version="409"), hb(0, "b:1", "c2", client_version="479")]
    out, _ = run([(events, 0)])
    snapshot = snapshot_of(out)
    assert snapshot["client_line"] == "4.9,5"
    assert json.loads(snapshot["details"])["client_versions"] == ["409", "479"]
    out, _ = run([([route(0), hb(0, "a:1", "c1", client_version="V4_9_8"), hb(0, "b:1", "c2")], 0)])
    assert snapshot_of(out)["client_line"] == "4.9"  # a client reporting nothing adds no line


def test_the_choice_names_every_part_and_what_was_defaulted():
    chosen = choose_strategy("G", None, None, "CONSISTENT_HASH", ClientLine.V5)
    assert chosen.strategy.name == "CONSISTENT_HASH"
    assert chosen.sources == {"strategy": "default", "virtual_node_count": "default"}
    rule = GroupRule("orders-*", "MACHINE_ROOM_NEARBY-CONFIG", config_queues=(("T", "broker-a", 0),))
    chosen = choose_strategy("orders-1", "MACHINE_ROOM_NEARBY", rule, "AVG", ClientLine.V5)
    assert chosen.strategy.name == "MACHINE_ROOM_NEARBY-CONFIG"
    assert chosen.sources == {
        "strategy": "reported",
        "inner": "rule 'orders-*' strategy 'MACHINE_ROOM_NEARBY-CONFIG'",
        "resolver": "rule 'orders-*': machine_room_separator '-'",
        "config_queues": "rule 'orders-*'",
    }
    with pytest.raises(StrategyIncomplete, match="config_queues"):
        choose_strategy("G", "MACHINE_ROOM_NEARBY-CONFIG", None, "AVG", ClientLine.V5)
