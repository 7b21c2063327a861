"""The job's JVM validation classifies every corpus event exactly like the contract's Python validator."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime

from streaming.contract.events import DEFAULT_TOPICS, EVENT_TYPES
from streaming.contract.validator import Rejection, validate_event
from streaming.job.ingest.classify import IngestSettings, classify, contracts_for, typed_column
from tests.support.event_corpus import BAD, GOOD, KAFKA_TS, MORE_GOOD


def test_spark_classification_equals_python_validation(spark):
    values = [json.dumps(e) for e in GOOD.values()] + MORE_GOOD + [raw for raw, _, _ in BAD] + ["", '"just a string"']
    # Records as the Kafka source delivers them: value bytes, topic, partition, offset, timestamp.
    ts = datetime.fromtimestamp(KAFKA_TS / 1000, tz=UTC)
    rows = [(v.encode(), DEFAULT_TOPICS["send_result"], 0, i, ts) for i, v in enumerate(values)]
    records = spark.createDataFrame(
        rows, "value BINARY, topic STRING, partition INT, offset BIGINT, timestamp TIMESTAMP"
    )
    settings = IngestSettings("unused:9092", {DEFAULT_TOPICS["send_result"]: "send_result"}, default_cluster="home")
    clusters = ", ".join(f"{typed_column(t)}.cluster" for t in EVENT_TYPES)
    classified = classify(records, contracts_for(), settings).selectExpr("*", f"coalesce({clusters}) AS cluster")
    got = {r.kafka_offset: (r.reason, r.detail, r.cluster) for r in classified.collect()}
    for offset, value in enumerate(values):
        expected = validate_event(value, KAFKA_TS, default_type="send_result")
        expected_reason = expected.reason if isinstance(expected, Rejection) else None
        assert got[offset][0] == expected_reason, (value[:120], got[offset], expected)
        if isinstance(expected, Rejection) and expected.reason not in ("OVERSIZED", "NOT_JSON"):
            assert got[offset][1] == expected.detail
        # Each valid event belongs to the cluster it names from version 2 on, else to the default one.
        assert got[offset][2] == (None if isinstance(expected, Rejection) else expected.cluster("home")), value[:120]
    assert sum(1 for reason, _, _ in got.values() if reason is None) == len(GOOD) + len(MORE_GOOD)
    assert {c for _, _, c in got.values()} >= {"home", "east", "Ops cluster é"}


def _fast_taken(spark, raws: list[tuple[str, str]]) -> list[tuple[bool, dict | None, dict | None]]:
    """For each (raw, default type): whether the fast path takes it, its typed struct there, and the typed
    struct the rules path extracts from the variant (``try_variant_get``) -- what the job would use."""
    from streaming.job.ingest.classify import register_strict_events, typed_column
    from streaming.job.ingest.validation import fast_path

    contracts = contracts_for()
    name = register_strict_events(spark, contracts)
    frame = spark.createDataFrame(list(enumerate(raws)), "i INT, pair STRUCT<raw: STRING, t: STRING>")
    frame = frame.selectExpr("i", "pair.raw AS raw", "pair.t AS t", f"{name}(encode(pair.raw, 'UTF-8'), pair.t) AS s")
    taken, fast_typed, rule_typed = [], [], []
    for event_type, contract in contracts.items():
        fast = fast_path(contract.schema, event_type)
        assert fast is not None, event_type
        typed = f"s.`{typed_column(event_type)}`"
        taken.append(f"(s.event_type = '{event_type}' AND {typed} IS NOT NULL)")
        fast_typed.append(f"to_json({typed})")
        rule_typed.append(
            f"CASE WHEN coalesce(try_variant_get(try_parse_json(raw), '$.type', 'string'), t) = '{event_type}' "
            f"THEN to_json(try_variant_get(try_parse_json(raw), '$', '{fast.struct_ddl}')) END"
        )
    rows = frame.selectExpr(
        "i",
        f"coalesce({' OR '.join(taken)}, FALSE) AS taken",
        f"coalesce({', '.join(fast_typed)}) AS fast",
        f"coalesce({', '.join(rule_typed)}) AS rules",
    ).collect()
    by_index = {r.i: r for r in rows}
    return [
        (
            by_index[i].taken,
            None if by_index[i].fast is None else json.loads(by_index[i].fast),
            None if by_index[i].rules is None else json.loads(by_index[i].rules),
        )
        for i in range(len(raws))
    ]


def test_fast_path_takes_the_plain_good_events_and_never_a_bad_one(spark):
    """The fast path is sound (no bad event passes it) and useful (the everyday events take it)."""
    cases = [(json.dumps(event), event_type) for event_type, event in GOOD.items()]
    # The JVM reads an event as its topic's default type until a "type" field names another: the type last,
    # under another topic's default, or no topic default at all, reads again with the named type.
    others = {t: next(o for o in sorted(GOOD) if o != t) for t in GOOD}
    for event_type, event in GOOD.items():
        type_last = {**{k: v for k, v in event.items() if k != "type"}, "type": event["type"]}
        cases += [(json.dumps(type_last), others[event_type]), (json.dumps(type_last), None)]
    # FUTURE_TIMESTAMP compares with the Kafka timestamp, beside the fast path (see ingest.classify).
    bad = [(raw, "send_result") for raw, reason, _ in BAD if reason != "FUTURE_TIMESTAMP"]
    results = _fast_taken(spark, cases + bad)
    for (raw, _), (taken, fast, rules) in zip(cases, results[: len(cases)], strict=True):
        assert taken, raw
        assert fast == rules, raw
    for (raw, _), (taken, _, _) in zip(bad, results[len(cases) :], strict=True):
        assert not taken, raw


# consume_tps (a number field) as collectors spell the broker's TPS, and spellings Spark may read otherwise than
# Jackson (exponents, long decimals, integers past 2^53, a negative zero) or that break the minimum.
TPS_TAKEN = ["0", "8", "8.0", "0.1", "0.3", "2.675", "1234.5678", "0.000123456789012", "99999999999999.9", "17.55"]
TPS_TAKEN += [str(2**53)]
TPS_LEFT = ["1e3", "1.5E-7", "0.1234567890123456", "-0.0", str(2**53 + 1), str(10**40), "-1", "-0.5"]


def progress_with_tps(tps: str) -> str:
    """A collector's consume_progress sample with ``tps`` spelt as given."""
    event = {
        "type": "consume_progress",
        "schema_version": 1,
        "event_time": KAFKA_TS - 1_000,
        "group": "G0",
        "broker": "broker-a",
        "collector": "c1",
        "consume_tps": "TPS",
        "queues": [{"topic": "T0", "queue_id": 0, "broker_offset": 780, "consumer_offset": 770, "pull_offset": 780}],
    }
    return json.dumps(event).replace('"TPS"', tps)


