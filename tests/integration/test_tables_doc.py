"""Every example of docs/tables.md's query guide runs against a job's tables, and agrees with Spark.

The tables are the simulated fleet's (``tests.support.fleet``). Examples name ``.run/delta``: commands and
Python run in a directory where that is the fleet's tables (Python in a subprocess, as a user would), Spark
SQL on the test session with the path made absolute. The guide asks one question in each of its three
languages (the first command, the first Python example, the first Spark SQL example) and one time-travel
question twice (the third command, the second Spark SQL example): the answers must agree.
"""

from __future__ import annotations

import ast
import csv
import io
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from streaming.contract.tables import QUERY_GUIDE_HEADING
from tests.support.fleet import fleet_run

ROOT = Path(__file__).parents[2]


def guide_blocks() -> list[tuple[str, str]]:
    text = (ROOT / "docs" / "tables.md").read_text()
    return re.findall(r"```(\w+)\n(.*?)```", text[text.index(QUERY_GUIDE_HEADING) :], re.S)


@pytest.fixture(scope="module")
def workdir(kafka_broker, spark, tmp_path_factory) -> Path:
    config = fleet_run(kafka_broker, spark, tmp_path_factory)
    workdir = tmp_path_factory.mktemp("guide")
    (workdir / ".run").mkdir()
    (workdir / ".run" / "delta").symlink_to(Path(config.paths.delta_root).resolve())
    return workdir


def run(workdir: Path, argv: list[str]) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(argv, cwd=workdir, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() and "(no rows)" not in result.stdout
    return result.stdout


def test_every_example_runs_and_the_languages_agree(workdir, spark):
    blocks = guide_blocks()
    assert {lang for lang, _ in blocks} == {"bash", "python", "sql"}
    commands = [line for lang, body in blocks if lang == "bash" for line in body.strip().splitlines()]
    assert commands and all(c.startswith("rebalance-monitor ") for c in commands)
    command_out = [run(workdir, [sys.executable, "-m", "streaming.app.cli", *shlex.split(c)[1:]]) for c in commands]
    python_out = [run(workdir, [sys.executable, "-c", body]) for lang, body in blocks if lang == "python"]
    tables = str(workdir / ".run" / "delta")
    spark_out = [spark.sql(body.replace(".run/delta", tables)).collect() for lang, body in blocks if lang == "sql"]
    assert all(spark_out)

    # open episodes per anomaly kind, three ways
    by_cli = [(kind, int(n)) for kind, n in list(csv.reader(io.StringIO(command_out[0])))[1:]]
    by_python = ast.literal_eval(python_out[0].strip())
    by_spark = [tuple(r) for r in spark_out[0]]
    assert by_cli == by_python == by_spark and len(by_cli) >= 5
    # current_assignment at version 1, twice
    assert [tuple(r.values()) for r in json.loads(command_out[2])] == [tuple(r) for r in spark_out[1]]
