"""The monitor job: builds the session, creates the tables, starts the two queries, stops cleanly.

Queries (each with its own checkpoint under ``paths.checkpoint_root``):

* ``consumer`` -- consumer channels, reported assignments, routes and consume progress -> membership, analysis,
  anomalies, each queue's progress verdict (``consumer.query``);
* ``send-ingest`` -- send results -> dead letters, per-minute statistics, and the reduced sends replayed
  into fault windows and broker status (``sends.query``, ``fault_replay``).

``MonitorJob`` follows a lifecycle contract: constructing it opens nothing; ``start()`` starts everything
and raises if anything fails; ``stop()`` stops the queries (the current micro-batch finishes or is
replayed from the checkpoint on restart), the metrics endpoint and the session it built. A session that was
already running in the process when the job started (tests, an application embedding the job) is the
caller's: the job runs on it and ``stop()`` leaves it running, without the job's progress listener.
``run()`` adds signal handling: SIGTERM or Ctrl-C stops the job cleanly, and a restart resumes from the
checkpoints.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from connectors import object_store
from connectors.metric_catalogue import Metrics
from connectors.metrics import MetricsState, new_registry, serve
from streaming.config import MonitorConfig
from streaming.contract.events import EventType
from streaming.contract.tables import TABLES, Table
from streaming.job.delta.bus import CONSUMER_TABLES
from streaming.job.delta.exactly_once import checkpoint_app_id
from streaming.job.delta.sinks import DeltaTables
from streaming.job.runtime.metered import MeteredBatches
from streaming.job.runtime.progress import ProgressBoard, ProgressListener
from streaming.job.runtime.supervision import KafkaRefused, QueryFailedRepeatedly, QuerySupervisor, kafka_refusal

QUERY_NAMES = ("consumer", "send-ingest")
# Queries that apply the watermark themselves and count their late rows (Spark drops none there, see
# ``consumer.query`` and ``fault_replay``): their progress would only ever say 0.
COUNTS_ITS_OWN_LATE_ROWS = frozenset({"consumer", "send-ingest"})
DAG_SCHEDULER_LOGGER = "org.apache.spark.scheduler.DAGScheduler"
# The tables each query writes (dead letters, which both write, apart): what a new checkpoint must not start over.
QUERY_TABLES = {
    "consumer": tuple(t for t in CONSUMER_TABLES if t != Table.DEAD_LETTERS),
    "send-ingest": (
        Table.FAULT_WINDOWS,
        Table.PRODUCER_BROKER_STATUS_CURRENT,
        Table.BROKER_STATUS_CURRENT,
        Table.SEND_LATENCY_MINUTES,
    ),
}
log = logging.getLogger(__name__)


def session_running() -> bool:
    """Whether this process has a Spark session already (active in this thread, or the default one), which
    ``build_spark_session`` would return instead of building one."""
    from pyspark.errors import PySparkRuntimeError
    from pyspark.sql import SparkSession

    try:
        SparkSession.active()
    except PySparkRuntimeError:
        return False
    return True


@dataclass
class MonitorJob:
    config: MonitorConfig
    available_now: bool = False  # process what is in Kafka now, then stop (tests, backfills)
    # A query on a new checkpoint over tables it wrote before: clear its current tables and read Kafka from the
    # latest offsets (``run --new-state``), instead of being refused (see ``_new_checkpoints``).
    new_state: bool = False
    metrics: MetricsState = field(default_factory=MetricsState)
    board: ProgressBoard = field(default_factory=ProgressBoard)
    session: Any = None
    queries: dict[str, Any] = field(default_factory=dict)
    tables: DeltaTables | None = None
    # Set once the queries are being stopped: a batch failing then is not searched for poison records.
    stopping: threading.Event = field(default_factory=threading.Event)
    # The batches each sink's metrics have counted, kept across a query's restarts (``metered``).
    metered: MeteredBatches = field(default_factory=MeteredBatches)
    # JVM loggers' levels (log4j names) set once the session is up, before any query starts (the demo's).
    logger_levels: dict[str, str] = field(default_factory=dict)
    _server: Any = None
    _owns_session: bool = field(default=False, init=False)  # built by start(), so stop() stops it
    _started_at: float = field(default=0.0, init=False)  # wall time start() began: a query's first look
    _listener: ProgressListener | None = field(default=None, init=False)
    _fresh: frozenset[str] = field(default=frozenset(), init=False)  # queries starting a new state (new_state)

    # -- lifecycle ------------------------------------------------------------------------------------
    def start(self) -> None:
        from streaming.job.runtime.checkpoint_layout import check_shard_layout
        from streaming.job.runtime.spark_session import SparkSettings, build_spark_session
        from streaming.job.runtime.storage_check import check_writable
        from streaming.job.sends.fault_replay import check_state_shards

        self._started_at = time.time()
        c = self.config
        check_writable(c.paths.delta_root, "Delta root ([paths] delta_root)")
        check_writable(c.paths.checkpoint_root, "checkpoint root ([paths] checkpoint_root)")
        self.metrics.label_value_cap = c.metrics.label_value_cap
        self._owns_session = not session_running()
        roots = (c.paths.delta_root, c.paths.checkpoint_root)
        storage = c.storage if object_store.needs_s3(roots) else None
        self.session = build_spark_session(SparkSettings.of(c.spark, c.paths.checkpoint_root, storage))
        # refused before anything is created or started: each path's state is keyed by its shard count
        check_shard_layout(self.session, self._checkpoint("consumer"), c.membership.shards)
        check_state_shards(self.session, self._checkpoint("send-ingest"), c.producers.state_shards)
        if self.logger_levels:
            from streaming.job.runtime.spark_session import set_logger_levels

            set_logger_levels(self.session, self.logger_levels)
        self._listener = ProgressListener(self.board)
        self.session.streams.addListener(self._listener)
        self.tables = DeltaTables(
            self.session,
            object_store.resolve(c.paths.delta_root),
            c.delta.checkpoint_interval,
            c.delta.auto_compact,
            c.delta.deleted_file_retention_hours,
            c.delta.log_retention_hours,
            c.delta.append_checkpoint_interval,
            c.ingest.default_cluster,
        )
        self.tables.ensure_all()
        self._fresh = self._new_checkpoints()  # before the series are restored from the current tables
        if c.metrics.enabled and self._server is None:
            self._server = serve(new_registry(self.metrics), c.metrics.host, c.metrics.port)
            import pyspark

            from streaming import __version__

            self.metrics.set_gauge(Metrics.BUILD_INFO, (__version__, pyspark.__version__), 1.0)
        self._restore_metrics()
        self._start_consumer_query()
        self._start_send_ingest()
        self.metrics.set_gauge(Metrics.UP, (), 1.0)

    def _restore_metrics(self) -> None:
        """Every group's and broker's series as the tables hold them, before the first batch (a group's series
        would otherwise wait for its next change); a failure is logged, and the batches set the series again."""
        from streaming.job.delta.outputs import restore_metrics

        assert self.tables is not None
        try:
            restore_metrics(self.tables, self.metrics)
        except Exception:  # noqa: BLE001 - the job runs on without the restored series
            log.exception("restoring the group and broker metrics from the Delta tables failed")

    def restart_query(self, name: str) -> None:
        """Start query ``name`` again from its checkpoint (after it failed; see ``supervision``)."""
        starters = {
            "consumer": self._start_consumer_query,
            "send-ingest": self._start_send_ingest,
        }
        starters[name]()

    def _new_checkpoints(self) -> frozenset[str]:
        """The queries starting a new state over their tables (``new_state``): each query whose checkpoint no query
        ever used while some of its tables hold writes. Without ``new_state`` such a start is refused in one line
        (the new state would append Kafka's retained history to the tables a second time, and leave rows of
        the current tables that it never reaches as they were for good); with it, the query's current tables are
        emptied, its history kept, and it reads Kafka from the latest offsets."""
        from pyspark.sql import functions as F

        from streaming.job.runtime.checkpoint_layout import CheckpointLayoutError, checkpoint_used

        assert self.tables is not None
        fresh = set()
        for query, names in QUERY_TABLES.items():
            checkpoint = self._checkpoint(query)
            if checkpoint_used(self.session, checkpoint):
                continue
            written = [name for name in names if self.tables.version(name) > 0]
            if not written:
                continue
            if not self.new_state:
                raise CheckpointLayoutError(
                    f"the {query} checkpoint {checkpoint} is new, but its tables under [paths] delta_root hold an "
                    f"earlier state's writes ({', '.join(written)}): start on the checkpoint_root they were written "
                    "with, with a new delta_root too, or with --new-state (its current tables emptied, history kept, "
                    "Kafka read from the latest offsets)"
                )
            current = [name for name in names if TABLES[name].kind == "current"]
            for name in current:
                self.tables.delete(name, F.lit(True))
            log.warning(
                "%s starts a new state on the new checkpoint %s over tables written before (%s): emptied %s, kept "
                "the history; reading Kafka from the latest offsets",
                query,
                checkpoint,
                ", ".join(written),
                ", ".join(current),
            )
            fresh.add(query)
        return frozenset(fresh)

    def _checkpoint(self, name: str) -> str:
        return object_store.join(object_store.resolve(self.config.paths.checkpoint_root), name)

    def _trigger(self, writer: Any) -> Any:
        if self.available_now:
            return writer.trigger(availableNow=True)
        return writer.trigger(processingTime=self.config.spark.trigger_interval)

    def _ingest_settings(self, event_types: tuple[EventType, ...], query: str) -> Any:
        """The Kafka source of ``query`` reading ``event_types``: each topic with the type its records default to
        (the first of the types read from it; the others sharing it are told apart by ``type``); from the latest
        offsets for a query starting a new state over its tables (``_new_checkpoints``)."""
        from streaming.job.ingest.classify import IngestSettings

        c = self.config
        topics: dict[str, EventType] = {}
        for t in event_types:
            topics.setdefault(c.kafka.topics.of(t), t)
        return IngestSettings(
            bootstrap_servers=c.kafka.bootstrap_servers,
            topics=topics,
            max_event_bytes=c.ingest.max_event_bytes,
            max_future_skew_ms=c.ingest.max_future_skew_ms,
            starting_offsets="latest" if query in self._fresh else c.kafka.starting_offsets,
            max_offsets_per_trigger=c.kafka.max_offsets_per_trigger or None,
            batch_planning=c.kafka.batch_planning,
            fail_on_data_loss=c.kafka.fail_on_data_loss,
            kafka_options=dict(c.kafka.options),
            default_cluster=c.ingest.default_cluster,
        )

    def _start_consumer_query(self, name: str = "consumer", state_function: Any = None) -> None:
        """The heartbeat path's query; ``state_function`` replaces the engine (the benchmark's no-op floor)."""
        from streaming.job.consumer.events import CONSUMER_EVENTS
        from streaming.job.consumer.query import build_consumer_stream
        from streaming.job.delta.outputs import consumer_sink
        from streaming.job.ingest.classify import contracts_for

        stream = build_consumer_stream(
            self.session,
            self._ingest_settings(CONSUMER_EVENTS, name),
            contracts_for(CONSUMER_EVENTS),
            self.config.membership.shards,
            self.config.ingest.watermark_delay,
            self.config.engine_settings,
            state_function,
        )
        checkpoint = self._checkpoint(name)
        app_id = checkpoint_app_id(checkpoint, self.config.delta.app_id_prefix, self.session)
        assert self.tables is not None
        writer = stream.writeStream.queryName(name).option("checkpointLocation", checkpoint)
        writer = self._trigger(writer.foreachBatch(consumer_sink(self.tables, app_id, self.metrics, self.metered)))
        self.queries[name] = writer.start()

    def _start_send_ingest(self) -> None:
        from streaming.job.delta.outputs import FaultOutputs
        from streaming.job.ingest.classify import contracts_for
        from streaming.job.sends.fault_replay import FaultReplayer, FaultStateFiles
        from streaming.job.sends.metrics import SendMetrics
        from streaming.job.sends.query import SEND_EVENTS, start_send_ingest

        c = self.config
        assert self.tables is not None
        checkpoint = self._checkpoint("send-ingest")
        app_id = checkpoint_app_id(checkpoint, c.delta.app_id_prefix, self.session)
        # The late-send series exists from the start, at 0, so that a dashboard or a rate() over it has data before
        # the first late send (a query Spark watermarks has it from its progress).
        self.metrics.inc(Metrics.LATE_EVENTS_TOTAL, ("send-ingest", "watermark"), 0.0)
        fault = FaultReplayer(
            FaultStateFiles(self.session, checkpoint),
            c.fault_settings,
            c.producers.state_shards,
            c.ingest.watermark_delay_ms,
            FaultOutputs(self.tables, app_id, self.metrics, self.metered),
            on_late=self._count_late_sends,
        )
        self.queries["send-ingest"] = start_send_ingest(
            self.session,
            self.tables,
            self._ingest_settings(SEND_EVENTS, "send-ingest"),
            contracts_for(SEND_EVENTS),
            c.fault_settings,
            checkpoint,
            app_id,
            c.spark.trigger_interval,
            self.available_now,
            fault=fault,
            metrics=SendMetrics(self.metrics, self.metered, c.ingest.default_cluster),
            stopping=self.stopping.is_set,
        )

    def _count_late_sends(self, batch_id: int, sends: int) -> None:
        """Sends the fault replay refused as older than the watermark, once per batch id."""
        if self.metered.first_time("send-ingest:watermark", batch_id):
            self.metrics.inc(Metrics.LATE_EVENTS_TOTAL, ("send-ingest", "watermark"), sends)

    def await_available(self) -> None:
        """With ``available_now``: wait until every query has processed what was available."""
        for name, query in self.queries.items():
            try:
                query.awaitTermination()
            except Exception as error:
                refused = kafka_refusal(error, name)
                if refused is None:
                    raise
                raise refused from None
        self.raise_if_failed()

    def raise_if_failed(self) -> None:
        for name, query in self.queries.items():
            error = query.exception()
            if error is not None:
                raise kafka_refusal(error, name) or RuntimeError(f"query {name} failed: {error}")

    def refresh_job_metrics(self) -> None:
        from datetime import datetime

        def seconds(iso: str) -> float:
            return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()

        # When each query last looked at its sources: its start, its last finished batch or its last trigger
        # that found nothing new, whichever is latest (quiet topics are not a stuck query).
        looked = {name: self._started_at for name in self.queries}
        for name, idle in self.board.idle_timestamps().items():
            looked[name] = max(looked.get(name, 0.0), seconds(idle))
        for name, p in self.board.snapshot().items():
            q = (name,)
            self.metrics.set_gauge(Metrics.BATCH_DURATION_SECONDS, q, p.batch_duration_ms / 1000)
            if p.batch_timestamp:  # when the last micro-batch started, plus how long it took: when it finished
                finished = seconds(p.batch_timestamp) + p.batch_duration_ms / 1000
                self.metrics.set_gauge(Metrics.LAST_BATCH_TIMESTAMP_SECONDS, q, finished)
                looked[name] = max(looked.get(name, 0.0), finished)
            self.metrics.set_gauge(Metrics.PROCESSED_ROWS_PER_SECOND, q, p.processed_rows_per_second)
            self.metrics.set_gauge(Metrics.STATE_ROWS, q, p.state_rows)
            self.metrics.set_gauge(Metrics.STATE_MEMORY_BYTES, q, p.state_memory_bytes)
            self.metrics.set_gauge(Metrics.KAFKA_OFFSETS_BEHIND, q, p.offsets_behind)
            self.metrics.set_counter(Metrics.INPUT_ROWS_TOTAL, q, p.input_rows_total)
            self.metrics.set_counter(Metrics.BATCHES_TOTAL, q, p.batches_total)
            for phase, ms in p.phase_ms_total.items():
                self.metrics.set_counter(Metrics.BATCH_PHASE_SECONDS_TOTAL, (name, phase), ms / 1000)
            if name not in COUNTS_ITS_OWN_LATE_ROWS:
                self.metrics.set_counter(Metrics.LATE_EVENTS_TOTAL, (name, "watermark"), p.late_rows_total)
            if p.watermark:
                self.metrics.set_gauge(Metrics.WATERMARK_TIMESTAMP_SECONDS, q, seconds(p.watermark))
        for name, at in looked.items():
            if at:
                self.metrics.set_gauge(Metrics.LAST_TRIGGER_TIMESTAMP_SECONDS, (name,), at)

    def stop(self, hurry: threading.Event | None = None) -> None:
        self.stop_queries(self.config.spark.stop_grace_seconds, hurry)
        self.metrics.set_gauge(Metrics.UP, (), 0.0)
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()  # the port is free for a job started again in this process
            self._server = None
        if self.session is not None and self._owns_session:
            self.session.stop()
        elif self.session is not None and self._listener is not None:
            self.session.streams.removeListener(self._listener)
        self.session, self._listener = None, None

    def stop_queries(self, grace_s: float, hurry: threading.Event | None = None) -> None:
        """Stop every query, each once its running micro-batch has ended, within ``grace_s`` in all.

        Structured Streaming has no graceful stop: ``stop()`` interrupts a running batch. Nothing is lost
        (the batch is replayed from the checkpoint on restart), but the interrupted Delta write or MERGE logs
        errors that look like a failure. So each query is stopped between triggers, or as soon as the batch
        it was running has reported its progress: a query that is behind starts its next batch at once, and
        that one is still planning (no writes yet) when it is stopped. A trigger that starts between the
        check and the stop is interrupted like before: Spark offers no way to hold it back. ``hurry`` set (a
        second Ctrl-C) ends the wait.
        """

        def last_batch(query: Any) -> int:
            progress = query.lastProgress
            return -1 if progress is None else int(progress["batchId"])

        from streaming.job.runtime.spark_session import set_logger_levels

        self.stopping.set()
        deadline = time.monotonic() + grace_s
        hurry = hurry or threading.Event()
        # ``stop()`` cancels the query's job group; a query stopped between batches, as here, has no job
        # running, and the DAGScheduler then warned "Failed to cancel job group ... Cannot find active jobs
        # for it", twice per query: noise at every clean stop. Its warnings stay off from here on: the
        # scheduler handles a cancel on its own thread after ``stop()`` returns, so a level restored when the
        # last query has stopped let those warnings through on a busy machine.
        if self.session is not None:
            set_logger_levels(self.session, {DAG_SCHEDULER_LOGGER: "ERROR"})
        for query in self.queries.values():
            try:
                running = last_batch(query)  # the batch in progress, if any, reports a higher id when done
                while (
                    query.isActive
                    and query.status["isTriggerActive"]
                    and last_batch(query) == running
                    and time.monotonic() < deadline
                ):
                    if hurry.wait(0.05):
                        break
                query.stop()
            except Exception:  # noqa: BLE001 - stopping must go on for the others
                pass

    def run(self, duration_s: float | None = None, on_tick: Any = None) -> int:
        """Run until SIGTERM/Ctrl-C, ``duration_s`` or ``on_tick`` (called about every second) returning True;
        returns the process exit code. The queries then finish their running batches (``stop_queries``), unless
        a second signal says not to wait."""
        stopping, hurry = threading.Event(), threading.Event()

        def on_signal(*_: Any) -> None:
            (hurry if stopping.is_set() else stopping).set()

        previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        deadline = None if duration_s is None else time.monotonic() + duration_s
        supervisor = QuerySupervisor(
            self.config.supervision,
            self.restart_query,
            lambda name: self.metrics.inc(Metrics.QUERY_RESTARTS_TOTAL, (name,)),
        )
        try:
            self.start()
            # Creating the SparkContext installed PySpark's own SIGINT handler (cancel every job, raise
            # KeyboardInterrupt), which would abort the running batches: Ctrl-C is this method's again.
            signal.signal(signal.SIGINT, on_signal)
            while not stopping.is_set() and (deadline is None or time.monotonic() < deadline):
                self.refresh_job_metrics()
                supervisor.check(self.queries, time.monotonic())
                if on_tick is not None and on_tick(self):
                    break
                stopping.wait(1.0)
            return 0
        except KafkaRefused:
            raise  # one line from the command, no restart can help
        except QueryFailedRepeatedly as error:
            log.error("%s; exiting so that the job's supervisor starts it again", error)
            return 1
        finally:
            self.stop(hurry)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
