"""``rebalance-monitor allocate`` (what-if) output and bad input; ``--help`` everywhere."""

from __future__ import annotations

import json

import pytest

from streaming.cli import build_parser, main


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
