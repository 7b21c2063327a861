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

EPILOG_SMOKE = """examples:
  rebalance-monitor smoke                  # 20 JSON events through Kafka and Spark into Delta
  rebalance-monitor smoke --count 100 --keep-broker
"""


def _kafka(args: argparse.Namespace) -> int:
    from connectors.kafka_broker import LocalKafkaBroker

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


def _smoke(args: argparse.Namespace) -> int:
    from connectors.kafka_broker import LocalKafkaBroker
    from streaming.job.smoke import run_smoke
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
SIGTERM or Ctrl-C stops the job cleanly; a restart resumes from the checkpoints.
"""


def _run(args: argparse.Namespace) -> int:
    from streaming.config import ConfigError, load_config
    from streaming.job.runner import MonitorJob

    try:
        config = load_config(args.config)
    except ConfigError as error:
        print(f"rebalance-monitor: {error}", file=sys.stderr)
        return 2
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
        f"metrics on http://{config.metrics.host}:{config.metrics.port}/metrics (Ctrl-C stops)",
        flush=True,
    )
    return job.run(duration_s=args.duration)


EPILOG_DEMO = """examples:
  rebalance-monitor demo                          # mixed scenario until Ctrl-C
  rebalance-monitor demo --duration 90 --scenario duplicate-ids
  rebalance-monitor demo --speed 60 --no-live     # plain log lines instead of the live view
"""

EPILOG_QUERY = """examples:
  rebalance-monitor query assignment --delta-root .run/delta --group orders-consumers --at 2026-11-21T14:03:00
  rebalance-monitor query anomalies --delta-root .run/delta --since 2026-11-21T00:00 --json
  rebalance-monitor query faults --delta-root .run/delta --broker broker-b
"""

EPILOG_ALLOCATE = """examples:
  rebalance-monitor allocate --strategy AVG --queues 8 --clients 10.0.0.1@1,172.17.0.1@1,172.17.0.1@1
  rebalance-monitor allocate --strategy CONSISTENT_HASH --virtual-nodes 10 --brokers broker-a,broker-b \\
      --queues 4 --clients c1,c2,c3 --json
