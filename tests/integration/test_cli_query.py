"""``rebalance-monitor query``, ``query sql`` and ``allocate --delta-root`` over real tables.

The tables are those of the simulated fleet's job run (``tests.support.fleet``, shared with the scenario
tests): its scale-out group has two members until 90 s and four after, its duplicate-id group has known
anomalies, producers avoid its slow broker, its consume-progress groups have a stuck holder, an offline group
with a backlog and an idle group (judged against the simulator's own offsets). The CLI reads them with delta-rs and DuckDB, in process
(``main(argv)``) and, to show it starts no JVM, in a subprocess; its answers are compared with Spark's
reads of the same tables.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shlex
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from deltalake import DeltaTable

from streaming.app.cli import main
from streaming.app.commands.tables import PROGRESS_COLUMNS
from streaming.app.simulation.fleet import Simulation
from streaming.contract.tables import TABLES, column_names
from streaming.job.delta.broker_gauges import producers_all_down
from tests.support.fleet import OTHER_CLUSTER, SEED, SENDS_PER_SECOND, SIMULATED_MS, START_MS, fleet_run, scenarios
from tests.support.runbook import confirm_commands, sections

ROOT = Path(__file__).parents[2]

SCALE_OUT = "scale-out-search-scale-out"
DUPLICATES = "duplicate-ids-ledger-containers"
SLOW_BROKER = "slow-broker-broker-b"
PROGRESS = "consume-progress"
STUCK, OFFLINE, IDLE = (f"{PROGRESS}-{name}" for name in ("fulfil-stuck", "archive-offline", "audit-idle"))


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
    before = cli_json(
        capsys, "query", "assignment", "--delta-root", delta, "--group", SCALE_OUT, "--at", str(START_MS + 60_000)
    )
    assert {r["client_id"] for r in before} == first
    assert [r["queue_count"] for r in before] == [4, 4] and len({r["generation"] for r in before}) == 1
    after = cli_json(capsys, "query", "assignment", "--delta-root", delta, "--group", SCALE_OUT)
    assert {r["client_id"] for r in after} == first | later
    assert [r["queue_count"] for r in after] == [2, 2, 2, 2]
    assert after[0]["generation"] > before[0]["generation"]
    owned = [(q["broker"], q["queue_id"]) for r in after for q in r["queues"]]
    assert sorted(owned) == [(b, q) for b in ("scale-out-broker-a", "scale-out-broker-b") for q in range(4)]
    # an ISO time means the same instant as epoch ms (UTC)
    iso = cli_json(
        capsys, "query", "assignment", "--delta-root", delta, "--group", SCALE_OUT, "--at", "2023-11-14T22:14:20"
    )  # START_MS + 60 s
    assert iso == before


def test_assignment_as_a_readable_table(delta, capsys):
    code, out, err = cli(capsys, "query", "assignment", "--delta-root", delta, "--group", SCALE_OUT)
    assert code == 0, err
    header, rule, *rows = out.strip().splitlines()
    assert header.split() == [
        "cluster",
        "group",
        "generation",
        "topic",
        "client_id",
        "queue_count",
        "queues",
        "event_time",
    ]
    assert set(rule) <= {"-", " "} and len(rows) == 4
    assert all(r.split()[:2] == ["DefaultCluster", SCALE_OUT] and "scale-out-orders" in r for r in rows)
    assert "scale-out-broker-a/" in out  # queues as broker/queue_id


def test_time_travel_over_current_assignment(delta, spark, capsys):
    history = spark.sql(f"DESCRIBE HISTORY delta.`{delta}/current_assignment`").collect()
    first_write = min(r["version"] for r in history if r["operation"] == "WRITE")  # the first batch's rows
    then = cli_json(
        capsys, "query", "assignment", "--delta-root", delta, "--group", SCALE_OUT, "--table-version", str(first_write)
    )
    assert len(then) == 2 and all(r["queue_count"] == 4 for r in then)  # the group began with two members
    now = cli_json(capsys, "query", "assignment", "--delta-root", delta, "--group", SCALE_OUT)
    latest = cli_json(
        capsys,
        "query",
        "assignment",
        "--delta-root",
        delta,
        "--group",
        SCALE_OUT,
        "--table-version",
        str(max(r["version"] for r in history)),
    )
    assert [(r["client_id"], r["queue_count"]) for r in latest] == [(r["client_id"], r["queue_count"]) for r in now]
    code, _, err = cli(
        capsys, "query", "assignment", "--delta-root", delta, "--group", SCALE_OUT, "--table-version", "99999"
    )
    assert code == 1 and len(err.strip().splitlines()) == 1 and "current_assignment" in err


def test_anomaly_episodes_of_a_group_and_in_a_time_range(delta, capsys):
    rows = cli_json(capsys, "query", "anomalies", "--delta-root", delta, "--group", DUPLICATES)
    assert {r["anomaly"] for r in rows} == {"DUPLICATE_CLIENT_ID", "ORPHANED_QUEUES", "DOUBLE_OWNED_QUEUES"}
    assert {r["group"] for r in rows} == {DUPLICATES} and {r["status"] for r in rows} >= {"OPENED"}
    duplicate = next(r for r in rows if r["anomaly"] == "DUPLICATE_CLIENT_ID")
    assert "172.17.0.1@1" in duplicate["details"] and duplicate["severity"] == "critical"
    # a range: the storm of the rebalance-storm scenario opens within its first 300 s, nothing opens after 6 min
    storm = cli_json(
        capsys,
        "query",
        "anomalies",
        "--delta-root",
        delta,
        "--kind",
        "REBALANCE_STORM",
        "--since",
        str(START_MS),
        "--until",
        str(START_MS + 300_000),
    )
    assert "rebalance-storm-cache-flapping" in {r["group"] for r in storm}
    assert all(
        r["anomaly"] == "REBALANCE_STORM" and START_MS <= r["event_time_ms"] <= START_MS + 300_000 for r in storm
    )
    late = cli_json(
        capsys, "query", "anomalies", "--delta-root", delta, "--group", DUPLICATES, "--since", str(START_MS + 3_600_000)
    )
    assert late == []
    code, out, _ = cli(capsys, "query", "anomalies", "--delta-root", delta, "--group", DUPLICATES)
    assert code == 0 and out.splitlines()[0].split() == [
        "event_time",
        "status",
        "cluster",
        "group",
        "topic",
        "anomaly",
        "severity",
        "summary",
    ]
    assert "DUPLICATE_CLIENT_ID" in out
    # The fleet plays this group in a second cluster too (tests.support.fleet): --cluster picks one's episodes.
    both = cli_json(capsys, "query", "anomalies", "--delta-root", delta, "--group", DUPLICATES)
    other = cli_json(
        capsys, "query", "anomalies", "--delta-root", delta, "--group", DUPLICATES, "--cluster", OTHER_CLUSTER
    )
    assert {r["cluster"] for r in both} == {"DefaultCluster", OTHER_CLUSTER} and {r["cluster"] for r in other} == {
        OTHER_CLUSTER
    }
    assert sorted((r["anomaly"], r["status"]) for r in other) == sorted(
        (r["anomaly"], r["status"]) for r in both if r["cluster"] == "DefaultCluster"
    )


def test_a_brokers_fault_windows(delta, capsys):
    rows = cli_json(capsys, "query", "faults", "--delta-root", delta, "--broker", SLOW_BROKER)
    assert rows and {r["broker"] for r in rows} == {SLOW_BROKER}
    opened = [r for r in rows if r["status"] == "OPENED"]
    assert opened and all(r["trigger_latency_ms"] >= 600 and r["window_end_ms"] > r["window_start_ms"] for r in opened)
    healthy = cli_json(capsys, "query", "faults", "--delta-root", delta, "--broker", "slow-broker-broker-a")
    assert healthy == []  # a broker producers use, never avoided
    code, out, _ = cli(capsys, "query", "faults", "--delta-root", delta, "--broker", SLOW_BROKER)
    assert code == 0 and "trigger_latency_ms" in out.splitlines()[0] and SLOW_BROKER in out


def progress_facts():
    """What the simulator's own offsets say at its last sample of the fleet run's consume-progress scenario."""
    simulation = Simulation(scenarios()[PROGRESS], START_MS, SEED, sends_per_second=SENDS_PER_SECOND)
    simulation.events_until(START_MS + SIMULATED_MS)
    return simulation.progress.facts()


def test_progress_names_the_stuck_holder_the_offline_group_and_the_idle_one(delta, capsys):
    facts = progress_facts()
    stuck = cli_json(capsys, "query", "progress", "--delta-root", delta, "--group", STUCK, "--state", "STUCK_HOLDER")
    expected = {ref: [client] for (group, ref), client in facts.stuck.items() if group == STUCK}
    assert expected and {(r["topic"], r["broker"], r["queue_id"]): r["holders"] for r in stuck} == expected
    assert all(r["severity"] == "critical" and r["cause"] and r["lag"] > 0 and r["group_online"] for r in stuck)
    assert all(r["lag"] == facts.lag[(STUCK, (r["topic"], r["broker"], r["queue_id"]))] for r in stuck)
    offline = cli_json(capsys, "query", "progress", "--delta-root", delta, "--group", OFFLINE)
    assert {r["state"] for r in offline} == {"ORPHAN_CONFIRMED"} and not any(r["group_online"] for r in offline)
    assert all(r["holders"] == [] for r in offline) and sum(r["lag"] for r in offline) == facts.offline[OFFLINE]
    idle = cli_json(capsys, "query", "progress", "--delta-root", delta, "--group", IDLE)
    assert idle and {(r["state"], r["lag"]) for r in idle} == {("IDLE", 0)}
    # before the stuck member's offsets stood still for a whole window, nothing of its group was stuck
    then = cli_json(
        capsys, "query", "progress", "--delta-root", delta, "--group", STUCK, "--at", str(START_MS + 150_000)
    )
    assert then and "STUCK_HOLDER" not in {r["state"] for r in then}
    code, out, err = cli(capsys, "query", "progress", "--delta-root", delta, "--group", STUCK)
    assert code == 0, err
    header, rule, *rows = out.strip().splitlines()
    assert header.split() == PROGRESS_COLUMNS and set(rule) <= {"-", " "}
    assert len(rows) == sum(1 for group, _ in facts.lag if group == STUCK)  # every queue the simulator sampled
    assert sum("STUCK_HOLDER" in r for r in rows) == len(expected)


@pytest.mark.parametrize(
    "argv, code, message",
    [
        (["query", "progress", "--group", "nope"], 1, "no consumer group with consume progress 'nope' in"),
        (["query", "progress", "--state", "STUCKED"], 2, "--state: no state 'STUCKED'"),
        (["query", "anomalies", "--state", "OK"], 2, "--state is for query progress"),
        (["query", "assignment", "--group", "nope"], 1, "no consumer group 'nope' in"),
        (["query", "anomalies", "--group", "nope"], 1, "no consumer group 'nope' in"),
        (["query", "faults", "--broker", "broker-z"], 1, "no broker 'broker-z' in"),
        (["query", "assignment", "--group", SCALE_OUT, "--at", str(START_MS - 1)], 1, "has no assignment at or before"),
        (["query", "assignment", "--group", SCALE_OUT, "--at", "noon"], 2, "--at: cannot read 'noon'"),
        (["allocate", "--group", "nope"], 1, "no consumer group 'nope' in"),
        (["allocate", "--group", SCALE_OUT, "--topic", "payments"], 1, "does not subscribe 'payments'"),
        (["allocate", "--group", SCALE_OUT, "--strategy", "RANDOM"], 2, "unknown allocation strategy 'RANDOM'"),
    ],
)
def test_bad_input_is_one_line_and_a_non_zero_exit(delta, capsys, argv, code, message):
    got, out, err = cli(capsys, *argv[:1], *argv[1:], "--delta-root", delta)
    assert got == code and not out
    lines = err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and lines[0].startswith(f"rebalance-monitor {argv[0]}")
    if "(known:" in lines[0]:
        assert SCALE_OUT in lines[0] or "slow-broker-broker-b" in lines[0] or "more" in lines[0]


def test_after_a_state_reset_the_latest_generation_is_the_latest_in_time(delta, spark, tmp_path, capsys):
    """A job started on a new checkpoint numbers a group's generations from 1 again while the tables keep the
    earlier ones: "the latest" (and ``--at``) is chosen by event time, and generation 1 of the new state is
    never mixed with generation 1 of the old."""
    from pyspark.sql import functions as F

    root = tmp_path / "delta"
    shutil.copytree(delta, root)
    before = cli_json(
        capsys, "query", "assignment", "--delta-root", str(root), "--group", SCALE_OUT, "--at", str(START_MS + 60_000)
    )
    latest = cli_json(capsys, "query", "assignment", "--delta-root", str(root), "--group", SCALE_OUT)
    assert latest[0]["generation"] > before[0]["generation"] > 0
    reset_ms = START_MS + SIMULATED_MS + 60_000  # after everything the fleet run recorded
    # the new state's first generation: the two first members again, at a later time
    for table in ("expected_assignments", "group_snapshots"):
        path = str(root / table)
        old = (F.col("group") == SCALE_OUT) & (F.col("generation") == before[0]["generation"])
        rows = spark.read.format("delta").load(path).where(old)
        assert rows.count() > 0, table
        renumbered = rows.withColumn("generation", F.lit(1).cast(rows.schema["generation"].dataType))
        renumbered = renumbered.withColumn("event_time_ms", F.lit(reset_ms).cast("long"))
        renumbered.write.format("delta").mode("append").save(path)

    now = cli_json(capsys, "query", "assignment", "--delta-root", str(root), "--group", SCALE_OUT)
    assert {r["client_id"] for r in now} == {r["client_id"] for r in before}
    assert {r["generation"] for r in now} == {1} and len(now) == len(before)
    earlier = cli_json(
        capsys, "query", "assignment", "--delta-root", str(root), "--group", SCALE_OUT, "--at", str(reset_ms - 1)
    )
    assert earlier == latest
    (what_if,) = cli_json(capsys, "allocate", "--delta-root", str(root), "--group", SCALE_OUT)
    assert sorted(what_if["cid_all"]) == sorted(r["client_id"] for r in before)


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


# -- the same answers as Spark's reads of the same tables --------------------------------------------------


def spark_rows(spark, delta: str, table: str, where: str | None = None, **options: str) -> list[dict]:
    reader = spark.read.format("delta")
    for key, value in options.items():
        reader = reader.option(key, value)
    frame = reader.load(f"{delta}/{table}")
    return [_utc(r.asDict(recursive=True)) for r in (frame.where(where) if where else frame).collect()]


def _utc(value):
    """PySpark gives timestamps as naive local times; the CLI prints naive UTC."""
    if isinstance(value, datetime):
        return datetime.fromtimestamp(value.timestamp(), UTC).replace(tzinfo=None)
    if isinstance(value, dict):
        return {k: _utc(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_utc(v) for v in value]
    return value


def same_rows(cli_rows: list[dict], expected: list[dict]) -> bool:
    """Equal as multisets of rows, values compared as the CLI's JSON prints them."""
    canon = lambda row: json.dumps(row, default=str, sort_keys=True)  # noqa: E731
    return sorted(map(canon, cli_rows)) == sorted(canon(json.loads(json.dumps(r, default=str))) for r in expected)


