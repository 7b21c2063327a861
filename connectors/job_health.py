"""A running job's health read from its own ``/metrics`` page: per query when it last ran, what it read, its
restarts and dead letters, the brokers whose views went stale, the label cap. What the runbook's job-health
sections confirm with ``rebalance-monitor health``; the thresholds are the alert rules' own.

One scrape answers what gauges say (down, stale, stale views); counters need a window: two scrapes ``window_s``
apart, whose increases are judged as the alerts judge their ``increase()``.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum

from prometheus_client.parser import text_string_to_metric_families

from connectors.metric_catalogue import Metrics
from streaming.domain.anomaly_catalogue import ALERT_PREFIX
from streaming.domain.vocabulary import DEFAULT_CLUSTER, in_cluster

# A query that neither finished a batch nor ran an idle trigger for longer is stale.
STALE_AFTER_S = 300
# More than this share of a query's input dead-lettered is an alert.
DEAD_LETTER_RATIO = 0.01
# The query whose silence means nothing publishes (every consumer heartbeats, the collector polls).
CONSUMER_QUERY = "consumer"


class JobAlert(StrEnum):
    """The alerts on the job's own health, by what they watch."""

    DOWN = ALERT_PREFIX + "Down"
    STALE = ALERT_PREFIX + "Stale"
    INPUT_SILENT = ALERT_PREFIX + "ConsumerInputSilent"
    RESTARTING = ALERT_PREFIX + "QueryRestarting"
    DEAD_LETTERS = ALERT_PREFIX + "DeadLettersRising"
    VIEW_STALE = ALERT_PREFIX + "BrokerViewStale"
    LABEL_CAP = ALERT_PREFIX + "LabelCapReached"


Labels = tuple[tuple[str, str], ...]
Samples = dict[tuple[str, Labels], float]


@dataclass(frozen=True)
class Scrape:
    """One read of the page: every sample by (sample name, sorted labels), and when it was read (epoch s)."""

    at_s: float
    samples: Samples

    def values(self, sample: str, label: str) -> dict[str, float]:
        """The sample's values by one label's value."""
        return {dict(labels).get(label, ""): v for (name, labels), v in self.samples.items() if name == sample}

    def per_cluster(self, sample: str, label: str) -> dict[str, float]:
        """The sample's values by one label's value within its cluster (``in_cluster``)."""
        return {
            in_cluster(dict(labels).get("cluster", DEFAULT_CLUSTER), dict(labels).get(label, "")): v
            for (name, labels), v in self.samples.items()
            if name == sample
        }

    def by_reason(self, query: str) -> dict[str, float]:
        name = Metrics.DEAD_LETTERS_TOTAL.name
        return {
            dict(labels)["reason"]: v
            for (n, labels), v in self.samples.items()
            if n == name and dict(labels).get("query") == query
        }


def parse(text: str, at_s: float) -> Scrape:
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return Scrape(at_s, samples)


class Unreachable(Exception):
    """The page could not be read (connection refused, timeout, not a metrics page)."""


def scrape(url: str, timeout_s: float = 10.0) -> Scrape:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:  # noqa: S310 - the operator's own URL
            text = response.read().decode("utf-8")
        return parse(text, time.time())
    except (urllib.error.URLError, OSError, ValueError) as error:
        reason = getattr(error, "reason", None) or error
        raise Unreachable(f"cannot read {url}: {reason}") from None


@dataclass(frozen=True)
class QueryHealth:
    query: str
    last_trigger_age_s: float | None
    last_batch_age_s: float | None
    rows_read: float  # since the job started, or within the window
    offsets_behind: float | None
    restarts: float  # since the job started, or within the window
    dead_letters: dict[str, float]  # by reason, since the job started or within the window


@dataclass(frozen=True)
class Finding:
    alert: JobAlert
    subject: str  # the query, broker or metric it is about ("" for the job)
    detail: str


@dataclass(frozen=True)
class Health:
    up: bool
    version: str
    window_s: float | None  # None: one scrape, counters are totals since the job started
    queries: tuple[QueryHealth, ...]
    stale_views: dict[str, float]  # broker (``in_cluster``) -> group views without a recent poll
    labels_dropped: dict[str, float]  # metric -> updates not exported
    findings: tuple[Finding, ...] = field(default=())

    @property
    def healthy(self) -> bool:
        return not self.findings


def _increase(later: Mapping[str, float], earlier: Mapping[str, float]) -> dict[str, float]:
    """Counter increases between two scrapes; a counter lower than before (the job restarted) counts from 0."""
    return {k: v - earlier.get(k, 0.0) if v >= earlier.get(k, 0.0) else v for k, v in later.items()}


