"""``rebalance-monitor``: the command operators and developers use.

Each subcommand is a small function; heavy imports (pyspark, kafka) happen inside them so ``--help`` is
instant. Bad arguments print one clear line and exit non-zero (argparse's exit code 2).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from connectors.jvm_artifacts import PROJECT_ROOT

EPILOG_KAFKA = """examples:
  rebalance-monitor kafka start            # start (or reuse) the local broker, print bootstrap servers
  rebalance-monitor kafka status
  rebalance-monitor kafka stop
"""

EPILOG_ROCKETMQ = """examples:
  rebalance-monitor rocketmq start              # name server + broker-a + broker-b (5.3.3), print addresses
  rebalance-monitor rocketmq start --line 4.9   # the same on RocketMQ 4.9.7 (.run/rocketmq/4.9)
  rebalance-monitor rocketmq status
  rebalance-monitor rocketmq stop
"""

EPILOG_SPARK_CLUSTER = """examples:
  rebalance-monitor spark-cluster start    # master + two 1-core workers on 127.0.0.1, print the master URL
  rebalance-monitor spark-cluster status
  rebalance-monitor spark-cluster stop
then run the job on it by configuration alone:
  RRM__SPARK__MASTER=spark://127.0.0.1:PORT rebalance-monitor run --config conf/monitor.toml
"""

EPILOG_COLLECT = """examples:
  rebalance-monitor collect --config my-monitor.toml       # [collector] and [kafka] of the file; Ctrl-C stops
  RRM__COLLECTOR__NAMESRV_ADDR="10.0.0.1:9876;10.0.0.2:9876" rebalance-monitor collect --config my-monitor.toml
  rebalance-monitor collect --config my-monitor.toml --cycles 1   # one poll cycle, then exit
"""

EPILOG_SMOKE = """examples:
  rebalance-monitor smoke                  # 20 JSON events through Kafka and Spark into Delta
  rebalance-monitor smoke --count 100 --keep-broker
"""


def _kafka(args: argparse.Namespace) -> int:
    from localenv.kafka_broker import LocalKafkaBroker

    broker = LocalKafkaBroker(args.home)
    if args.action == "start":
        info = broker.start()
        print(f"Kafka broker running: pid {info.pid}, bootstrap servers {info.bootstrap_servers}")
    elif args.action == "stop":
        print("Kafka broker stopped" if broker.stop() else "no Kafka broker was running")
    else:
        info = broker.info()
        print(f"running: pid {info.pid}, {info.bootstrap_servers}" if info else "not running")
        return 0 if info else 3
    return 0


def _spark_cluster(args: argparse.Namespace) -> int:
    from localenv.spark_cluster import SparkClusterError

    try:
        return _spark_cluster_action(args)
    except SparkClusterError as error:
        print(f"rebalance-monitor spark-cluster: {error}", file=sys.stderr)
        return 1


def _spark_cluster_action(args: argparse.Namespace) -> int:
    from localenv.spark_cluster import LocalSparkCluster

    if args.action == "start":
        cluster = LocalSparkCluster(
            args.home,
            master_port=args.master_port,
            webui_port=args.webui_port,
            workers=args.workers,
            worker_cores=args.worker_cores,
            worker_memory=args.worker_memory,
        )
        print(f"starting a Spark standalone cluster (master, {args.workers} workers) in {cluster.home} ...", flush=True)
        info = cluster.start()
        print(
            f"Spark cluster running: master {info.master_url} (pid {info.master.pid}, status "
            f"{info.webui_url}/json/), workers " + ", ".join(f"pid {w.pid}" for w in info.workers)
        )
        return 0
    cluster = LocalSparkCluster(args.home)
    if args.action == "stop":
        print("Spark cluster stopped" if cluster.stop() else "no Spark cluster was running")
    else:
        info = cluster.info()
        if info is None:
            print("not running")
            return 3
        running = cluster.running_workers()
        alive = cluster.alive_workers()
        print(
            f"running: master {info.master_url} (pid {info.master.pid}), {alive} of {len(info.workers)} workers "
            "ALIVE; "
            + ", ".join(
                f"worker-{i} pid {w.pid} {'up' if i in running else 'DOWN'}" for i, w in enumerate(info.workers)
            )
        )
    return 0


def _rocketmq(args: argparse.Namespace) -> int:
    from localenv.rocketmq_cluster import LocalRocketMQCluster

    cluster = LocalRocketMQCluster(args.line, args.home, namesrv_port=args.namesrv_port)
    if args.action == "start":
        print(f"starting RocketMQ {args.line} (name server, broker-a, broker-b) in {cluster.home} ...", flush=True)
        info = cluster.start()
        print(
            f"RocketMQ cluster running: name server {info.namesrv_addr} (pid {info.namesrv.pid}), "
            + ", ".join(f"{name} {info.broker_addr(name)} (pid {p.pid})" for name, p in info.brokers.items())
        )
    elif args.action == "stop":
        print("RocketMQ cluster stopped" if cluster.stop() else "no RocketMQ cluster was running")
    else:
        info = cluster.info()
        if info is None:
            print("not running")
            return 3
        running = cluster.running_brokers()
        print(
            f"running: name server {info.namesrv_addr} (pid {info.namesrv.pid}), "
            + ", ".join(
                f"{name} {info.broker_addr(name)} {'up' if name in running else 'DOWN'}" for name in info.brokers
            )
        )
    return 0


def _collect(args: argparse.Namespace) -> int:
    from connectors.rocketmq_collector import supervise
    from streaming.config import load_config

    config = load_config(args.config)
    c = config.collector
    print(
        f"collecting from name server {c.namesrv_addr} every {c.poll_interval_ms} ms into Kafka "
        f"{config.kafka.bootstrap_servers}"
        + (f"; metrics on http://{c.metrics_host}:{c.metrics_port}/metrics" if c.metrics_port else ""),
        flush=True,
    )
    return supervise(
        config, Path(args.work_dir), lambda line: print(line, file=sys.stderr, flush=True), max_cycles=args.cycles
    )


def _smoke(args: argparse.Namespace) -> int:
    from localenv.kafka_broker import LocalKafkaBroker
    from localenv.smoke import run_smoke
    from streaming.job.spark_session import build_spark_session

    broker = LocalKafkaBroker(args.home)
    print("starting the local Kafka broker ...", flush=True)
    info = broker.start()
    try:
        print(f"broker ready at {info.bootstrap_servers}; starting Spark ...", flush=True)
        session = build_spark_session()
        work_dir = Path(tempfile.mkdtemp(prefix="rrm-smoke-", dir=PROJECT_ROOT / ".run"))
        result = run_smoke(
            session, info.bootstrap_servers, work_dir, topic=f"rrm.smoke.{int(time.time())}", count=args.count
        )
        verdict = "EQUAL" if result.equal else "DIFFERENT"
        print(
            f"produced {len(result.produced)} events, read back {len(result.read_back)} rows "
            f"from the Delta table {work_dir / 'smoke_events'}: {verdict}"
        )
        session.stop()
        return 0 if result.equal else 1
    finally:
        if not args.keep_broker:
            broker.stop()


EPILOG_RUN = """examples:
  rebalance-monitor run --config conf/monitor.toml
  RRM__KAFKA__BOOTSTRAP_SERVERS=kafka:9092 rebalance-monitor run --config my.toml
  rebalance-monitor run --config my.toml --available-now     # process what is in Kafka now, then exit
