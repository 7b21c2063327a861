"""The consumer query's stateful function sees every event exactly as its JSON says.

Valid channel events reach Python as typed columns (``consumer.query.shard_input``), other events as the JSON of
their validated fields, never as their raw JSON; this compares the typed events the function builds with what
``consumer.events.parsed_event`` builds from the raw value, for the corpus' channel events (absent, null and empty
optional fields, extra fields, several subscriptions), generated ones, a report and a route, and checks the order
of application.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from streaming.contract.events import DEFAULT_TOPICS
from streaming.domain.consumers.engine_settings import EngineSettings
from streaming.domain.consumers.membership import ChannelEvent
from streaming.domain.consumers.shard import Shard
from streaming.domain.consumers.shard_engine import STALE_ROUTE, UNKNOWN_GROUP, ShardEngine
from streaming.job.consumer.events import EVENT_COLUMNS, ShardEvents, parsed_event, read_columns, shard_events
from streaming.job.consumer.query import DEAD_LETTER_SHARD, _as_job_rows, shard_input
from streaming.job.ingest.classify import IngestSettings, classify, contracts_for
from tests.support.event_corpus import GOOD, KAFKA_TS, MORE_GOOD

# The order the engine applies events of one millisecond in: routes, channel events, reported assignments.
TYPE_RANK = {"topic_route": 0, "consumer_channel": 1, "reported_assignment": 2}


def _generated() -> list[dict]:
    events = []
    for i in range(40):
        event = dict(
            GOOD["consumer_channel"],
            event_time=KAFKA_TS - (i * 7919) % 5000,
            group=f"G{i % 5}",
            channel=f"10.0.{i % 3}.{i}:4000{i % 2}",
            client_id=f"c{i}@{i}#ünï",
        )
        if i % 4 == 0:
            event.pop("allocate_strategy")
        if i % 5 == 0:
            event["client_version"] = None
        if i % 3 == 0:
            event["subscriptions"] = [
                {"topic": f"T{i % 2}", "expression": "tagA || tagB", "sub_version": i},
                {"topic": "%RETRY%G", "sub_version": None},
            ]
        events.append(event)
    return events


def _applied(columns, engine=None) -> ShardEvents:  # type: ignore[no-untyped-def]
    """The events the state function hands the engine for these columns (none late: watermark 0), and their
    origins."""
    found = shard_events(columns, engine or ShardEngine.restore(None, EngineSettings()), 0)
    assert not found.late
    return found


def test_events_from_typed_columns_equal_their_json(spark):
    types = ("consumer_channel", "reported_assignment", "topic_route")
    channel_values = [json.dumps(GOOD["consumer_channel"])] + [e for e in MORE_GOOD if '"consumer_channel"' in e]
    values = channel_values + [json.dumps(e) for e in _generated()]
    values += [json.dumps(GOOD["reported_assignment"]), json.dumps(GOOD["topic_route"]), '{"type": "consumer_channel"}']
    ts = datetime.fromtimestamp(KAFKA_TS / 1000, tz=UTC)
    topic = DEFAULT_TOPICS["consumer_channel"]
    rows = [(v.encode(), topic, i % 2, i, ts) for i, v in enumerate(values)]
    records = spark.createDataFrame(
        rows, "value BINARY, topic STRING, partition INT, offset BIGINT, timestamp TIMESTAMP"
    )
    settings = IngestSettings("unused:9092", {topic: "consumer_channel"})
    frame = shard_input(classify(records, contracts_for(types), settings), 3).toPandas()

    seen = 0
    for shard, rows_of_shard in frame.groupby("shard"):
        if shard == DEAD_LETTER_SHARD:
            assert len(rows_of_shard) == 1  # the channel event without its required fields
            continue
        found = _applied(read_columns(iter([rows_of_shard.reset_index(drop=True)])))
        got = found.events
        origins = [found.origins.get(id(g)) for g in got]
        ranked = rows_of_shard.assign(rank=rows_of_shard["event_type"].map(TYPE_RANK))
        by_offset = ranked.sort_values(["event_time_ms", "rank", "kafka_topic", "kafka_partition", "kafka_offset"])
        expected = []
        for offset in by_offset["kafka_offset"]:
            event = json.loads(values[offset])
            expected.append(parsed_event(event["type"], event))  # the engine's type, parsed from the raw JSON
        assert got == expected
        assert all(type(g) is type(e) for g, e in zip(got, expected, strict=True))
        # the function keeps where events that travel as JSON came from, for a dead letter of the engine's
        raw = [(origin, offset) for origin, offset in zip(origins, by_offset["kafka_offset"], strict=True) if origin]
        assert raw and all(
            o[:3] == (topic, offset % 2, offset) and o[3] == ts.replace(tzinfo=None) and o[4] == values[offset]
            for o, offset in raw
        )
        seen += sum(isinstance(g, ChannelEvent) for g in got)
    assert seen == len(channel_values) + 40


def test_events_of_one_millisecond_apply_by_type_whatever_the_topics_are_called():
    """A report published on a topic whose name sorts first still follows its group's first heartbeat."""
    channel = dict(GOOD["consumer_channel"], event_time=KAFKA_TS)
    route = dict(GOOD["topic_route"], event_time=KAFKA_TS)
    report = dict(GOOD["reported_assignment"], event_time=KAFKA_TS, group=channel["group"], client_id="r1")
    other_report = dict(report, client_id="r2")
    earlier_report = dict(report, event_time=KAFKA_TS - 1, client_id="r0")
    # (event, topic, partition, offset): the topic names sort reports < routes < channels, against the rank.
    published = [
        (channel, "c-channels", 0, 7),
        (other_report, "a-reports", 1, 2),
        (route, "b-routes", 0, 1),
        (report, "a-reports", 0, 3),
        (earlier_report, "a-reports", 0, 9),
    ]
    columns: dict[str, list] = {name: [] for name in EVENT_COLUMNS}
    for event, topic, partition, offset in published:
        row = dict.fromkeys(EVENT_COLUMNS)
        row.update(
            event_time_ms=event["event_time"],
            event_type=event["type"],
            kafka_topic=topic,
            kafka_partition=partition,
            kafka_offset=offset,
            raw_value=json.dumps(event),
            typed_json=json.dumps(event),
        )
        for name in EVENT_COLUMNS:
            columns[name].append(row[name])

    # time first, then route, channel, reports; the two reports of one topic in Kafka order (partition 0 first)
    found = _applied(columns)
    events = found.events
    origins = [found.origins[id(event)] for event in events]
    # every event that kept its raw value is parsed once, here, into its type
    parsed = [parsed_event(e["type"], e) for e in (earlier_report, route, channel, report, other_report)]
    assert events == parsed and isinstance(events[2], ChannelEvent)
    assert [origin[:3] for origin in origins] == [
        ("a-reports", 0, 9),
        ("b-routes", 0, 1),
        ("c-channels", 0, 7),
        ("a-reports", 0, 3),
        ("a-reports", 1, 2),
    ]


