"""``rebalance-monitor health`` reads pages the job's own metrics code renders (``MetricsState`` and its
registry, served by the same HTTP endpoint the driver starts) and judges them as the job-health alerts do."""

from __future__ import annotations

import json
import shlex
import time

import pytest
from prometheus_client import generate_latest

from connectors import job_health
from connectors.job_health import DEAD_LETTER_RATIO, STALE_AFTER_S, JobAlert
from connectors.metric_catalogue import Metrics
from connectors.metrics import MetricsState, new_registry, serve
from connectors.processes import free_port
from streaming.app.cli import build_parser, main
from tests.support.runbook import confirm_commands


def running_job(now_s: float, state: MetricsState | None = None) -> MetricsState:
    """A job's metrics as the driver sets them: up, both queries triggered 5 s ago, each having read rows."""
    state = state or MetricsState()
    state.set_gauge(Metrics.UP, (), 1.0)
    state.set_gauge(Metrics.BUILD_INFO, ("1.2.3", "4.0.1"), 1.0)
    for query in ("consumer", "send-ingest"):
        state.set_gauge(Metrics.LAST_TRIGGER_TIMESTAMP_SECONDS, (query,), now_s - 5)
        state.set_gauge(Metrics.LAST_BATCH_TIMESTAMP_SECONDS, (query,), now_s - 7)
        state.set_gauge(Metrics.KAFKA_OFFSETS_BEHIND, (query,), 0.0)
        state.set_counter(Metrics.INPUT_ROWS_TOTAL, (query,), 1000.0)
        state.set_counter(Metrics.QUERY_RESTARTS_TOTAL, (query,), 0.0)
    return state


def page(state: MetricsState, at_s: float) -> job_health.Scrape:
    return job_health.parse(generate_latest(new_registry(state)).decode(), at_s)


def kinds(health: job_health.Health) -> set[tuple[str, str]]:
    return {(f.alert, f.subject) for f in health.findings}


def test_a_running_job_is_healthy_and_each_querys_ages_are_read_from_its_timestamps():
    now = time.time()
    health = job_health.judge(page(running_job(now), now))
    assert health.healthy and health.up and health.version == "1.2.3"
    ages = {q.query: (q.last_trigger_age_s, q.last_batch_age_s, q.rows_read) for q in health.queries}
    assert ages == {"consumer": (5.0, 7.0, 1000.0), "send-ingest": (5.0, 7.0, 1000.0)}


def test_a_query_without_a_trigger_for_longer_than_the_alerts_threshold_is_stale_and_only_that_one():
    now = time.time()
    state = running_job(now)
    state.set_gauge(Metrics.LAST_TRIGGER_TIMESTAMP_SECONDS, ("send-ingest",), now - STALE_AFTER_S - 1)
    assert kinds(job_health.judge(page(state, now))) == {(JobAlert.STALE, "send-ingest")}
    state.set_gauge(Metrics.LAST_TRIGGER_TIMESTAMP_SECONDS, ("send-ingest",), now - STALE_AFTER_S + 1)
    assert job_health.judge(page(state, now)).healthy


def test_queries_stopped_are_down():
    now = time.time()
    state = running_job(now)
    state.set_gauge(Metrics.UP, (), 0.0)
    assert kinds(job_health.judge(page(state, now))) == {(JobAlert.DOWN, "")}


def test_over_a_window_the_counters_increase_is_judged_silence_restarts_and_dead_letters():
    now = time.time()
    state = running_job(now)
    first = page(state, now)
    state.set_counter(Metrics.INPUT_ROWS_TOTAL, ("send-ingest",), 1200.0)  # consumer read nothing
    state.set_counter(Metrics.QUERY_RESTARTS_TOTAL, ("consumer",), 2.0)
    rejected = int(200 * DEAD_LETTER_RATIO) + 1  # just over the alert's share of what send-ingest read
    state.set_counter(Metrics.DEAD_LETTERS_TOTAL, ("send-ingest", "MISSING_FIELD"), rejected)
    health = job_health.judge(page(state, now + 60), first)
    assert health.window_s == 60
    assert kinds(health) == {
        (JobAlert.INPUT_SILENT, "consumer"),
        (JobAlert.RESTARTING, "consumer"),
        (JobAlert.DEAD_LETTERS, "send-ingest"),
    }
    sends = {q.query: q for q in health.queries}["send-ingest"]
    assert (sends.rows_read, sends.dead_letters) == (200, {"MISSING_FIELD": rejected})
    # The same counters in one read are totals since the start: shown, not judged.
    assert job_health.judge(page(state, now)).healthy


