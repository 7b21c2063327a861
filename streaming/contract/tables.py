"""The catalogue of Delta tables the monitor writes: one place for names, schemas, keys and meaning.

``docs/tables.md`` is rendered from it (``python -m streaming.contract.tables``), the job creates every table
from it at start and the readers (``connectors.delta_reader``) name their views after it, so code, docs
and storage agree; code names a table by its ``Table`` member, never a string. History tables are append-only
(one row per fact, idempotent per micro-batch through ``txnAppId``/``txnVersion``); current-state tables hold
one row per key, rewritten whole from the driver's copy or MERGEd (idempotent through the same txn ids). Times
are epoch milliseconds in ``*_ms`` columns (exact, as the events carry them) plus a UTC timestamp column where
people query by time; ``batch_id`` is the writing micro-batch.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace

from streaming.contract.columns import (
    BIGINT,
    BOOLEAN,
    DOUBLE,
    INT,
    STRING,
    TIMESTAMP,
    Column,
    array_of,
    columns,
    struct_of,
)
from streaming.domain.anomaly_catalogue import CATALOGUE as ANOMALY_CATALOGUE


class Table(enum.StrEnum):
    """Every table's name, in the catalogue's order: the only place a table's name is written."""

    MEMBERSHIP_CHANGES = "membership_changes"
    GROUP_SNAPSHOTS = "group_snapshots"
    EXPECTED_ASSIGNMENTS = "expected_assignments"
    CURRENT_ASSIGNMENT = "current_assignment"
    ANOMALY_EPISODES = "anomaly_episodes"
    ANOMALIES_CURRENT = "anomalies_current"
    GROUP_STATUS_CURRENT = "group_status_current"
    QUEUE_HOLDERS_CURRENT = "queue_holders_current"
    BROKER_VIEWS_CURRENT = "broker_views_current"
    BROKER_VIEW_CHANGES = "broker_view_changes"
    CONSUME_PROGRESS = "consume_progress"
    QUEUE_PROGRESS_CURRENT = "queue_progress_current"
    REBALANCE_COST = "rebalance_cost"
    FAULT_WINDOWS = "fault_windows"
    PRODUCER_BROKER_STATUS_CURRENT = "producer_broker_status_current"
    BROKER_STATUS_CURRENT = "broker_status_current"
    SEND_LATENCY_MINUTES = "send_latency_minutes"
    DEAD_LETTERS = "dead_letters"


@dataclass(frozen=True)
class TableSpec:
    name: Table
    kind: str  # "history" (append-only) or "current" (one row per key)
    columns: tuple[Column, ...]
    description: str
    key: tuple[str, ...] = ()
    partition_by: tuple[str, ...] = ()

    @property
    def schema_ddl(self) -> str:
        return ", ".join(f"{c.name} {c.type.ddl}" for c in self.columns)

    def column(self, name: str) -> Column:
        return next(c for c in self.columns if c.name == name)


QUEUE_LIST = array_of(struct_of(broker=STRING, queue_id=INT))
# A queue at a consume-progress sample, as both progress tables hold it.
PROGRESS_COLUMNS = columns(
    group=STRING,
    topic=STRING,
    broker=STRING,
    queue_id=INT,
    event_time_ms=BIGINT,
    answered=BOOLEAN,
    broker_offset=BIGINT,
    consumer_offset=BIGINT,
    pull_offset=BIGINT,
    min_offset=BIGINT,
    last_timestamp_ms=BIGINT,
    lag=BIGINT,
    state=STRING,
    rule=STRING,
    severity=STRING,
    cause=STRING,
    complete=DOUBLE,
    time_lag_upper_s=DOUBLE,
    time_lag_estimate_s=DOUBLE,
    time_lag_bounded=BOOLEAN,
    expired_unconsumed=BOOLEAN,
    holders=array_of(STRING),
    holders_reported=BOOLEAN,
    expected_owner=STRING,
    view_fresh=BOOLEAN,
    group_online=BOOLEAN,
    state_since_ms=BIGINT,
)

