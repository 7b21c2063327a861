"""``query``, ``query sql``, ``allocate --delta-root`` and ``maintain`` on tables in an S3 bucket answer as they do
on the same tables on local disk; ``rebalance-monitor s3-server`` starts and stops the project's S3 server.

The tables are the crash-recovery workload's uninterrupted run (``tests.support.kill_workload``), copied file for
file into the tier's S3 server (``s3_server``); the commands reach it with ``[storage]`` from ``RRM__STORAGE__``
variables alone: delta-rs for the queries, Spark through Hadoop's S3A for ``maintain``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from deltalake import DeltaTable

from connectors.delta_reader import read_arrow, rows
from connectors.object_store import delta_rs_options, join
from streaming.app.cli import main
from streaming.config import load_config
from streaming.contract.tables import TABLES
from tests.spark_cluster.conftest import BUCKET
from tests.support.job import test_spark_conf as sized_spark_conf
from tests.support.kill_workload import kill_workload_run

ROOT = Path(__file__).parents[2]


def answer(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """What the CLI prints for ``argv``, which must succeed."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def test_query_allocate_and_maintain_answer_on_s3_as_on_local_disk(
    kafka_broker, spark, s3_server, tmp_path_factory, capsys, monkeypatch
):
    local = kill_workload_run(kafka_broker, spark, tmp_path_factory).root / "delta"
    assert s3_server.upload(local, BUCKET, "copied/delta") > len(TABLES)
    remote = f"s3a://{BUCKET}/copied/delta"
    for key, value in s3_server.storage_env().items():
        monkeypatch.setenv(key, value)
    options = delta_rs_options(load_config(None).storage)

    group = min(r["group"] for r in rows(read_arrow(local / "current_assignment", columns=["group"])))  # one assigned
    counts = " UNION ALL ".join(f"SELECT '{t}' AS t, count(*) AS n FROM {t}" for t in TABLES)
    commands = [
        ("query", "sql", f"{counts} ORDER BY t"),
        ("query", "sql", "SELECT * FROM dead_letters ORDER BY ALL", "--csv"),
        ("query", "anomalies", "--json"),
        ("query", "faults", "--json"),
        ("query", "assignment", "--group", group, "--json"),
        ("allocate", "--group", group),
    ]
    for command in commands:
        on_disk = answer(capsys, *command, "--delta-root", str(local))
        on_s3 = answer(capsys, *command, "--delta-root", remote)
        assert on_s3 == on_disk, command
        assert on_s3.count("\n") > 1, (command, on_s3)  # every answer has rows: the comparison proves something
    assert s3_server.secret_key not in capsys.readouterr().out

    # maintain through Spark's S3A (a JVM of its own, sized as the tests' JVMs are: the tests' session has no S3A),
    # on a root holding two of the tables (it leaves out those not there; each costs seconds of Spark jobs): it
    # compacts both, and delta-rs reads each as before, at a newer version.
    kept = ("dead_letters", "fault_windows")
    for table in kept:
        s3_server.upload(local / table, BUCKET, f"maintained/delta/{table}")
    maintained_root = f"s3a://{BUCKET}/maintained/delta"
    versions = {t: DeltaTable(join(maintained_root, t), storage_options=options).version() for t in kept}
    maintained = subprocess.run(
        [sys.executable, "-m", "streaming.app.cli", "maintain", "--job-stopped"],
        cwd=ROOT,
        env={
            **os.environ,
            "RRM__PATHS__DELTA_ROOT": maintained_root,
            "RRM__SPARK__MASTER": "local[1]",
            **{f"RRM__SPARK__CONF__{key}": value for key, value in sized_spark_conf().items()},
        },
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert maintained.returncode == 0, maintained.stderr[-3000:]
    report = {line.split()[0]: line.split() for line in maintained.stdout.splitlines()[1:] if line.split()}
    assert set(kept) <= set(report), maintained.stdout
    assert s3_server.secret_key not in maintained.stdout + maintained.stderr
    for table in kept:
        assert int(report[table][3]) > 1, maintained.stdout  # files compacted: it had several small ones
        assert DeltaTable(join(maintained_root, table), storage_options=options).version() > versions[table]
        expected = sorted(map(repr, rows(read_arrow(local / table))))
        after = rows(read_arrow(join(maintained_root, table), storage_options=options))
        assert sorted(map(repr, after)) == expected, table


def test_the_cli_starts_reports_and_stops_the_s3_server_by_pid(tmp_path):
    from connectors.processes import pid_alive
    from localenv.s3_server import S3ServerInfo

    secret = "cli-secret-0123456789"
    env = {**os.environ, "RRM__STORAGE__ACCESS_KEY": "cli-key", "RRM__STORAGE__SECRET_KEY": secret}

    def cli(*args: str) -> subprocess.CompletedProcess:
        command = [sys.executable, "-m", "streaming.app.cli", "s3-server", *args, "--home", str(tmp_path)]
        return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)

    started = cli("start", "--bucket", "cli")
    assert started.returncode == 0, started.stderr[-2000:]
    recorded = S3ServerInfo(**json.loads((tmp_path / "s3.json").read_text()))
    try:
        assert recorded.endpoint in started.stdout and pid_alive(recorded.pid)
        assert secret not in started.stdout + started.stderr
        # the configured credentials are the server's: a request signed with them lists the new bucket
        assert (recorded.access_key, recorded.secret_key) == ("cli-key", secret)
        assert recorded.keys("cli") == []
        again = cli("start")  # the running server is reported, not a second one started
        assert again.returncode == 0 and f"pid {recorded.pid}" in again.stdout
        status = cli("status")
        assert status.returncode == 0 and f"pid {recorded.pid}" in status.stdout
    finally:
        stopped = cli("stop")
    assert stopped.returncode == 0 and "stopped" in stopped.stdout
    assert not pid_alive(recorded.pid)
    after = cli("status")
    assert after.returncode == 3 and "not running" in after.stdout
