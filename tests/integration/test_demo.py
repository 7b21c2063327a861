"""The demo, run briefly in the tests' process on the session's Kafka broker and Spark session: what it prints,
its Delta tables and its metrics show the mixed scenario's known anomalies, also after the job was restarted
halfway (the last scrape is the restarted job's). ``demo --rocketmq`` is the subprocess run as a user runs it."""

from __future__ import annotations

import re
import threading
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from kafka import KafkaAdminClient

from connectors.processes import free_port
from streaming.app.demo import DemoSettings, run_demo
from streaming.app.simulation.fleet import build_scenario

# Every asserted anomaly is in the first 150 s of simulated time (the mailer group's storm comes last) and the
# crashed member of a healthy group expires at 150 s: the demo's default lead (180 s) sends that much in the
# first three seconds of the first job, and the fleet goes on only as far ahead of what the job has processed,
# so a slow machine slows the fleet rather than losing events. Each of the two runs stops once the monitor has
# processed its half of SIMULATED_S (the first run 180 s of fleet time, the second 180 s more), however long
# its start and batches take; DURATION_S only bounds a run that never gets there.
SIMULATED_S = 360
DURATION_S = 1200
SPEED = 60


@contextmanager
def jvm_log(spark) -> Iterator[Callable[[], str]]:
    """What the JVM logs meanwhile: what its console shows a user (each logger's level applies)."""
    jvm = spark.sparkContext._jvm
    core = jvm.org.apache.logging.log4j.core
    context = jvm.org.apache.logging.log4j.LogManager.getContext(False)
    writer = jvm.java.io.StringWriter()
    layout = core.layout.PatternLayout.createDefaultLayout()
    appender = core.appender.WriterAppender.createAppender(layout, None, writer, "test-demo-log", False, True)
    appender.start()
    configuration = context.getConfiguration()
    configuration.addAppender(appender)
    configuration.getRootLogger().addAppender(appender, None, None)
    context.updateLoggers()
    try:
        yield lambda: str(writer.toString())
    finally:
        configuration.getRootLogger().removeAppender("test-demo-log")
        context.updateLoggers()
        appender.stop()


def test_demo_reports_the_mixed_scenarios_anomalies(kafka_broker, spark, capsys):
    port = free_port()
    settings = DemoSettings(
        duration_s=DURATION_S,
        simulated_s=SIMULATED_S,
        speed=SPEED,
        restarts=1,
        live=False,
        metrics_port=port,
        bootstrap_servers=kafka_broker.bootstrap_servers,
    )
    scraped: list[str] = []
    demo_over = threading.Event()

    def scrape() -> None:
        while not demo_over.wait(3):
            try:
                scraped.append(urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read().decode())
            except OSError:
                pass

    scraper = threading.Thread(target=scrape, daemon=True)
    partitions = spark.conf.get("spark.sql.shuffle.partitions")  # the demo's job sets its own on the session
    with jvm_log(spark) as jvm_output:
        scraper.start()
        try:
            code = run_demo(settings)
        finally:
            demo_over.set()
            scraper.join(timeout=10)
            spark.conf.set("spark.sql.shuffle.partitions", partitions)
        printed = capsys.readouterr()
        output = printed.out + printed.err + jvm_output()
    assert code == 0, output[-3000:]
    # Spark's routine noise stays out of what the user reads: the demo's queries run behind their trigger on
    # purpose, and a clean stop cancels job groups that have no jobs. The status line gives batch times instead.
    assert "falling behind" not in output and "Failed to cancel job group" not in output, output[-3000:]
    assert re.search(r"consumer #\d+ \d+ rows/s in \d+\.\d s", output), output[-3000:]
    # halfway the job stops and a new one starts on the same checkpoints and tables, serving the same port
    assert "restart 1 of 1: a new job" in output, output[-3000:]
    # the demo ran on the broker it was given: its topics are there
    stamp = re.search(r"Delta tables : \S+/demo/(\S+)/delta", output).group(1)
    admin = KafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap_servers)
    try:
        assert f"demo-{stamp}.send-results" in admin.list_topics()
    finally:
        admin.close()
    delta = Path(re.search(r"Delta tables : (\S+)", output).group(1))

    episodes = spark.read.format("delta").load(str(delta / "anomaly_episodes")).collect()
    seen = {(r["group"], r["anomaly"]) for r in episodes}
    # The offline group's backlog is not among them: its members die at 120 s and expire at 240 s, after the
    # 150 s this run is sized for (tests/integration/test_simulator_scenarios.py checks it on the whole fleet).
    expected = {e for e in build_scenario("mixed").expected if e[1] not in ("BROKER_AVOIDED", "OFFLINE_GROUP_BACKLOG")}
    assert expected <= seen, f"missing: {expected - seen}"
    healthy = {"billing-steady", "search-scale-out", "audit-crash"}
    assert not {(g, a) for g, a in seen if g in healthy and a not in ("REBALANCE_STORM",)}, seen

    assert scraped, "the metrics endpoint never answered"
    last = scraped[-1]
    assert 'rmqmon_group_duplicate_client_ids{cluster="DefaultCluster",consumer_group="ledger-containers"} 1.0' in last
    assert re.search(
        r'rmqmon_group_queues\{cluster="DefaultCluster",consumer_group="ledger-containers",state="orphaned",topic="payments"\} [1-9]',
        last,
    )
    assert re.search(
        r'rmqmon_broker_producers_avoiding\{broker="broker-b",cluster="DefaultCluster"\} [1-9]', "\n".join(scraped)
    )
    producers_seen = re.search(
        r'rmqmon_broker_producers_seen\{broker="broker-b",cluster="DefaultCluster"\} (\S+)', last
    )
    assert producers_seen and float(producers_seen.group(1)) >= 2  # the scenario's producers that send to broker-b
    windows = spark.read.format("delta").load(str(delta / "fault_windows")).where("broker = 'broker-b'").count()
    assert windows > 0