def ordered(rows: list[dict], *columns: str) -> bool:
    """Sorted on ``columns`` as Spark sorts ascending (nulls first)."""
    keys = [tuple((r[c] is not None, r[c]) for c in columns) for r in rows]
    return keys == sorted(keys)


def test_anomalies_and_faults_equal_spark_reads(delta, spark, capsys):
    every = cli_json(capsys, "query", "anomalies", "--delta-root", delta)
    assert len(every) > 10 and same_rows(every, spark_rows(spark, delta, "anomaly_episodes"))
    assert ordered(every, "event_time_ms", "group", "topic", "anomaly")
    since, until = START_MS + 30_000, START_MS + 240_000
    some = cli_json(
        capsys,
        "query",
        "anomalies",
        "--delta-root",
        delta,
        "--kind",
        "FLAPPING_MEMBERS",
        "--since",
        str(since),
        "--until",
        str(until),
    )
    where = f"anomaly = 'FLAPPING_MEMBERS' AND event_time_ms BETWEEN {since} AND {until}"
    assert some and same_rows(some, spark_rows(spark, delta, "anomaly_episodes", where))
    faults = cli_json(capsys, "query", "faults", "--delta-root", delta, "--broker", SLOW_BROKER)
    assert same_rows(faults, spark_rows(spark, delta, "fault_windows", f"broker = '{SLOW_BROKER}'"))
    assert ordered(faults, "event_time_ms", "broker", "producer_id")