"""


def _demo(args: argparse.Namespace) -> int:
    from streaming.demo import DemoSettings, run_demo

    return run_demo(
        DemoSettings(args.scenario, args.duration, args.speed, args.seed, args.metrics_port, live=not args.no_live)
    )


def _query(args: argparse.Namespace) -> int:
    from pathlib import Path

    from streaming.queries import emit, parse_time_ms

    root = Path(args.delta_root)
    if not (root / "group_snapshots").exists():
        print(f"rebalance-monitor: no monitor tables under {root}", file=sys.stderr)
        return 2
    from streaming.job.spark_session import SparkSettings, build_spark_session

    spark = build_spark_session(SparkSettings(master="local[1]", app_name="rrm-query"))
    from pyspark.sql import functions as F

    since, until = parse_time_ms(args.since), parse_time_ms(args.until)
    if args.what == "assignment":
        if not args.group:
            print("rebalance-monitor: query assignment needs --group", file=sys.stderr)
            return 2
        at = parse_time_ms(args.at)
        history = (
            spark.read.format("delta").load(str(root / "expected_assignments")).where(F.col("group") == args.group)
        )
        if at is not None:
            history = history.where(F.col("event_time_ms") <= at)
        last = history.agg(F.max("generation")).first()[0]
        rows = [
            r.asDict(recursive=True)
            for r in history.where(F.col("generation") == last).orderBy("topic", "client_id").collect()
        ]
        print(
            emit(rows, ["group", "generation", "topic", "client_id", "queue_count", "queues", "event_time"], args.json)
        )
    elif args.what == "anomalies":
        frame = spark.read.format("delta").load(str(root / "anomaly_episodes"))
        if args.group:
            frame = frame.where(F.col("group") == args.group)
        if since is not None:
            frame = frame.where(F.col("event_time_ms") >= since)
        if until is not None:
            frame = frame.where(F.col("event_time_ms") <= until)
        rows = [r.asDict(recursive=True) for r in frame.orderBy("event_time_ms", "group").collect()]
        print(emit(rows, ["event_time", "status", "group", "topic", "anomaly", "severity", "summary"], args.json))
    else:
        frame = spark.read.format("delta").load(str(root / "fault_windows"))
        if args.broker:
            frame = frame.where(F.col("broker") == args.broker)
        if since is not None:
            frame = frame.where(F.col("event_time_ms") >= since)
        rows = [r.asDict(recursive=True) for r in frame.orderBy("event_time_ms").collect()]
        print(
            emit(
                rows,
                [
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
                ],
                args.json,
            )
        )
    spark.stop()
    return 0


def _allocate(args: argparse.Namespace) -> int:
    import json

    from streaming.domain.errors import DomainError
    from streaming.queries import format_table, what_if

    clients = [c for c in args.clients.split(",") if c]
    brokers = [b for b in args.brokers.split(",") if b]
    if not clients or args.queues < 1 or not brokers:
        print("rebalance-monitor: allocate needs --clients, --brokers and --queues >= 1", file=sys.stderr)
        return 2
    queues = [(args.topic, b, q) for b in brokers for q in range(args.queues)]
    try:
        result = what_if(
            args.strategy,
            clients,
            queues,
            args.client_line,
            args.virtual_nodes,
            [i for i in args.consumer_idcs.split(",") if i],
        )
    except DomainError as error:
        print(f"rebalance-monitor: {error}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"strategy {result['strategy']}, cidAll (as RebalanceImpl sorts it): {', '.join(result['cid_all'])}")
    print(format_table(result["shares"], ["client_id", "count", "queues", "error"]))
    print(f"orphaned     ({len(result['orphaned'])}): {' '.join(result['orphaned']) or '-'}")
    print(f"double-owned ({len(result['double_owned'])}): {' '.join(result['double_owned']) or '-'}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
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

    from connectors.simulator import SCENARIOS

    demo = commands.add_parser(
        "demo",
        help="local broker + simulated fleet + the monitor, with a live view",
        epilog=EPILOG_DEMO,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    demo.add_argument("--scenario", choices=SCENARIOS, default="mixed")
    demo.add_argument("--duration", type=float, default=None, help="stop after this many seconds")
    demo.add_argument("--speed", type=float, default=20.0, help="simulated seconds per wall second (default 20)")
    demo.add_argument("--seed", type=int, default=1)
    demo.add_argument("--metrics-port", type=int, default=9464)
    demo.add_argument("--no-live", action="store_true", help="no in-place terminal view")
    demo.set_defaults(handler=_demo)

    query = commands.add_parser(
        "query",
        help="history: assignment at a time, anomalies, fault windows",
        epilog=EPILOG_QUERY,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    query.add_argument("what", choices=["assignment", "anomalies", "faults"])
    query.add_argument("--delta-root", default=".run/delta")
    query.add_argument("--group")
    query.add_argument("--broker")
    query.add_argument("--at", help="epoch ms or ISO time (assignment)")
    query.add_argument("--since", help="epoch ms or ISO time")
    query.add_argument("--until", help="epoch ms or ISO time")
    query.add_argument("--json", action="store_true")
    query.set_defaults(handler=_query)

    allocate = commands.add_parser(
        "allocate",
        help="what-if: every client's share under a strategy",
        epilog=EPILOG_ALLOCATE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    allocate.add_argument("--strategy", default="AVG")
    allocate.add_argument("--clients", required=True, help="comma-separated client ids, one per channel")
    allocate.add_argument("--queues", type=int, required=True, help="queues per broker")
    allocate.add_argument("--brokers", default="broker-a")
    allocate.add_argument("--topic", default="T")
    allocate.add_argument("--client-line", choices=["4.9", "5"], default="5")
    allocate.add_argument("--virtual-nodes", type=int, default=10)
    allocate.add_argument("--consumer-idcs", default="")
    allocate.add_argument("--json", action="store_true")
    allocate.set_defaults(handler=_allocate)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
