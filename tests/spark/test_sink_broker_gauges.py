"""The per-broker gauges and isolation-episode counts are set from the batch's own rows before the writes (a
failed write leaves them set, and the replayed batch sets the gauges again and counts nothing twice), and the
fault sink commits once per table it has rows for, exactly once per batch id, the broker rows computed
from the items as the batch leaves them."""

from __future__ import annotations

from pathlib import Path

import pytest

from connectors.metrics import MetricsState
from streaming.domain.faults.outcomes import FaultOutcome, FaultWindowChanged, PairEvicted, PairStatus
from streaming.domain.faults.windows import FaultWindowEpisode, WindowStatus
from streaming.job.delta.bus import deleted, output_rows, output_schema
from streaming.job.delta.outputs import FaultOutputs, consumer_sink
from streaming.job.delta.sinks import DeltaTables, run_concurrently
from streaming.job.runtime.metered import MeteredBatches

FAULT_TABLES = ["fault_windows", "producer_broker_status_current", "broker_status_current"]
T = 1_700_000_000_000


class RefusingWrites(DeltaTables):
    """Tables whose MERGE into, upsert into or overwrite of ``refused`` raises, as a failed Delta commit does."""

    refused = ""

    def merge_upsert(self, name, frame, app_id, batch_id, delete_condition=None):  # type: ignore[no-untyped-def]
        if name == self.refused:
            raise RuntimeError(f"MERGE into {name} refused")
        super().merge_upsert(name, frame, app_id, batch_id, delete_condition)

    def upsert(self, name, changes, app_id, batch_id, deleted):  # type: ignore[no-untyped-def]
        if name == self.refused:
            raise RuntimeError(f"upsert into {name} refused")
        super().upsert(name, changes, app_id, batch_id, deleted)

    def overwrite(self, name, frame, app_id, batch_id, rows):  # type: ignore[no-untyped-def]
        if name == self.refused:
            raise RuntimeError(f"overwrite of {name} refused")
        super().overwrite(name, frame, app_id, batch_id, rows)


def item(producer: str, broker: str, until: int, t: int = T) -> FaultOutcome:
    return PairStatus(producer, "PG", broker, "rocketmq-5", until, 700, t, True, t)


def evicted(producer: str, broker: str, t: int) -> FaultOutcome:
    return PairEvicted(producer, broker, t)


def opened(producer: str, broker: str, until: int, t: int = T) -> FaultOutcome:
    episode = FaultWindowEpisode(
        WindowStatus.OPENED, producer, broker, t, t, until, None, 700, 2, "SLOW", False, "rocketmq-5"
    )
    return FaultWindowChanged(episode, "PG")


def fault_sink(tables, app_id, metrics, metered=None):  # type: ignore[no-untyped-def]
    """A query start's ``FaultOutputs``, writing a batch of the replay's outcomes as send-ingest does."""
    outputs = FaultOutputs(tables, app_id, metrics, metered)
    return lambda outcomes, batch_id: run_concurrently(outputs.writes(tables.session, outcomes, batch_id))


def view(group: str, broker: str, status: str, polled_at_ms: int) -> tuple[str, dict]:
    row = {
        "cluster": "DefaultCluster",
        "group": group,
        "broker": broker,
        "status": status,
        "polled_at_ms": polled_at_ms,
        "stale_after_ms": 30_000,
        "channels": 2,
        "collector": "c1",
        "event_time_ms": polled_at_ms,
        "stale_since_ms": None,
    }
    return ("broker_views_current", row)


def frame(spark, records: list[tuple[str, dict]]):  # type: ignore[no-untyped-def]
    """The consumer query's typed output of ``records`` (kind, row)."""
    return spark.createDataFrame(output_rows(records), output_schema())


def commits(root: Path) -> dict[str, int]:
    return {t: len(list((root / t / "_delta_log").glob("*.json"))) for t in FAULT_TABLES}