def with_event_time(rows: list[dict]) -> list[dict]:
    """A current table's rows with the event_time the CLI adds (from event_time_ms, UTC)."""
    return [
        {**r, "event_time": datetime.fromtimestamp(r["event_time_ms"] / 1000, UTC).replace(tzinfo=None)} for r in rows
    ]


def test_progress_equals_spark_reads_now_and_at_a_time(delta, spark, capsys):
    now = cli_json(capsys, "query", "progress", "--delta-root", delta)
    assert {STUCK, OFFLINE, IDLE} <= {r["group"] for r in now}
    assert same_rows(now, with_event_time(spark_rows(spark, delta, "queue_progress_current")))
    assert ordered(now, "group", "topic", "broker", "queue_id")
    stuck = cli_json(capsys, "query", "progress", "--delta-root", delta, "--state", "STUCK_HOLDER")
    expected = spark_rows(spark, delta, "queue_progress_current", "state = 'STUCK_HOLDER'")
    assert stuck and same_rows(stuck, with_event_time(expected))
    at = START_MS + 150_000
    then = cli_json(capsys, "query", "progress", "--delta-root", delta, "--group", STUCK, "--at", str(at))
    history = spark_rows(spark, delta, "consume_progress", f"`group` = '{STUCK}' AND event_time_ms <= {at}")
    latest: dict[tuple, dict] = {}
    for row in history:
        key = (row["topic"], row["broker"], row["queue_id"])
        if key not in latest or row["event_time_ms"] > latest[key]["event_time_ms"]:
            latest[key] = row
    assert then and same_rows(then, list(latest.values()))