def _raw_columns(published) -> dict[str, list]:  # type: ignore[no-untyped-def]
    """The function's columns for events that travel as raw JSON: (event, topic, partition, offset, timestamp)."""
    columns: dict[str, list] = {name: [] for name in EVENT_COLUMNS}
    for event, topic, partition, offset, timestamp in published:
        row = dict.fromkeys(EVENT_COLUMNS)
        row.update(
            event_time_ms=event["event_time"],
            event_type=event["type"],
            kafka_topic=topic,
            kafka_partition=partition,
            kafka_offset=offset,
            kafka_timestamp=timestamp,
            raw_value=json.dumps(event),
            typed_json=json.dumps(event),
        )
        for name in EVENT_COLUMNS:
            columns[name].append(row[name])
    return columns


def test_what_the_engine_ignores_reaches_the_sink_as_a_dead_letter_or_a_late_event_count():
    """A report for a group no broker knows becomes a dead letter with the record's Kafka coordinates and raw
    value; a stale route is counted by shard 0 only, since every shard receives every route."""
    import pandas as pd

    kafka_ts = pd.Timestamp("2026-11-24 10:00:00.125")
    ghost = dict(GOOD["reported_assignment"], event_time=KAFKA_TS, group="nobody-knows-me")
    newer_route = dict(GOOD["topic_route"], event_time=KAFKA_TS)
    older_route = dict(GOOD["topic_route"], event_time=KAFKA_TS - 1)
    columns = _raw_columns([(ghost, "rmq.reports", 2, 41, kafka_ts), (newer_route, "rmq.routes", 0, 5, kafka_ts)])
    late = _raw_columns([(older_route, "rmq.routes", 0, 6, kafka_ts)])

    for shard in (0, 1):
        engine = Shard.restore(None, EngineSettings())
        first = _applied(columns, engine)
        records = engine.apply(first.events, KAFKA_TS - 60_000)
        second = _applied(late, engine)
        records += engine.apply(second.events, KAFKA_TS - 60_000)
        rows = _as_job_rows(records, shard, {**first.origins, **second.origins})
        assert {t for t, _ in rows} == ({"dead_letters", "late_events"} if shard == 0 else {"dead_letters"})
        letters = [r for t, r in rows if t == "dead_letters"]
        assert letters == [
            {
                "source": "reported_assignment",
                "kafka_topic": "rmq.reports",
                "kafka_partition": 2,
                "kafka_offset": 41,
                "kafka_timestamp": kafka_ts,
                "raw_value": json.dumps(ghost),
                "reason": UNKNOWN_GROUP,
                "detail": letters[0]["detail"],
                "cluster": "DefaultCluster",  # the cluster of the engine that refused it
            }
        ]
        assert "nobody-knows-me" in letters[0]["detail"] and ghost["client_id"] in letters[0]["detail"]
        stale = [r for t, r in rows if t == "late_events"]
        assert stale == (
            [
                {
                    "reason": STALE_ROUTE,
                    "event_type": "topic_route",
                    "count": 1,
                    "topic": older_route["topic"],
                    "event_time_ms": KAFKA_TS - 1,
                    "group": None,
                    "broker": None,
                    "cluster": "DefaultCluster",
                }
            ]
            if shard == 0
            else []
        )