TABLES: dict[str, TableSpec] = {
    spec.name: spec
    for spec in (
        TableSpec(
            Table.MEMBERSHIP_CHANGES,
            "history",
            columns(
                group=STRING,
                broker=STRING,
                event_time_ms=BIGINT,
                event_time=TIMESTAMP,
                change=STRING,
                reason=STRING,
                client_id=STRING,
                channel=STRING,
                notifies_clients=BOOLEAN,
                topics_added=array_of(STRING),
                topics_removed=array_of(STRING),
                batch_id=BIGINT,
            ),
            "Every change of a group's membership as one broker saw it: JOIN (new channel), LEAVE "
            "(UNREGISTER/close/exception/idle), EXPIRED (silent past the channel expiry; RocketMQ sends no "
            "CHANGE for it), VANISHED (missing from a poll of the broker's connection list, reason POLL; how "
            "it left is unknown, notifies_clients false), SUBSCRIPTION_CHANGED (topic added or removed). "
            "notifies_clients says whether the broker would send NOTIFY_CONSUMER_IDS_CHANGED.",
        ),
        TableSpec(
            Table.GROUP_SNAPSHOTS,
            "history",
            columns(
                group=STRING,
                generation=BIGINT,
                event_time_ms=BIGINT,
                event_time=TIMESTAMP,
                triggers=array_of(STRING),
                members=INT,
                channels=INT,
                brokers=array_of(STRING),
                cid_all=array_of(STRING),
                topics=array_of(STRING),
                strategy=STRING,
                client_line=STRING,
                views_diverge=BOOLEAN,
                anomalies=array_of(STRING),
                details=STRING,
                batch_id=BIGINT,
            ),
            "One row per generation of a group: the merged membership after a membership or route change "
            "(changes closer than [anomalies] storm_coalesce_ms in event time are one generation, however the "
            "input was batched; event_time_ms is the last of them). generation increases by one per generation; "
            "cid_all is sorted as RebalanceImpl sorts it, "
            "duplicates kept; topics are the topics its clients subscribe; details is JSON (per-broker views, "
            "per-topic summary, allocation, stale_views, client_versions as reported, strategy_sources, and "
            "cause: the anomaly the generation is part of -- ROLLING_DEPLOY, REBALANCE_STORM, FLAPPING_MEMBERS, "
            "INCONSISTENT_SUBSCRIPTION for a flip of the broker's subscription table -- or null). "
            "strategy is what the clients run (MACHINE_ROOM_NEARBY-AVG), or the name they report when the "
            "monitor cannot compute or complete it (UNKNOWN_STRATEGY), or BROADCAST (BROADCASTING) or BROKER "
            "(CONSUME_POP) for a group without client-side allocation, which has no expected assignment. "
            "strategy_sources says where each part of the strategy came from: reported (the clients' running "
            "info), rule '<group pattern>' with the option ([[allocation.groups]]), or default; e.g. "
            '{"strategy": "reported", "inner": "rule \'orders-*\' strategy \'MACHINE_ROOM_NEARBY-AVG\'", '
            "\"resolver\": \"rule 'orders-*': machine_room_regex '^([A-Z0-9]+)-'\"}. "
            "client_line is the lines (4.9, 5) of the versions the clients report, empty when none reports one.",
        ),
        TableSpec(
            Table.EXPECTED_ASSIGNMENTS,
            "history",
            columns(
                group=STRING,
                generation=BIGINT,
                topic=STRING,
                client_id=STRING,
                queues=QUEUE_LIST,
                queue_count=INT,
                strategy=STRING,
                event_time_ms=BIGINT,
                event_time=TIMESTAMP,
                batch_id=BIGINT,
            ),
            "What every distinct client of the group computes for each subscribed topic at each generation, "
            "exactly as the real client would (strategy and client line as reported or configured).",
        ),
        TableSpec(
            Table.CURRENT_ASSIGNMENT,
            "current",
            columns(
                group=STRING,
                topic=STRING,
                client_id=STRING,
                queues=QUEUE_LIST,
                queue_count=INT,
                generation=BIGINT,
                event_time_ms=BIGINT,
                batch_id=BIGINT,
            ),
            "The latest expected assignment per (group, topic, client); rows of clients or topics that left "
            "are deleted.",
            key=("group", "topic", "client_id"),
        ),
        TableSpec(
            Table.ANOMALY_EPISODES,
            "history",
            columns(
                episode_id=STRING,
                group=STRING,
                topic=STRING,
                anomaly=STRING,
                status=STRING,
                opened_at_ms=BIGINT,
                closed_at_ms=BIGINT,
                event_time_ms=BIGINT,
                event_time=TIMESTAMP,
                generation=BIGINT,
                severity=STRING,
                summary=STRING,
                details=STRING,
                batch_id=BIGINT,
            ),
            "Anomaly episodes as they open and close (status OPENED / UPDATED / CLOSED), of these kinds (severity: "
            "meaning; from streaming/domain/anomaly_catalogue.py): "
            + "; ".join(f"{k} ({spec.severity}: {spec.meaning})" for k, spec in ANOMALY_CATALOGUE.items())
            + ". "
            "details is JSON naming the queues, clients and channels.",
        ),
        TableSpec(
            Table.ANOMALIES_CURRENT,
            "current",
            columns(
                episode_id=STRING,
                group=STRING,
                topic=STRING,
                anomaly=STRING,
                opened_at_ms=BIGINT,
                event_time_ms=BIGINT,
                generation=BIGINT,
                severity=STRING,
                summary=STRING,
                details=STRING,
                batch_id=BIGINT,
            ),
            "Open anomaly episodes; a closed episode's row is deleted.",
            key=("episode_id",),
        ),
        TableSpec(
            Table.GROUP_STATUS_CURRENT,
            "current",
            columns(
                group=STRING,
                generation=BIGINT,
                members=INT,
                channels=INT,
                duplicate_client_ids=INT,
                views_diverge=BOOLEAN,
                last_rebalance_ms=BIGINT,
                open_anomalies=array_of(struct_of(anomaly=STRING, episodes=INT)),
                topics=array_of(
                    struct_of(
                        topic=STRING,
                        assigned=INT,
                        orphaned=INT,
                        double_owned=INT,
                        idle_members=INT,
                        non_subscribing_members=INT,
                        skew_queues=INT,
                    )
                ),
                event_time_ms=BIGINT,
                batch_id=BIGINT,
            ),
            "Per group, its latest analysis as the rmqmon_group_* metrics show it: distinct members, channels "
            "(cidAll entries), generation, client IDs on more than one channel, whether broker views diverge, the "
            "last rebalance's event time, open anomaly episodes by kind, and per subscribed topic its queues by "
            "owner count (assigned 1, orphaned 0, double_owned 2+), idle and non-subscribing members and the "
            "queue skew. The job restores those metrics from it at start. Rows of groups gone from every broker "
            "are deleted.",
            key=("group",),
        ),
        TableSpec(
            Table.QUEUE_HOLDERS_CURRENT,
            "current",
            columns(
                group=STRING,
                topic=STRING,
                broker=STRING,
                queue_id=INT,
                generation=BIGINT,
                expected_owners=array_of(STRING),
                holders=array_of(STRING),
                state=STRING,
                since_ms=BIGINT,
                evidence_from_ms=BIGINT,
                not_counted=array_of(STRING),
                uncounted_holders=array_of(STRING),
                event_time_ms=BIGINT,
                batch_id=BIGINT,
            ),
            "Per queue of a topic whose clients report what they hold (running info through the collector, or the "
            "client agent), as of the group's latest analysis: expected_owners (the subscribers whose computed "
            "share holds it) next to holders (the clients whose counted report holds it). A report counts only if "
            "taken at or after evidence_from_ms, the group's latest generation plus [membership] "
            "client_rebalance_delay_ms; older reports are kept but not compared: not_counted names the subscribers "
            "whose latest report is older, uncounted_holders those of them holding the queue then. state: HELD, "
            "DOUBLE_HELD (two or more holders), UNHELD (every subscriber's report counts, none holds it), UNKNOWN (a "
            "subscriber's report is missing or not counted, or a client id is on several channels); since_ms: since "
            "when the counted reports have shown that state (OBSERVED_DOUBLE_HOLDING and OBSERVED_UNHELD_QUEUES "
            "open once it lasted [membership] observed_grace_ms). Rows of a topic no longer analysed, or of a group "
            "gone, are deleted. Rewritten whole by each consumer batch that changes it, so its change feed shows a "
            "batch as deletes and inserts.",
            key=("group", "topic", "broker", "queue_id"),
        ),
        TableSpec(
            Table.BROKER_VIEWS_CURRENT,
            "current",
            columns(
                group=STRING,
                broker=STRING,
                status=STRING,
                polled_at_ms=BIGINT,
                stale_after_ms=BIGINT,
                stale_since_ms=BIGINT,
                channels=INT,
                collector=STRING,
                event_time_ms=BIGINT,
                batch_id=BIGINT,
            ),
            "Each broker view of a group fed by a collector's polls (consumer_connections): FRESH while polls "
            "arrive, STALE from stale_since_ms when none came within stale_after_ms of the last (polled_at_ms). "
            "A stale view keeps its channels as last seen: no removal, no queue anomaly. Rows of a group gone "
            "from every broker are deleted. Heartbeat-fed views have no row. Rewritten whole by each consumer batch "
            "that changes it, so its change feed shows a batch as deletes and inserts.",
            key=("group", "broker"),
        ),
        TableSpec(
            Table.BROKER_VIEW_CHANGES,
            "history",
            columns(
                group=STRING,
                broker=STRING,
                status=STRING,
                polled_at_ms=BIGINT,
                stale_after_ms=BIGINT,
                channels=INT,
                collector=STRING,
                event_time_ms=BIGINT,
                event_time=TIMESTAMP,
                batch_id=BIGINT,
            ),
            "Status changes of polled broker views: FRESH at a view's first poll and when polls resume after "
            "STALE, STALE at the first event time without a newer poll (polled_at_ms + stale_after_ms + 1).",
        ),
        TableSpec(
            Table.CONSUME_PROGRESS,
            "history",
            (*PROGRESS_COLUMNS, *columns(event_time=TIMESTAMP, state_changed=BOOLEAN, batch_id=BIGINT)),
            "Every queue of a group at every consume-progress sample (one master's GET_CONSUME_STATS answer, "
            "consume_progress events), joined with ownership at that time and judged over the queue's last "
            "samples (docs/design/consume-progress.md): the offsets as answered (NULL, never 0, when the master did "
            "not answer: answered false), lag (broker_offset - consumer_offset at the latest answered sample), state "
            "(UNKNOWN, NOT_OWNED_MODEL, NO_OFFSET, INCOMPLETE, IDLE, OK, REWIND, REBALANCE_REWIND, "
            "ORPHAN_CONFIRMED, HIDDEN_CONSUMER, DOUBLE_OWNED, STUCK_HOLDER, SLOW), the rule that matched, its "
            "severity, a stuck holder's cause, the share of the window answered (complete), the time lag (upper "
            "bound, interpolated estimate, bounded when the estimate is only a lower bound), holders (clients "
            "whose latest report holds the queue, counted as in queue_holders_current: taken at or after the "
            "group's latest generation plus [membership] client_rebalance_delay_ms; holders_reported false: the "
            "expected owner has no counted report of the topic, no running info or only an older one, and is "
            "presumed to hold it, so no orphan or double ownership is "
            "confirmed for the queue from reports), the expected owner, whether the group had any member "
            "(group_online) and since when the queue is in its state. state_changed marks the samples that "
            "changed the state (or a queue's first).",
        ),
        TableSpec(
            Table.QUEUE_PROGRESS_CURRENT,
            "current",
            (*PROGRESS_COLUMNS, *columns(batch_id=BIGINT)),
            "Each tracked queue's latest consume_progress row. A queue is no longer tracked, and its row deleted, "
            "when no sample came for a whole window, or when its group has no member on any broker and no queue "
            "of it has a backlog. Rewritten whole by each consumer batch that changes it, so its change feed shows a "
            "batch as deletes and inserts.",
            key=("group", "topic", "broker", "queue_id"),
        ),
        TableSpec(
            Table.REBALANCE_COST,
            "history",
            columns(
                group=STRING,
                topic=STRING,
                broker=STRING,
                queue_id=INT,
                generation=BIGINT,
                t0_ms=BIGINT,
                old_owner=STRING,
                new_owner=STRING,
                handoff_start_ms=BIGINT,
                handoff_start_bounded=BOOLEAN,
                handoff_end_ms=BIGINT,
                handoff_gap_ms=BIGINT,
                orphaned_ms=BIGINT,
                double_held_ms=BIGINT,
                committed_before=BIGINT,
                received_before=BIGINT,
                start_offset=BIGINT,
                rewound=BIGINT,
                redelivered_max=BIGINT,
                lag_at_t0=BIGINT,
                peak_lag=BIGINT,
                lag_spike=BIGINT,
                recovered_ms=BIGINT,
                recovery_ms=BIGINT,
                samples=INT,
                final_reason=STRING,
                event_time_ms=BIGINT,
                event_time=TIMESTAMP,
                batch_id=BIGINT,
            ),
            "What a generation change cost each queue whose expected owner it changed (a moved queue), measured "
            "on the queue's consume-progress samples (docs/design/consume-progress.md, Rebalance cost); one row per "
            "moved queue per change, written once final (final_reason: RECOVERED, SAMPLE_BOUND after a window of "
            "samples, MOVED_AGAIN, UNTRACKED), event_time_ms its sample. t0_ms: the change; handoff_gap_ms: from "
            "the old owner's last progress (handoff_start_ms, the last sample before t0 whose consumer offset "
            "advanced or lag was 0; bounded: none in the window, the gap is then a lower bound) to the first sample "
            "where new_owner holds the queue and its offset advanced or lag is 0 (NULL: never within the row); "
            "orphaned_ms / double_held_ms: the time from t0 to that sample seen with no / two or more holders; "
            "rewound: committed messages delivered again (the consumer offset went back from committed_before to "
            "start_offset); redelivered_max: at most this many received by the old owner are delivered again "
            "(received_before: its pull offset or cachedMsgMaxOffset + 1); lag_at_t0, peak_lag (from t0), "
            "lag_spike (their difference), recovery_ms (t0 to the sample with lag back to lag_at_t0; NULL: not "
            "recovered).",
        ),
        TableSpec(
            Table.FAULT_WINDOWS,
            "history",
            columns(
                producer_id=STRING,
                producer_group=STRING,
                broker=STRING,
                status=STRING,
                window_start_ms=BIGINT,
                window_end_ms=BIGINT,
                previous_end_ms=BIGINT,
                trigger_latency_ms=BIGINT,
                level=INT,
                cause=STRING,
                isolation=BOOLEAN,
                fault_table=STRING,
                event_time_ms=BIGINT,
                event_time=TIMESTAMP,
                batch_id=BIGINT,
            ),
            "Producer latency-fault windows per (producer, broker): OPENED when a send makes the broker "
            "unavailable to that producer, EXTENDED / SHORTENED when a later send moves the end, EXPIRED when "
            "the end is reached, CLOSED_EARLY when a fast send ends it at once (4.x overwrite semantics) or a "
            "send says the producer no longer runs with sendLatencyFaultEnable. Producers without it have none. "
            "level is the fault table index the trigger fell in; cause the send outcome.",
        ),
        TableSpec(
            Table.PRODUCER_BROKER_STATUS_CURRENT,
            "current",
            columns(
                producer_id=STRING,
                producer_group=STRING,
                broker=STRING,
                fault_table=STRING,
                unavailable_until_ms=BIGINT,
                last_latency_ms=BIGINT,
                last_send_ms=BIGINT,
                reachable=BOOLEAN,
                event_time_ms=BIGINT,
                batch_id=BIGINT,
            ),
            "Each producer's fault item per broker: unavailable while event time is before "
            "unavailable_until_ms. A producer without sendLatencyFaultEnable (producers.send_latency_fault_enable) "
            "keeps no item: its rows have no fault_table, unavailable_until_ms, last_latency_ms or reachable. "
            "Rows of pairs idle longer than producers.state_ttl_ms are deleted. Rewritten whole by each send-ingest "
            "batch with sends, so its change feed shows a batch as deletes and inserts.",
            key=("producer_id", "broker"),
        ),
        TableSpec(
            Table.BROKER_STATUS_CURRENT,
            "current",
            columns(
                broker=STRING,
                producers_avoiding=INT,
                producers_seen=INT,
                avoiding_ratio=DOUBLE,
                avoided_until_ms=BIGINT,
                isolated=BOOLEAN,
                event_time_ms=BIGINT,
                batch_id=BIGINT,
            ),
            "Per broker some producer's fault item names: how many producers currently avoid it, out of those "
            "that sent to it, and until when. Written whole with producer_broker_status_current, from the same items.",
            key=("broker",),
        ),
        TableSpec(
            Table.SEND_LATENCY_MINUTES,
            "history",
            columns(
                broker=STRING,
                producer_group=STRING,
                minute_start=TIMESTAMP,
                sends=BIGINT,
                errors=BIGINT,
                latency_sum_ms=BIGINT,
                latency_max_ms=BIGINT,
                bucket_upper_ms=array_of(BIGINT),
                bucket_counts=array_of(BIGINT),
                batch_id=BIGINT,
            ),
            "Per-minute send statistics per broker and producer group, as partial aggregates: a row per "
            "micro-batch and Kafka partition that saw sends of that minute (a late send adds a row to its minute). "
            "For totals, sum sends, errors, latency_sum_ms and bucket_counts (element-wise) and take the max of "
            "latency_max_ms per (cluster, broker, producer_group, minute_start), as `sends.reduce.sum_minutes` does. "
            "Buckets are the fault table's latencyMax thresholds (cumulative counts, Prometheus style).",
        ),
        TableSpec(
            Table.DEAD_LETTERS,
            "history",
            columns(
                source=STRING,
                kafka_topic=STRING,
                kafka_partition=INT,
                kafka_offset=BIGINT,
                kafka_timestamp=TIMESTAMP,
                raw_value=STRING,
                reason=STRING,
                detail=STRING,
                batch_id=BIGINT,
            ),
            "Every rejected input with where it came from and why (reason is a fixed code, see docs/events.md).",
        ),
    )
}