def test_assignments_equal_spark_reads(delta, spark, capsys):
    at = START_MS + 60_000
    before = cli_json(capsys, "query", "assignment", "--delta-root", delta, "--group", SCALE_OUT, "--at", str(at))
    history = spark_rows(spark, delta, "expected_assignments", f"`group` = '{SCALE_OUT}' AND event_time_ms <= {at}")
    last = max(r["generation"] for r in history)
    assert same_rows(before, [r for r in history if r["generation"] == last])
    assert ordered(before, "topic", "client_id")
    versions = spark.sql(f"DESCRIBE HISTORY delta.`{delta}/current_assignment`").collect()
    for version in sorted({r["version"] for r in versions}):
        then = cli_json(
            capsys, "query", "assignment", "--delta-root", delta, "--group", SCALE_OUT, "--table-version", str(version)
        )
        expected = spark_rows(spark, delta, "current_assignment", f"`group` = '{SCALE_OUT}'", versionAsOf=str(version))
        for row in expected:
            row["event_time"] = datetime.fromtimestamp(row["event_time_ms"] / 1000, UTC).replace(tzinfo=None)
        assert same_rows(then, expected), version


def test_allocate_reads_the_group_spark_reads(delta, spark, capsys):
    (now,) = cli_json(capsys, "allocate", "--delta-root", delta, "--group", SCALE_OUT)
    snapshots = spark_rows(spark, delta, "group_snapshots", f"`group` = '{SCALE_OUT}'")
    latest = max(snapshots, key=lambda r: r["generation"])
    assert (now["generation"], now["cid_all"]) == (latest["generation"], latest["cid_all"])
    owned = spark_rows(
        spark, delta, "expected_assignments", f"`group` = '{SCALE_OUT}' AND generation = {latest['generation']}"
    )
    queues = sorted(f"{q['broker']}/{q['queue_id']}" for r in owned for q in r["queues"])
    assert sorted(q for share in now["shares"] for q in share["queues"]) == queues