@pytest.mark.parametrize("refused", ["producer_broker_status_current", "broker_status_current"])
def test_a_fault_batch_sets_the_broker_gauges_even_when_its_write_fails(spark, tmp_path, refused):
    tables = RefusingWrites(spark, tmp_path)
    tables.ensure_all(FAULT_TABLES)
    tables.refused = refused
    metrics = MetricsState()
    sink = fault_sink(tables, "test", metrics)
    batch = [item("p1", "a", T + 60_000), item("p2", "a", T), opened("p1", "a", T + 60_000)]
    with pytest.raises(RuntimeError, match="refused"):
        sink(batch, 0)
    assert metrics.gauges["rmqmon_broker_producers_avoiding"] == {("DefaultCluster", "a"): 1.0}
    assert metrics.gauges["rmqmon_broker_producers_seen"] == {("DefaultCluster", "a"): 2.0}
    assert metrics.gauges["rmqmon_broker_isolated"] == {("DefaultCluster", "a"): 1.0}


def test_a_fault_batch_counts_its_isolation_episodes_before_its_writes_and_its_replay_adds_none(spark, tmp_path):
    """The episode counter is on the alert path as the gauges are (a short isolation shows only there): counted
    even when the batch's write fails, and not again when the restarted query replays the batch."""
    tables = RefusingWrites(spark, tmp_path)
    tables.ensure_all(FAULT_TABLES)
    tables.refused = "producer_broker_status_current"
    metrics, metered = MetricsState(), MeteredBatches()
    batch = [item("p1", "a", T + 60_000), opened("p1", "a", T + 60_000)]
    with pytest.raises(RuntimeError, match="refused"):
        fault_sink(tables, "test", metrics, metered)(batch, 0)
    assert metrics.counters["rmqmon_broker_isolation_episodes_total"] == {("DefaultCluster", "a"): 1.0}
    tables.refused = ""
    fault_sink(tables, "test", metrics, metered)(batch, 0)  # the replay, its writes going through
    assert metrics.counters["rmqmon_broker_isolation_episodes_total"] == {("DefaultCluster", "a"): 1.0}
    assert [r["broker"] for r in tables.read("broker_status_current").collect()] == ["a"]


def test_a_polled_view_batch_sets_the_view_gauges_even_when_its_write_fails(spark, tmp_path):
    tables = RefusingWrites(spark, tmp_path)
    tables.ensure_all(["broker_views_current"])
    tables.refused = "broker_views_current"
    metrics = MetricsState()
    sink = consumer_sink(tables, "test", metrics)
    batch = frame(spark, [view("g1", "a", "FRESH", T), view("g2", "a", "STALE", T + 5_000)])
    with pytest.raises(RuntimeError, match="refused"):
        sink(batch, 0)
    assert metrics.gauges["rmqmon_broker_polled_group_views"] == {("DefaultCluster", "a"): 2.0}
    assert metrics.gauges["rmqmon_broker_stale_group_views"] == {("DefaultCluster", "a"): 1.0}
    assert metrics.gauges["rmqmon_broker_last_poll_timestamp_seconds"] == {("DefaultCluster", "a"): (T + 5_000) / 1000}