SIGTERM or Ctrl-C stops the job cleanly once the running micro-batches end ([spark] stop_grace_seconds; a second
signal stops at once); a restart resumes from the checkpoints.
"""


def _run(args: argparse.Namespace) -> int:
    from streaming.config import load_config
    from streaming.job.runner import MonitorJob

    config = load_config(args.config)  # a ConfigError is one line per problem and exit code 2 (main)
    job = MonitorJob(config, available_now=args.available_now)
    if args.available_now:
        try:
            job.start()
            job.await_available()
        finally:
            job.stop()
        return 0
    print(
        f"monitor running: Delta tables in {config.paths.delta_root}, "
        f"metrics on http://{config.metrics.host}:{config.metrics.port}/metrics "
        "(Ctrl-C stops after the running batches, twice at once)",
        flush=True,
    )
    return job.run(duration_s=args.duration)


EPILOG_MAINTAIN = """examples:
  rebalance-monitor maintain --config conf/monitor.toml            # safe while the job runs
  rebalance-monitor maintain --config conf/monitor.toml --dry-run  # what VACUUM would delete; nothing changes
  rebalance-monitor maintain --config conf/monitor.toml --job-stopped
VACUUMs every table, keeping the table's delta.deletedFileRetentionDuration ([delta]
deleted_file_retention_hours when the job created it), and compacts the append-only tables the job does
not compact itself ([delta] auto_compact = false). --job-stopped compacts every table: while the job runs,
a second compaction of the files it compacts or MERGEs would fail its write. Run it daily.
"""


def _maintain(args: argparse.Namespace) -> int:
    from streaming.config import load_config
    from streaming.job.maintenance import maintain, monitor_tables, report_lines
    from streaming.job.spark_session import SparkSettings

    config = load_config(args.config)
    root = Path(config.paths.delta_root).resolve()
    if not any((root / name / "_delta_log").is_dir() for name, _ in monitor_tables()):
        raise NotFound(f"no monitor tables under {root} (paths.delta_root); nothing to maintain")
    session, owned = _spark(
        SparkSettings(
            master=config.spark.master,
            app_name=f"{config.spark.app_name}-maintain",
            driver_memory=config.spark.driver_memory,
            extra_conf=dict(config.spark.conf),
        )
    )
    try:
        reports = maintain(session, root, job_stopped=args.job_stopped, dry_run=args.dry_run)
    finally:
        if owned:
            session.stop()  # type: ignore[attr-defined]
    print("\n".join(report_lines(reports, args.dry_run)))
    return 0


EPILOG_DEMO = """examples:
  rebalance-monitor demo                          # mixed scenario until Ctrl-C
  rebalance-monitor demo --duration 90 --scenario duplicate-ids
  rebalance-monitor demo --speed 60 --no-live     # plain log lines instead of the live view
  rebalance-monitor demo --rocketmq               # a real local RocketMQ cluster, real consumers, the collector
  rebalance-monitor demo --rocketmq --line 4.9 --duration 120
With --rocketmq the fleet options (--scenario, --speed, --seed, --groups, ...) do not apply: the consumers are real
processes and the script is fixed (a duplicate client ID, an inconsistent subscription, a crash, a scale-out);
--duration counts from the script's start, once the monitor shows the initial groups (the script takes about 45 s).
"""

EPILOG_SIMULATE = """examples:
  rebalance-monitor simulate --config conf/monitor.toml --scenario crash          # into the config's Kafka topics
  rebalance-monitor simulate --bootstrap-servers 127.0.0.1:9092 --speed 20 --start 2026-11-21T00:00 --duration 600
  rebalance-monitor simulate --scenario duplicate-ids --fleet-seconds 300 --output events.jsonl
  rebalance-monitor simulate --bootstrap-servers 127.0.0.1:9092 --create-topics --groups 200  # a local test broker
  rebalance-monitor simulate --config conf/monitor.toml --producer-option security_protocol=SSL \\
      --producer-option ssl_cafile=/etc/kafka/ca.pem