def test_sql_over_the_tables_equals_spark_sql(delta, spark, capsys):
    code, out, err = cli(
        capsys,
        "query",
        "sql",
        "--delta-root",
        delta,
        "--csv",
        'SELECT g."group", a.anomaly, count(*) AS episodes, max(g.generation) AS generation '
        'FROM anomaly_episodes a JOIN group_snapshots g ON a."group" = g."group" '
        "WHERE a.status = 'OPENED' GROUP BY ALL ORDER BY 1, 2",
    )
    assert code == 0, err
    got = list(csv.reader(io.StringIO(out)))
    expected = spark.sql(
        f"SELECT g.`group`, a.anomaly, count(*) AS episodes, max(g.generation) AS generation "
        f"FROM delta.`{delta}/anomaly_episodes` a JOIN delta.`{delta}/group_snapshots` g ON a.`group` = g.`group` "
        f"WHERE a.status = 'OPENED' GROUP BY g.`group`, a.anomaly ORDER BY 1, 2"
    ).collect()
    assert got[0] == ["group", "anomaly", "episodes", "generation"]
    assert got[1:] == [[str(v) for v in r] for r in expected] and len(expected) > 5
    # --json, and time travel: a table as of a version and as of a commit time
    history = spark.sql(f"DESCRIBE HISTORY delta.`{delta}/current_assignment`").collect()
    first_write = min((r for r in history if r["operation"] == "WRITE"), key=lambda r: r["version"])
    (counted,) = cli_json(
        capsys,
        "query",
        "sql",
        "--delta-root",
        delta,
        "--table-version",
        str(first_write["version"]),
        'SELECT count(*) AS n, count(DISTINCT "group") AS groups FROM current_assignment',
    )
    then = spark.read.format("delta").option("versionAsOf", first_write["version"]).load(f"{delta}/current_assignment")
    assert counted == {"n": then.count(), "groups": then.select("group").distinct().count()}
    moment = _utc(first_write["timestamp"])
    spark_at = spark.read.format("delta").option("timestampAsOf", moment.strftime("%Y-%m-%d %H:%M:%S.%f"))
    expected = spark_at.load(f"{delta}/current_assignment").count()
    (at,) = cli_json(
        capsys,
        "query",
        "sql",
        "--delta-root",
        delta,
        "--table-time",
        moment.isoformat(),
        "SELECT count(*) AS n FROM current_assignment",
    )
    assert at == {"n": expected}


