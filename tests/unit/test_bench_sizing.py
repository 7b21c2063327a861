"""The sizing bench's collector-shaped fleet publishes what the contract accepts at the collector's cadences (a
poll per group and broker per cycle, reports, progress samples, routes), shows each incident as the collector
would see it and marks the poll that first shows it; its lag verdict and the page's sizing curve follow from the
recorded results (``docs/deploy.md``'s block is ``bench.sizing_table``'s rendering of ``bench/results/
sizing.json``)."""

from __future__ import annotations

import json
from collections import Counter

from bench.bench_sizing import lag_summary
from bench.collector_fleet import BROKERS, CollectorFleet, cadences
from bench.latency_fleet import EXPIRY_MS, Injection, Injector, tick_events
from bench.sizing_table import CURVE_BEGIN, CURVE_END, PAGE, RESULTS, fit, render
from streaming.contract.events import DEFAULT_TOPICS
from streaming.contract.validator import Rejection, validate_event

START = 1_796_012_280_000  # a poll cycle's start, and a running-info cycle's


def _fleet(groups: int = 20, sends: int = 50) -> CollectorFleet:
    return CollectorFleet(groups, 10, 20, sends, dict(DEFAULT_TOPICS))


def _run(fleet: CollectorFleet, injector: Injector, start: int, end: int) -> list:
    out = []
    for t in range(start, end, 100):
        out += tick_events(fleet, injector, t, t + 100)
    return out


