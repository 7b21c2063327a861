"""``rebalance-monitor simulate --output``: a scenario's events as JSON lines, valid, deterministic, faithful.

No Kafka here (the Kafka side is ``tests/integration/test_simulate_kafka.py``): the file mode is what a
collector author diffs their own events against, so every line must pass the contract, the scenario's
story must be in it (a crash is a member that stops heartbeating), and the same arguments must give the
same bytes.
"""

from __future__ import annotations

import json

import pytest

from streaming.app.cli import main
from streaming.app.simulation.fleet import HEARTBEAT_MS, Simulation, build_scenario
from streaming.app.simulation.progress import fact_lines
from streaming.contract.validator import Rejection, validate_event

START_MS = 1_763_000_000_000


def simulate_to_file(tmp_path, capsys, *extra: str, name: str = "events.jsonl") -> tuple[list[dict], str]:
    path = tmp_path / name
    code = main(["simulate", "--output", str(path), "--start", str(START_MS), *extra])
    out = capsys.readouterr().out
    assert code == 0, out
    return [json.loads(line) for line in path.read_text().splitlines()], out


def test_every_line_is_a_valid_event_of_the_fleet_time_asked_for_in_order(tmp_path, capsys):
    events, out = simulate_to_file(tmp_path, capsys, "--scenario", "mixed", "--fleet-seconds", "300")
    assert events
    for event in events:
        assert not isinstance(validate_event(json.dumps(event).encode(), event["event_time"] + 1), Rejection), event
    times = [e["event_time"] for e in events]
    assert times == sorted(times)
    assert START_MS <= times[0] and times[-1] < START_MS + 300_000
    assert {e["type"] for e in events} == {"topic_route", "consumer_channel", "send_result", "consume_progress"}
    assert f"{len(events)} events of 300 s of fleet time written to" in out


def test_a_crashed_member_stops_heartbeating_when_the_scenario_says_and_the_others_go_on(tmp_path, capsys):
    events, out = simulate_to_file(tmp_path, capsys, "--scenario", "crash", "--fleet-seconds", "400", "--seed", "7")
    (group,) = build_scenario("crash", 7).groups
    crashed = next(m for m in group.members if m.crashes_ms is not None)
    beats: dict[str, list[int]] = {}
    for e in events:
        if e["type"] == "consumer_channel" and e["kind"] == "HEARTBEAT":
            beats.setdefault(e["client_id"], []).append(e["event_time"] - START_MS)
    assert set(beats) == {m.client_id for m in group.members}
    assert max(beats[crashed.client_id]) < crashed.crashes_ms
    for member in group.members:
        if member is not crashed:  # one heartbeat per broker every 30 s, to the end of the run
            assert max(beats[member.client_id]) >= 400_000 - HEARTBEAT_MS
    assert "scenario crash" in out and "the monitor should report no anomaly" in out


def test_the_scenario_s_known_answer_is_printed(tmp_path, capsys):
    _, out = simulate_to_file(tmp_path, capsys, "--scenario", "duplicate-ids", "--fleet-seconds", "60")
    expected = build_scenario("duplicate-ids").expected
    assert expected
    for group, kind in expected:
        assert f"expect: {kind} in {group}" in out


def test_same_arguments_same_bytes_and_another_seed_another_fleet(tmp_path, capsys):
    args = ("--scenario", "rebalance-storm", "--fleet-seconds", "120", "--groups", "3", "--namespace", "s9")
    first, _ = simulate_to_file(tmp_path, capsys, *args, name="a.jsonl")
    again, _ = simulate_to_file(tmp_path, capsys, *args, name="b.jsonl")
    other, _ = simulate_to_file(tmp_path, capsys, *args, "--seed", "2", name="c.jsonl")
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    assert first == again and first != other
    assert all(e["group"].startswith("s9-") for e in first if e["type"] == "consumer_channel")


def test_consume_progress_with_reports_and_what_it_should_show_at_the_end(tmp_path, capsys):
    args = ("--scenario", "consume-progress", "--fleet-seconds", "300", "--progress-interval", "60")
    events, out = simulate_to_file(tmp_path, capsys, *args, "--assignment-reports")
    samples = [e for e in events if e["type"] == "consume_progress"]
    assert sorted({e["event_time"] - START_MS for e in samples}) == [60_000, 120_000, 180_000, 240_000]
    assert {e["group"] for e in samples} == build_scenario("consume-progress").group_names
    reports = [e for e in events if e["type"] == "reported_assignment"]
    assert reports and all("commit_offset" in q for e in reports for q in e["queues"])
    # the facts printed are the simulator's own, from the same fleet
    simulation = Simulation(build_scenario("consume-progress"), START_MS, progress_interval_ms=60_000)
    simulation.events_until(START_MS + 300_000)
    facts = simulation.progress.facts()
    assert facts.stuck and facts.offline
    for line in fact_lines(facts, START_MS):
        assert f"[simulate] {line}" in out
    assert "expect: STUCK_HOLDER fulfil-stuck" in out and "expect: archive-offline offline" in out
    without, _ = simulate_to_file(tmp_path, capsys, *args, name="plain.jsonl")
    assert without == [e for e in events if e["type"] != "reported_assignment"]  # reports only when asked


def test_standard_output_carries_only_events(capsys):
    code = main(
        ["simulate", "--output", "-", "--start", str(START_MS), "--scenario", "steady", "--fleet-seconds", "30"]
    )
    captured = capsys.readouterr()
    assert code == 0
    lines = captured.out.splitlines()
    assert lines and all(json.loads(line)["schema_version"] == 1 for line in lines)
    assert "[simulate] scenario steady" in captured.err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--output", "x.jsonl"], "--output needs --fleet-seconds"),
        (["--output", "x.jsonl", "--fleet-seconds", "10", "--bootstrap-servers", "h:1"], "are for Kafka"),
        (["--output", "x.jsonl", "--fleet-seconds", "10", "--start", "yesterday"], "--start: cannot read"),
        (["--speed", "0"], "'0'"),
        (["--bootstrap-servers", "127.0.0.1:1", "--producer-option", "acks"], "expected KEY=VALUE"),
        (
            ["--bootstrap-servers", "127.0.0.1:1", "--producer-option", "security.protocol=SSL"],
            "not a kafka-python producer option",
        ),
        (["--scenario", "nope"], "invalid choice"),
        (["--output", "x.jsonl", "--fleet-seconds", "10", "--progress-interval", "7"], "multiple of 5"),
        (["--bootstrap-servers", "127.0.0.1:1", "--replication-factor", "2"], "topics --create-topics creates"),
        (["--create-topics", "--replication-factor", "0"], "'0'"),
    ],
)
def test_bad_arguments_give_one_line_and_exit_2(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    try:
        code = main(["simulate", *argv])
    except SystemExit as exit_:
        code = exit_.code
    err = capsys.readouterr().err
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "x.jsonl").exists()
