"""``rebalance-monitor query`` and ``allocate``: what the monitor's Delta tables hold, without a JVM."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from streaming.app.commands import NotFound, UsageError
from streaming.contract.tables import Table

if TYPE_CHECKING:
    from connectors.delta_reader import MonitorTables


def time_option(name: str, text: str | None) -> int | None:
    from streaming.app.queries import parse_time_ms

    try:
        return parse_time_ms(text)
    except ValueError:
        raise UsageError(f"{name}: cannot read {text!r} as epoch milliseconds or an ISO-8601 time") from None


def monitor_tables(args: argparse.Namespace, *tables: str, as_of_ms: int | None = None) -> MonitorTables:
    """The tables under ``--delta-root``, which must hold ``tables``; an object-store root is reached with the
    ``[storage]`` settings of ``--config`` and the ``RRM__STORAGE__`` variables."""
    from connectors import object_store
    from connectors.delta_reader import MonitorTables, is_table

    options = None
    if not object_store.is_local(args.delta_root):
        from streaming.config import load_config

        options = object_store.delta_rs_options(load_config(getattr(args, "config", None)).storage)
    root = args.delta_root.rstrip("/") or "/"
    missing = [t for t in tables if not is_table(object_store.join(root, t), options)]
    if missing:
        raise UsageError(f"no monitor tables under {root} (missing {', '.join(missing)}); pass --delta-root")
    return MonitorTables(root, as_of_ms, options)


def open_spark(settings: object = None) -> tuple[object, bool]:
    """The active session (in-process callers such as tests) or one of ``settings`` (a ``SparkSettings``;
    by default a small local one) that we stop afterwards."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    from streaming.job.runtime.spark_session import SparkSettings, build_spark_session

    return build_spark_session(settings or SparkSettings(master="local[1]", app_name="rrm-query")), True


def _known(tables, table: str, column: str, value: str, what: str) -> None:  # type: ignore[no-untyped-def]
    import pyarrow.compute as pc

    names = sorted(n for n in pc.unique(tables.arrow(table, columns=[column])[column]).to_pylist() if n is not None)
    if value in names:
        return
    shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
    raise NotFound(f"no {what} {value!r} in {tables.root} (known: {shown or 'none'})")


ASSIGNMENT_COLUMNS = ["cluster", "group", "generation", "topic", "client_id", "queue_count", "queues", "event_time"]


ANOMALY_COLUMNS = ["event_time", "status", "cluster", "group", "topic", "anomaly", "severity", "summary"]


FAULT_COLUMNS = [
    "event_time",
    "status",
    "cluster",
    "broker",
    "producer_id",
    "window_start_ms",
    "window_end_ms",
    "trigger_latency_ms",
    "level",
    "cause",
    "fault_table",
]


PROGRESS_COLUMNS = [
    "cluster",
    "group",
    "topic",
    "broker",
    "queue_id",
    "state",
    "cause",
    "lag",
    "time_lag_estimate_s",
    "holders",
    "expected_owner",
    "group_online",
    "event_time",
]


