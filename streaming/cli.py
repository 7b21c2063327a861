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
        result = run_smoke(session, info.bootstrap_servers, work_dir, topic=f"rrm.smoke.{int(time.time())}",
                           count=args.count)  # fmt: skip
        verdict = "EQUAL" if result.equal else "DIFFERENT"
        print(f"produced {len(result.produced)} events, read back {len(result.read_back)} rows "
              f"from the Delta table {work_dir / 'smoke_events'}: {verdict}")  # fmt: skip
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
    print(f"monitor running: Delta tables in {config.paths.delta_root}, "
          f"metrics on http://{config.metrics.host}:{config.metrics.port}/metrics (Ctrl-C stops)", flush=True)
    return job.run(duration_s=args.duration)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rebalance-monitor",
        description="Watch a RocketMQ fleet through Kafka: exact consumer allocation, rebalances, "
        "producer fault windows.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    kafka = commands.add_parser("kafka", help="start/stop/status of the local Kafka broker",
                                epilog=EPILOG_KAFKA, formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    kafka.add_argument("action", choices=["start", "stop", "status"])
    kafka.add_argument("--home", default=str(PROJECT_ROOT / ".run" / "kafka"), help="broker data directory")
    kafka.set_defaults(handler=_kafka)

    run = commands.add_parser("run", help="run the monitor job", epilog=EPILOG_RUN,
                              formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    run.add_argument("--config", help="TOML file (see conf/monitor.toml); defaults apply to what it omits")
    run.add_argument("--available-now", action="store_true", help="process what is in Kafka now, then exit")
    run.add_argument("--duration", type=float, default=None, help="stop after this many seconds")
    run.set_defaults(handler=_run)

    smoke = commands.add_parser("smoke", help="Kafka -> Spark -> Delta round trip through the local broker",
                                epilog=EPILOG_SMOKE, formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    smoke.add_argument("--count", type=int, default=20, help="events to produce (default 20)")
    smoke.add_argument("--keep-broker", action="store_true", help="leave the broker running afterwards")
    smoke.add_argument("--home", default=str(PROJECT_ROOT / ".run" / "kafka"), help="broker data directory")
    smoke.set_defaults(handler=_smoke)

    # Until the streaming job lands, the demo is the smoke pipeline.
    demo = commands.add_parser("demo", help="run the monitor on an embedded default (local broker + data)",
                               epilog=EPILOG_SMOKE, formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    demo.add_argument("--count", type=int, default=20)
    demo.add_argument("--keep-broker", action="store_true")
    demo.add_argument("--home", default=str(PROJECT_ROOT / ".run" / "kafka"))
    demo.set_defaults(handler=_smoke)
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