def test_a_number_field_takes_the_fast_path_typed_as_the_rules_type_it(spark):
    """consume_progress carries the broker's consume TPS, a double: a sample with a plain decimal or an integer
    there takes the fast path, typed to the bit as the rules path types it; spellings Spark may read differently
    are left to the rules (which accept them or, below the minimum, refuse them)."""
    raws = [(progress_with_tps(t), "consume_progress") for t in TPS_TAKEN + TPS_LEFT]
    results = _fast_taken(spark, raws)
    taken_part = len(TPS_TAKEN)
    for (raw, _), (taken, fast, rules) in zip(raws[:taken_part], results[:taken_part], strict=True):
        assert taken, raw
        assert fast == rules and fast["consume_tps"] == float(json.loads(raw)["consume_tps"]), raw
    assert [taken for taken, _, _ in results[taken_part:]] == [False] * len(TPS_LEFT)
    valid = [not isinstance(validate_event(raw, KAFKA_TS), Rejection) for raw, _ in raws]
    assert valid == [float(t) >= 0 for t in TPS_TAKEN + TPS_LEFT]


# Values an edit puts in a field: other JSON types, numbers Spark reads differently, names at their limits.
_ODD_VALUES = [
    None,
    True,
    False,
    0,
    -1,
    1.0,
    1.5,
    1e3,
    2**63,
    -(2**63),
    10**40,
    "",
    "x",
    "1",
    " ",
    "\u00e9",
    "\ud83d\ude00",
    "\ud800",
    "a\udc00",
    [],
    [None],
    [1],
    {},
    {"a": 1},
    "OK",
    "HEARTBEAT",
    1_700_000_000_000,
    999_999_999_999,
    10**12,
    9_999_999_999_999,
    10**13,
    "a" * 255,
    "a" * 256,
    "10.0.0.1:1",
    "[fe80::1]:40000",
    "SEND_OK",
    "CLUSTERING",
]