# Each query's DuckDB SQL over the views of the tables it names ($-parameters; NULL filters nothing).
QUERY_SQL = {
    # "The latest" is by event time, not by generation number: a job started on a new checkpoint (a state
    # reset) numbers its generations from 1 again, while the tables keep the earlier ones. Each cluster's latest:
    # two clusters' groups of one name are two groups (--cluster picks one).
    "assignment": """
        SELECT * FROM expected_assignments
        WHERE "group" = $group AND ($at IS NULL OR event_time_ms <= $at)
          AND ($cluster IS NULL OR cluster = $cluster)
        QUALIFY rank() OVER (PARTITION BY cluster ORDER BY event_time_ms DESC, generation DESC) = 1
        ORDER BY topic, client_id, cluster""",
    "assignment-version": """
        SELECT *, epoch_ms(event_time_ms) AS event_time FROM current_assignment
        WHERE "group" = $group AND ($cluster IS NULL OR cluster = $cluster) ORDER BY topic, client_id, cluster""",
    "anomalies": """
        SELECT * FROM anomaly_episodes
        WHERE ($group IS NULL OR "group" = $group) AND ($kind IS NULL OR anomaly = $kind)
          AND ($since IS NULL OR event_time_ms >= $since) AND ($until IS NULL OR event_time_ms <= $until)
          AND ($cluster IS NULL OR cluster = $cluster)
        ORDER BY event_time_ms, "group", topic, anomaly, cluster, status, episode_id""",
    "faults": """
        SELECT * FROM fault_windows
        WHERE ($broker IS NULL OR broker = $broker)
          AND ($since IS NULL OR event_time_ms >= $since) AND ($until IS NULL OR event_time_ms <= $until)
          AND ($cluster IS NULL OR cluster = $cluster)
        ORDER BY event_time_ms, broker, producer_id, cluster, status, window_start_ms""",
    # each tracked queue's latest verdict; --at: each queue's latest row at or before then, from the history
    "progress": """
        SELECT *, epoch_ms(event_time_ms) AS event_time FROM queue_progress_current
        WHERE ($group IS NULL OR "group" = $group) AND ($state IS NULL OR state = $state)
          AND ($cluster IS NULL OR cluster = $cluster)
        ORDER BY "group", topic, broker, queue_id, cluster""",
    "progress-at": """
        SELECT * FROM (
            SELECT * FROM consume_progress
            WHERE ($group IS NULL OR "group" = $group) AND event_time_ms <= $at
              AND ($cluster IS NULL OR cluster = $cluster)
            QUALIFY row_number() OVER (
                PARTITION BY cluster, "group", topic, broker, queue_id ORDER BY event_time_ms DESC
            ) = 1
        ) WHERE ($state IS NULL OR state = $state)
        ORDER BY "group", topic, broker, queue_id, cluster""",
    "group-at": """
        SELECT * FROM group_snapshots WHERE "group" = $group AND ($at IS NULL OR event_time_ms <= $at)
          AND ($cluster IS NULL OR cluster = $cluster)
        ORDER BY event_time_ms DESC, generation DESC LIMIT 1""",
    "group-assignments": """
        SELECT * FROM expected_assignments
        WHERE "group" = $group AND generation = $generation AND event_time_ms = $event_time
          AND cluster IS NOT DISTINCT FROM $cluster""",
}


def query(args: argparse.Namespace) -> int:
    from connectors.delta_reader import TableMissing, VersionMissing, rows
    from streaming.app.queries import emit

    at = time_option("--at", args.at)
    since, until = time_option("--since", args.since), time_option("--until", args.until)
    table_time = time_option("--table-time", args.table_time)
    if since is not None and until is not None and since > until:
        raise UsageError("--since is after --until")
    if args.what == "sql":
        filtered = args.group or args.broker or args.kind or args.cluster
        if at is not None or since is not None or until is not None or filtered:
            raise UsageError("query sql takes only its statement, --table-version, --table-time and the output format")
    if args.what == "assignment" and not args.group:
        raise UsageError("query assignment needs --group")
    if args.what in ("anomalies", "faults") and (at is not None or args.table_version is not None):
        raise UsageError("--at and --table-version are for query assignment (and --table-version for query sql)")
    if args.what == "progress" and (since is not None or until is not None or args.table_version is not None):
        raise UsageError("query progress takes --group, --state, --at and --table-time")
    if args.state is not None and args.what != "progress":
        raise UsageError("--state is for query progress")
    if args.state is not None:
        from streaming.domain.progress.verdict import QueueState

        if args.state not in QueueState.__members__:
            raise UsageError(f"--state: no state {args.state!r} (states: {', '.join(QueueState)})")
    if args.table_version is not None and args.table_version < 0:
        raise UsageError("--table-version must be >= 0")
    if args.table_version is not None and table_time is not None:
        raise UsageError("give --table-version or --table-time, not both")
    if args.csv and args.json:
        raise UsageError("give --json or --csv, not both")
    if args.csv and args.what != "sql":
        raise UsageError("--csv is for query sql")
    _refuse_filters_that_do_not_apply(args)
    needs = {
        "assignment": (Table.GROUP_SNAPSHOTS, Table.EXPECTED_ASSIGNMENTS, Table.CURRENT_ASSIGNMENT),
        "anomalies": (Table.GROUP_SNAPSHOTS, Table.ANOMALY_EPISODES),
        "faults": (Table.FAULT_WINDOWS,),
        "progress": (Table.CONSUME_PROGRESS, Table.QUEUE_PROGRESS_CURRENT),
        "sql": (),
    }[args.what]
    tables = monitor_tables(args, *needs, as_of_ms=table_time)
    if not tables.names():
        raise UsageError(f"no monitor tables under {tables.root}; pass --delta-root")
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