def test_the_fleet_publishes_valid_events_at_the_collector_s_cadences():
    fleet, c = _fleet(), cadences()
    events = [json.loads(v) for (_, _, v), _ in _run(fleet, Injector(fleet), START, START + c.running_info_ms)]
    counts = Counter(e["type"] for e in events)
    cycles = c.running_info_ms // c.poll_ms
    assert counts["consumer_connections"] == 20 * len(BROKERS) * cycles  # every group on every broker per cycle
    assert counts["reported_assignment"] == 20 * 10  # every member once per running-info interval
    assert counts["consume_progress"] == 20 * len(BROKERS) * (c.running_info_ms // c.progress_ms)
    assert counts["send_result"] == 50 * c.running_info_ms // 1000
    raw = [json.dumps(e).encode() for e in events]
    outcomes = [validate_event(v, now_ms=START + c.running_info_ms) for v in raw]
    assert not [r for r in outcomes if isinstance(r, Rejection)]
    # the reports of one group cover its topic's queues once: the expected allocation, as the clients hold it
    reports = [e for e in events if e["type"] == "reported_assignment" and e["group"] == "G3"]
    held = [(q["broker"], q["queue_id"]) for e in reports for q in e["queues"]]
    assert len(held) == len(set(held)) == 4 * len(BROKERS)


def _polls_of(events: list, group: str) -> list[tuple[dict, list]]:
    return [
        (json.loads(v), handed)
        for (_, _, v), handed in events
        if b'"consumer_connections"' in v and json.loads(v)["group"] == group
    ]


def test_a_leaving_member_is_gone_from_the_next_polls_which_carry_the_incident():
    fleet = _fleet()
    injector = Injector(fleet)
    _run(fleet, injector, START, START + 10_000)
    leaving = fleet.client_id(4, 2)
    injector.scheduled = [Injection(7, "unregister", START + 10_050, group=4, member=2)]
    events = _run(fleet, injector, START + 10_000, START + 20_000)
    polls = _polls_of(events, "G4")
    assert len(polls) == len(BROKERS)
    assert all(leaving not in [c["client_id"] for c in poll["connections"]] for poll, _ in polls)
    assert [handed for _, handed in polls] == [[(7, START + 10_100)]] + [[]] * (len(BROKERS) - 1)
    assert [h for (_, _, v), h in events if h and b'"G4"' not in v] == []


def test_a_duplicate_client_id_is_two_connections_with_one_id():
    fleet = _fleet()
    injector = Injector(fleet)
    twin = fleet.client_id(5, 0)
    injector.scheduled = [Injection(8, "duplicate_client_id", START + 100, group=5, client_id=twin)]
    polls = _polls_of(_run(fleet, injector, START, START + 10_000), "G5")
    ids = [c["client_id"] for c in polls[0][0]["connections"]]
    assert ids.count(twin) == 2 and len({c["channel"] for c in polls[0][0]["connections"]}) == 11
    assert polls[0][1] == [(8, START + 100)]


def test_a_silent_member_stays_in_the_polls_until_the_brokers_would_expire_it():
    fleet = _fleet(groups=2)
    injector = Injector(fleet)
    silent = fleet.client_id(1, 3)
    injector.scheduled = [Injection(9, "silent_member", START + 100, group=1, member=3)]
    events = _run(fleet, injector, START, START + EXPIRY_MS + 40_000)
    polls = _polls_of(events, "G1")
    listed = [(poll["event_time"], silent in [c["client_id"] for c in poll["connections"]], h) for poll, h in polls]
    expiry = fleet.gone_at[(1, 3)]
    assert START + EXPIRY_MS - 30_000 < expiry <= START + EXPIRY_MS + 100  # 120 s after its last heartbeat
    assert all(present == (at < expiry) for at, present, _ in listed)
    marked = [(at, h) for at, _, h in listed if h]
    assert len(marked) == 1 and marked[0][0] >= expiry and marked[0][1] == [(9, expiry)]
    assert min(at for at, present, _ in listed if not present) == marked[0][0]


def test_input_lag_is_growing_only_when_its_second_half_climbs_more_than_a_batch_s_sawtooth():
    flat = [{"t": t, "lag": 500 + (t % 2) * 300, "input_end": 1_000 * t} for t in range(0, 600, 5)]
    growing = [{"t": t, "lag": 100 * t, "input_end": 1_000 * t} for t in range(0, 600, 5)]
    # batches 20 s apart: the lag rises by up to 20 s of input between two, and it falls back at each
    sawtooth = [
        {"t": t, "lag": 1_000 * (t % 20) + (5 * t if t > 500 else 0), "input_end": 1_000 * t} for t in range(0, 600, 5)
    ]
    assert lag_summary(flat, 0, 600)["verdict"] == "flat"
    assert lag_summary(sawtooth, 0, 600, batch_interval_s=20.0)["verdict"] == "flat"
    assert lag_summary(sawtooth, 0, 600)["verdict"] == "growing"
    summary = lag_summary(growing, 0, 600, batch_interval_s=20.0)
    assert summary["verdict"] == "growing" and summary["second_half_slope_events_per_s"] == 100.0
    assert summary["input_events_per_s"] == 1_000.0


def test_the_curve_is_the_least_squares_fit_of_the_points():
    points = [(g, s, 0.2 + 0.1 * g + 0.05 * s) for g in (1, 3, 10) for s in (2, 10)]
    fixed, per_groups, per_sends = fit(points)  # type: ignore[misc]
    assert (round(fixed, 6), round(per_groups, 6), round(per_sends, 6)) == (0.2, 0.1, 0.05)
    assert fit([(1, 2, 1.0), (1, 10, 2.0)]) is None  # one fleet size: no per-group figure


def test_the_page_s_sizing_curve_is_the_rendering_of_the_recorded_results():
    page = PAGE.read_text()
    block = page[page.index(CURVE_BEGIN) : page.index(CURVE_END) + len(CURVE_END)]
    assert block == render(json.loads(RESULTS.read_text()))


def test_a_run_from_an_exported_tree_records_its_code_as_unknown(tmp_path, monkeypatch):
    """A run outside a git checkout keeps its figures (``code`` is read before the run and never raises)."""
    from bench import bench_sizing

    monkeypatch.setattr(bench_sizing, "ROOT", tmp_path)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    assert bench_sizing.code() == "unknown"
