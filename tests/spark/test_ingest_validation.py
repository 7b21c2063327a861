"""The job's JVM validation classifies every corpus event exactly like the contract's Python validator."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from streaming.contract.events import DEFAULT_TOPICS, Rejection, validate_event
from streaming.job.ingest import IngestSettings, classify, contracts_for
from tests.support.event_corpus import BAD, GOOD, KAFKA_TS, MORE_GOOD


def test_spark_classification_equals_python_validation(spark):
    values = [json.dumps(e) for e in GOOD.values()] + MORE_GOOD + [raw for raw, _, _ in BAD] + ["", '"just a string"']
    # Records as the Kafka source delivers them: value bytes, topic, partition, offset, timestamp.
    ts = datetime.fromtimestamp(KAFKA_TS / 1000, tz=UTC)
    rows = [(v.encode(), DEFAULT_TOPICS["send_result"], 0, i, ts) for i, v in enumerate(values)]
    records = spark.createDataFrame(
        rows, "value BINARY, topic STRING, partition INT, offset BIGINT, timestamp TIMESTAMP"
    )
    settings = IngestSettings("unused:9092", {DEFAULT_TOPICS["send_result"]: "send_result"})
    got = {r.kafka_offset: (r.reason, r.detail) for r in classify(records, contracts_for(), settings).collect()}
    for offset, value in enumerate(values):
        expected = validate_event(value, KAFKA_TS, default_type="send_result")
        expected_reason = expected.reason if isinstance(expected, Rejection) else None
        assert got[offset][0] == expected_reason, (value[:120], got[offset], expected)
        if isinstance(expected, Rejection) and expected.reason not in ("OVERSIZED", "NOT_JSON"):
            assert got[offset][1] == expected.detail
    assert sum(1 for reason, _ in got.values() if reason is None) == len(GOOD) + len(MORE_GOOD)


def test_fast_path_accepts_the_plain_good_events_and_never_a_bad_one(spark):
    """The fast path is sound (no bad event passes it) and useful (the everyday events take it)."""
    from streaming.contract import events
    from streaming.job.validation import fast_accept_sql, fast_path

    def accepted(event_type: str, raw: str) -> bool:
        fast = fast_path(events.schema(event_type, 1))
        assert fast is not None
        frame = spark.createDataFrame([(raw,)], "raw STRING").selectExpr("try_parse_json(raw) AS v")
        frame = frame.selectExpr(f"try_variant_get(v, '$', '{fast.struct_ddl}') AS e", "schema_of_variant(v) AS shape")
        return frame.selectExpr(f"coalesce({fast_accept_sql(event_type, fast, 'e', 'shape')}, FALSE)").first()[0]

    for event_type, event in GOOD.items():
        assert accepted(event_type, json.dumps(event)), event_type
    for raw, reason, note in BAD:
        try:
            event_type = json.loads(raw).get("type")
        except (ValueError, AttributeError):
            continue  # not an object: never reaches the fast path
        # FUTURE_TIMESTAMP compares with the Kafka timestamp, beside the fast path (see ingest.classify).
        if event_type in GOOD and reason != "FUTURE_TIMESTAMP":
            assert not accepted(event_type, raw), (note, reason)
