"""``rebalance-monitor query`` and ``allocate --delta-root`` over real tables: output and bad input.

The tables are those of the simulated fleet's job run (``tests.support.fleet``, shared with the scenario
tests): its scale-out group has two members until 90 s and four after, its duplicate-id group has known
anomalies, producers avoid its slow broker. The CLI runs in process (``main(argv)``) on the test session.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streaming.cli import main
from tests.support.fleet import START_MS, fleet_run, scenarios

SCALE_OUT = "scale-out-search-scale-out"
DUPLICATES = "duplicate-ids-ledger-containers"
SLOW_BROKER = "slow-broker-broker-b"


@pytest.fixture(scope="module")
def delta(kafka_broker, spark, tmp_path_factory) -> str:
    config = fleet_run(kafka_broker, spark, tmp_path_factory)
    return str(Path(config.paths.delta_root).resolve())


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exit_:
        code = exit_.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def cli_json(capsys, *argv: str):
    code, out, err = cli(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def test_assignment_before_and_after_the_scale_out(delta, capsys):
    (group,) = scenarios()["scale-out"].groups
    first, later = {m.client_id for m in group.members[:2]}, {m.client_id for m in group.members[2:]}
    before = cli_json(capsys, "query", "assignment", "--delta-root", delta, "--group", SCALE_OUT,
                      "--at", str(START_MS + 60_000))  # fmt: skip
    assert {r["client_id"] for r in before} == first
    assert [r["queue_count"] for r in before] == [4, 4] and len({r["generation"] for r in before}) == 1
    after = cli_json(capsys, "query", "assignment", "--delta-root", delta, "--group", SCALE_OUT)
    assert {r["client_id"] for r in after} == first | later
    assert [r["queue_count"] for r in after] == [2, 2, 2, 2]
    assert after[0]["generation"] > before[0]["generation"]
    owned = [(q["broker"], q["queue_id"]) for r in after for q in r["queues"]]
    assert sorted(owned) == [(b, q) for b in ("scale-out-broker-a", "scale-out-broker-b") for q in range(4)]
    # an ISO time means the same instant as epoch ms (UTC)
    iso = cli_json(capsys, "query", "assignment", "--delta-root", delta, "--group", SCALE_OUT,
                   "--at", "2023-11-14T22:14:20")  # START_MS + 60 s  # fmt: skip
    assert iso == before


def test_assignment_as_a_readable_table(delta, capsys):
    code, out, err = cli(capsys, "query", "assignment", "--delta-root", delta, "--group", SCALE_OUT)
    assert code == 0, err
    header, rule, *rows = out.strip().splitlines()
    assert header.split() == ["group", "generation", "topic", "client_id", "queue_count", "queues", "event_time"]
    assert set(rule) <= {"-", " "} and len(rows) == 4
    assert all(r.startswith(SCALE_OUT) and "scale-out-orders" in r for r in rows)
    assert "scale-out-broker-a/" in out  # queues as broker/queue_id


def test_time_travel_over_current_assignment(delta, spark, capsys):
    history = spark.sql(f"DESCRIBE HISTORY delta.`{delta}/current_assignment`").collect()
    first_merge = min(r["version"] for r in history if r["operation"] == "MERGE")
    then = cli_json(capsys, "query", "assignment", "--delta-root", delta, "--group", SCALE_OUT,
                    "--table-version", str(first_merge))  # fmt: skip
    assert len(then) == 2 and all(r["queue_count"] == 4 for r in then)  # the group began with two members
    now = cli_json(capsys, "query", "assignment", "--delta-root", delta, "--group", SCALE_OUT)
    latest = cli_json(capsys, "query", "assignment", "--delta-root", delta, "--group", SCALE_OUT,
                      "--table-version", str(max(r["version"] for r in history)))  # fmt: skip
    assert [(r["client_id"], r["queue_count"]) for r in latest] == [(r["client_id"], r["queue_count"]) for r in now]
    code, _, err = cli(capsys, "query", "assignment", "--delta-root", delta, "--group", SCALE_OUT,
                       "--table-version", "99999")  # fmt: skip
    assert code == 1 and len(err.strip().splitlines()) == 1 and "current_assignment" in err


def test_anomaly_episodes_of_a_group_and_in_a_time_range(delta, capsys):
    rows = cli_json(capsys, "query", "anomalies", "--delta-root", delta, "--group", DUPLICATES)
    assert {r["anomaly"] for r in rows} == {"DUPLICATE_CLIENT_ID", "ORPHANED_QUEUES", "DOUBLE_OWNED_QUEUES"}
    assert {r["group"] for r in rows} == {DUPLICATES} and {r["status"] for r in rows} >= {"OPENED"}
    duplicate = next(r for r in rows if r["anomaly"] == "DUPLICATE_CLIENT_ID")
    assert "172.17.0.1@1" in duplicate["details"] and duplicate["severity"] == "critical"
    # a range: the storm of the rebalance-storm scenario opens within its first 300 s, nothing opens after 6 min
    storm = cli_json(capsys, "query", "anomalies", "--delta-root", delta, "--kind", "REBALANCE_STORM",
                     "--since", str(START_MS), "--until", str(START_MS + 300_000))  # fmt: skip
    assert "rebalance-storm-cache-flapping" in {r["group"] for r in storm}
    assert all(r["anomaly"] == "REBALANCE_STORM" and START_MS <= r["event_time_ms"] <= START_MS + 300_000
               for r in storm)  # fmt: skip
    late = cli_json(capsys, "query", "anomalies", "--delta-root", delta, "--group", DUPLICATES,
                    "--since", str(START_MS + 3_600_000))  # fmt: skip
    assert late == []
    code, out, _ = cli(capsys, "query", "anomalies", "--delta-root", delta, "--group", DUPLICATES)
    assert code == 0 and out.splitlines()[0].split() == ["event_time", "status", "group", "topic", "anomaly",
                                                         "severity", "summary"]  # fmt: skip
    assert "DUPLICATE_CLIENT_ID" in out


def test_a_brokers_fault_windows(delta, capsys):
    rows = cli_json(capsys, "query", "faults", "--delta-root", delta, "--broker", SLOW_BROKER)
    assert rows and {r["broker"] for r in rows} == {SLOW_BROKER}
    opened = [r for r in rows if r["status"] == "OPENED"]
    assert opened and all(r["trigger_latency_ms"] >= 600 and r["window_end_ms"] > r["window_start_ms"] for r in opened)
    healthy = cli_json(capsys, "query", "faults", "--delta-root", delta, "--broker", "slow-broker-broker-a")
    assert healthy == []  # a broker producers use, never avoided
    code, out, _ = cli(capsys, "query", "faults", "--delta-root", delta, "--broker", SLOW_BROKER)
    assert code == 0 and "trigger_latency_ms" in out.splitlines()[0] and SLOW_BROKER in out


@pytest.mark.parametrize("argv, code, message", [
    (["query", "assignment", "--group", "nope"], 1, "no consumer group 'nope' in"),
    (["query", "anomalies", "--group", "nope"], 1, "no consumer group 'nope' in"),
    (["query", "faults", "--broker", "broker-z"], 1, "no broker 'broker-z' in"),
    (["query", "assignment", "--group", SCALE_OUT, "--at", str(START_MS - 1)], 1, "has no assignment at or before"),
    (["query", "assignment", "--group", SCALE_OUT, "--at", "noon"], 2, "--at: cannot read 'noon'"),
    (["allocate", "--group", "nope"], 1, "no consumer group 'nope' in"),
    (["allocate", "--group", SCALE_OUT, "--topic", "payments"], 1, "does not subscribe 'payments'"),
    (["allocate", "--group", SCALE_OUT, "--strategy", "RANDOM"], 2, "unknown allocation strategy 'RANDOM'"),
])  # fmt: skip
def test_bad_input_is_one_line_and_a_non_zero_exit(delta, capsys, argv, code, message):
    got, out, err = cli(capsys, *argv[:1], *argv[1:], "--delta-root", delta)
    assert got == code and not out
    lines = err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and lines[0].startswith(f"rebalance-monitor {argv[0]}")
    if "(known:" in lines[0]:
        assert SCALE_OUT in lines[0] or "slow-broker-broker-b" in lines[0] or "more" in lines[0]


def test_allocate_what_if_for_a_group_from_the_tables(delta, capsys):
    (group,) = scenarios()["scale-out"].groups
    (now,) = cli_json(capsys, "allocate", "--delta-root", delta, "--group", SCALE_OUT)
    assert now["strategy"] == "AVG" and now["topic"] == "scale-out-orders"
    assert sorted(now["cid_all"]) == sorted(m.client_id for m in group.members)
    assert [s["count"] for s in now["shares"]] == [2, 2, 2, 2] and not now["orphaned"] and not now["double_owned"]
    (before,) = cli_json(
        capsys, "allocate", "--delta-root", delta, "--group", SCALE_OUT, "--at", str(START_MS + 60_000)
    )
    assert len(before["cid_all"]) == 2
    # the duplicate-id group: what AVG_BY_CIRCLE would do with its cidAll (two channels share 172.17.0.1@1)
    (dup,) = cli_json(capsys, "allocate", "--delta-root", delta, "--group", DUPLICATES, "--strategy", "AVG_BY_CIRCLE")
    assert dup["strategy"] == "AVG_BY_CIRCLE" and dup["cid_all"].count("172.17.0.1@1") == 2
    assert dup["orphaned"] and dup["double_owned"]  # the second copy's queues: nobody; its first: both
    code, out, err = cli(capsys, "allocate", "--delta-root", delta, "--group", DUPLICATES)
    assert code == 0, err
    assert out.startswith(f"group {DUPLICATES} generation ") and "orphaned     (" in out and "172.17.0.1@1" in out
