"""Two RocketMQ clusters with the same group, broker, topic, client and producer names never share state.

The same names go through ``Shard.apply`` (the consumer engine per cluster) and ``ClusterFaultShards.apply`` (the
fault windows per cluster) with two cluster values: generations, members, expected assignments, episodes and
fault windows stay each cluster's own, and a snapshot of the single-cluster shape before becomes the default
cluster's, generations and open episodes kept.
"""

from __future__ import annotations

import json
from dataclasses import replace

from streaming.domain.consumers.engine_settings import EngineSettings
from streaming.domain.consumers.outcomes import EpisodeTransition, ExpectedAssignment, GenerationSnapshot
from streaming.domain.consumers.shard import SCHEMA_VERSION, Shard
from streaming.domain.consumers.shard_engine import ShardEngine
from streaming.domain.faults.outcomes import FaultWindowChanged, PairStatus
from streaming.domain.faults.settings import FaultSettings
from streaming.domain.faults.shard import ClusterFaultShards, FaultShard, PairSend
from streaming.domain.faults.tolerance import SendOutcome
from streaming.domain.faults.windows import WindowStatus
from streaming.domain.vocabulary import AnomalyKind
from streaming.job.consumer.events import parsed_event
from tests.support.events import BASE, hb, route
from tests.support.state_versions import engine_as_previous, engine_as_v9, v9_as_v8

SETTINGS = EngineSettings()


def _in(cluster: str, event: dict) -> dict:
    return {**event, "schema_version": 2, "cluster": cluster}


def _events(cluster: str, clients: list[tuple[str, str]], queues: int) -> list:
    """A route of ``T`` with ``queues`` queues on broker-a, and each (channel, client id) heartbeating group G."""
    events = [route(0, brokers=(("broker-a", queues),))]
    events += [hb(10 + i, channel, cid) for i, (channel, cid) in enumerate(clients)]
    return [parsed_event(e["type"], _in(cluster, e)) for e in events]


def _interleaved(*streams: list) -> list:
    return sorted((e for s in streams for e in s), key=lambda e: e.event_time_ms)


EAST = _events("east", [("10.0.0.1:1", "c1"), ("10.0.0.2:1", "c2")], 4)
# West: the same group, broker, topic and client id c1, but two channels claiming c1 (a duplicate id) and 2 queues.
WEST = _events("west", [("10.0.0.1:1", "c1"), ("10.0.0.3:1", "c1")], 2)


def _settled(shard: Shard) -> list:
    out = shard.apply(_interleaved(EAST, WEST), BASE)
    return out + shard.apply([], BASE + 60_000)


def _of(outcomes: list, kind: type) -> dict[str, list]:
    found: dict[str, list] = {}
    for cluster, outcome in outcomes:
        if type(outcome) is kind:
            found.setdefault(cluster, []).append(outcome)
    return found


def test_the_same_names_in_two_clusters_keep_their_own_generations_assignments_and_episodes():
    shard = Shard.restore(None, SETTINGS)
    outcomes = _settled(Shard.restore(json.loads(json.dumps(shard.snapshot())), SETTINGS))
    snapshots = _of(outcomes, GenerationSnapshot)
    assert {c: [(s.generation, s.members, s.channels) for s in v] for c, v in snapshots.items()} == {
        "east": [(1, 2, 2)],
        "west": [(1, 1, 2)],
    }
    expected = {
        c: {(a.client_id, tuple((q.broker_name, q.queue_id) for q in a.queues)) for a in v}
        for c, v in _of(outcomes, ExpectedAssignment).items()
    }
    assert expected == {
        "east": {("c1", (("broker-a", 0), ("broker-a", 1))), ("c2", (("broker-a", 2), ("broker-a", 3)))},
        "west": {("c1", (("broker-a", 0),))},  # two ids c1 in cidAll: each channel computes index 0
    }
    opened = {c: {t.transition.episode.anomaly for t in v} for c, v in _of(outcomes, EpisodeTransition).items()}
    assert AnomalyKind.DUPLICATE_CLIENT_ID in opened["west"]
    assert AnomalyKind.DUPLICATE_CLIENT_ID not in opened.get("east", set())


def test_each_cluster_is_its_own_engine_in_the_snapshot_and_a_single_cluster_snapshot_is_the_defaults():
    shard = Shard.restore(None, SETTINGS)
    _settled(shard)
    snapshot = json.loads(json.dumps(shard.snapshot()))
    assert snapshot["schema_version"] == SCHEMA_VERSION == 12 and sorted(snapshot["clusters"]) == ["east", "west"]
    restored = Shard.restore(snapshot, SETTINGS)
    assert {c: e.groups["G"].generation for c, e in restored.engines.items()} == {"east": 1, "west": 1}
    # A version 9 snapshot (one engine, no cluster), or the previous release's version 8: the default cluster's,
    # its generation and episode kept.
    west_only = ShardEngine.restore(snapshot["clusters"]["west"], SETTINGS)
    previous = engine_as_v9(engine_as_previous(json.loads(json.dumps(west_only.snapshot()))))
    assert previous["schema_version"] == 9
    release = v9_as_v8(previous)
    assert release["schema_version"] == 8
    from_release = Shard.restore(release, replace(SETTINGS, default_cluster="home"))
    assert json.loads(json.dumps(from_release.snapshot())) == json.loads(
        json.dumps(Shard.restore(previous, replace(SETTINGS, default_cluster="home")).snapshot())
    )
    migrated = Shard.restore(previous, replace(SETTINGS, default_cluster="home"))
    assert list(migrated.engines) == ["home"]
    state = migrated.engines["home"].groups["G"]
    assert state.generation == 1 and AnomalyKind.DUPLICATE_CLIENT_ID in {e.anomaly for e in state.episodes.values()}
    # The default cluster goes on from there: a new member is generation 2 there and nowhere else.
    joined = migrated.apply([parsed_event("consumer_channel", _in("home", hb(70_000, "10.0.0.9:1", "c9")))], BASE)
    joined += migrated.apply([], BASE + 140_000)
    generations = [(c, o.generation) for c, o in joined if type(o) is GenerationSnapshot]
    assert generations[0] == ("home", 2) and {c for c, _ in generations} == {"home"}


