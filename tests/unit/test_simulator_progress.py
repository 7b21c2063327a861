"""The simulated fleet's offsets: consume_progress and reported ProcessQueueInfo consistent with its ground truth.

Each scenario's incident must leave the backlog it implies (an orphan's committed offset flat while its broker
offset grows, a crashed member's queues waiting until reassigned, a stuck holder pinned on one message, a dead
group's backlog growing, an idle group at lag 0); ``ProgressModel.facts()`` must say so; and the rule table of
``streaming.domain.progress.verdict``, fed the emitted events alone, must reach the same verdicts.
"""

from __future__ import annotations

import json
from collections import defaultdict
from functools import cache
from typing import Any

import pytest

from streaming.app.simulation.fleet import Simulation, build_scenario
from streaming.app.simulation.progress import QUEUES_PER_EVENT, ProgressModel
from streaming.contract.validator import Rejection, validate_event
from streaming.domain.progress.verdict import HolderView, QueueSample, QueueState, StuckCause, evaluate

START = 1_700_000_000_000
RUN_MS = 600_000
Key = tuple[str, str, str, int]  # (group, topic, broker, queue id)


@cache
def run(name: str, seed: int = 1, reports: bool = True, queues: int = 4) -> tuple[Simulation, tuple[dict, ...]]:
    simulation = Simulation(
        build_scenario(name, seed), START, seed, queues_per_broker=queues, assignment_reports=reports
    )
    return simulation, tuple(simulation.events_until(START + RUN_MS))


def progress_rows(events) -> dict[Key, list[tuple[int, dict[str, Any]]]]:
    """Each (group, queue)'s consume_progress rows, oldest first, with their sample time."""
    rows: dict[Key, list[tuple[int, dict[str, Any]]]] = defaultdict(list)
    for e in events:
        if e["type"] == "consume_progress":
            for q in e["queues"]:
                rows[(e["group"], q["topic"], e["broker"], q["queue_id"])].append((e["event_time"], q))
    return rows


def reported(events) -> dict[tuple[int, Key], list[tuple[str, dict[str, Any], bool]]]:
    """(sample time, queue) -> every (client, ProcessQueueInfo, orderly) reporting it then."""
    held: dict[tuple[int, Key], list[tuple[str, dict[str, Any], bool]]] = defaultdict(list)
    for e in events:
        if e["type"] == "reported_assignment":
            for q in e["queues"]:
                key = (e["group"], e["topic"], q["broker"], q["queue_id"])
                held[(e["event_time"], key)].append((e["client_id"], q, e["consume_orderly"]))
    return held


def ref(key: Key) -> tuple[str, tuple[str, str, int]]:
    return key[0], key[1:]


def test_offsets_never_go_back_and_the_committed_offset_never_passes_the_broker_s():
    _, events = run("mixed")
    rows = progress_rows(events)
    assert rows
    for key, samples in rows.items():
        brokers = [q["broker_offset"] for _, q in samples]
        consumers = [q["consumer_offset"] for _, q in samples]
        assert brokers == sorted(brokers) and consumers == sorted(consumers), key
        assert all(c <= b for c, b in zip(consumers, brokers, strict=True)), key
        assert [t for t, _ in samples] == list(range(START + 30_000, START + RUN_MS, 30_000))


def test_the_facts_lag_is_the_last_sample_s_broker_minus_committed_offset():
    simulation, events = run("mixed")
    facts = simulation.progress.facts()
    rows = progress_rows(events)
    assert facts.at_ms == START + RUN_MS - 30_000
    assert facts.lag == {ref(k): s[-1][1]["broker_offset"] - s[-1][1]["consumer_offset"] for k, s in rows.items()}
    # and the model's own state when the run ends on a sample
    ended = Simulation(build_scenario("mixed"), START)
    ended.events_until(START + 300_001)
    model, at_end = ended.progress, ended.progress.facts()
    assert at_end.at_ms == START + 300_000
    assert at_end.lag == {(g, q): model.broker_offsets[q] - model.committed[g][q].offset for g, q in at_end.lag}


def test_an_orphaned_queue_stands_still_while_its_broker_offset_grows():
    simulation, events = run("duplicate-ids")
    (group,) = simulation.scenario.groups
    rows, held = progress_rows(events), reported(events)
    orphans = {k for k, samples in rows.items() if all((t, k) not in held for t, _ in samples)}
    assert orphans  # the duplicated id's missing share: nobody's report ever lists these queues
    for key in orphans:
        samples = [q for _, q in rows[key]]
        assert len({q["consumer_offset"] for q in samples}) == 1
        assert samples[-1]["broker_offset"] > samples[0]["broker_offset"]
    assert simulation.progress.facts().orphans == {ref(k) for k in orphans}
    # and the queues someone holds are consumed to the end
    assert all(simulation.progress.facts().lag[ref(k)] == 0 for k in rows if k not in orphans and k[0] == group.name)


