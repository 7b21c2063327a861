"""The job on a Spark standalone cluster, chosen by configuration alone, with its tables and checkpoints on an
S3 server, writes the tables ``local[2]`` writes on local disk, through a lost worker and a killed driver.

The cluster is the project's own (``spark_cluster`` fixture: a master and two 1-core workers started without
the caller's ``PYTHONPATH``), and so is the S3 server (``s3_server``: s3proxy, reached through Hadoop's S3A by
the job and through delta-rs by the comparison); the job runs as ``rebalance-monitor run --config FILE
--available-now`` with ``[spark] master`` naming the cluster and ``[paths]``/``[storage]`` the bucket. The input
and the reference are the crash-recovery test's workload and its uninterrupted run in the tests' ``local[2]``
session (``tests.support.kill_workload``): every table gets rows, bad records included, in many micro-batches.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from connectors.delta_reader import read_arrow, rows
from connectors.object_store import delta_rs_options, join
from streaming.config import load_config
from streaming.contract.tables import TABLES
from tests.spark_cluster.conftest import BUCKET
from tests.support.driver_kills import Progress
from tests.support.kill_workload import KillWorkloadRun, kill_workload_run

ROOT = Path(__file__).parents[2]


def write_config(path: Path, master: str) -> Path:
    """The job's configuration file: the master and nothing else (the rest comes from ``RRM__`` overrides)."""
    path.write_text(f'[spark]\nmaster = "{master}"\n')
    return path


def job_log(config: Path) -> Path:
    return config.with_suffix(".log")


def log_tail(config: Path) -> str:
    return job_log(config).read_text(errors="replace")[-3000:]


def start_job(config: Path, env: dict[str, str]) -> subprocess.Popen:
    """The job's output goes to a file beside ``config``: a pipe the test does not read while it waits would
    fill (64 KiB) with the warnings of a lost executor and block the driver at its next log line."""
    with job_log(config).open("ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "streaming.app.cli", "run", "--config", str(config), "--available-now"],
            cwd=ROOT,
            env={**os.environ, **env},
            start_new_session=True,
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def finish(process: subprocess.Popen, config: Path) -> None:
    try:
        process.wait(timeout=900)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, 9)
        raise
    assert process.returncode == 0, log_tail(config)


def run_job(config: Path, env: dict[str, str]) -> None:
    finish(start_job(config, env), config)


def on_s3(settings: dict[str, str], s3, prefix: str) -> dict[str, str]:
    """``settings`` with the tables and checkpoints under ``s3a://<bucket>/<prefix>`` and ``[storage]`` reaching
    the test's S3 server."""
    return {
        **settings,
        "RRM__PATHS__DELTA_ROOT": f"s3a://{BUCKET}/{prefix}/delta",
        "RRM__PATHS__CHECKPOINT_ROOT": f"s3a://{BUCKET}/{prefix}/checkpoints",
        **s3.storage_env(),
    }


def delta_rs_rows(root: str, table: str, storage_options: dict[str, str] | None = None) -> list[str]:
    """A table's rows as delta-rs reads them, each a sorted repr of its columns, sorted."""
    return sorted(repr(sorted(r.items())) for r in rows(read_arrow(join(root, table), storage_options=storage_options)))


def assert_same_tables(reference: KillWorkloadRun, run: dict[str, str]) -> dict[str, int]:
    """Every table of a run on S3 (``RRM__`` settings ``run``) equal to the reference run's, both read by delta-rs."""
    options = delta_rs_options(load_config(None, env=run).storage)
    counts = {}
    for table in TABLES:
        expected = delta_rs_rows(str(reference.root / "delta"), table)
        actual = delta_rs_rows(run["RRM__PATHS__DELTA_ROOT"], table, options)
        assert actual == expected, f"{table}: {len(actual)} rows on the cluster vs {len(expected)} in local[2]"
        counts[table] = len(expected)
    return counts


def commits(s3, env: dict[str, str], query: str) -> int:
    """Batches ``query`` committed: the commit files of its checkpoint on S3."""
    prefix = env["RRM__PATHS__CHECKPOINT_ROOT"].removeprefix(f"s3a://{BUCKET}/") + f"/{query}/commits/"
    return sum(1 for key in s3.keys(BUCKET, prefix) if key[len(prefix) :].isdigit())


def wait_for(condition, process: subprocess.Popen, config: Path, what: str, timeout_s: float = 600.0) -> None:
    """Until ``condition()``, while the job (configured by ``config``) runs; the job finishing first fails the
    test."""
    deadline = time.monotonic() + timeout_s
    while not condition() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert process.poll() is None, f"the job finished before {what}:\n{log_tail(config)}"
    assert condition(), f"not {what} within {timeout_s:.0f} s:\n{log_tail(config)}"