Without the job: a monitor running elsewhere reads the topics. The config's [kafka.options] (Java client
names) are carried over to the producer where kafka-python can follow them: security.protocol, SASL PLAIN or
SCRAM credentials in sasl.jaas.config, PEM trust and key stores, host-name checking, timeouts; JKS or PKCS12
stores and Kerberos or OAuth logins are refused with the --producer-option to give instead (kafka-python
names; they override the config's). Into Kafka, fleet time never runs further ahead of the wall clock than the config's
[ingest] max_future_skew_ms allows (the monitor would dead-letter those events): with --speed above 1, start
in the past. What the monitor should report for the scenario is printed first.
"""

EPILOG_QUERY = """examples:
  rebalance-monitor query assignment --delta-root .run/delta --group orders-consumers --at 2026-11-21T14:03:00
  rebalance-monitor query assignment --delta-root .run/delta --group orders-consumers --table-version 12
  rebalance-monitor query anomalies --delta-root .run/delta --since 2026-11-21T00:00 --until 2026-11-21T06:00
  rebalance-monitor query anomalies --delta-root .run/delta --group ledger-containers --json
  rebalance-monitor query anomalies --delta-root .run/delta --table-time 2026-11-21T06:00  # as the tables were
  rebalance-monitor query faults --delta-root .run/delta --broker broker-b
  rebalance-monitor query sql "SELECT anomaly, count(*) AS episodes FROM anomaly_episodes
      WHERE status = 'OPENED' GROUP BY anomaly ORDER BY episodes DESC" --csv
  rebalance-monitor query sql "SELECT count(*) FROM current_assignment" --table-version 3
times are epoch milliseconds or ISO-8601 (UTC unless a zone is given); they are event times, except
--table-time, which is a Delta commit time (time travel: each table as it was then). query sql runs DuckDB
SQL (UTC session time zone) over the tables it names (see docs/tables.md); nothing here starts a JVM.
"""

EPILOG_ALLOCATE = """examples:
  rebalance-monitor allocate --strategy AVG --queues 8 --clients 10.0.0.1@1,172.17.0.1@1,172.17.0.1@1
  rebalance-monitor allocate --strategy CONSISTENT_HASH --virtual-nodes 10 --brokers broker-a,broker-b \\
      --queues 4 --clients c1,c2,c3 --json
  rebalance-monitor allocate --delta-root .run/delta --group ledger-containers --strategy AVG_BY_CIRCLE
      (the group's members and queues as the monitor last saw them, or --at a time; what if it used AVG_BY_CIRCLE)
every client in cidAll is assumed to subscribe the topic; duplicates in --clients are channels sharing an id.
"""


class UsageError(Exception):
    """Bad input found after parsing: printed as one line, exit code 2."""


class NotFound(Exception):
    """A group, broker or table that is not there: printed as one line, exit code 1."""


def _demo(args: argparse.Namespace) -> int:
    if args.rocketmq:
        from streaming.demo_rocketmq import RocketMQDemoSettings, run_rocketmq_demo

        return run_rocketmq_demo(
            RocketMQDemoSettings(args.line, args.duration, args.metrics_port, live=not args.no_live)
        )
    from streaming.demo import DemoSettings, run_demo

    return run_demo(
        DemoSettings(
            args.scenario,
            args.duration,
            args.speed,
            args.seed,
            args.metrics_port,
            live=not args.no_live,
            extra_groups=args.groups,
            clients_per_group=args.clients,
            queues_per_broker=args.queues,
            sends_per_second=args.send_rate,
        )
    )


def _simulate(args: argparse.Namespace) -> int:
    import dataclasses
    import signal
    import threading

    from streaming.simulation.publish import MissingTopics, SimulateSettings, run_to_file, run_to_kafka

    if args.output is not None and args.fleet_seconds is None:
        raise UsageError("--output needs --fleet-seconds: how much fleet time to write")
    kafka_only = args.config or args.bootstrap_servers or args.producer_option or args.create_topics
    if args.output is not None and kafka_only:
        raise UsageError(
            "--output writes a file; --config, --bootstrap-servers, --producer-option and --create-topics are for Kafka"
        )
    config = None
    if args.output is None:
        from streaming.config import load_config

        config = load_config(args.config)  # a ConfigError is one line per problem and exit code 2 (main)
    settings = SimulateSettings(
        scenario=args.scenario,
        seed=args.seed,
        namespace=args.namespace,
        extra_groups=args.groups,
        clients_per_group=args.clients,
        queues_per_broker=args.queues,
        sends_per_second=args.send_rate,
        start_ms=_time_option("--start", args.start),
        speed=args.speed,
        fleet_seconds=args.fleet_seconds,
        duration_s=args.duration,
        max_future_skew_ms=config.ingest.max_future_skew_ms if config else 0,
    )

    def say(line: str) -> None:
        print(f"[simulate] {line}", file=sys.stderr if args.output == "-" else sys.stdout, flush=True)

    if args.output is not None:
        return run_to_file(settings, args.output, say)
    assert config is not None
    from connectors.kafka_options import UntranslatableOption, producer_options

    try:
        translated = producer_options(config.kafka.options)
    except UntranslatableOption as error:
        raise UsageError(str(error)) from None
    if translated.not_used:
        say(
            f"[kafka.options] not used for publishing (they tune the monitor's consumer): "
            f"{', '.join(sorted(translated.not_used))}"
        )
    options = {**translated.options, **_producer_options(args.producer_option)}  # the command line wins
    topics = dataclasses.asdict(config.kafka.topics)  # event type -> Kafka topic
    bootstrap = args.bootstrap_servers or config.kafka.bootstrap_servers
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        return run_to_kafka(settings, bootstrap, topics, options, say, stop, create_missing_topics=args.create_topics)
    except MissingTopics as error:
        raise NotFound(str(error)) from None
    except KeyboardInterrupt:
        stop.set()
        return 130
    except Exception as error:  # kafka-python: no broker reachable, bad security settings
        if type(error).__module__.startswith("kafka"):
            detail = type(error).__name__ + ("" if str(error) in ("", type(error).__name__) else f": {error}")
            raise NotFound(f"cannot publish to Kafka at {bootstrap} ({detail})") from None
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)


def _producer_options(pairs: list[str]) -> dict[str, object]:
    """``KEY=VALUE`` pairs for kafka-python's producer; numbers and true/false become ints and bools."""
    from kafka import KafkaProducer

    options: dict[str, object] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--producer-option {pair!r}: expected KEY=VALUE")
        if key not in KafkaProducer.DEFAULT_CONFIG:
            raise UsageError(
                f"--producer-option {key!r} is not a kafka-python producer option "
                "(they use underscores, e.g. security_protocol)"
            )
        lowered = value.lower()
        options[key] = int(value) if value.isdigit() else lowered == "true" if lowered in ("true", "false") else value
    return options


def _time_option(name: str, text: str | None) -> int | None:
    from streaming.queries import parse_time_ms

    try:
        return parse_time_ms(text)
    except ValueError:
        raise UsageError(f"{name}: cannot read {text!r} as epoch milliseconds or an ISO-8601 time") from None


def _tables_root(text: str, *tables: str) -> Path:
    root = Path(text)
    missing = [t for t in tables if not (root / t / "_delta_log").is_dir()]
    if missing:
        raise UsageError(f"no monitor tables under {root} (missing {', '.join(missing)}); pass --delta-root")
    return root


def _spark(settings: object = None) -> tuple[object, bool]:
    """The active session (in-process callers such as tests) or one of ``settings`` (a ``SparkSettings``;
    by default a small local one) that we stop afterwards."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    from streaming.job.spark_session import SparkSettings, build_spark_session

    return build_spark_session(settings or SparkSettings(master="local[1]", app_name="rrm-query")), True


def _known(tables, table: str, column: str, value: str, what: str) -> None:  # type: ignore[no-untyped-def]
    import pyarrow.compute as pc

    names = sorted(n for n in pc.unique(tables.arrow(table, columns=[column])[column]).to_pylist() if n is not None)
    if value in names:
        return
    shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
    raise NotFound(f"no {what} {value!r} in {tables.root} (known: {shown or 'none'})")


ASSIGNMENT_COLUMNS = ["group", "generation", "topic", "client_id", "queue_count", "queues", "event_time"]
ANOMALY_COLUMNS = ["event_time", "status", "group", "topic", "anomaly", "severity", "summary"]
FAULT_COLUMNS = [
    "event_time",
    "status",
    "broker",
    "producer_id",
    "window_start_ms",
    "window_end_ms",
    "trigger_latency_ms",
    "level",
    "cause",
    "fault_table",
]
# Each query's table and its SQL over the view of that name ($-parameters; a NULL parameter filters nothing).
# Each query's DuckDB SQL over the views of the tables it names ($-parameters; NULL filters nothing).
QUERY_SQL = {
    "assignment": """
        SELECT * FROM expected_assignments
        WHERE "group" = $group AND ($at IS NULL OR event_time_ms <= $at)
        QUALIFY generation = max(generation) OVER ()
        ORDER BY topic, client_id""",
    "assignment-version": """
        SELECT *, epoch_ms(event_time_ms) AS event_time FROM current_assignment
        WHERE "group" = $group ORDER BY topic, client_id""",
    "anomalies": """
        SELECT * FROM anomaly_episodes
        WHERE ($group IS NULL OR "group" = $group) AND ($kind IS NULL OR anomaly = $kind)
          AND ($since IS NULL OR event_time_ms >= $since) AND ($until IS NULL OR event_time_ms <= $until)
        ORDER BY event_time_ms, "group", topic, anomaly, status, episode_id""",
    "faults": """
        SELECT * FROM fault_windows
        WHERE ($broker IS NULL OR broker = $broker)
          AND ($since IS NULL OR event_time_ms >= $since) AND ($until IS NULL OR event_time_ms <= $until)
        ORDER BY event_time_ms, broker, producer_id, status, window_start_ms""",
    "group-at": """
        SELECT * FROM group_snapshots WHERE "group" = $group AND ($at IS NULL OR event_time_ms <= $at)
        ORDER BY generation DESC LIMIT 1""",
    "group-assignments": """
        SELECT * FROM expected_assignments WHERE "group" = $group AND generation = $generation""",
}


def _query(args: argparse.Namespace) -> int:
    from connectors.delta_reader import MonitorTables, TableMissing, VersionMissing, rows
    from streaming.queries import emit

    at = _time_option("--at", args.at)
    since, until = _time_option("--since", args.since), _time_option("--until", args.until)
    table_time = _time_option("--table-time", args.table_time)
    if since is not None and until is not None and since > until:
        raise UsageError("--since is after --until")
    if args.what == "sql":
        if at is not None or since is not None or until is not None or args.group or args.broker or args.kind:
            raise UsageError("query sql takes only its statement, --table-version, --table-time and the output format")
    if args.what == "assignment" and not args.group:
        raise UsageError("query assignment needs --group")
    if args.what in ("anomalies", "faults") and (at is not None or args.table_version is not None):
        raise UsageError("--at and --table-version are for query assignment (and --table-version for query sql)")
    if args.table_version is not None and args.table_version < 0:
        raise UsageError("--table-version must be >= 0")
    if args.table_version is not None and table_time is not None:
        raise UsageError("give --table-version or --table-time, not both")
    if args.csv and args.json:
        raise UsageError("give --json or --csv, not both")
    if args.csv and args.what != "sql":
        raise UsageError("--csv is for query sql")
    needs = {
        "assignment": ("group_snapshots", "expected_assignments", "current_assignment"),
        "anomalies": ("group_snapshots", "anomaly_episodes"),
        "faults": ("fault_windows",),
        "sql": (),
    }[args.what]
    root = _tables_root(args.delta_root, *needs)
    tables = MonitorTables(root, as_of_ms=table_time)
    if not tables.names():
        raise UsageError(f"no monitor tables under {root}; pass --delta-root")
    try:
        if args.what == "sql":
            try:
                result = tables.sql(args.statement, version=args.table_version)
            except ValueError as error:
                raise UsageError(f"query sql: {error}") from None
            print(emit(rows(result), result.column_names, "json" if args.json else "csv" if args.csv else "table"))
            return 0
        found, columns = _query_rows(tables, args, at, since, until, table_time)
    except (TableMissing, VersionMissing) as error:
        raise NotFound(str(error)) from None
    print(emit(rows(found), columns, "json" if args.json else "table"))
    return 0


def _query_rows(tables, args, at, since, until, table_time):  # type: ignore[no-untyped-def]
    if args.group:
        _known(tables, "group_snapshots", "group", args.group, "consumer group")
    if args.what == "assignment":
        if args.table_version is not None or table_time is not None:  # Delta time travel
            found = tables.sql(QUERY_SQL["assignment-version"], {"group": args.group}, args.table_version)
            return found, ASSIGNMENT_COLUMNS
        found = tables.sql(QUERY_SQL["assignment"], {"group": args.group, "at": at})
        if not found.num_rows:
            raise NotFound(f"consumer group {args.group!r} has no assignment at or before {args.at}")
        return found, ASSIGNMENT_COLUMNS
    if args.what == "anomalies":
        parameters = {"group": args.group, "kind": args.kind, "since": since, "until": until}
        return tables.sql(QUERY_SQL["anomalies"], parameters), ANOMALY_COLUMNS
    if args.broker:  # brokers producers sent to, with or without fault windows
        known = "broker_status_current" if "broker_status_current" in tables.names() else "fault_windows"
        _known(tables, known, "broker", args.broker, "broker")
    parameters = {"broker": args.broker, "since": since, "until": until}
    return tables.sql(QUERY_SQL["faults"], parameters), FAULT_COLUMNS


def _group_from_delta(args: argparse.Namespace) -> list[dict[str, object]]:
    """(topic, cidAll, queues, strategy, line, generation) of a group as the monitor recorded it."""
    import json

    from connectors.delta_reader import MonitorTables, rows

    at = _time_option("--at", args.at)
    tables = MonitorTables(_tables_root(args.delta_root, "group_snapshots", "expected_assignments"))
    _known(tables, "group_snapshots", "group", args.group, "consumer group")
    found = rows(tables.sql(QUERY_SQL["group-at"], {"group": args.group, "at": at}))
    if not found:
        raise NotFound(f"consumer group {args.group!r} has no generation at or before {args.at}")
    snapshot = found[0]
    parameters = {"group": args.group, "generation": snapshot["generation"]}
    assignments = rows(tables.sql(QUERY_SQL["group-assignments"], parameters))
    details = json.loads(snapshot["details"])
    topics = [args.topic] if args.topic else list(snapshot["topics"])
    if args.topic and args.topic not in snapshot["topics"]:
        raise NotFound(
            f"consumer group {args.group!r} does not subscribe {args.topic!r} (it subscribes "
            f"{', '.join(snapshot['topics']) or 'nothing'})"
        )
    groups = []
    for topic in topics:
        seen = {(q["broker"], q["queue_id"]) for r in assignments if r["topic"] == topic for q in r["queues"]}
        count = int(details["topics"][topic]["queues"])
        per_broker: dict[str, int] = {}
        for broker, queue_id in seen:
            per_broker[broker] = max(per_broker.get(broker, 0), queue_id + 1)
        if sum(per_broker.values()) != count:
            # Some queues had no owner (the expected assignments list owned queues only): assume, as RocketMQ
            # clusters are usually set up, the same queue count on every broker the group's clients talk to.
            brokers = sorted(set(per_broker) | set(snapshot["brokers"] or ()))
            even = count // len(brokers) if brokers and count % len(brokers) == 0 else 0
            if not even or any(n > even for n in per_broker.values()):
                raise NotFound(
                    f"cannot rebuild the {count} queues of {topic!r} at generation "
                    f"{snapshot['generation']}; pass --clients, --brokers and --queues instead"
                )
            per_broker = dict.fromkeys(brokers, even)
        queues = [(topic, b, q) for b in sorted(per_broker) for q in range(per_broker[b])]
        versions = [v for v in (snapshot["client_line"] or "").split(",") if v]
        groups.append(
            {
                "topic": topic,
                "cid_all": list(snapshot["cid_all"]),
                "queues": queues,
                "strategy": (snapshot["strategy"] or "AVG").split(",")[0],
                "versions": versions,
                "generation": snapshot["generation"],
            }
        )
    return groups


def _allocate(args: argparse.Namespace) -> int:
    import json

    from streaming.domain.errors import DomainError
    from streaming.domain.versions import ClientLine
    from streaming.queries import format_table, what_if

    if args.delta_root is not None or args.group is not None:
        if not (args.delta_root and args.group):
            raise UsageError("allocate from the Delta tables needs both --delta-root and --group")
        if args.clients is not None or args.queues is not None:
            raise UsageError("give either --clients and --queues, or --delta-root and --group, not both")
        cases = _group_from_delta(args)
    else:
        if args.clients is None or args.queues is None:
            raise UsageError("allocate needs --clients and --queues (or --delta-root and --group)")
        clients = [c.strip() for c in args.clients.split(",") if c.strip()]
        brokers = [b.strip() for b in args.brokers.split(",") if b.strip()]
        if not clients or args.queues < 1 or not brokers:
            raise UsageError("allocate needs a client in --clients, a broker in --brokers and --queues >= 1")
        cases = [
            {
                "topic": args.topic or "T",
                "cid_all": clients,
                "versions": [],
                "strategy": "AVG",
                "generation": None,
                "queues": [(args.topic or "T", b, q) for b in brokers for q in range(args.queues)],
            }
        ]
    results = []
    for case in cases:
        line = args.client_line or ClientLine.parse(case["versions"][0] if case["versions"] else None).value
        try:
            result = what_if(
                args.strategy or case["strategy"],
                case["cid_all"],
                case["queues"],
                line,
                args.virtual_nodes,
                [i for i in args.consumer_idcs.split(",") if i],
            )
        except DomainError as error:
            raise UsageError(str(error)) from None
        results.append(
            {
                "group": args.group,
                "topic": case["topic"],
                "generation": case["generation"],
                "client_line": line,
                **result,
            }
        )
    if args.json:
        print(json.dumps(results if args.group else results[0], indent=2))
        return 0
    for result in results:
        where = f"group {result['group']} generation {result['generation']}, " if args.group else ""
        print(f"{where}topic {result['topic']}, strategy {result['strategy']}, client line {result['client_line']}")
        print(f"cidAll (as RebalanceImpl sorts it): {', '.join(result['cid_all'])}")
        print(format_table(result["shares"], ["client_id", "count", "queues", "error"]))
        print(f"orphaned     ({len(result['orphaned'])}): {' '.join(result['orphaned']) or '-'}")
        print(f"double-owned ({len(result['double_owned'])}): {' '.join(result['double_owned']) or '-'}")
    return 0


class _Parser(argparse.ArgumentParser):
    """Bad arguments: one line naming the command and the problem, exit code 2 (no usage dump)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="rebalance-monitor",
        description="Watch a RocketMQ fleet through Kafka: exact consumer allocation, rebalances, "
        "producer fault windows.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    kafka = commands.add_parser(
        "kafka",
        help="start/stop/status of the local Kafka broker",
        epilog=EPILOG_KAFKA,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    kafka.add_argument("action", choices=["start", "stop", "status"])
    kafka.add_argument("--home", default=str(PROJECT_ROOT / ".run" / "kafka"), help="broker data directory")
    kafka.set_defaults(handler=_kafka)

    rocketmq = commands.add_parser(
        "rocketmq",
        help="start/stop/status of the local RocketMQ cluster (name server and two brokers)",
        epilog=EPILOG_ROCKETMQ,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    rocketmq.add_argument("action", choices=["start", "stop", "status"])
    rocketmq.add_argument(
        "--line", choices=["5", "4.9"], default="5", help="broker line: 5 (5.3.3, default) or 4.9 (4.9.7)"
    )
    rocketmq.add_argument("--home", default=None, help="data and logs (default .run/rocketmq/<line>)")
    rocketmq.add_argument(
        "--namesrv-port", type=int, default=None, help="name server port on 127.0.0.1 (default: a free one)"
    )
    rocketmq.set_defaults(handler=_rocketmq)

    spark_cluster = commands.add_parser(
        "spark-cluster",
        help="start/stop/status of a local Spark standalone cluster (master and two workers)",
        description="A Spark standalone master and workers on 127.0.0.1 from the pyspark distribution's own "
        "classes; logs and work directories under --home, stopped by PID.",
        epilog=EPILOG_SPARK_CLUSTER,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    spark_cluster.add_argument("action", choices=["start", "stop", "status"])
    spark_cluster.add_argument("--home", default=None, help="logs and work directories (default .run/spark-cluster)")
    spark_cluster.add_argument(
        "--master-port", type=_positive(int), default=None, help="master port on 127.0.0.1 (default: a free one)"
    )
    spark_cluster.add_argument(
        "--webui-port",
        type=_positive(int),
        default=None,
        help="master web UI and JSON status port (default: a free one)",
    )
    spark_cluster.add_argument("--workers", type=_positive(int), default=2, help="number of workers (default 2)")
    spark_cluster.add_argument("--worker-cores", type=_positive(int), default=1, help="cores per worker (default 1)")
    spark_cluster.add_argument("--worker-memory", default="1g", help='memory per worker (default "1g")')
    spark_cluster.set_defaults(handler=_spark_cluster)

    collect = commands.add_parser(
        "collect",
        help="poll a real RocketMQ cluster through its admin client and publish the events to Kafka",
        description="Watch a RocketMQ cluster through RocketMQ's admin client: every group's connections on every "
        "master broker, the routes of the topics they subscribe and each client's running info, published as "
        "contract events to the monitor's Kafka topics (docs/collector.md).",
        epilog=EPILOG_COLLECT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    collect.add_argument("--config", help="TOML file (see conf/monitor.toml): [collector], [kafka]")
    collect.add_argument("--cycles", type=_positive(int), default=0, help="stop after this many poll cycles")
    collect.add_argument(
        "--work-dir",
        default=str(PROJECT_ROOT / ".run" / "collector"),
        help="the admin client's own log directory (default .run/collector)",
    )
    collect.set_defaults(handler=_collect)

    run = commands.add_parser(
        "run", help="run the monitor job", epilog=EPILOG_RUN, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    run.add_argument("--config", help="TOML file (see conf/monitor.toml); defaults apply to what it omits")
    run.add_argument("--available-now", action="store_true", help="process what is in Kafka now, then exit")
    run.add_argument("--duration", type=float, default=None, help="stop after this many seconds")
    run.set_defaults(handler=_run)

    smoke = commands.add_parser(
        "smoke",
        help="Kafka -> Spark -> Delta round trip through the local broker",
        epilog=EPILOG_SMOKE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    smoke.add_argument("--count", type=int, default=20, help="events to produce (default 20)")
    smoke.add_argument("--keep-broker", action="store_true", help="leave the broker running afterwards")
    smoke.add_argument("--home", default=str(PROJECT_ROOT / ".run" / "kafka"), help="broker data directory")
    smoke.set_defaults(handler=_smoke)

    maintain = commands.add_parser(
        "maintain",
        help="VACUUM the monitor's Delta tables, and compact those the job does not",
        epilog=EPILOG_MAINTAIN,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    maintain.add_argument("--config", help="TOML file (see conf/monitor.toml): paths.delta_root, [spark]")
    maintain.add_argument("--dry-run", action="store_true", help="report what VACUUM would delete; change nothing")
    maintain.add_argument("--job-stopped", action="store_true", help="the job is not running: compact every table")
    maintain.set_defaults(handler=_maintain)

    demo = commands.add_parser(
        "demo",
        help="local broker + simulated fleet + the monitor, with a live view",
        epilog=EPILOG_DEMO,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _fleet_arguments(demo)
    demo.add_argument("--duration", type=_positive(float), default=None, help="stop after this many seconds")
    demo.add_argument(
        "--speed", type=_positive(float), default=20.0, help="simulated seconds per wall second (default 20)"
    )
    demo.add_argument(
        "--metrics-port",
        type=_positive(int),
        default=9464,
        help="Prometheus endpoint port (default 9464; a free one if taken)",
    )
    demo.add_argument("--no-live", action="store_true", help="plain log lines instead of the in-place view")
    demo.add_argument(
        "--rocketmq",
        action="store_true",
        help="a real local RocketMQ cluster with real consumers and the collector, not the simulator",
    )
    demo.add_argument(
        "--line",
        choices=["5", "4.9"],
        default="5",
        help="with --rocketmq: the cluster's RocketMQ line (default 5: 5.3.3; 4.9: 4.9.7)",
    )
    demo.set_defaults(handler=_demo)

    simulate = commands.add_parser(
        "simulate",
        help="a simulated fleet's events into Kafka (for a monitor running elsewhere) or a JSON-lines file",
        description="Publish a simulated RocketMQ fleet (heartbeats, routes, send results) to the Kafka topics "
        "a monitor's configuration names, or write its events to a file, without running the job.",
        epilog=EPILOG_SIMULATE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _fleet_arguments(simulate)
    simulate.add_argument("--namespace", default="", help="prefix for every group, topic, broker and producer group")
    simulate.add_argument("--config", help="TOML file (see conf/monitor.toml): Kafka bootstrap servers and topics")
    simulate.add_argument("--bootstrap-servers", help="Kafka to publish to (default: the config's)")
    simulate.add_argument(
        "--producer-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a kafka-python producer option, e.g. security_protocol=SASL_SSL (repeatable)",
    )
    simulate.add_argument(
        "--create-topics",
        action="store_true",
        help="create missing topics (2 partitions, replication factor 1: for test clusters)",
    )
    simulate.add_argument("--output", metavar="FILE", help="write JSON lines here instead (- for standard output)")
    simulate.add_argument("--start", help="fleet time of the first event: epoch ms or ISO-8601 (default now)")
    simulate.add_argument(
        "--speed", type=_positive(float), default=1.0, help="fleet seconds per wall second, into Kafka (default 1)"
    )
    simulate.add_argument(
        "--fleet-seconds",
        type=_positive(float),
        default=None,
        help="stop after this much fleet time (required with --output)",
    )
    simulate.add_argument(
        "--duration",
        type=_positive(float),
        default=None,
        help="stop after this many wall seconds (default: SIGTERM or Ctrl-C)",
    )
    simulate.set_defaults(handler=_simulate)

    query = commands.add_parser(
        "query",
        help="history: a group's assignment at a time, anomaly episodes, fault windows, or any SQL",
        description="Read the monitor's Delta tables (no JVM: delta-rs and DuckDB): a group's assignment at a "
        "point in time (history, or Delta time travel over current_assignment), anomaly episodes in a time "
        "range, fault windows, or ad-hoc SQL with every table a view by its name.",
        epilog=EPILOG_QUERY,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    options = argparse.ArgumentParser(add_help=False)  # every kind takes them; _query says which apply
    options.add_argument("--delta-root", default=".run/delta", help="where the tables are (default .run/delta)")
    options.add_argument("--group", help="consumer group (required for assignment)")
    options.add_argument("--broker", help="faults: only this broker")
    options.add_argument("--kind", help="anomalies: only this kind, e.g. ORPHANED_QUEUES")
    options.add_argument("--at", help="assignment: the last generation at or before this event time (default: latest)")
    options.add_argument(
        "--table-version",
        type=int,
        help="assignment: current_assignment as of this Delta version; sql: the one table it reads, as of this version",
    )
    options.add_argument("--table-time", help="every table as of its last commit at or before this time")
    options.add_argument("--since", help="anomalies/faults: from this event time")
    options.add_argument("--until", help="anomalies/faults: up to this event time")
    options.add_argument("--json", action="store_true", help="JSON rows instead of a table")
    options.add_argument("--csv", action="store_true", help="sql: CSV with a header instead of a table")
    kinds = query.add_subparsers(dest="what", required=True, metavar="WHAT")
    for kind, what in (
        ("assignment", "a group's assignment at a time (history or Delta time travel)"),
        ("anomalies", "anomaly episodes"),
        ("faults", "producers' fault windows"),
        ("sql", "ad-hoc SQL (DuckDB) over the tables, each a view by its name"),
    ):
        parser_ = kinds.add_parser(
            kind,
            parents=[options],
            help=what,
            description=what,
            epilog=EPILOG_QUERY,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        if kind == "sql":
            parser_.add_argument("statement", help='the SQL statement, e.g. "SELECT count(*) FROM dead_letters"')
        parser_.set_defaults(handler=_query, statement=None)

    allocate = commands.add_parser(
        "allocate",
        help="what-if: every client's share under a strategy",
        description="Compute what every client of a group takes under a strategy and client line, with the "
        "orphaned and double-owned queues -- for ids and queues you give, or a group from the Delta tables.",
        epilog=EPILOG_ALLOCATE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    allocate.add_argument(
        "--strategy",
        help="AVG, AVG_BY_CIRCLE, CONSISTENT_HASH, MACHINE_ROOM, "
        "MACHINE_ROOM_NEARBY-<inner> (default AVG, or the group's own)",
    )
    allocate.add_argument("--clients", help="comma-separated client ids, one per channel (duplicates allowed)")
    allocate.add_argument("--queues", type=int, help="queues per broker")
    allocate.add_argument("--brokers", default="broker-a", help="comma-separated broker names (default broker-a)")
    allocate.add_argument("--topic", help="topic name (default T; with --group: every topic it subscribes)")
    allocate.add_argument("--delta-root", help="take the group from these monitor tables")
    allocate.add_argument("--group", help="with --delta-root: the consumer group")
    allocate.add_argument("--at", help="with --group: its generation at or before this event time")
    allocate.add_argument(
        "--client-line", choices=["4.9", "5"], help="4.9 or 5 (default 5, or the group's reported version)"
    )
    allocate.add_argument(
        "--virtual-nodes", type=_positive(int), default=10, help="CONSISTENT_HASH virtual nodes (default 10)"
    )
    allocate.add_argument("--consumer-idcs", default="", help="MACHINE_ROOM: comma-separated rooms")
    allocate.add_argument("--json", action="store_true", help="JSON instead of a table")
    allocate.set_defaults(handler=_allocate)
    return parser


def _fleet_arguments(parser: argparse.ArgumentParser) -> None:
    """The simulated fleet's options, shared by ``demo`` and ``simulate``."""
    from streaming.simulation.fleet import SCENARIOS

    parser.add_argument("--scenario", choices=SCENARIOS, default="mixed", help="what the fleet does (default mixed)")
    parser.add_argument("--seed", type=int, default=1, help="same seed, same fleet and events (default 1)")
    parser.add_argument(
        "--groups",
        type=_positive(int, zero=True),
        default=0,
        help="extra healthy consumer groups, for load (default 0)",
    )
    parser.add_argument("--clients", type=_positive(int), default=4, help="members per extra group (default 4)")
    parser.add_argument("--queues", type=_positive(int), default=4, help="queues per topic and broker (default 4)")
    parser.add_argument(
        "--send-rate",
        type=_positive(float, zero=True),
        default=None,
        help="sends per second per producer (default 0.8)",
    )


def _positive(kind: type, zero: bool = False):  # type: ignore[no-untyped-def]
    """An argparse type: a number > 0 (or >= 0), with a one-line message otherwise."""

    def convert(text: str):  # type: ignore[no-untyped-def]
        try:
            value = kind(text)
        except ValueError:
            kind_name = "number" if kind is float else "whole number"
            raise argparse.ArgumentTypeError(f"{text!r} is not a {kind_name}") from None
        if value < 0 or (value == 0 and not zero):
            raise argparse.ArgumentTypeError(f"{text!r} must be {'>= 0' if zero else '> 0'}")
        return value

    return convert


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from connectors.jvm_artifacts import ArtifactError
    from streaming.config import ConfigError
    from streaming.job.storage_check import StorageError

    try:
        return int(args.handler(args))
    except ConfigError as error:
        print(f"rebalance-monitor: {error}", file=sys.stderr)
        return 2
    except UsageError as error:
        print(
            f"rebalance-monitor {args.command}: error: {error} (see rebalance-monitor {args.command} --help)",
            file=sys.stderr,
        )
        return 2
    except (NotFound, ArtifactError, StorageError) as error:
        print(f"rebalance-monitor {args.command}: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the output's reader stopped early (| head): nothing more to say
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so that Python's exit flush is quiet
        return 1


if __name__ == "__main__":
    sys.exit(main())
