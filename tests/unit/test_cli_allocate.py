"""``rebalance-monitor allocate`` (what-if) output and bad input; ``--help`` everywhere."""

from __future__ import annotations

import json

import pytest

from streaming.app.cli import build_parser, main


def test_allocate_names_orphaned_and_double_owned_queues(capsys):
    assert (
        main(
            [
                "allocate",
                "--strategy",
                "AVG_BY_CIRCLE",
                "--queues",
                "8",
                "--clients",
                "10.0.0.0@1,10.0.0.2@1,10.0.0.2@1",
                "--json",
            ]
        )
        == 0
    )
    result = json.loads(capsys.readouterr().out)
    assert result["orphaned"] == ["broker-a/2", "broker-a/5"]
    assert result["double_owned"] == ["broker-a/1", "broker-a/4", "broker-a/7"]
    assert [s["client_id"] for s in result["shares"]] == ["10.0.0.0@1", "10.0.0.2@1"]


def test_allocate_table_output(capsys):
    assert main(["allocate", "--queues", "4", "--brokers", "broker-a,broker-b", "--clients", "c1,c2"]) == 0
    out = capsys.readouterr().out
    assert "c1         4      broker-a/0,broker-a/1,broker-a/2,broker-a/3" in out and "orphaned     (0): -" in out


@pytest.mark.parametrize(
    "argv",
    [
        ["allocate", "--strategy", "NOPE", "--queues", "2", "--clients", "a"],
        ["allocate", "--queues", "0", "--clients", "a"],
        ["allocate", "--queues", "2", "--clients", ""],
        ["allocate", "--queues", "two", "--clients", "a"],
    ],
)
def test_bad_arguments_give_one_line_and_a_non_zero_exit(argv, capsys):
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse errors
        code = exit_.code
    assert code != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err and err[-1].startswith(("rebalance-monitor", "usage:", "rebalance-monitor allocate: error"))


@pytest.mark.parametrize("command", ["run", "demo", "query", "allocate", "maintain", "kafka", "smoke"])
def test_every_command_has_help_with_examples(command):
    sub = build_parser()._subparsers._group_actions[0].choices[command]
    assert "examples:" in (sub.epilog or "")


@pytest.mark.parametrize(
    "strategy, option",
    [
        ("CONFIG", "--config-queues"),
        ("MACHINE_ROOM", "--consumer-idcs"),
        ("MACHINE_ROOM_NEARBY-CONFIG", "--config-queues"),
    ],
)
def test_a_strategy_without_its_configuration_says_so_and_which_option_gives_it(strategy, option, capsys):
    argv = ["allocate", "--strategy", strategy, "--brokers", "IDC1@a,IDC2@b", "--queues", "2", "--clients", "c1,c2"]
    assert main([*argv, "--json"]) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    assert [s["count"] for s in result["shares"]] == [0, 0]  # what a real client so configured takes
    assert result["orphaned"] == ["IDC1@a/0", "IDC1@a/1", "IDC2@b/0", "IDC2@b/1"]
    (note,) = captured.err.strip().splitlines()
    assert "a real client so configured takes no queue" in note and option in note


def test_configured_lists_and_rooms_are_read_and_say_nothing(capsys):
    argv = ["allocate", "--brokers", "IDC1@a,IDC2@b,c", "--queues", "2", "--clients", "c1,c2", "--json"]
    assert main([*argv, "--strategy", "CONFIG", "--config-queues", "IDC2@b:1,c:0"]) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    assert [s["queues"] for s in result["shares"]] == [["IDC2@b/1", "c/0"], ["IDC2@b/1", "c/0"]]
    assert result["double_owned"] == ["IDC2@b/1", "c/0"] and not captured.err
    assert main([*argv, "--strategy", "MACHINE_ROOM", "--consumer-idcs", "IDC1,IDC2"]) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    assert [s["queues"] for s in result["shares"]] == [["IDC1@a/0", "IDC1@a/1"], ["IDC2@b/0", "IDC2@b/1"]]
    assert result["orphaned"] == ["c/0", "c/1"] and not captured.err


def test_machine_room_nearby_takes_the_rooms_from_the_regex(capsys):
    # semantics section 2.7's Java-verified example: rooms IDC1..IDC3 of 3 queues, consumers in IDC1 and IDC2
    argv = ["allocate", "--strategy", "MACHINE_ROOM_NEARBY-AVG", "--machine-room-regex", "^([A-Z0-9]+)-"]
    argv += ["--brokers", "IDC1-broker,IDC2-broker,IDC3-broker", "--queues", "3"]
    assert main([*argv, "--clients", "IDC1-c0,IDC1-c1,IDC2-c0", "--json"]) == 0
    shares = {s["client_id"]: s["queues"] for s in json.loads(capsys.readouterr().out)["shares"]}
    assert shares == {
        "IDC1-c0": ["IDC1-broker/0", "IDC1-broker/1", "IDC3-broker/0"],
        "IDC1-c1": ["IDC1-broker/2", "IDC3-broker/1"],
        "IDC2-c0": ["IDC2-broker/0", "IDC2-broker/1", "IDC2-broker/2", "IDC3-broker/2"],
    }
