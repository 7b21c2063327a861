"""Every ``rebalance-monitor`` command: ``--help`` with examples; bad arguments give one line and a non-zero exit.

These never reach Spark or Kafka: argument and input checks happen before anything starts.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from streaming.app.cli import build_parser, main

COMMANDS = ["run", "demo", "simulate", "query", "allocate", "maintain", "kafka", "spark-cluster", "smoke"]
ROOT = Path(__file__).parents[2]
DESIGN_STATE = ROOT / "docs" / "design" / "state-snapshots.md"


def run_main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse: --help and parse errors
        code = exit_.code if isinstance(exit_.code, int) else 1
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_with_runnable_looking_examples(command, capsys):
    code, out, _ = run_main([command, "--help"], capsys)
    assert code == 0
    examples = out.split("examples:", 1)[1]
    assert f"rebalance-monitor {command}" in examples
    # every option an example uses exists on that command
    parser = build_parser()._subparsers._group_actions[0].choices[command]
    parsers = [parser, *(parser._subparsers._group_actions[0].choices.values() if parser._subparsers else ())]
    options = {o for p in parsers for a in p._actions for o in a.option_strings}
    used = {
        w.split("=")[0]
        for line in examples.splitlines()
        if f"rebalance-monitor {command}" in line
        for w in line.split()
        if w.startswith("--")
    }
    assert used <= options, used - options


def test_top_level_help_lists_every_command(capsys):
    code, out, _ = run_main(["--help"], capsys)
    assert code == 0 and all(c in out for c in COMMANDS)


@pytest.mark.parametrize(
    "argv, message",
    [
        ([], "the following arguments are required: COMMAND"),
        (["nope"], "invalid choice: 'nope'"),
        (["demo", "--scenario", "chaos"], "invalid choice: 'chaos'"),
        (["demo", "--duration", "-5"], "'-5' must be > 0"),
        (["demo", "--speed", "fast"], "'fast' is not a number"),
        (["demo", "--groups", "many"], "'many' is not a whole number"),
        (["demo", "--clients", "0"], "'0' must be > 0"),
        (["demo", "--rocketmq", "--line", "4.8"], "invalid choice: '4.8'"),
        (["demo", "--restarts", "-1"], "'-1' must be >= 0"),
        (["demo", "--lead", "0"], "'0' must be > 0"),
        (["query"], "the following arguments are required: WHAT"),
        (["query", "owners"], "invalid choice: 'owners'"),
        (["query", "assignment", "--table-version", "x"], "invalid int value: 'x'"),
        (["allocate", "--queues", "two", "--clients", "a"], "invalid int value: 'two'"),
        (["allocate", "--client-line", "6", "--queues", "2", "--clients", "a"], "invalid choice: '6'"),
        (["allocate", "--virtual-nodes", "0", "--queues", "2", "--clients", "a"], "'0' must be > 0"),
        (["kafka", "restart"], "invalid choice: 'restart'"),
        (["spark-cluster", "restart"], "invalid choice: 'restart'"),
        (["spark-cluster", "start", "--workers", "0"], "'0' must be > 0"),
        (["spark-cluster", "start", "--worker-cores", "one"], "'one' is not a whole number"),
        (["query", "sql", "--delta-root", "."], "the following arguments are required: statement"),
        (["query", "anomalies", "SELECT 1"], "unrecognized arguments: SELECT 1"),
        (["query", "history"], "invalid choice: 'history'"),
        (["smoke", "--count"], "expected one argument"),
        (["collect", "--shard", "2/2"], "'2/2' is not I/N with 0 <= I < N"),
        (["collect", "--shard", "1"], "'1' is not I/N with 0 <= I < N"),
    ],
)
def test_parse_errors_are_one_line_naming_the_problem(argv, message, capsys):
    code, out, err = run_main(argv, capsys)
    assert code == 2 and not out
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("rebalance-monitor") and message in lines[0] and "--help" in lines[0]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["demo", "--restarts", "2"], "--restarts needs --duration"),
        (["demo", "--rocketmq", "--duration", "60", "--restarts", "1"], "--restarts is for the simulated fleet"),
        (["query", "assignment", "--delta-root", "{tmp}"], "query assignment needs --group"),
        (
            ["query", "assignment", "--group", "G", "--at", "yesterday", "--delta-root", "{tmp}"],
            "--at: cannot read 'yesterday' as epoch milliseconds or an ISO-8601 time",
        ),
        (["query", "anomalies", "--since", "2026-13-40", "--delta-root", "{tmp}"], "--since: cannot read '2026-13-40'"),
        (
            ["query", "anomalies", "--since", "2000", "--until", "1000", "--delta-root", "{tmp}"],
            "--since is after --until",
        ),
        (
            ["query", "faults", "--at", "1000", "--delta-root", "{tmp}"],
            "--at and --table-version are for query assignment",
        ),
        (["query", "sql", "SELECT 1", "--group", "G", "--delta-root", "{tmp}"], "query sql takes only its statement"),
        (["query", "sql", "SELECT 1", "--json", "--csv", "--delta-root", "{tmp}"], "give --json or --csv, not both"),
        (["query", "anomalies", "--csv", "--delta-root", "{tmp}"], "--csv is for query sql"),
        (
            ["query", "sql", "SELECT 1", "--table-version", "1", "--table-time", "1000", "--delta-root", "{tmp}"],
            "give --table-version or --table-time, not both",
        ),
        (
            ["query", "sql", "SELECT count(*) FROM dead_letters", "--delta-root", "{tmp}"],
            "no monitor tables under {tmp}",
        ),
        (["query", "anomalies", "--delta-root", "{tmp}/nowhere"], "no monitor tables under {tmp}/nowhere"),
        (["query", "assignment", "--group", "G", "--delta-root", "{tmp}"], "no monitor tables under {tmp}"),
        (["allocate", "--queues", "2"], "allocate needs --clients and --queues"),
        (["allocate", "--group", "G"], "needs both --delta-root and --group"),
        (["allocate", "--delta-root", "{tmp}", "--group", "G", "--clients", "a"], "give either --clients and --queues"),
        (["allocate", "--delta-root", "{tmp}", "--group", "G"], "no monitor tables under {tmp}"),
        (["allocate", "--strategy", "NOPE", "--queues", "2", "--clients", "a"], "unknown allocation strategy 'NOPE'"),
        (["allocate", "--queues", "0", "--clients", "a"], "--queues >= 1"),
        (["allocate", "--queues", "2", "--clients", ",,"], "a client in --clients"),
        (
            ["allocate", "--queues", "10000000", "--clients", "a,b"],
            "--queues 10000000 on 1 broker(s) is 10000000 queues; the what-if takes at most 65536",
        ),
        (
            [
                "allocate",
                "--strategy",
                "CONSISTENT_HASH",
                "--virtual-nodes",
                "1000000000",
                "--queues",
                "2",
                "--clients",
                "a",
            ],
            "a ring of 1000000000 entries; the what-if takes at most 1000000",
        ),
        (
            ["allocate", "--strategy", "MACHINE_ROOM_NEARBY", "--queues", "2", "--clients", "a"],
            "MACHINE_ROOM_NEARBY needs its inner strategy: --strategy MACHINE_ROOM_NEARBY-<inner>",
        ),
        (
            ["allocate", "--consumer-idcs", "IDC1", "--queues", "2", "--clients", "a"],
            "--consumer-idcs is for MACHINE_ROOM",
        ),
        (
            ["allocate", "--config-queues", "broker-a:0", "--queues", "2", "--clients", "a"],
            "--config-queues is for CONFIG",
        ),
        (
            ["allocate", "--strategy", "CONFIG", "--config-queues", "broker-a", "--queues", "2", "--clients", "a"],
            "--config-queues: 'broker-a' is not broker:queue_id",
        ),
        (
            [
                "allocate",
                "--strategy",
                "MACHINE_ROOM_NEARBY-AVG",
                "--machine-room-regex",
                "^IDC",
                "--queues",
                "2",
                "--clients",
                "a",
            ],
            "--machine-room-regex needs a capturing group",
        ),
        (
            ["query", "faults", "--group", "G", "--delta-root", "{tmp}"],
            "query faults takes no --group (fault windows are per producer and broker, not per consumer group); "
            "it takes --cluster, --broker, --since, --until and --table-time",
        ),
        (
            ["query", "anomalies", "--broker", "broker-a", "--delta-root", "{tmp}"],
            "query anomalies takes no --broker (anomaly episodes are per consumer group and topic, not per broker)",
        ),
        (
            ["query", "assignment", "--group", "G", "--until", "1000", "--delta-root", "{tmp}"],
            "query assignment takes no --until",
        ),
        (["query", "progress", "--kind", "ORPHANED_QUEUES", "--delta-root", "{tmp}"], "query progress takes no --kind"),
        (["demo", "--rocketmq", "--simulated", "60"], "--simulated is for the simulated fleet"),
    ],
)
def test_bad_input_found_after_parsing_is_one_line_too(argv, message, tmp_path, capsys):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    code, out, err = run_main(argv, capsys)
    assert code != 0 and not out
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert message.replace("{tmp}", str(tmp_path)) in lines[0]
    assert lines[0].startswith(f"rebalance-monitor {argv[0]}")


def test_the_installed_command_exits_non_zero_with_one_line():
    result = subprocess.run(
        [sys.executable, "-m", "streaming.app.cli", "allocate", "--queues", "x", "--clients", "a"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2 and not result.stdout
    assert result.stderr.count("\n") == 1 and "invalid int value: 'x'" in result.stderr


def test_a_huge_what_if_is_refused_before_it_takes_memory(capsys):
    import tracemalloc

    tracemalloc.start()
    try:
        code, out, err = run_main(["allocate", "--queues", "10000000", "--brokers", "a,b,c", "--clients", "x"], capsys)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert code == 2 and not out and "30000000 queues" in err
    assert peak < 32 * 2**20  # 30 million queues would take gigabytes; the refusal comes before any is built


def test_version_names_the_release_the_state_versions_and_what_each_delta_commit_records(capsys):
    """The release the package was built as; each kept state's version as ``docs/design/state-snapshots.md``
    lists it, with the oldest its migrations read; the ``userMetadata`` the job's Delta commits carry."""
    from importlib.metadata import version

    from streaming.app.versions import STATE_KINDS
    from streaming.job.runtime.spark_session import COMMIT_METADATA

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    release, states, commits = capsys.readouterr().out.strip().splitlines()
    assert release == f"rebalance-monitor {version('rocketmq-rebalance-monitor')}"
    assert commits == f"Delta commits record userMetadata: {COMMIT_METADATA}"
    assert COMMIT_METADATA.endswith(version("rocketmq-rebalance-monitor"))
    documented = dict(re.findall(r"^\| `([a-z ]+)` \| .* \| (\d+) \|$", DESIGN_STATE.read_text(), re.MULTILINE))
    assert {kind: int(v) for kind, v in documented.items()} == {kind: v for kind, v, _ in STATE_KINDS}
    assert states.startswith("state versions: shard 12 (reads 5 to 12), membership 2, ")
    assert states == "state versions: " + ", ".join(
        f"{kind} {v}" + (f" (reads {min(m)} to {v})" if m else "") for kind, v, m in STATE_KINDS
    )