def _mutations(rng: random.Random, event: dict) -> str:
    """One random edit of a valid event, as raw JSON text: retyped, nulled, dropped or extra fields, numbers
    Spark reads differently from Python, duplicate keys, escapes, trailing text, edits inside arrays."""
    event = json.loads(json.dumps(event))
    action, key = _edit_fields(rng, event)
    return _edit_text(rng, json.dumps(event), action, key)


def _edit_fields(rng: random.Random, event: dict) -> tuple[int, str]:
    """Draw the edit and the key (of the event or an item of one of its arrays); make the field edits in place."""
    target = event
    arrays = [k for k, v in event.items() if isinstance(v, list) and v and isinstance(v[0], dict)]
    if arrays and rng.random() < 0.35:
        target = rng.choice(event[rng.choice(arrays)])
    action = rng.randrange(8)
    key = rng.choice(sorted(target))
    if action <= 2:
        target[key] = rng.choice(_ODD_VALUES)
    elif action == 3:
        del target[key]
    elif action == 4:
        target[rng.choice(["extra", "Type", "queue_id", "topic", "perm"])] = rng.choice(_ODD_VALUES)
    return action, key


def _edit_text(rng: random.Random, text: str, action: int, key: str) -> str:
    """The text edits: a duplicate key, other number spellings or escapes, text around the object."""
    if action == 5:  # a duplicate key, spelt literally
        text = text[:-1] + f', "{key}": ' + json.dumps(rng.choice(_ODD_VALUES)) + "}"
    elif action == 6:  # numbers as Spark and Python spell them differently, or escaped names
        text = rng.choice(
            [
                text.replace(": 1,", ": 1.0,", 1),
                text.replace(": 1,", ": 1e0,", 1),
                text.replace('"type"', '"\\u0074ype"', 1),
                text.replace(": 6", ": 06", 1),
            ]
        )
    elif action == 7:
        text = rng.choice([text + " trailing", text + " {}", "\ufeff" + text, "  \n" + text, text + ",", text[:-1]])
    return text


def test_fast_path_never_disagrees_with_the_rules_on_random_edits(spark):
    """Differential check of the JVM fast path: over 2,000 random edits of valid events, every event it
    takes is one the contract's validator accepts, typed exactly as the rules path types it; and the job's
    whole classification still equals the Python validator's."""
    rng = random.Random(20261123)
    bases = {**GOOD, "consume_progress": json.loads(progress_with_tps("8.5"))}  # with a number field
    raws = []
    for n in range(2000):
        event_type = rng.choice(sorted(bases))
        raws.append((_mutations(rng, bases[event_type]), event_type if n % 3 else "send_result"))
    results = _fast_taken(spark, raws)
    taken_count = 0
    for (raw, default_type), (taken, fast, rules) in zip(raws, results, strict=True):
        expected = validate_event(raw, KAFKA_TS, default_type=default_type)
        if taken:
            taken_count += 1
            # FUTURE_TIMESTAMP is checked beside the fast path, against the Kafka timestamp (see ingest.classify).
            assert not isinstance(expected, Rejection) or expected.reason == "FUTURE_TIMESTAMP", (raw, expected)
            assert fast == rules, raw
    # The edits leave many events valid; the fast path must take a good share of them to be of any use.
    assert taken_count > 200
    ts = datetime.fromtimestamp(KAFKA_TS / 1000, tz=UTC)
    topic_of = {t: f"{DEFAULT_TOPICS[t]}.{t}" for t in bases}  # a topic per type: each its own default type
    records = spark.createDataFrame(
        [(raw.encode(), topic_of[t], 0, i, ts) for i, (raw, t) in enumerate(raws)],
        "value BINARY, topic STRING, partition INT, offset BIGINT, timestamp TIMESTAMP",
    )
    settings = IngestSettings("unused:9092", {topic: t for t, topic in topic_of.items()})
    got = {r.kafka_offset: r.reason for r in classify(records, contracts_for(), settings).collect()}
    for i, (raw, default_type) in enumerate(raws):
        expected = validate_event(raw, KAFKA_TS, default_type=default_type)
        assert got[i] == (expected.reason if isinstance(expected, Rejection) else None), (raw, got[i], expected)