def test_a_worker_lost_mid_run_then_the_driver_killed_leave_the_tables_of_local(
    kafka_broker, spark, spark_cluster, s3_server, tmp_path, tmp_path_factory
):
    # The crash-recovery test's workload and uninterrupted local[2] run, on the same topics: batches of 60
    # records, many micro-batches (the send-ingest query's the most), so both kills land mid-run.
    reference = kill_workload_run(kafka_broker, spark, tmp_path_factory)
    cluster = on_s3(reference.settings(tmp_path / "cluster"), s3_server, "cluster")
    config = write_config(tmp_path / "cluster.toml", spark_cluster.master_url)
    query, total = "send-ingest", Progress.of(reference.root).commits["send-ingest"]

    def committed() -> int:
        return commits(s3_server, cluster, query)

    process = start_job(config, cluster)
    try:
        wait_for(lambda: committed() >= 2, process, config, "two batches committed")
        lost_at = committed()
        spark_cluster.kill_worker(1)  # the worker, its executor and the executor's Python workers: a lost machine
        wait_for(lambda: committed() > lost_at, process, config, "a batch committed without the lost worker")
        os.killpg(process.pid, 9)  # then the driver, mid-run: the restart resumes from the checkpoints
        process.wait(timeout=60)
        killed_at = committed()
    finally:
        if process.poll() is None:
            os.killpg(process.pid, 9)
        spark_cluster.start_worker(1)  # the cluster whole again, for the restart and later tests

    assert killed_at < total, f"the killed run had committed all {total} batches: the restart would prove nothing"
    run_job(config, cluster)  # restarted from the checkpoints, on both workers
    assert committed() == total
    # Nothing of the run on local disk (an s3a:// root taken for a relative path would be <cwd>/s3a:/...).
    assert not (ROOT / "s3a:").exists()

    counts = assert_same_tables(reference, cluster)
    for table in (
        "membership_changes",
        "group_snapshots",
        "anomaly_episodes",
        "fault_windows",
        "dead_letters",
    ):
        assert counts[table] > 0, f"{table} is empty: the comparison would prove nothing"
    # The cluster ran it: executors of the job's applications worked on both workers.
    assert all(list((Path(spark_cluster.home) / f"worker-{i}" / "work").glob("app-*")) for i in (0, 1))


PROBE = """
import json, sys
from streaming.job.runtime.spark_session import SparkSettings, build_spark_session

def where(_):
    import os, streaming, streaming.domain.consumers.shard_engine as shard_engine
    return json.dumps([streaming.__file__, shard_engine.__file__, os.getcwd()])

session = build_spark_session(SparkSettings(master=sys.argv[1], app_name="rrm-probe"))
print(json.dumps(sorted(set(session.sparkContext.parallelize(range(4), 4).map(where).collect()))))
session.stop()
"""


def test_executors_import_the_job_from_the_zip_the_driver_ships(spark_cluster):
    """Without the zip the executors' Python would find the project wherever the virtualenv's install points
    (this checkout, on this machine): the job's code must come from what the driver shipped."""
    from connectors.python_package import python_zip

    result = subprocess.run(
        [sys.executable, "-c", PROBE, spark_cluster.master_url], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    seen = [json.loads(entry) for entry in json.loads(result.stdout.strip().splitlines()[-1])]
    shipped = python_zip().name
    assert seen
    for package, module, cwd in seen:
        # Each executor's copy of the driver's zip, in its work directory under a worker, not the project.
        assert package.endswith(f"{shipped}/streaming/__init__.py"), package
        assert module.endswith(f"{shipped}/streaming/domain/consumers/shard_engine.py"), module
        assert Path(cwd).is_relative_to(spark_cluster.home) and not Path(cwd).is_relative_to(ROOT), cwd


def test_the_cli_starts_reports_and_stops_a_cluster_by_pid(tmp_path):
    from connectors.processes import pid_alive

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "streaming.app.cli", "spark-cluster", *args, "--home", str(tmp_path)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )

    pids: list[int] = []
    started = cli("start", "--workers", "1")
    try:
        assert started.returncode == 0, started.stderr[-2000:]
        recorded = json.loads((tmp_path / "cluster.json").read_text())
        pids = [recorded["master"]["pid"]] + [w["pid"] for w in recorded["workers"]]
        assert f"spark://127.0.0.1:{recorded['master']['port']}" in started.stdout and all(map(pid_alive, pids))
        status = cli("status")
        assert status.returncode == 0 and "1 of 1 workers ALIVE" in status.stdout, status.stdout
    finally:
        stopped = cli("stop")
    assert stopped.returncode == 0 and "stopped" in stopped.stdout
    assert not any(map(pid_alive, pids))
    after = cli("status")
    assert after.returncode == 3 and "not running" in after.stdout