def test_every_table_is_a_view_with_the_catalogue_columns(delta, capsys):
    for name in TABLES:
        code, out, err = cli(capsys, "query", "sql", "--delta-root", delta, "--csv", f"SELECT * FROM {name} LIMIT 0")
        assert code == 0, err
        assert out.strip().split(",") == column_names(name)


def test_the_runbooks_sql_runs_on_the_tables_and_finds_what_the_metric_counts(delta, capsys):
    statements = {
        heading: shlex.split(command)[2]
        for heading in sections()
        for command in confirm_commands(heading)
        if command.startswith("query sql ")
    }
    assert statements  # the runbook names some
    for heading, statement in statements.items():
        code, out, err = cli(capsys, "query", "sql", statement.replace("'G'", f"'{STUCK}'"), "--delta-root", delta)
        assert code == 0, (heading, err)
    # The producers the all-brokers-unavailable section lists are those the job's gauge counts, at the same time.
    items = DeltaTable(f"{delta}/producer_broker_status_current").to_pyarrow_table().to_pylist()
    ends: dict[str, int] = {}  # each producer's earliest window end: all its brokers are unavailable before it
    for item in items:
        if item["unavailable_until_ms"] is not None:
            ends[item["producer_id"]] = min(item["unavailable_until_ms"], ends.get(item["producer_id"], 2**62))
    at = max(ends.values()) - 1
    listed = statements["RocketMQMonitorProducerAllBrokersUnavailable"].replace("epoch_ms(now())", str(at))
    rows = cli_json(capsys, "query", "sql", listed, "--delta-root", delta)
    assert len(rows) == producers_all_down(items, at) > 0