def test_the_rule_walk_runs_in_its_jvm_function_only(spark):
    """The walk's SQL is not in the ingest plan (inline, its lambdas kept the projection out of whole-stage
    codegen and every task generated its code again): the plan calls ``RuleVerdict`` instead, which still
    names each rejection's reason and detail."""
    import pytest
    from pyspark.errors import IllegalArgumentException

    ts = datetime.fromtimestamp(KAFKA_TS / 1000, tz=UTC)
    good = json.dumps(GOOD["consumer_channel"])
    bad = json.dumps({**GOOD["consumer_channel"], "subscriptions": [{"topic": ""}]})
    records = spark.createDataFrame(
        [(raw.encode(), DEFAULT_TOPICS["consumer_channel"], 0, i, ts) for i, raw in enumerate([good, bad])],
        "value BINARY, topic STRING, partition INT, offset BIGINT, timestamp TIMESTAMP",
    )
    settings = IngestSettings("unused:9092", {DEFAULT_TOPICS["consumer_channel"]: "consumer_channel"})
    classified = classify(records, contracts_for(), settings)
    plan = classified._jdf.queryExecution().executedPlan().toString()
    assert "rrm_rule_verdict_" in plan
    assert "exists(" not in plan  # the walk's array rules are exists(...) lambdas
    got = sorted((r.kafka_offset, r.reason, r.detail) for r in classified.collect())
    expected = validate_event(bad, KAFKA_TS, default_type="consumer_channel")
    assert isinstance(expected, Rejection)
    assert got == [(0, None, None), (1, expected.reason, expected.detail)]

    jvm = spark.sparkContext._jvm
    gateway = spark.sparkContext._gateway
    one, none = gateway.new_array(jvm.String, 1), gateway.new_array(jvm.String, 0)
    with pytest.raises(IllegalArgumentException, match="one SQL expression per output name"):
        jvm.io.github.rrm.ingest.RuleVerdict.register(spark._jsparkSession, "f", "a INT", one, none)