# The filters each query takes (--table-time applies to every one); sql's own check comes first.
QUERY_FILTERS = {
    "assignment": ("--cluster", "--group", "--at", "--table-version"),
    "anomalies": ("--cluster", "--group", "--kind", "--since", "--until"),
    "faults": ("--cluster", "--broker", "--since", "--until"),
    "progress": ("--cluster", "--group", "--state", "--at"),
}
# Why a filter means nothing to a query, where it is not plain.
FILTER_REASONS = {
    ("faults", "--group"): "fault windows are per producer and broker, not per consumer group",
    ("faults", "--kind"): "fault windows have no anomaly kind",
    ("anomalies", "--broker"): "anomaly episodes are per consumer group and topic, not per broker",
    ("assignment", "--broker"): "an assignment is per consumer group",
    ("progress", "--broker"): "use query sql on queue_progress_current for one broker",
}


def _refuse_filters_that_do_not_apply(args: argparse.Namespace) -> None:
    """A filter the query would ignore is refused: an answer that looks filtered and is not misleads."""
    takes = QUERY_FILTERS.get(args.what)
    if takes is None:
        return
    given = {
        "--cluster": args.cluster,
        "--group": args.group,
        "--broker": args.broker,
        "--kind": args.kind,
        "--state": args.state,
        "--at": args.at,
        "--since": args.since,
        "--until": args.until,
        "--table-version": args.table_version,
    }
    for option, value in given.items():
        if value is not None and option not in takes:
            reason = FILTER_REASONS.get((args.what, option))
            raise UsageError(
                f"query {args.what} takes no {option}{f' ({reason})' if reason else ''}; "
                f"it takes {', '.join(takes)} and --table-time"
            )


def _query_rows(tables, args, at, since, until, table_time):  # type: ignore[no-untyped-def]
    if args.what == "progress":  # an offline group may never have had a member: known by its progress
        if args.group:
            _known(tables, Table.CONSUME_PROGRESS, "group", args.group, "consumer group with consume progress")
        parameters = {"group": args.group, "state": args.state, "cluster": args.cluster}
        if at is None:
            return tables.sql(QUERY_SQL["progress"], parameters), PROGRESS_COLUMNS
        return tables.sql(QUERY_SQL["progress-at"], {**parameters, "at": at}), PROGRESS_COLUMNS
    if args.group:
        _known(tables, Table.GROUP_SNAPSHOTS, "group", args.group, "consumer group")
    if args.what == "assignment":
        if args.table_version is not None or table_time is not None:  # Delta time travel
            parameters = {"group": args.group, "cluster": args.cluster}
            found = tables.sql(QUERY_SQL["assignment-version"], parameters, args.table_version)
            return found, ASSIGNMENT_COLUMNS
        found = tables.sql(QUERY_SQL["assignment"], {"group": args.group, "at": at, "cluster": args.cluster})
        if not found.num_rows:
            raise NotFound(f"consumer group {args.group!r} has no assignment at or before {args.at}")
        return found, ASSIGNMENT_COLUMNS
    if args.what == "anomalies":
        parameters = {"group": args.group, "kind": args.kind, "since": since, "until": until, "cluster": args.cluster}
        return tables.sql(QUERY_SQL["anomalies"], parameters), ANOMALY_COLUMNS
    if args.broker:  # brokers producers sent to, with or without fault windows
        known = Table.BROKER_STATUS_CURRENT if Table.BROKER_STATUS_CURRENT in tables.names() else Table.FAULT_WINDOWS
        _known(tables, known, "broker", args.broker, "broker")
    parameters = {"broker": args.broker, "since": since, "until": until, "cluster": args.cluster}
    return tables.sql(QUERY_SQL["faults"], parameters), FAULT_COLUMNS


def _group_from_delta(args: argparse.Namespace) -> list[dict[str, object]]:
    """(topic, cidAll, queues, strategy, line, generation) of a group as the monitor recorded it."""
    import json

    from connectors.delta_reader import rows

    at = time_option("--at", args.at)
    tables = monitor_tables(args, Table.GROUP_SNAPSHOTS, Table.EXPECTED_ASSIGNMENTS)
    _known(tables, Table.GROUP_SNAPSHOTS, "group", args.group, "consumer group")
    found = rows(tables.sql(QUERY_SQL["group-at"], {"group": args.group, "at": at, "cluster": args.cluster}))
    if not found:
        raise NotFound(f"consumer group {args.group!r} has no generation at or before {args.at}")
    snapshot = found[0]
    parameters = {
        "group": args.group,
        "generation": snapshot["generation"],
        "event_time": snapshot["event_time_ms"],
        "cluster": snapshot["cluster"],
    }
    assignments = rows(tables.sql(QUERY_SQL["group-assignments"], parameters))
    details = json.loads(snapshot["details"])
    if args.topic and args.topic not in snapshot["topics"]:
        raise NotFound(
            f"consumer group {args.group!r} does not subscribe {args.topic!r} (it subscribes "
            f"{', '.join(snapshot['topics']) or 'nothing'})"
        )
    computed = details.get("topics", {})  # subscribed topics with a route and a strategy the monitor computes
    topics = [t for t in ([args.topic] if args.topic else list(snapshot["topics"])) if t in computed]
    if not topics:
        raise NotFound(
            f"the monitor computed no allocation for consumer group {args.group!r} at generation "
            f"{snapshot['generation']} (strategy {snapshot['strategy'] or 'unknown'!r}: no route, or a strategy it "
            "cannot compute or complete); pass --clients, --brokers and --queues instead"
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
                "sources": details.get("strategy_sources", {}),
            }
        )
    return groups