def test_the_fault_sink_commits_once_per_table_with_rows_and_a_replay_commits_nothing(spark, tmp_path):
    tables = DeltaTables(spark, tmp_path)
    tables.ensure_all(FAULT_TABLES)
    metrics = MetricsState()
    # Counted from the second batch on: the first batch into the new tables made one commit more.
    fault_sink(tables, "test", metrics)([item("p0", "a", T - 1_000, t=T - 1_000)], 0)
    before = commits(tmp_path)
    first = [item("p1", "a", T + 60_000), item("p2", "a", T), item("p2", "b", T), opened("p1", "a", T + 60_000)]
    fault_sink(tables, "test", metrics)(first, 1)
    assert {t: n - before[t] for t, n in commits(tmp_path).items()} == dict.fromkeys(FAULT_TABLES, 1)

    # A batch without windows: no fault_windows commit. p2 leaves b: no item names b, so b has no row left.
    second = [item("p1", "a", T + 60_000, t=T + 1_000), evicted("p2", "b", T + 1_000)]
    before = commits(tmp_path)
    sink = fault_sink(tables, "test", metrics)  # a new sink (a restarted query) reads the items from the table
    sink(second, 2)
    made = {t: n - before[t] for t, n in commits(tmp_path).items()}
    assert made == {"fault_windows": 0, "producer_broker_status_current": 1, "broker_status_current": 1}

    # The replay of batch 2 (its commits done, the query restarted) commits nothing and leaves the rows.
    before = commits(tmp_path)
    fault_sink(tables, "test", metrics)(second, 2)
    assert commits(tmp_path) == before
    status = {r["broker"]: r.asDict() for r in tables.read("broker_status_current").collect()}
    assert status["a"]["producers_avoiding"] == 1
    assert status["a"]["producers_seen"] == 3  # p0, p1, p2
    assert status["a"]["event_time_ms"] == T + 1_000
    assert status["a"]["batch_id"] == 2
    assert "b" not in status  # as b has no gauges
    assert metrics.gauges["rmqmon_broker_producers_seen"] == {("DefaultCluster", "a"): 3.0}
    items = {
        (r["producer_id"], r["broker"]): r["batch_id"] for r in tables.read("producer_broker_status_current").collect()
    }
    assert items == {("p0", "a"): 0, ("p1", "a"): 2, ("p2", "a"): 1}  # a row keeps the batch that last changed it
    assert metrics.counters["rmqmon_broker_isolation_episodes_total"] == {("DefaultCluster", "a"): 1.0}


def test_a_batch_replayed_by_a_restarted_query_counts_its_episodes_once(spark, tmp_path):
    # The batch's writes were done and its commit was not (the query failed): the supervisor restarts the query,
    # whose new sink replays the batch. The job's MeteredBatches outlives the sink, so the counter holds.
    tables = DeltaTables(spark, tmp_path)
    tables.ensure_all(FAULT_TABLES)
    metrics, metered = MetricsState(), MeteredBatches()
    batch = [item("p1", "a", T + 60_000), opened("p1", "a", T + 60_000)]
    fault_sink(tables, "test", metrics, metered)(batch, 0)
    fault_sink(tables, "test", metrics, metered)(batch, 0)
    assert metrics.counters["rmqmon_broker_isolation_episodes_total"] == {("DefaultCluster", "a"): 1.0}
    # A sink of its own (no shared record) would have counted the replay again.
    fault_sink(tables, "test", metrics)(batch, 0)
    assert metrics.counters["rmqmon_broker_isolation_episodes_total"] == {("DefaultCluster", "a"): 2.0}


HELD = ["current_assignment", "anomalies_current", "group_status_current"]
CONSUMER_TABLES = [*HELD, "anomaly_episodes"]


def assignment(group: str, client: str, queues: list[int], t: int) -> tuple[str, dict]:
    row = {
        "cluster": "DefaultCluster",
        "group": group,
        "topic": "T",
        "client_id": client,
        "queues": [{"broker": "a", "queue_id": q} for q in queues],
        "queue_count": len(queues),
        "generation": 1,
        "event_time_ms": t,
    }
    return ("current_assignment", row)


def withdrawn(group: str, client: str, t: int) -> tuple[str, dict]:
    return (
        deleted("current_assignment"),
        {"cluster": "DefaultCluster", "group": group, "topic": "T", "client_id": client, "event_time_ms": t},
    )


def episode(episode_id: str, group: str, status: str, t: int) -> tuple[str, dict]:
    row = {
        "cluster": "DefaultCluster",
        "episode_id": episode_id,
        "group": group,
        "topic": "T",
        "anomaly": "DUPLICATE_CLIENT_ID",
        "status": status,
        "opened_at_ms": T,
        "closed_at_ms": t if status == "CLOSED" else None,
        "event_time_ms": t,
        "generation": 1,
        "severity": "critical",
        "summary": "s",
        "details": "{}",
    }
    return ("anomaly_episodes", row)


def group_row(group: str, members: int, t: int) -> tuple[str, dict]:
    row = {
        "cluster": "DefaultCluster",
        "group": group,
        "generation": 1,
        "members": members,
        "channels": members,
        "duplicate_client_ids": 0,
        "views_diverge": False,
        "last_rebalance_ms": t,
        "open_anomalies": [{"anomaly": "DUPLICATE_CLIENT_ID", "episodes": 1}],
        "topics": [],
        "event_time_ms": t,
    }
    return ("group_status_current", row)