def test_the_rule_trees_travel_as_a_broadcast_not_in_every_task(spark):
    """The consumer topics' ingest plan, Java-serialized as a stage's task binary carries it, stays small: the
    walk's expression trees (several hundred kilobytes; the plan was 599 KB with them) reach executors as a
    broadcast. Every stage whose lineage holds the plan (each of a batch's writes) carried them before, and
    Spark warned of a task binary over 1 MB. Many concurrent tasks still give every record its own verdict."""
    consumer_types = ("consumer_channel", "reported_assignment", "topic_route")
    settings = IngestSettings("unused:9092", {DEFAULT_TOPICS[t]: t for t in consumer_types})
    ts = datetime.fromtimestamp(KAFKA_TS / 1000, tz=UTC)
    good = json.dumps(GOOD["consumer_channel"])
    bad = [
        json.dumps({**GOOD["consumer_channel"], "subscriptions": [{"topic": ""}]}),
        json.dumps(
            {
                **GOOD["topic_route"],
                "brokers": [{"broker": "broker-a", "read_queue_nums": -1, "write_queue_nums": 4, "perm": 6}],
            }
        ),
    ]
    values = [bad[i % 2] if i % 3 else good for i in range(600)]
    topics = [
        DEFAULT_TOPICS["topic_route"] if value == bad[1] else DEFAULT_TOPICS["consumer_channel"] for value in values
    ]
    records = spark.createDataFrame(
        [(value.encode(), topic, 0, i, ts) for i, (value, topic) in enumerate(zip(values, topics, strict=True))],
        "value BINARY, topic STRING, partition INT, offset BIGINT, timestamp TIMESTAMP",
    ).repartition(12)
    classified = classify(records, contracts_for(consumer_types), settings)

    jvm = spark.sparkContext._jvm
    plan_bytes = len(jvm.org.apache.spark.util.Utils.serialize(classified._jdf.queryExecution().executedPlan()))
    assert plan_bytes < 256 * 1024, plan_bytes

    expected = {}
    for value, topic in {(v, t) for v, t in zip(values, topics, strict=True)}:
        default_type = next(t for t in consumer_types if DEFAULT_TOPICS[t] == topic)
        verdict = validate_event(value, KAFKA_TS, default_type=default_type)
        expected[value] = (verdict.reason, verdict.detail) if isinstance(verdict, Rejection) else (None, None)
    assert {v: e for v, e in expected.items() if e[0] is not None}.keys() == set(bad)
    got = {r.kafka_offset: (r.reason, r.detail) for r in classified.collect()}
    assert got == {i: expected[value] for i, value in enumerate(values)}


def test_the_contract_case_table_classifies_as_the_python_validator_and_valid_cases_take_the_fast_path(spark):
    """Every case of the contract's table (lengths in code points, patterns to the end of input, nested bounds,
    the cross-field rule, the skew boundary) gets the job's verdict the contract's validator gives, and every
    accepted case is taken by the JVM fast path (its value checks included), typed as the rules type it."""
    from tests.unit.test_contract import CASES, NOW

    raws = [raw for _, raw, _, _ in CASES]
    ts = datetime.fromtimestamp(NOW / 1000, tz=UTC)
    records = spark.createDataFrame(
        # A topic without a default type, as the table's validator has none (case 16).
        [(None if raw is None else raw.encode(), "cases.without-default", 0, i, ts) for i, raw in enumerate(raws)],
        "value BINARY, topic STRING, partition INT, offset BIGINT, timestamp TIMESTAMP",
    )
    settings = IngestSettings("unused:9092", {DEFAULT_TOPICS["send_result"]: "send_result"})
    got = {r.kafka_offset: r.reason for r in classify(records, contracts_for(), settings).collect()}
    for i, (number, _, reason, why) in enumerate(CASES):
        assert got[i] == reason, f"case {number} ({why}): {got[i]}"
    # Left to the rules by design (StrictEvents): numbers written 1.0, unknown fields, and a version 1 event
    # holding a newer version's field its own rules ignore but the newest would refuse (an empty cluster).
    left_to_the_rules = {21, 27, 40, 67, 76}
    accepted = [(number, raw) for number, raw, reason, _ in CASES if reason is None]
    results = _fast_taken(spark, [(raw, None) for _, raw in accepted])
    for (number, raw), (taken, fast, rules) in zip(accepted, results, strict=True):
        assert taken == (number not in left_to_the_rules), (number, raw[:160])
        if taken:
            assert fast == rules, (number, raw[:160])