@pytest.mark.parametrize(
    "statement, code, message",
    [
        ("SELECT * FROM no_such_table", 1, "no monitor table 'no_such_table'"),
        ("SELEC 1", 2, "query sql: Parser Error"),
        ("SELECT nope FROM dead_letters", 2, "query sql: Binder Error"),
    ],
)
def test_bad_sql_is_one_line_and_a_non_zero_exit(delta, capsys, statement, code, message):
    got, out, err = cli(capsys, "query", "sql", statement, "--delta-root", delta)
    assert got == code and not out
    lines = err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], err


# -- no JVM -----------------------------------------------------------------------------------------------


def test_query_sql_progress_and_allocate_start_no_jvm(delta, spark, tmp_path):
    """In a subprocess whose only java records that it ran and fails: the answers still come, no JVM
    package is imported (``-X importtime`` lists every import) and java never ran."""
    started = tmp_path / "java-started"
    fake_java_home = tmp_path / "java-home"
    (fake_java_home / "bin").mkdir(parents=True)
    java = fake_java_home / "bin" / "java"
    java.write_text(f'#!/bin/sh\necho "$@" >> {started}\nexit 1\n')
    java.chmod(0o755)
    env = {
        **os.environ,
        "JAVA_HOME": str(fake_java_home),
        "PATH": f"{fake_java_home / 'bin'}:{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT),
        "SPARK_HOME": str(tmp_path / "no-spark"),
    }
    answers = {}
    for argv in (
        ["query", "anomalies", "--json"],
        ["query", "faults", "--broker", SLOW_BROKER, "--json"],
        ["query", "assignment", "--group", SCALE_OUT, "--table-version", "1", "--json"],
        ["query", "sql", "SELECT count(*) AS n FROM fault_windows", "--json"],
        ["query", "progress", "--json"],
        ["allocate", "--group", SCALE_OUT, "--json"],
    ):
        result = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "streaming.app.cli", *argv, "--delta-root", delta],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr[-2000:]
        imported = {line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines() if "|" in line}
        assert "deltalake" in imported and "duckdb" in imported
        jvm_side = {m for m in imported if m.split(".")[0] in ("pyspark", "py4j", "jpype", "delta")}
        assert not jvm_side, sorted(jvm_side)[:5]
        answers[argv[1] if argv[0] == "query" else argv[0]] = json.loads(result.stdout)
    assert not started.exists(), started.read_text()
    assert same_rows(answers["anomalies"], spark_rows(spark, delta, "anomaly_episodes"))
    assert same_rows(answers["faults"], spark_rows(spark, delta, "fault_windows", f"broker = '{SLOW_BROKER}'"))
    assert answers["sql"] == [{"n": len(spark_rows(spark, delta, "fault_windows"))}]
    assert same_rows(answers["progress"], with_event_time(spark_rows(spark, delta, "queue_progress_current")))
    assert answers["assignment"] and {r["group"] for r in answers["assignment"]} == {SCALE_OUT}
    assert answers["allocate"][0]["group"] == SCALE_OUT and answers["allocate"][0]["shares"]
