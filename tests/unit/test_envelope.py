"""The envelope checks are one table (``streaming.contract.envelope``) compiled to Python and to SQL.

The Python side is held to the job on real records by ``tests/spark/test_ingest_validation.py``; here: every
message of the table is written only in the table, the SQL compiler emits each check's reason and its detail's
text, and the Python evaluation gives each reason with the table's detail.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from streaming.contract import envelope
from streaming.contract.validator import Rejection, ValidEvent, validate_event
from streaming.job.ingest.classify import IngestSettings, _verdict_sql, contracts_for
from tests.unit.test_contract import SEND

ROOT = Path(__file__).parents[2]
CHECKS = (*envelope.BEFORE_RULES, envelope.VERSION, *envelope.AFTER_RULES)


def _fragments(check: envelope.EnvelopeCheck) -> list[str]:
    return [f for f in re.split(r"\{\w+\}", check.detail) if len(f) >= 15 and " " in f.strip()]  # distinctive phrases


def test_every_message_of_the_table_is_written_only_there():
    writers = set()
    for path in sorted(p for d in ("streaming", "connectors") for p in (ROOT / d).rglob("*.py")):
        strings = [n.value for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Constant)]
        text = " ".join(s for s in strings if isinstance(s, str))
        if any(f in text for c in CHECKS for f in _fragments(c)):
            writers.add(path.relative_to(ROOT).as_posix())
    assert writers == {"streaming/contract/envelope.py"}


def test_the_sql_names_every_reason_and_message_of_the_table_in_its_order():
    settings = IngestSettings("b", {"t": "consumer_channel"}, 1_000, 5_000)
    reason_sql, detail_sql = _verdict_sql(contracts_for(("consumer_channel", "send_result")), settings)
    at = 0
    for check in CHECKS:  # each reason after the one before
        at = reason_sql.index(f"'{check.reason}'", at) + 1
    for check in CHECKS:
        assert all(f"'{f}'" in detail_sql for f in re.split(r"\{\w+\}", check.detail) if f)
    assert "> 1000 THEN 'OVERSIZED'" in reason_sql and "unix_millis(kafka_timestamp) + 5000" in reason_sql


def event(**fields) -> str:
    base = {"type": "send_result", "schema_version": 1, "event_time": 10_000}
    return json.dumps({**base, **fields})


@pytest.mark.parametrize(
    ("raw", "now_ms", "expected"),
    [
        (None, None, Rejection("NOT_JSON", "empty record value")),
        ("x" * 2_000, None, Rejection("OVERSIZED", "event of 2000 bytes exceeds 1000")),
        ("{", None, Rejection("NOT_JSON", "value is not valid JSON")),
        ("[1]", None, Rejection("NOT_AN_OBJECT", "JSON array")),
        ("null", None, Rejection("NOT_AN_OBJECT", "JSON null")),
        ("{}", None, Rejection("UNKNOWN_TYPE", "unknown event type <none>")),
        (event(type="nope"), None, Rejection("UNKNOWN_TYPE", "unknown event type nope")),
        (
            event(schema_version=7),
            None,
            Rejection("UNKNOWN_SCHEMA_VERSION", "schema_version 7 of send_result is not one of [1, 2]"),
        ),
    ],
    ids=["empty", "oversized", "not-json", "array", "null", "no-type", "unknown-type", "version"],
)
def test_python_gives_each_envelope_reason_with_the_tables_detail(raw, now_ms, expected):
    assert validate_event(raw, now_ms, max_event_bytes=1_000) == expected


def test_python_checks_the_future_after_the_rules_and_only_with_a_clock():
    time_ms = SEND["event_time"]
    raw = json.dumps(SEND)
    assert isinstance(validate_event(raw, None), ValidEvent)
    assert isinstance(validate_event(raw, time_ms - 1_000, max_future_skew_ms=1_000), ValidEvent)
    assert validate_event(raw, time_ms - 1_001, max_future_skew_ms=1_000) == Rejection(
        "FUTURE_TIMESTAMP", f"event_time {time_ms} is more than 1000 ms after the Kafka timestamp"
    )
    late_and_invalid = json.dumps({**SEND, "latency_ms": -1})  # the rules come first
    assert validate_event(late_and_invalid, 0).reason == "NEGATIVE_LATENCY"  # type: ignore[union-attr]