def _send(t: int, latency: int) -> PairSend:
    return PairSend(t, "PG", latency, SendOutcome.OK, "rocketmq-4")


def test_the_same_producer_and_broker_in_two_clusters_have_their_own_fault_windows():
    settings = FaultSettings(state_ttl_ms=600_000)
    shards = ClusterFaultShards.restore(None, settings)
    # East's send is slow (a window opens); west's, same producer and broker names, is fast (none).
    step = shards.apply({("east", "P", "b"): [_send(1_000, 600)], ("west", "P", "b"): [_send(1_000, 5)]}, 0)
    windows = [(o.cluster, o.episode.status) for o in step.outcomes if type(o) is FaultWindowChanged]
    assert windows == [("east", WindowStatus.OPENED)]
    status = {o.cluster: o.unavailable_until_ms for o in step.outcomes if type(o) is PairStatus}
    assert status["east"] == 31_000 and status["west"] != 31_000
    restored = ClusterFaultShards.restore(json.loads(json.dumps(step.shards.snapshot())), settings)
    assert restored.next_wakeup_ms() == step.shards.next_wakeup_ms()
    expired = restored.apply({}, 31_001).outcomes
    assert [(o.cluster, o.episode.status) for o in expired if type(o) is FaultWindowChanged] == [
        ("east", WindowStatus.EXPIRED)
    ]
    # A version 1 document (one cluster's pairs) is the default cluster's: its window is kept.
    single = FaultShard.restore(None, settings).apply({("P", "b"): [_send(1_000, 600)]}, 0).shard
    home = replace(settings, default_cluster="home")
    migrated = ClusterFaultShards.restore(json.loads(json.dumps(single.snapshot())), home)
    assert list(migrated.shards) == ["home"] and migrated.next_wakeup_ms() == 31_000


def test_the_same_group_and_broker_names_in_two_clusters_are_two_metric_series_each():
    """The engines' outcomes of both clusters, through the job's metric mapping: every group and broker series
    is each cluster's own, the label cap counts (cluster, group) pairs, and a group gone from one cluster keeps
    the other's series."""
    from prometheus_client import generate_latest

    from connectors.metrics import Metrics, MetricsState, new_registry
    from streaming.domain.consumers.outcomes import GroupGone, GroupSummary
    from streaming.job.delta.broker_gauges import broker_status, producers_all_down_per_cluster
    from streaming.job.delta.metric_rows import apply_broker_metrics, apply_consumer_metrics

    shard = Shard.restore(None, SETTINGS)
    outcomes = _settled(shard)
    summaries = [(c, o) for c, o in outcomes if type(o) is GroupSummary]
    assert {c for c, _ in summaries} == {"east", "west"}
    metrics = MetricsState()
    apply_consumer_metrics(metrics, summaries)
    assert metrics.gauges[Metrics.GROUP_MEMBERS.name] == {("east", "G"): 2.0, ("west", "G"): 1.0}
    assert metrics.gauges[Metrics.GROUP_DUPLICATE_CLIENT_IDS.name] == {("east", "G"): 0.0, ("west", "G"): 1.0}
    queues = metrics.gauges[Metrics.GROUP_QUEUES.name]
    per_cluster = {c: sum(v for (qc, *_), v in queues.items() if qc == c) for c in ("east", "west")}
    assert per_cluster == {"east": 4, "west": 2}  # each cluster's route of T: 4 queues and 2
    items = [
        {"cluster": c, "producer_id": "P", "broker": "broker-a", "unavailable_until_ms": until}
        for c, until in (("east", BASE + 30_000), ("west", None))
    ]
    apply_broker_metrics(metrics, broker_status(items, BASE), producers_all_down_per_cluster(items, BASE))
    assert metrics.gauges[Metrics.BROKER_ISOLATED.name] == {("east", "broker-a"): 1.0, ("west", "broker-a"): 0.0}
    assert metrics.gauges[Metrics.PRODUCERS_ALL_BROKERS_UNAVAILABLE.name] == {("east",): 1.0, ("west",): 0.0}
    page = generate_latest(new_registry(metrics)).decode()
    assert 'rmqmon_group_members{cluster="east",consumer_group="G"} 2.0' in page
    assert 'rmqmon_group_members{cluster="west",consumer_group="G"} 1.0' in page
    assert 'rmqmon_broker_isolated{broker="broker-a",cluster="west"} 0.0' in page

    # West's group goes: east's series stay. Under a cap of one pair, west's group is refused, not merged.
    apply_consumer_metrics(metrics, [("west", GroupGone("G", BASE + 60_000))])
    assert metrics.gauges[Metrics.GROUP_MEMBERS.name] == {("east", "G"): 2.0}
    assert {k[:2] for k in metrics.gauges[Metrics.GROUP_QUEUES.name]} == {("east", "G")}
    capped = MetricsState(label_value_cap=1)
    apply_consumer_metrics(capped, summaries)
    assert capped.gauges[Metrics.GROUP_MEMBERS.name] == {("east", "G"): 2.0}
    assert capped.dropped[Metrics.GROUP_MEMBERS.name] == 1