def _allocation_cases(args: argparse.Namespace) -> list[dict[str, object]]:
    """What ``allocate`` computes: a group's generation from the Delta tables, or the ids and queues given."""
    if args.delta_root is not None or args.group is not None:
        if not (args.delta_root and args.group):
            raise UsageError("allocate from the Delta tables needs both --delta-root and --group")
        if args.clients is not None or args.queues is not None:
            raise UsageError("give either --clients and --queues, or --delta-root and --group, not both")
        return _group_from_delta(args)
    if args.clients is None or args.queues is None:
        raise UsageError("allocate needs --clients and --queues (or --delta-root and --group)")
    clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    brokers = [b.strip() for b in args.brokers.split(",") if b.strip()]
    if not clients or args.queues < 1 or not brokers:
        raise UsageError("allocate needs a client in --clients, a broker in --brokers and --queues >= 1")
    if args.queues * len(brokers) > MAX_QUEUES:
        raise UsageError(
            f"--queues {args.queues} on {len(brokers)} broker(s) is {args.queues * len(brokers)} queues; "
            f"the what-if takes at most {MAX_QUEUES} queues per topic"
        )
    if len(clients) > MAX_CHANNELS:
        raise UsageError(f"--clients names {len(clients)} channels; the what-if takes at most {MAX_CHANNELS}")
    topic = args.topic or "T"
    queues = [(topic, b, q) for b in brokers for q in range(args.queues)]
    return [
        {"topic": topic, "cid_all": clients, "versions": [], "strategy": "AVG", "generation": None, "queues": queues}
    ]


# The what-if's bounds: a topic's queues, cidAll's entries, a consistent-hash ring's entries, and the
# (client, queue) pairs of a strategy computed client by client. Within them an answer takes seconds.
MAX_QUEUES = 65_536
MAX_CHANNELS = 65_536
MAX_RING_ENTRIES = 1_000_000
MAX_PER_CLIENT_PAIRS = 2_000_000
NEARBY_PREFIX = "MACHINE_ROOM_NEARBY-"


def _family(strategy: str) -> str:
    """The strategy a ``MACHINE_ROOM_NEARBY-<inner>`` runs in each room (the name itself otherwise)."""
    while strategy.startswith(NEARBY_PREFIX):
        strategy = strategy[len(NEARBY_PREFIX) :]
    return strategy


def _config_queues(text: str, topic: str) -> list[tuple[str, str, int]] | None:
    if not text.strip():
        return None
    queues = []
    for item in (i.strip() for i in text.split(",") if i.strip()):
        broker, _, queue_id = item.rpartition(":")
        if not broker or not queue_id.isdigit():
            raise UsageError(f"--config-queues: {item!r} is not broker:queue_id")
        queues.append((topic, broker, int(queue_id)))
    return queues


def _allocation_options(args: argparse.Namespace, strategies: set[str]) -> None:
    """Refuse what-if options the strategy does not read, and names the what-if cannot compute."""
    import re

    for strategy in strategies:
        if strategy == "MACHINE_ROOM_NEARBY" or strategy.endswith("-MACHINE_ROOM_NEARBY"):
            raise UsageError(
                "MACHINE_ROOM_NEARBY needs its inner strategy: --strategy MACHINE_ROOM_NEARBY-<inner>, "
                "e.g. MACHINE_ROOM_NEARBY-AVG"
            )
    families = {_family(s) for s in strategies}
    nearby = any(s.startswith(NEARBY_PREFIX) for s in strategies)
    if args.consumer_idcs.strip() and "MACHINE_ROOM" not in families:
        raise UsageError("--consumer-idcs is for MACHINE_ROOM (or MACHINE_ROOM_NEARBY-MACHINE_ROOM)")
    if args.config_queues.strip() and "CONFIG" not in families:
        raise UsageError("--config-queues is for CONFIG (or MACHINE_ROOM_NEARBY-CONFIG)")
    if (args.machine_room_regex is not None or args.machine_room_separator != "-") and not nearby:
        raise UsageError("--machine-room-regex and --machine-room-separator are for MACHINE_ROOM_NEARBY-<inner>")
    if args.machine_room_regex is not None and args.machine_room_separator != "-":
        raise UsageError("give --machine-room-regex or --machine-room-separator, not both")
    if not args.machine_room_separator:
        raise UsageError("--machine-room-separator must not be empty")
    if args.machine_room_regex is not None:
        try:
            groups = re.compile(args.machine_room_regex).groups
        except re.error as error:
            raise UsageError(f"--machine-room-regex: not a valid regular expression ({error})") from None
        if groups < 1:
            raise UsageError("--machine-room-regex needs a capturing group: the room is the first group's text")


