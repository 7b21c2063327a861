"""``rebalance-monitor``: the command operators and developers use.

Each subcommand is a small function; heavy imports (pyspark, kafka) happen inside them so ``--help`` is
instant. Bad arguments print one clear line and exit non-zero (argparse's exit code 2).
"""

from __future__ import annotations

import argparse
import sys

from connectors.jvm_artifacts import PROJECT_ROOT
from streaming.app.commands import NotFound, UsageError, epilogs, services, tables
from streaming.app.commands import health as health_command
from streaming.app.commands import simulate as simulate_command


class _Version(argparse.Action):
    """``--version``: the release, the state versions and the Delta commits' ``userMetadata``, line by line."""

    def __call__(self, parser, namespace, values, option_string=None):  # type: ignore[no-untyped-def]
        from streaming.app.versions import version_text

        print(version_text(parser.prog))
        parser.exit(0)


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
    parser.add_argument(
        "--version", action=_Version, nargs=0, help="the release, its state versions and its Delta commit metadata"
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    kafka = commands.add_parser(
        "kafka",
        help="start/stop/status of the local Kafka broker",
        epilog=epilogs.EPILOG_KAFKA,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    kafka.add_argument("action", choices=["start", "stop", "status"])
    kafka.add_argument("--home", default=str(PROJECT_ROOT / ".run" / "kafka"), help="broker data directory")
    kafka.add_argument(
        "--secure",
        action="store_true",
        help="start: one SASL_SSL listener (SCRAM-SHA-512 over TLS, certificate and users made at the first start; "
        "use a home of its own)",
    )
    kafka.set_defaults(handler=services.kafka)

    rocketmq = commands.add_parser(
        "rocketmq",
        help="start/stop/status of the local RocketMQ cluster (name server and two brokers)",
        epilog=epilogs.EPILOG_ROCKETMQ,
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
    rocketmq.set_defaults(handler=services.rocketmq)

    s3_server = commands.add_parser(
        "s3-server",
        help="start/stop/status of the local S3-compatible server (s3proxy, in memory)",
        description="An S3-compatible server on 127.0.0.1 for s3a:// roots on one machine (docs/deploy.md). Its "
        "objects live in memory until it stops. The credentials are [storage] access_key and secret_key of "
        "--config (or RRM__STORAGE__*), else generated into <home>/s3.json (mode 600); never printed.",
    )
    s3_server.add_argument("action", choices=["start", "stop", "status"])
    s3_server.add_argument("--home", default=str(PROJECT_ROOT / ".run" / "s3"), help="logs and PID record")
    s3_server.add_argument("--port", type=int, default=None, help="port on 127.0.0.1 (default: a free one)")
    s3_server.add_argument("--bucket", default="rrm", help="bucket created at start (default rrm)")
    s3_server.add_argument("--config", help="TOML file (see conf/monitor.toml): [storage] credentials")
    s3_server.set_defaults(handler=services.s3_server)

    spark_cluster = commands.add_parser(
        "spark-cluster",
        help="start/stop/status of a local Spark standalone cluster (master and two workers)",
        description="A Spark standalone master and workers on 127.0.0.1 from the pyspark distribution's own "
        "classes; logs and work directories under --home, stopped by PID.",
        epilog=epilogs.EPILOG_SPARK_CLUSTER,
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
    spark_cluster.set_defaults(handler=services.spark_cluster)

    collect = commands.add_parser(
        "collect",
        help="poll a real RocketMQ cluster through its admin client and publish the events to Kafka",
        description="Watch a RocketMQ cluster through RocketMQ's admin client: every group's connections on every "
        "master broker, the routes of the topics they subscribe and each client's running info, published as "
        "contract events to the monitor's Kafka topics (docs/collector.md).",
        epilog=epilogs.EPILOG_COLLECT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    collect.add_argument("--config", help="TOML file (see conf/monitor.toml): [collector], [kafka]")
    collect.add_argument("--cycles", type=_positive(int), default=0, help="stop after this many poll cycles")
    collect.add_argument(
        "--shard",
        type=_shard,
        default=None,
        metavar="I/N",
        help="watch the groups of shard I of N collectors (overrides [collector] shard_index and shard_count; "
        "default 0/1: every group)",
    )
    collect.add_argument(
        "--work-dir",
        default=str(PROJECT_ROOT / ".run" / "collector"),
        help="the admin client's own log directory (default .run/collector)",
    )
    collect.set_defaults(handler=services.collect)

    run = commands.add_parser(
        "run",
        help="run the monitor job",
        epilog=epilogs.EPILOG_RUN,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("--config", help="TOML file (see conf/monitor.toml); defaults apply to what it omits")
    run.add_argument("--available-now", action="store_true", help="process what is in Kafka now, then exit")
    run.add_argument(
        "--new-state",
        action="store_true",
        help="on a new checkpoint_root over tables written before: empty the current tables, keep the history and "
        "read Kafka from the latest offsets (refused without it)",
    )
    run.add_argument("--duration", type=float, default=None, help="stop after this many seconds")
    run.set_defaults(handler=services.run)

    smoke = commands.add_parser(
        "smoke",
        help="Kafka -> Spark -> Delta round trip through the local broker",
        epilog=epilogs.EPILOG_SMOKE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    smoke.add_argument("--count", type=int, default=20, help="events to produce (default 20)")
    smoke.add_argument("--keep-broker", action="store_true", help="leave the broker running afterwards")
    smoke.add_argument("--home", default=str(PROJECT_ROOT / ".run" / "kafka"), help="broker data directory")
    smoke.set_defaults(handler=services.smoke)

    maintain = commands.add_parser(
        "maintain",
        help="VACUUM the monitor's Delta tables, and compact those the job does not",
        epilog=epilogs.EPILOG_MAINTAIN,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    maintain.add_argument("--config", help="TOML file (see conf/monitor.toml): paths.delta_root, [spark]")
    maintain.add_argument("--dry-run", action="store_true", help="report what VACUUM would delete; change nothing")
    maintain.add_argument("--job-stopped", action="store_true", help="the job is not running: compact every table")
    maintain.set_defaults(handler=services.maintain)

    demo = commands.add_parser(
        "demo",
        help="local broker + simulated fleet + the monitor, with a live view",
        epilog=epilogs.EPILOG_DEMO,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _fleet_arguments(demo)
    demo.add_argument("--duration", type=_positive(float), default=None, help="stop after this many seconds")
    demo.add_argument(
        "--simulated",
        type=_positive(float),
        default=None,
        help="stop once the monitor has processed this many seconds of fleet time (with --duration: whichever "
        "comes first)",
    )
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
        "--lead",
        type=_positive(float),
        default=180.0,
        help="simulated seconds the fleet may run ahead of what the job has processed (default 180): longer "
        "lets --speed be reached on a slow machine, in larger batches",
    )
    demo.add_argument(
        "--restarts",
        type=_positive(int, zero=True),
        default=0,
        help="with --duration or --simulated: stop the job this many times, evenly spread, and start it again on "
        "the same checkpoints and tables while the fleet goes on (default 0)",
    )
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
    demo.set_defaults(handler=services.demo)

    simulate = commands.add_parser(
        "simulate",
        help="a simulated fleet's events into Kafka (for a monitor running elsewhere) or a JSON-lines file",
        description="Publish a simulated RocketMQ fleet (heartbeats, routes, send results, consume progress) to the "
        "Kafka topics a monitor's configuration names, or write its events to a file, without running the job.",
        epilog=epilogs.EPILOG_SIMULATE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _fleet_arguments(simulate)
    simulate.add_argument("--namespace", default="", help="prefix for every group, topic, broker and producer group")
    simulate.add_argument(
        "--cluster",
        type=_cluster_name,
        help="the RocketMQ cluster every event names (contract version 2); default: none, the monitor's default",
    )
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
        help="create missing topics (2 partitions; replicas: --replication-factor): for test clusters",
    )
    simulate.add_argument(
        "--replication-factor",
        type=_positive(int),
        metavar="N",
        help="replicas of each topic --create-topics creates (default: one per broker, up to 3)",
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
    simulate.add_argument(
        "--progress-interval",
        type=_positive(int, zero=True),
        default=30,
        help="seconds between consume_progress samples, a multiple of 5 (default 30; 0: none)",
    )
    simulate.add_argument(
        "--assignment-reports",
        action="store_true",
        help="each live member's reported_assignment, with its ProcessQueueInfo, at every progress sample",
    )
    simulate.set_defaults(handler=simulate_command.simulate)

    health = commands.add_parser(
        "health",
        help="a running job's own health from its metrics page: stale or restarting queries, silent input, "
        "dead letters, stale broker views (exit 1 when anything is found)",
        description="Read a running job's /metrics page and judge it as its job-health alerts do (the runbook's "
        "RocketMQMonitorStale, Down, ConsumerInputSilent, QueryRestarting, DeadLettersRising, BrokerViewStale, "
        "LabelCapReached). One read judges the gauges; --over reads twice and judges the counters' increase.",
    )
    health.add_argument("--url", help="the job's metrics page (default: [metrics] host and port of --config)")
    health.add_argument("--config", help="TOML file (see conf/monitor.toml) whose [metrics] endpoint to read")
    health.add_argument(
        "--over",
        type=_positive(float, zero=True),
        default=0.0,
        metavar="SECONDS",
        help="read twice, this far apart, and judge what the counters counted in between (default 0: one read)",
    )
    health.add_argument("--json", action="store_true", help="JSON instead of a table")
    health.set_defaults(handler=health_command.health)

    query = commands.add_parser(
        "query",
        help="history: a group's assignment at a time, anomaly episodes, fault windows, consume progress, or any SQL",
        description="Read the monitor's Delta tables (no JVM: delta-rs and DuckDB): a group's assignment at a "
        "point in time (history, or Delta time travel over current_assignment), anomaly episodes in a time "
        "range, fault windows, each queue's consume progress (now, or at a time), or ad-hoc SQL with every table "
        "a view by its name.",
        epilog=epilogs.EPILOG_QUERY,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    options = argparse.ArgumentParser(add_help=False)  # every kind takes them; _query says which apply
    options.add_argument(
        "--delta-root", default=".run/delta", help="where the tables are: a path or s3a://... (default .run/delta)"
    )
    options.add_argument("--config", help="TOML file (see conf/monitor.toml): [storage], for an s3a:// --delta-root")
    options.add_argument("--group", help="consumer group (required for assignment)")
    options.add_argument("--cluster", help="only this RocketMQ cluster's rows (names are unique within a cluster only)")
    options.add_argument("--broker", help="faults: only this broker")
    options.add_argument("--kind", help="anomalies: only this kind, e.g. ORPHANED_QUEUES")
    options.add_argument("--state", help="progress: only queues in this state, e.g. STUCK_HOLDER")
    options.add_argument(
        "--at",
        help="assignment: the last generation at or before this event time (default: latest); "
        "progress: each queue's last sample at or before it",
    )
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
        ("progress", "consume progress per queue: state, cause, lag, time lag, holders, expected owner"),
        ("sql", "ad-hoc SQL (DuckDB) over the tables, each a view by its name"),
    ):
        parser_ = kinds.add_parser(
            kind,
            parents=[options],
            help=what,
            description=what,
            epilog=epilogs.EPILOG_QUERY,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        if kind == "sql":
            parser_.add_argument("statement", help='the SQL statement, e.g. "SELECT count(*) FROM dead_letters"')
        parser_.set_defaults(handler=tables.query, statement=None)

    allocate = commands.add_parser(
        "allocate",
        help="what-if: every client's share under a strategy",
        description="Compute what every client of a group takes under a strategy and client line, with the "
        "orphaned and double-owned queues -- for ids and queues you give, or a group from the Delta tables.",
        epilog=epilogs.EPILOG_ALLOCATE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    allocate.add_argument(
        "--strategy",
        help="AVG, AVG_BY_CIRCLE, CONSISTENT_HASH, CONFIG, MACHINE_ROOM, "
        "MACHINE_ROOM_NEARBY-<inner> (default AVG, or the group's own)",
    )
    allocate.add_argument("--clients", help="comma-separated client ids, one per channel (duplicates allowed)")
    allocate.add_argument("--queues", type=int, help="queues per broker (in all at most 65536)")
    allocate.add_argument("--brokers", default="broker-a", help="comma-separated broker names (default broker-a)")
    allocate.add_argument("--topic", help="topic name (default T; with --group: every topic it subscribes)")
    allocate.add_argument("--delta-root", help="take the group from these monitor tables (a path or s3a://...)")
    allocate.add_argument("--config", help="TOML file (see conf/monitor.toml): [storage], for an s3a:// --delta-root")
    allocate.add_argument("--group", help="with --delta-root: the consumer group")
    allocate.add_argument("--cluster", help="with --group: the RocketMQ cluster of the group")
    allocate.add_argument("--at", help="with --group: its generation at or before this event time")
    allocate.add_argument(
        "--client-line", choices=["4.9", "5"], help="4.9 or 5 (default 5, or the group's reported version)"
    )
    allocate.add_argument(
        "--virtual-nodes", type=_positive(int), default=10, help="CONSISTENT_HASH virtual nodes (default 10)"
    )
    allocate.add_argument("--consumer-idcs", default="", help="MACHINE_ROOM: comma-separated rooms")
    allocate.add_argument(
        "--config-queues", default="", help="CONFIG: the configured list, comma-separated broker:queue_id"
    )
    allocate.add_argument(
        "--machine-room-regex",
        help="MACHINE_ROOM_NEARBY: room = the regex's first group in broker names and client ids",
    )
    allocate.add_argument(
        "--machine-room-separator",
        default="-",
        help="MACHINE_ROOM_NEARBY: room = the text before this separator (default -)",
    )
    allocate.add_argument("--json", action="store_true", help="JSON instead of a table")
    allocate.set_defaults(handler=tables.allocate)
    return parser


def _fleet_arguments(parser: argparse.ArgumentParser) -> None:
    """The simulated fleet's options, shared by ``demo`` and ``simulate``."""
    from streaming.app.simulation.fleet import SCENARIOS

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


def _shard(text: str) -> tuple[int, int]:
    """An argparse type: ``I/N``, shard I (0 to N-1) of N collectors."""
    index, _, count = text.partition("/")
    if not (index.isdigit() and count.isdigit()) or int(index) >= int(count):
        raise argparse.ArgumentTypeError(f"{text!r} is not I/N with 0 <= I < N, e.g. 0/2")
    return int(index), int(count)


def _cluster_name(text: str) -> str:
    """An argparse type: a RocketMQ cluster's name as the contract accepts it."""
    from streaming.contract.events import cluster_name_problem

    problem = cluster_name_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{text!r} {problem}")
    return text


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
    from streaming.job.runtime.checkpoint_layout import CheckpointLayoutError
    from streaming.job.runtime.storage_check import StorageError
    from streaming.job.runtime.supervision import KafkaRefused

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
    except (NotFound, ArtifactError, StorageError, CheckpointLayoutError, KafkaRefused) as error:
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
