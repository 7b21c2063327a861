"""A batch that processing cannot take, for a reason the validator did not foresee, through the real job.

The tests' seam ``poison.planted`` makes the consumer engine raise on events holding a marker, and send-ingest's
rules on sends holding it. The job must dead-letter exactly those records as
``PROCESSING_ERROR``, apply the rest of their batch, count them, keep running, and leave identical tables when
the batches are replayed after a crash.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from streaming.job.ingest.poison import PROCESSING_ERROR, planted
from tests.support.events import BASE, hb, report, route
from tests.support.job import finish, job_config, publish, read

MARKER = "POISON-7"
TABLES = (
    "membership_changes",
    "group_snapshots",
    "expected_assignments",
    "current_assignment",
    "anomaly_episodes",
    "anomalies_current",
    "dead_letters",
    "send_latency_minutes",
)


def send(t, producer, latency_ms, **extra):  # type: ignore[no-untyped-def]
    return {
        "type": "send_result",
        "schema_version": 1,
        "event_time": BASE + t,
        "producer_id": producer,
        "producer_group": "PG",
        "topic": "T",
        "broker": "broker-a",
        "queue_id": 0,
        "latency_ms": latency_ms,
        "outcome": "OK",
        **extra,
    }


def events():
    published = [route(0, "T")]
    for t in range(0, 120_001, 30_000):
        published += [hb(t, "10.5.0.1:1", "c1", "G-p"), hb(t, "10.5.0.2:1", "c2", "G-p")]
    published.append(hb(60_000, "10.5.0.3:1", f"c3-{MARKER}", "G-p"))  # a typed channel event
    published.append(report(90_000, f"r-{MARKER}", [("broker-a", 0)], "G-p"))  # an event that travels as JSON
    published.append(report(90_000, "c1", [("broker-a", 0), ("broker-a", 1)], "G-p"))
    published += [send(t, "P1", 10) for t in range(0, 60_000, 10_000)]
    published.append(send(30_000, "P2", 20, note=MARKER))  # an unknown field: off the fast path, to the rules
    published.append(send(40_000, "P3", 30, note="plain"))  # valid, off the fast path too
    return published


def run(config, marker: str | None):  # type: ignore[no-untyped-def]
    from streaming.job.runner import MonitorJob

    job = MonitorJob(config, available_now=True)
    with planted(marker):
        job.start()
        finish(job)  # raises if a query failed
    return job


def tables(spark, config) -> dict[str, list[str]]:
    return {t: sorted(json.dumps(r, sort_keys=True, default=str) for r in read(spark, config, t)) for t in TABLES}


@pytest.fixture(scope="module")
def outcome(kafka_broker, spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("poison")
    config, topics = job_config(kafka_broker.bootstrap_servers, root, "poison")
    publish(kafka_broker.bootstrap_servers, events(), topics)
    job = run(config, MARKER)
    first = tables(spark, config)
    counted = dict(job.metrics.counters.get("rmqmon_dead_letters_total", {}))
    # A crash after the batch's writes and before its commit: the restart replays the batch.
    for query in ("consumer", "send-ingest"):
        commits = Path(config.paths.checkpoint_root).resolve() / query / "commits"
        last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
        for name in (str(last), f".{last}.crc"):
            (commits / name).unlink(missing_ok=True)
    replayed = run(config, MARKER)
    return {"first": first, "replayed": tables(spark, config), "counted": counted, "replay_batches": replayed}


def test_the_records_processing_cannot_take_are_dead_lettered_with_the_error(outcome):
    letters = [json.loads(r) for r in outcome["first"]["dead_letters"]]
    assert sorted((r["source"], r["reason"]) for r in letters) == [
        ("consumer_channel", PROCESSING_ERROR),
        ("reported_assignment", PROCESSING_ERROR),
        ("send_result", PROCESSING_ERROR),
    ]
    sent = next(r for r in letters if r["source"] == "send_result")
    assert f"test poison marker '{MARKER}' in a send" in sent["detail"]
    assert json.loads(sent["raw_value"])["producer_id"] == "P2" and sent["kafka_timestamp"] is not None
    for letter in (r for r in letters if r["source"] != "send_result"):
        assert letter["detail"] == f"ValueError: test poison marker '{MARKER}' in an event"
        assert MARKER in letter["raw_value"] and letter["kafka_offset"] >= 0
    channel = next(r for r in letters if r["source"] == "consumer_channel")
    assert json.loads(channel["raw_value"])["client_id"] == f"c3-{MARKER}"  # its fields as the job read them


def test_the_rest_of_the_batch_is_applied(outcome):
    members = {json.loads(r)["client_id"] for r in outcome["first"]["membership_changes"]}
    assert members == {"c1", "c2"}
    assignments = [json.loads(r) for r in outcome["first"]["current_assignment"]]
    assert {a["client_id"] for a in assignments if a["group"] == "G-p"} == {"c1", "c2"}
    minutes = [json.loads(r) for r in outcome["first"]["send_latency_minutes"]]
    assert sum(m["sends"] for m in minutes) == 7  # P1's six and P3's; not P2's


def test_they_are_counted_like_every_dead_letter(outcome):
    assert Counter(outcome["counted"]) == Counter(
        {("consumer", PROCESSING_ERROR): 2, ("send-ingest", PROCESSING_ERROR): 1}
    )


def test_a_replay_of_the_batch_leaves_identical_tables(outcome):
    for table in TABLES:
        assert outcome["replayed"][table] == outcome["first"][table], table


def test_a_batch_failing_while_the_job_stops_is_replayed_not_searched(kafka_broker, spark, tmp_path):
    # A stop interrupts the running batch, and its failure then says nothing about the records: the job must
    # not search them for poison (its attempts may fail for the stop too) but fail, and replay the batch.
    config, topics = job_config(kafka_broker.bootstrap_servers, tmp_path, "poison-stop")
    publish(kafka_broker.bootstrap_servers, [send(0, "P1", 10), send(10_000, "P2", 20, note=MARKER)], topics)
    from streaming.job.runner import MonitorJob

    stopping = MonitorJob(config, available_now=True)
    stopping.stopping.set()  # as ``stop_queries`` does before it stops the queries
    with planted(MARKER), pytest.raises(Exception, match=f"test poison marker '{MARKER}' in a send"):  # noqa: PT011
        stopping.start()  # with available_now, waits for send-ingest, which fails (Spark's own exception)
        stopping.await_available()
    stopping.stop()
    assert read(spark, config, "dead_letters") == []
    assert read(spark, config, "send_latency_minutes") == []

    run(config, MARKER)  # the restart replays the batch, and now searches it
    letters = read(spark, config, "dead_letters")
    assert [(r["source"], r["reason"]) for r in letters] == [("send_result", PROCESSING_ERROR)]
    assert json.loads(letters[0]["raw_value"])["producer_id"] == "P2"
    assert sum(m["sends"] for m in read(spark, config, "send_latency_minutes")) == 1