def test_a_crashed_member_s_queues_wait_until_its_channel_expires_then_catch_up():
    simulation, events = run("crash")
    (group,) = simulation.scenario.groups
    crashed = group.members[2]
    rows, held = progress_rows(events), reported(events)
    first = START + 30_000
    its = {k for (t, k), clients in held.items() if t == first and crashed.client_id in {c for c, _, _ in clients}}
    assert its
    for key in its:
        by_time = dict(rows[key])
        # last heartbeat at 30 s, crash at 60 s, expired at 150 s: flat from the crash until the expiry
        waiting = [by_time[START + s * 1000]["consumer_offset"] for s in (60, 90, 120, 150)]
        assert len(set(waiting)) == 1 and by_time[START + 150_000]["broker_offset"] > waiting[0]
        assert all((START + s * 1000, key) not in held for s in (90, 120, 150))  # nobody holds it meanwhile
        assert held[(START + 180_000, key)]  # a survivor holds it after the expiry ...
        assert by_time[START + 180_000]["consumer_offset"] > waiting[0]
        assert simulation.progress.facts().lag[ref(key)] == 0  # ... and catches up
    assert not simulation.progress.facts().orphans  # the gap is over long before the end


def test_a_stuck_holder_pins_its_queues_and_its_process_queue_info_says_so():
    simulation, events = run("consume-progress")
    group = next(g for g in simulation.scenario.groups if g.name == "fulfil-stuck")
    stuck, healthy = group.members
    rows, held = progress_rows(events), reported(events)
    last = START + RUN_MS - 30_000
    mine = {k for (t, k), clients in held.items() if t == last and stuck.client_id in {c for c, _, _ in clients}}
    assert mine and all(k[0] == group.name for k in mine)
    for key in mine:
        after = [q for t, q in rows[key] if t >= START + 90_000]
        assert len({q["consumer_offset"] for q in after}) == 1  # nothing committed since the listener blocked
        assert after[-1]["broker_offset"] - after[0]["broker_offset"] > 0
        ((client, info, orderly),) = held[(last, key)]
        progress = after[-1]
        assert client == stuck.client_id and not orderly and info["dropped"] is False
        assert info["commit_offset"] == info["cached_msg_min_offset"] == progress["consumer_offset"]
        assert info["cached_msg_count"] >= 1 and info["cached_msg_max_offset"] < progress["broker_offset"]
        assert progress["pull_offset"] == info["cached_msg_max_offset"] + 1
        assert last - info["last_consume_timestamp"] < 30_000 and last - info["last_pull_timestamp"] < 30_000
    facts = simulation.progress.facts()
    assert facts.stuck == {ref(k): stuck.client_id for k in mine}
    others = [k for k in rows if k[0] == group.name and k not in mine]
    assert others and all(facts.lag[ref(k)] == 0 for k in others)  # the healthy member keeps up
    assert all(
        info["cached_msg_count"] == 0 for (t, k), c in held.items() if t == last for _, info, _ in c if k in others
    )
    assert healthy.stuck_from_ms is None


def test_a_group_whose_members_all_died_has_a_growing_backlog_and_no_holder():
    simulation, events = run("consume-progress")
    group = next(g for g in simulation.scenario.groups if g.name == "archive-offline")
    rows = {k: v for k, v in progress_rows(events).items() if k[0] == group.name}
    times = sorted({t for samples in rows.values() for t, _ in samples if t >= START + 120_000})
    totals = [
        sum(q["broker_offset"] - q["consumer_offset"] for s in rows.values() for t, q in s if t == at) for at in times
    ]
    assert all(later > earlier for earlier, later in zip(totals, totals[1:], strict=False))
    assert all(len({q["consumer_offset"] for t, q in s if t >= START + 120_000}) == 1 for s in rows.values())
    assert not any(
        e["type"] == "reported_assignment" and e["group"] == group.name and e["event_time"] >= START + 120_000
        for e in events
    )
    facts = simulation.progress.facts()
    assert facts.offline == {group.name: totals[-1]}
    assert not {g for g, _ in facts.orphans} & {group.name}  # offline, not orphans of a live group


def test_an_idle_group_has_lag_0_and_nothing_to_report():
    simulation, events = run("consume-progress")
    rows = {k: v for k, v in progress_rows(events).items() if k[0] == "audit-idle"}
    assert rows
    for samples in rows.values():
        assert len({(q["broker_offset"], q["consumer_offset"]) for _, q in samples}) == 1
        assert samples[0][1]["broker_offset"] == samples[0][1]["consumer_offset"]
    facts = simulation.progress.facts()
    assert all(facts.lag[ref(k)] == 0 for k in rows)
    named = {g for g, _ in facts.orphans} | {g for g, _ in facts.stuck} | set(facts.offline)
    assert "audit-idle" not in named
    reports = [e for e in events if e["type"] == "reported_assignment" and e["group"] == "audit-idle"]
    assert reports and all(e["consume_orderly"] for e in reports)
    assert all(
        q["locked"] and e["event_time"] - q["last_lock_timestamp"] < 30_000 for e in reports for q in e["queues"]
    )