def _within_bounds(args: argparse.Namespace, strategy: str, cid_all: list[str], queues: int) -> None:
    family = _family(strategy)
    if family == "CONSISTENT_HASH" and len(cid_all) * args.virtual_nodes > MAX_RING_ENTRIES:
        raise UsageError(
            f"{len(cid_all)} channels x --virtual-nodes {args.virtual_nodes} is a ring of "
            f"{len(cid_all) * args.virtual_nodes} entries; the what-if takes at most {MAX_RING_ENTRIES}"
        )
    per_client = strategy != family or family in ("CONFIG", "MACHINE_ROOM")
    if per_client and len(set(cid_all)) * queues > MAX_PER_CLIENT_PAIRS:
        raise UsageError(
            f"{strategy} is computed client by client: {len(set(cid_all))} clients x {queues} queues is more than "
            f"the what-if's {MAX_PER_CLIENT_PAIRS}"
        )


def _unconfigured_notes(args: argparse.Namespace, strategies: set[str]) -> list[str]:
    """One line per strategy run without the configuration that a real client would be built with."""
    families = {_family(s) for s in strategies}
    notes = []
    if "CONFIG" in families and not args.config_queues.strip():
        notes.append(
            "CONFIG without a queue list: a real client so configured takes no queue (every queue is orphaned "
            "below); --config-queues gives the list (config_queues in an [[allocation.groups]] rule)"
        )
    if "MACHINE_ROOM" in families and not args.consumer_idcs.strip():
        notes.append(
            "MACHINE_ROOM without rooms: a real client so configured takes no queue (every queue is orphaned "
            "below); --consumer-idcs gives the rooms (consumer_idcs in an [[allocation.groups]] rule)"
        )
    return notes


# The what-if option that gives each part a rule supplied to the monitor.
OPTION_OF_PART = {
    "resolver": "--machine-room-regex or --machine-room-separator",
    "config_queues": "--config-queues",
    "consumer_idcs": "--consumer-idcs",
}


def _rule_parts_notes(args: argparse.Namespace, cases: list[dict[str, object]]) -> list[str]:
    """For a group from the tables run with its own strategy: the parts its rule supplied that no option gives."""
    given = {
        "resolver": args.machine_room_regex is not None or args.machine_room_separator != "-",
        "config_queues": bool(args.config_queues.strip()),
        "consumer_idcs": bool(args.consumer_idcs.strip()),
    }
    notes: dict[str, str] = {}
    for case in cases if args.strategy is None else []:
        sources = case.get("sources") or {}
        assert isinstance(sources, dict)
        for part, option in OPTION_OF_PART.items():
            source = str(sources.get(part, ""))
            if source.startswith("rule") and not given[part]:
                notes[part] = f"the monitor took the group's {part} from {source}; pass {option} to use it here"
    return list(notes.values())


def allocate(args: argparse.Namespace) -> int:
    import json
    import sys

    from streaming.app.queries import format_table, what_if
    from streaming.domain.errors import DomainError
    from streaming.domain.versions import ClientLine

    cases = _allocation_cases(args)
    strategies = {str(args.strategy or case["strategy"]) for case in cases}
    _allocation_options(args, strategies)
    for case in cases:
        _within_bounds(args, str(args.strategy or case["strategy"]), case["cid_all"], len(case["queues"]))
    for note in _rule_parts_notes(args, cases) + _unconfigured_notes(args, strategies):
        print(f"rebalance-monitor allocate: note: {note}", file=sys.stderr)
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
                [i.strip() for i in args.consumer_idcs.split(",") if i.strip()],
                _config_queues(args.config_queues, str(case["topic"])),
                args.machine_room_regex,
                args.machine_room_separator,
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