def test_dead_letters_within_the_alerts_share_are_not_a_finding():
    now = time.time()
    state = running_job(now)
    first = page(state, now)
    state.set_counter(Metrics.INPUT_ROWS_TOTAL, ("consumer",), 2000.0)
    state.set_counter(Metrics.DEAD_LETTERS_TOTAL, ("consumer", "BAD_JSON"), 1000 * DEAD_LETTER_RATIO)
    health = job_health.judge(page(state, now + 30), first)
    assert health.healthy and {q.query: q.dead_letters for q in health.queries}["consumer"] == {"BAD_JSON": 10}


def test_a_job_restarted_between_the_reads_counts_its_counters_from_zero():
    now = time.time()
    first = page(running_job(now), now)
    restarted = running_job(now + 30)
    restarted.set_counter(Metrics.INPUT_ROWS_TOTAL, ("consumer",), 40.0)  # below the first read's 1000
    health = job_health.judge(page(restarted, now + 30), first)
    assert {q.query: q.rows_read for q in health.queries}["consumer"] == 40


def test_stale_broker_views_and_the_label_cap_are_named():
    now = time.time()
    state = running_job(now, MetricsState(label_value_cap=2))  # the job's two queries, two brokers
    state.set_gauge(Metrics.BROKER_STALE_GROUP_VIEWS, ("DefaultCluster", "broker-a"), 3.0)
    state.set_gauge(Metrics.BROKER_STALE_GROUP_VIEWS, ("east", "broker-a"), 0.0)
    for group in ("G1", "G2", "G3"):  # the third is over the cap: dropped
        state.set_gauge(Metrics.GROUP_MEMBERS, ("DefaultCluster", group), 2.0)
    health = job_health.judge(page(state, now))
    assert health.stale_views == {"broker-a": 3.0}  # east's broker-a is its own, and fresh
    assert kinds(health) == {(JobAlert.VIEW_STALE, "broker-a"), (JobAlert.LABEL_CAP, Metrics.GROUP_MEMBERS.name)}


def test_the_command_reads_a_served_page_and_exits_1_on_a_finding(capsys):
    now = time.time()
    state = running_job(now)
    port = free_port()
    server = serve(new_registry(state), "127.0.0.1", port)
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        assert main(["health", "--url", url]) == 0
        out = capsys.readouterr().out
        assert out.splitlines()[0] == f"{url}: up, version 1.2.3" and out.rstrip().endswith("healthy")
        state.set_gauge(Metrics.LAST_TRIGGER_TIMESTAMP_SECONDS, ("consumer",), now - 2 * STALE_AFTER_S)
        assert main(["health", "--url", url, "--json"]) == 1
        answer = json.loads(capsys.readouterr().out)
        assert [(f["alert"], f["subject"]) for f in answer["findings"]] == [(JobAlert.STALE, "consumer")]
    finally:
        server.shutdown()


def test_a_page_nobody_serves_is_down_in_one_line(capsys):
    url = f"http://127.0.0.1:{free_port()}/metrics"
    assert main(["health", "--url", url]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith(f"{JobAlert.DOWN}  cannot read {url}") and lines[-1] == "1 finding(s)"


@pytest.mark.parametrize("alert", list(JobAlert))
def test_each_job_health_alerts_runbook_section_confirms_it_with_a_health_command_the_cli_takes(alert):
    commands = [c for c in confirm_commands(alert) if c.startswith("health")]
    assert commands, confirm_commands(alert)
    for command in commands:
        args = build_parser().parse_args(shlex.split(command))
        assert args.command == "health"