def judge(last: Scrape, first: Scrape | None = None) -> Health:
    """The job's health from ``last`` (and, for counters, their increase since ``first``)."""
    up_values = last.values(Metrics.UP.name, "")
    up = bool(up_values) and all(v == 1 for v in up_values.values())
    (version,) = [*last.values(Metrics.BUILD_INFO.name, "version"), ""][:1]
    triggers = last.values(Metrics.LAST_TRIGGER_TIMESTAMP_SECONDS.name, "query")
    batches = last.values(Metrics.LAST_BATCH_TIMESTAMP_SECONDS.name, "query")
    behind = last.values(Metrics.KAFKA_OFFSETS_BEHIND.name, "query")
    rows = last.values(Metrics.INPUT_ROWS_TOTAL.name, "query")
    restarts = last.values(Metrics.QUERY_RESTARTS_TOTAL.name, "query")
    dropped = last.values(Metrics.LABEL_VALUES_DROPPED_TOTAL.name, "metric")
    if first is not None:
        rows = _increase(rows, first.values(Metrics.INPUT_ROWS_TOTAL.name, "query"))
        restarts = _increase(restarts, first.values(Metrics.QUERY_RESTARTS_TOTAL.name, "query"))
        dropped = _increase(dropped, first.values(Metrics.LABEL_VALUES_DROPPED_TOTAL.name, "metric"))
    queries = []
    for query in sorted(set(triggers) | set(rows) | set(batches)):
        letters = last.by_reason(query)
        if first is not None:
            letters = _increase(letters, first.by_reason(query))
        queries.append(
            QueryHealth(
                query,
                last.at_s - triggers[query] if triggers.get(query) else None,
                last.at_s - batches[query] if batches.get(query) else None,
                rows.get(query, 0.0),
                behind.get(query),
                restarts.get(query, 0.0),
                {r: n for r, n in sorted(letters.items()) if n},
            )
        )
    stale = {
        b: n for b, n in sorted(last.per_cluster(Metrics.BROKER_STALE_GROUP_VIEWS.name, "broker").items()) if n > 0
    }
    health = Health(
        up,
        version,
        None if first is None else last.at_s - first.at_s,
        tuple(queries),
        stale,
        {m: n for m, n in sorted(dropped.items()) if n > 0},
    )
    return replace(health, findings=tuple(_findings(health)))


def _findings(health: Health) -> list[Finding]:
    found = []
    if not health.up:
        found.append(Finding(JobAlert.DOWN, "", "rmqmon_up is not 1: the job's queries are not running"))
    for q in health.queries:
        if q.last_trigger_age_s is not None and q.last_trigger_age_s > STALE_AFTER_S:
            found.append(
                Finding(
                    JobAlert.STALE,
                    q.query,
                    f"no batch or trigger for {q.last_trigger_age_s:.0f} s (stale after {STALE_AFTER_S} s)",
                )
            )
        if health.window_s is None:
            continue
        window = f"in {health.window_s:.0f} s"
        if q.query == CONSUMER_QUERY and q.rows_read == 0:
            found.append(Finding(JobAlert.INPUT_SILENT, q.query, f"read no record {window}"))
        if q.restarts > 0:
            found.append(Finding(JobAlert.RESTARTING, q.query, f"restarted {q.restarts:.0f} time(s) {window}"))
        rejected = sum(q.dead_letters.values())
        if rejected and rejected > DEAD_LETTER_RATIO * q.rows_read:
            reasons = ", ".join(f"{r} {n:.0f}" for r, n in q.dead_letters.items())
            found.append(
                Finding(
                    JobAlert.DEAD_LETTERS,
                    q.query,
                    f"{rejected:.0f} of {q.rows_read:.0f} records dead-lettered {window} ({reasons})",
                )
            )
    for broker, views in health.stale_views.items():
        found.append(Finding(JobAlert.VIEW_STALE, broker, f"{views:.0f} group view(s) without a recent poll"))
    for metric, n in health.labels_dropped.items():
        since = f"in {health.window_s:.0f} s" if health.window_s is not None else "since the job started"
        found.append(Finding(JobAlert.LABEL_CAP, metric, f"{n:.0f} update(s) not exported {since}"))
    return found


def check(url: str, window_s: float = 0.0, timeout_s: float = 10.0) -> Health:
    """Scrape ``url`` (twice, ``window_s`` apart, when a window is asked) and judge. An unreachable page is a
    Down finding."""
    try:
        first = scrape(url, timeout_s)
        if window_s <= 0:
            return judge(first)
        time.sleep(window_s)
        return judge(scrape(url, timeout_s), first)
    except Unreachable as error:
        return Health(False, "", None, (), {}, {}, (Finding(JobAlert.DOWN, "", str(error)),))