def test_nothing_is_stored_on_a_broker_whose_sends_fail():
    _, events = run("broker-outage", reports=False)
    for key, samples in progress_rows(events).items():
        down = [q["broker_offset"] for t, q in samples if t >= START + 60_000]
        assert (len(set(down)) == 1) == (key[2] == "broker-b"), key


def verdicts(events) -> dict[Key, Any]:
    """The domain's rule table over the emitted events alone, at the last sample."""
    rows, held = progress_rows(events), reported(events)
    out = {}
    for key, samples in rows.items():
        window = []
        for t, q in samples:
            holders = tuple(
                HolderView(
                    client,
                    info["commit_offset"],
                    info["cached_msg_count"],
                    info["cached_msg_size_mib"],
                    info["cached_msg_min_offset"],
                    info["cached_msg_max_offset"],
                    info["last_pull_timestamp"],
                    info["last_consume_timestamp"],
                    orderly=orderly,
                    locked=info["locked"],
                    last_lock_ms=info["last_lock_timestamp"],
                )
                for client, info, orderly in held.get((t, key), ())
            )
            window.append(
                QueueSample(
                    t,
                    True,
                    q["broker_offset"],
                    q["consumer_offset"],
                    q["last_timestamp"],
                    q["pull_offset"],
                    holders=holders,
                )
            )
        out[key] = evaluate(window, samples[-1][0])
    return out


def test_the_domain_s_rule_table_reads_the_events_as_the_facts_say():
    simulation, events = run("mixed")
    facts = simulation.progress.facts()
    found = verdicts(events)
    offline = {k for k in found if k[0] in facts.offline and facts.lag[ref(k)] > 0}
    expected = {
        k: QueueState.ORPHAN_CONFIRMED
        if ref(k) in facts.orphans or k in offline
        else QueueState.STUCK_HOLDER
        if ref(k) in facts.stuck
        else QueueState.IDLE
        if k[1] == "audit"
        else QueueState.OK
        for k in found
    }
    assert {k: v.state for k, v in found.items()} == expected
    assert facts.orphans and facts.stuck and offline  # each kind is there to be read
    assert {v.cause for v in found.values() if v.state is QueueState.STUCK_HOLDER} == {StuckCause.OFFSET_HOLE}


@pytest.mark.parametrize("name, queues", [("mixed", 4), ("consume-progress", 120)])
def test_every_event_is_valid_and_a_large_sample_is_split(name, queues):
    # 120 queues a broker: archive-offline's two topics are 240 rows a broker, more than one event's worth
    _, events = run(name, queues=queues)
    assert {"consume_progress", "reported_assignment"} <= {e["type"] for e in events}
    for event in events:
        assert not isinstance(validate_event(json.dumps(event).encode(), event["event_time"] + 1), Rejection), event
    parts: dict[tuple[int, str, str], list[dict]] = defaultdict(list)
    for e in events:
        if e["type"] == "consume_progress":
            parts[(e["event_time"], e["group"], e["broker"])].append(e)
    split = [p for p in parts.values() if len(p) > 1]
    assert bool(split) == (queues * 2 > QUEUES_PER_EVENT) and all(
        len(e["queues"]) <= QUEUES_PER_EVENT for p in split for e in p
    )
    for p in parts.values():  # together one row per queue of the group on the broker
        queues = [(q["topic"], q["queue_id"]) for e in p for q in e["queues"]]
        assert len(queues) == len(set(queues))


def test_same_seed_same_offsets_another_seed_other_ones_and_the_other_events_do_not_move():
    assert list(run("mixed", 3)[1]) == Simulation(
        build_scenario("mixed", 3), START, 3, assignment_reports=True
    ).events_until(START + RUN_MS)
    offsets = {
        seed: [
            (e["group"], q["broker_offset"])
            for e in run("mixed", seed)[1]
            if e["type"] == "consume_progress"
            for q in e["queues"]
        ]
        for seed in (3, 4)
    }
    assert offsets[3] != offsets[4]
    without = Simulation(build_scenario("mixed", 3), START, 3, progress_interval_ms=0).events_until(START + RUN_MS)
    assert without == [e for e in run("mixed", 3)[1] if e["type"] not in ("consume_progress", "reported_assignment")]


def test_the_progress_interval_is_a_multiple_of_the_tick():
    with pytest.raises(ValueError, match="multiple"):
        ProgressModel(build_scenario("steady"), START, 1, 4, 5_000, 7_000)
    events = Simulation(build_scenario("steady"), START, progress_interval_ms=60_000).events_until(START + 300_000)
    times = sorted({e["event_time"] - START for e in events if e["type"] == "consume_progress"})
    assert times == [60_000, 120_000, 180_000, 240_000]