def test_the_consumer_sink_rewrites_its_current_tables_once_per_batch_as_a_merge_would_leave_them(spark, tmp_path):
    """Upserts replace their key's row (the latest of the batch wins), deletes and closed episodes remove it,
    untouched rows stay with the batch that last wrote them; one commit per changed table, none on a replay,
    and a restarted query's sink reads the tables back before applying its batch."""
    tables = DeltaTables(spark, tmp_path)
    tables.ensure_all(CONSUMER_TABLES)
    first = [
        assignment("G", "c1", [0, 1], T),
        assignment("G", "c2", [2, 3], T),
        assignment("H", "h1", [0], T),
        episode("e1", "G", "OPENED", T),
        episode("e2", "H", "OPENED", T),
        group_row("G", 2, T),
        group_row("H", 1, T),
    ]
    consumer_sink(tables, "test", None)(frame(spark, first), 0)
    second = [
        assignment("G", "c1", [0], T + 1),
        assignment("G", "c1", [0, 1, 2, 3], T + 2),  # the batch's latest row per key wins
        withdrawn("G", "c2", T + 2),
        episode("e1", "G", "UPDATED", T + 2),
        episode("e2", "H", "CLOSED", T + 2),
        group_row("G", 1, T + 2),
    ]
    sink = consumer_sink(tables, "test", None)  # a restarted query: the held tables are read again
    before = {t: len(list((tmp_path / t / "_delta_log").glob("*.json"))) for t in HELD}
    sink(frame(spark, second), 1)
    after = {t: len(list((tmp_path / t / "_delta_log").glob("*.json"))) for t in HELD}
    assert {t: after[t] - before[t] for t in HELD} == dict.fromkeys(HELD, 1)
    consumer_sink(tables, "test", None)(frame(spark, second), 1)  # its replay writes nothing
    assert {t: len(list((tmp_path / t / "_delta_log").glob("*.json"))) for t in HELD} == after

    held = {(r["group"], r["client_id"]): r for r in tables.read("current_assignment").collect()}
    assert {k: ([q["queue_id"] for q in r["queues"]], r["batch_id"]) for k, r in held.items()} == {
        ("G", "c1"): ([0, 1, 2, 3], 1),
        ("H", "h1"): ([0], 0),
    }
    assert {
        (r["episode_id"], r["event_time_ms"], r["batch_id"]) for r in tables.read("anomalies_current").collect()
    } == {("e1", T + 2, 1)}
    status = {r["group"]: (r["members"], r["batch_id"]) for r in tables.read("group_status_current").collect()}
    assert status == {"G": (1, 1), "H": (1, 0)}
    assert [len(tables.read(t).inputFiles()) for t in HELD] == [1, 1, 1]  # each written whole, as one file


def test_driver_rows_become_the_frame_create_data_frame_gives_without_a_python_worker(spark):
    """``local_frame``, which every sink's frame of driver-held rows goes through, holds exactly the values
    ``createDataFrame`` would, NULLs, doubles and booleans included, and refuses a row of another type alike."""
    from streaming.contract.tables import TABLES
    from streaming.job.delta.bus import struct_type
    from streaming.job.delta.fault_table_rows import WINDOW_FIELDS, window_values
    from streaming.job.delta.sinks import local_frame

    windows = [window_values(opened(f"P{i}", "b", T + 1_000 * i, T + i)) for i in range(3)]  # type: ignore[arg-type]
    schema = struct_type(WINDOW_FIELDS)
    assert local_frame(spark, windows, schema).collect() == spark.createDataFrame(windows, schema).collect()
    brokers = struct_type(TABLES["broker_status_current"].columns)
    rows = [("b", 1, 3, 1 / 3, None, True, T, 7, "c"), ("d", 0, 2, 0.0, T + 5, False, T, 7, "c")]
    assert local_frame(spark, rows, brokers).collect() == spark.createDataFrame(rows, brokers).collect()
    with pytest.raises(TypeError):
        local_frame(spark, [("b", "one", 3, 0.5, None, True, T, 7, "c")], brokers)