# Every row is about one RocketMQ cluster (``docs/design/clusters.md``): ``cluster`` is each table's last column (where
# schema evolution adds it to a table written before clusters, ``delta.sinks.DeltaTables.ensure_all``) and the first
# part of a current table's key.
CLUSTER_COLUMN = Column("cluster", STRING)


def _per_cluster(spec: TableSpec) -> TableSpec:
    return replace(spec, columns=(*spec.columns, CLUSTER_COLUMN), key=("cluster", *spec.key) if spec.key else ())


TABLES = {name: _per_cluster(spec) for name, spec in TABLES.items()}


def column_names(name: str) -> list[str]:
    return [c.name for c in TABLES[name].columns]


QUERY_GUIDE_HEADING = "## Querying the tables"


def render_markdown() -> str:
    """The catalogue part of ``docs/tables.md`` (the query guide after it is written by hand)."""
    lines = [
        "# Delta tables",
        "",
        "Generated from `streaming/contract/tables.py` (`python -m streaming.contract.tables`), "
        f"except the last section, {QUERY_GUIDE_HEADING[3:]!r}, which is written by hand.",
        "",
        "Every table's last column, `cluster`, is the RocketMQ cluster a row is about (`docs/events.md`, "
        '"Clusters"), and a current table\'s key starts with it. Rows written before clusters were kept apart '
        "hold `[ingest] default_cluster` in current tables and NULL (that same cluster) in history tables: the "
        "job adds the column to such a table at start.",
        "",
    ]
    for spec in TABLES.values():
        lines += [f"## `{spec.name}` ({spec.kind})", "", spec.description, ""]
        if spec.key:
            lines += [f"Key (one row per key): `{', '.join(spec.key)}`", ""]
        lines += ["| column | type |", "|---|---|"]
        lines += [f"| `{c.name}` | `{c.type.ddl}` |" for c in spec.columns]
        lines.append("")
    return "\n".join(lines)


def rewrite_doc(path: str) -> None:
    """Regenerate the catalogue part of the doc at ``path``, keeping its query guide."""
    from pathlib import Path

    doc = Path(path)
    text = doc.read_text() if doc.exists() else ""
    guide = text[text.index(QUERY_GUIDE_HEADING) :] if QUERY_GUIDE_HEADING in text else ""
    doc.write_text(render_markdown() + ("\n" + guide if guide else ""))


if __name__ == "__main__":
    rewrite_doc("docs/tables.md")
