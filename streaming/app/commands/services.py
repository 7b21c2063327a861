"""The subcommands that start, stop or run something: local services, the job, maintenance, the demo."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from connectors import object_store
from connectors.jvm_artifacts import PROJECT_ROOT
from streaming.app.commands import NotFound, UsageError
from streaming.app.commands.tables import open_spark


def kafka(args: argparse.Namespace) -> int:
    from localenv.kafka_broker import LocalKafkaBroker

    broker = LocalKafkaBroker(args.home, secure=args.secure)
    if args.action == "start":
        info = broker.start()
        print(f"Kafka broker running: pid {info.pid}, bootstrap servers {info.bootstrap_servers}")
        if info.listener is not None:
            client = info.listener.write_client_config(info.bootstrap_servers)
            print(f"SASL_SSL (SCRAM-SHA-512) only; the [kafka] settings of a client, password included: {client}")
    elif args.action == "stop":
        print("Kafka broker stopped" if broker.stop() else "no Kafka broker was running")
    else:
        info = broker.info()
        print(f"running: pid {info.pid}, {info.bootstrap_servers}" if info else "not running")
        return 0 if info else 3
    return 0


def s3_server(args: argparse.Namespace) -> int:
    from localenv.s3_server import LocalS3Server, S3ServerError

    try:
        credentials = None
        if args.action == "start":
            from streaming.config import load_config

            storage = load_config(args.config).storage
            if storage.access_key and storage.secret_key:
                credentials = (storage.access_key, storage.secret_key)
        server = LocalS3Server(args.home, port=args.port, credentials=credentials)
        if args.action == "start":
            info = server.start()
            info.create_bucket(args.bucket)
            print(
                f"S3 server running: pid {info.pid}, endpoint {info.endpoint}, bucket {args.bucket} "
                f"(path-style, http; credentials in {server.home / 's3.json'})"
            )
        elif args.action == "stop":
            print("S3 server stopped" if server.stop() else "no S3 server was running")
        else:
            running = server.info()
            print(f"running: pid {running.pid}, {running.endpoint}" if running else "not running")
            return 0 if running else 3
    except (S3ServerError, OSError) as error:
        print(f"rebalance-monitor s3-server: {error}", file=sys.stderr)
        return 1
    return 0


def spark_cluster(args: argparse.Namespace) -> int:
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


def rocketmq(args: argparse.Namespace) -> int:
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


def collect(args: argparse.Namespace) -> int:
    from connectors.rocketmq_collector import supervise
    from streaming.config import load_config

    env = dict(os.environ)
    if args.shard is not None:
        env["RRM__COLLECTOR__SHARD_INDEX"], env["RRM__COLLECTOR__SHARD_COUNT"] = map(str, args.shard)
    config = load_config(args.config, env=env)
    c = config.collector
    print(
        f"collecting from name server {c.namesrv_addr} every {c.poll_interval_ms} ms into Kafka "
        f"{config.kafka.bootstrap_servers}"
        + (f" (groups of shard {c.shard_index} of {c.shard_count})" if c.shard_count > 1 else "")
        + (f"; metrics on http://{c.metrics_host}:{c.metrics_port}/metrics" if c.metrics_port else ""),
        flush=True,
    )
    return supervise(
        config, Path(args.work_dir), lambda line: print(line, file=sys.stderr, flush=True), max_cycles=args.cycles
    )


def smoke(args: argparse.Namespace) -> int:
    from localenv.kafka_broker import LocalKafkaBroker
    from streaming.app.smoke import run_smoke
    from streaming.job.runtime.spark_session import build_spark_session

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


def run(args: argparse.Namespace) -> int:
    from streaming.config import load_config
    from streaming.job.runner import MonitorJob

    config = load_config(args.config)  # a ConfigError is one line per problem and exit code 2 (main)
    job = MonitorJob(config, available_now=args.available_now, new_state=args.new_state)
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


def maintain(args: argparse.Namespace) -> int:
    from streaming.config import load_config
    from streaming.job.delta.maintenance import maintain, monitor_tables, report_lines
    from streaming.job.runtime.spark_session import SparkSettings

    config = load_config(args.config)
    root = object_store.resolve(config.paths.delta_root)
    nothing = f"no monitor tables under {root} (paths.delta_root); nothing to maintain"
    local = object_store.is_local(root)
    if local and not any((Path(root) / name / "_delta_log").is_dir() for name, _ in monitor_tables()):
        raise NotFound(nothing)
    session, owned = open_spark(
        SparkSettings(
            master=config.spark.master,
            app_name=f"{config.spark.app_name}-maintain",
            driver_memory=config.spark.driver_memory,
            extra_conf=dict(config.spark.conf),
            storage=None if local else config.storage,
        )
    )
    try:
        reports = maintain(session, root, job_stopped=args.job_stopped, dry_run=args.dry_run)
    finally:
        if owned:
            session.stop()  # type: ignore[attr-defined]
    if not reports:  # an object store is only looked at by Spark
        raise NotFound(nothing)
    print("\n".join(report_lines(reports, args.dry_run)))
    return 0


def demo(args: argparse.Namespace) -> int:
    if args.restarts and args.rocketmq:
        raise UsageError("--restarts is for the simulated fleet, not --rocketmq")
    if args.restarts and args.duration is None and args.simulated is None:
        raise UsageError("--restarts needs --duration or --simulated: the restarts are spread evenly over it")
    if args.simulated is not None and args.rocketmq:
        raise UsageError("--simulated is for the simulated fleet, not --rocketmq")
    if args.rocketmq:
        from streaming.app.demo_rocketmq import RocketMQDemoSettings, run_rocketmq_demo

        return run_rocketmq_demo(
            RocketMQDemoSettings(args.line, args.duration, args.metrics_port, live=not args.no_live)
        )
    from streaming.app.demo import DemoSettings, run_demo

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
            restarts=args.restarts,
            lead_s=args.lead,
            simulated_s=args.simulated,
        )
    )