def test_bytes_the_fast_path_leaves_to_the_rules_get_the_python_validators_verdict_and_fields(spark):
    """StrictEvents reads the record's bytes as UTF-8 itself, so bytes Spark reads differently go to the rules:
    invalid UTF-8 (Spark reads U+FFFD), UTF-8-encoded surrogates, a byte order mark, a NUL before the JSON. Each
    gets the contract validator's verdict, and a valid one the fields the validator reads."""
    good = json.dumps(GOOD["consumer_channel"]).encode()
    with_client = lambda raw: good.replace(b'"client_id": "', b'"client_id": "' + raw, 1)  # noqa: E731
    values = [
        with_client(b"\xff"),  # not UTF-8 at all
        with_client(b"\xed\xa0\x80"),  # a surrogate, encoded
        with_client(b"\xc0\x80"),  # an overlong NUL
        with_client("\u00e9\U0001f600".encode()),  # plain multi-byte UTF-8: the fast path takes it
        b"\xef\xbb\xbf" + good,  # a byte order mark
        b"\x00" + good,
        good,
    ]
    ts = datetime.fromtimestamp(KAFKA_TS / 1000, tz=UTC)
    records = spark.createDataFrame(
        [(value, DEFAULT_TOPICS["consumer_channel"], 0, i, ts) for i, value in enumerate(values)],
        "value BINARY, topic STRING, partition INT, offset BIGINT, timestamp TIMESTAMP",
    )
    settings = IngestSettings("unused:9092", {DEFAULT_TOPICS["consumer_channel"]: "consumer_channel"})
    rows = classify(records, contracts_for(), settings).collect()
    got = {r.kafka_offset: (r.reason, r.e_consumer_channel.client_id if r.e_consumer_channel else None) for r in rows}
    for i, value in enumerate(values):
        expected = validate_event(value, KAFKA_TS, default_type="consumer_channel")
        if isinstance(expected, Rejection):
            assert got[i] == (expected.reason, None), (value[:60], got[i], expected)
        elif i in (1, 2):  # Java replaces an invalid sequence by fewer U+FFFD than Python: compare the verdict
            assert got[i][0] is None and got[i][1].endswith("10.0.0.7@1#123") and "\ufffd" in got[i][1]
        else:
            assert got[i] == (None, expected.payload["client_id"]), (value[:60], got[i])
    assert got[0][1] == "\ufffd10.0.0.7@1#123"  # valid, read as Spark reads it


def test_the_job_classifies_the_hostile_harness_records_as_the_python_validator(spark):
    """The hostile-input generator (``tests.support.hostile``: mutations built from the schema files, every
    bound, type, spelling, encoding and topic) against both validators: the job's classification (JVM fast
    path and rule walk) gives every record the reason and detail the Python validator gives, and every
    record the fast path takes is valid and typed as the rules type it."""
    from tests.support.hostile import generate

    records_list = [r for seed in (0, 1) for r in generate(seed)]
    ts = datetime.fromtimestamp(KAFKA_TS / 1000, tz=UTC)
    records = spark.createDataFrame(
        [(r.raw, DEFAULT_TOPICS[r.topic_type], 0, i, ts) for i, r in enumerate(records_list)],
        "value BINARY, topic STRING, partition INT, offset BIGINT, timestamp TIMESTAMP",
    )
    settings = IngestSettings("unused:9092", {DEFAULT_TOPICS[t]: t for t in DEFAULT_TOPICS})
    got = {r.kafka_offset: (r.reason, r.detail) for r in classify(records, contracts_for(), settings).collect()}
    disagreements = []
    for i, record in enumerate(records_list):
        expected = validate_event(record.raw, KAFKA_TS, default_type=record.topic_type)
        want = (expected.reason, expected.detail) if isinstance(expected, Rejection) else (None, None)
        if want[0] in ("OVERSIZED", "NOT_JSON") and got[i][0] == want[0]:
            continue  # the detail of these two says what the reader met, in its own words
        if got[i] != want:
            disagreements.append((record.note, record.raw[:160], got[i], want))
    assert not disagreements, disagreements[:10]
    assert sum(1 for reason, _ in got.values() if reason is None) > 300  # the harness keeps many valid records

    texts = [(r.raw.decode("utf-8", "replace"), r.topic_type) for r in records_list]
    for (text, default_type), (taken, fast, rules) in zip(texts, _fast_taken(spark, texts), strict=True):
        if taken:
            expected = validate_event(text, KAFKA_TS, default_type=default_type)
            # The size rule runs on the raw bytes before the fast path, which does not check it.
            assert not isinstance(expected, Rejection) or expected.reason in ("FUTURE_TIMESTAMP", "OVERSIZED"), (
                text[:160],
                expected,
            )
            assert fast == rules, text[:160]
