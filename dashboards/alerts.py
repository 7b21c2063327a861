"""The monitor's Prometheus alert rules and their promtool unit tests, as plain Python data.

``dashboards/generate.py`` writes them to ``dashboards/prometheus/alerts.yml`` and ``alerts_test.yml``;
tests check the committed files equal the generated ones, run ``promtool check rules`` and
``promtool test rules`` on them, and check every alert's labels, annotations, runbook anchor
(``docs/runbook.md``) and metric names (``connectors/metrics.py``).

Conventions (monitoring-mixins): CamelCase names with one prefix; ``severity`` critical (act now: messages
are not consumed, or nothing watches), warning (act today) or info; ``for:`` durations that outlast
RocketMQ's 20 s rebalance interval and 30 s heartbeats, so transients never page; relative thresholds where
a count means nothing on its own; counters are only ever ``rate()``d or ``increase()``d, gauges never.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

from connectors.job_health import DEAD_LETTER_RATIO, STALE_AFTER_S, JobAlert
from connectors.metric_catalogue import Metrics
from streaming.app.simulation import operations
from streaming.domain.anomaly_catalogue import ALERT_PREFIX, CATALOGUE, KEEP_FIRING_FOR, AnomalySpec
from streaming.domain.progress.verdict import DEFAULT_SETTINGS, QueueState, StuckCause, alerts_on, severity_of
from streaming.domain.vocabulary import AnomalyKind

from .scripted_series import expand, first_sustained, restarted, series_of

PREFIX = ALERT_PREFIX
# Where runbook_url points: docs/runbook.md as your repository browser serves it. The committed rule files use
# this example; `python -m dashboards.generate --runbook-url-base URL --out DIR` writes them with yours.
RUNBOOK_URL_BASE = "https://git.example.com/ops/rocketmq-rebalance-monitor/blob/main/docs/runbook.md"
# The scrape job that scrapes the monitor's driver (the `job` label Prometheus adds).
MONITOR_JOB = "rocketmq-rebalance-monitor"
# Severities, most urgent first.
SEVERITIES = ("critical", "warning", "info")


@dataclass(frozen=True)
class Alert:
    name: str
    expr: str
    for_: str
    severity: str
    summary: str
    description: str
    anchor: str  # heading id in docs/runbook.md
    # What the job concluded about the fleet holds across a restart of the job (catalogue's KEEP_FIRING_FOR);
    # "" for the alerts on the job's own health, which judge the restart itself.
    keep_firing_for: str = KEEP_FIRING_FOR

    def runbook_url(self, base: str = RUNBOOK_URL_BASE) -> str:
        return f"{base}#{self.anchor}"

    def rule(self, runbook_url_base: str = RUNBOOK_URL_BASE) -> dict[str, object]:
        annotations = {"summary": self.summary, "description": self.description}
        keep = {"keep_firing_for": self.keep_firing_for} if self.keep_firing_for else {}
        return {
            "alert": self.name,
            "expr": self.expr,
            "for": self.for_,
            **keep,
            "labels": {"severity": self.severity},
            "annotations": {**annotations, "runbook_url": self.runbook_url(runbook_url_base)},
        }


def _slug(name: str) -> str:
    return name.lower()


GROUP_TOPIC = "{{ $labels.consumer_group }}"


def _anomaly_alert(spec: AnomalySpec) -> Alert:
    """A kind's alert, everything from its catalogue entry (``streaming/domain/anomaly_catalogue.py``)."""
    assert spec.alert is not None and spec.alert_name is not None
    a = spec.alert
    return Alert(spec.alert_name, a.expr, a.for_, spec.severity.value, a.summary, a.description, spec.anchor)


# The alert of every anomaly kind that has one; the kinds without (severity info) are recorded, never alerted.
ANOMALY_ALERTS: dict[AnomalyKind, Alert] = {k: _anomaly_alert(s) for k, s in CATALOGUE.items() if s.alert}

# -- consume progress (docs/design/consume-progress.md) ------------------------------------------------------
# One alert per queue state whose severity (the rule table's, streaming/domain/progress/verdict.py) is warning
# or critical; IDLE, OK, UNKNOWN, INCOMPLETE, NO_OFFSET, NOT_OWNED_MODEL (no severity) and REBALANCE_REWIND
# (info) never alert. Each state already needs several 30 s samples of evidence (an orphan 3, a stuck holder a
# whole window of 10); ``for:`` adds what a page needs besides: the state held at two samples or more, so that a
# single sample's verdict (a rebalance handing the queue over between two samples) never pages.
OFFLINE = AnomalyKind.OFFLINE_GROUP_BACKLOG
OFFLINE_OPEN = f'max by (cluster, consumer_group) (rmqmon_group_open_anomalies{{anomaly="{OFFLINE}"}}) > 0'
INCONSISTENT = AnomalyKind.INCONSISTENT_SUBSCRIPTION
INCONSISTENT_OPEN = f'max by (cluster, consumer_group) (rmqmon_group_open_anomalies{{anomaly="{INCONSISTENT}"}}) > 0'
CAUSES = ", ".join(StuckCause)
QUERY_PROGRESS = "rebalance-monitor query progress --cluster {{ $labels.cluster }} --group " + GROUP_TOPIC


def _queues_in(state: QueueState) -> str:
    return f'max by (cluster, consumer_group, topic) (rmqmon_group_progress_queues{{state="{state}"}}) > 0'


def _progress_alert(state: QueueState, name: str, for_: str, summary: str, description: str, expr: str = "") -> Alert:
    severity = severity_of(state)
    assert severity is not None and alerts_on(state), f"{state} does not alert"
    queues = '{{ printf "%.0f" $value }} queue(s) of topic {{ $labels.topic }} of consumer group ' + GROUP_TOPIC
    return Alert(
        f"{PREFIX}{name}",
        expr or _queues_in(state),
        for_,
        severity.value,
        summary,
        f"{queues} {description} Confirm: {QUERY_PROGRESS} --state {state}.",
        _slug(f"{PREFIX}{name}"),
    )


# the progress window at the default settings, in minutes (the alert texts quote it beside the option)
WINDOW_MIN = DEFAULT_SETTINGS.window * DEFAULT_SETTINGS.sample_interval_ms // 60_000

PROGRESS_ALERTS: dict[QueueState, Alert] = {
    QueueState.ORPHAN_CONFIRMED: _progress_alert(
        QueueState.ORPHAN_CONFIRMED,
        "ProgressOrphanConfirmed",
        "1m",
        "Messages of {{ $labels.topic }} wait on queues no member of " + GROUP_TOPIC + " holds.",
        "had no holder for 3 progress samples while their committed offset stood still and messages waited: "
        "nobody consumes them. (A group with no member at all is RocketMQMonitorOfflineGroupBacklog's, a group "
        "whose members subscribe different topics RocketMQMonitorInconsistentSubscriptions'.)",
        # the offline group's queues are orphans too, and so are a non-subscriber's shares: their own alert says
        # why, once (and a subscription rolled out member by member pages neither)
        _queues_in(QueueState.ORPHAN_CONFIRMED)
        + "\nunless on (cluster, consumer_group)\n"
        + OFFLINE_OPEN
        + "\nunless on (cluster, consumer_group)\n"
        + INCONSISTENT_OPEN,
    ),
    QueueState.STUCK_HOLDER: _progress_alert(
        QueueState.STUCK_HOLDER,
        "ProgressStuckHolder",
        "1m",
        "A member of " + GROUP_TOPIC + " holds queues of {{ $labels.topic }} and does not consume them.",
        "are held by one member that did not advance the committed offset for a whole window ([progress] "
        f"window samples, {WINDOW_MIN} min unless configured) while messages waited. Where to look is each "
        f"queue's cause in queue_progress_current ({CAUSES}).",
    ),
    QueueState.REWIND: _progress_alert(
        QueueState.REWIND,
        "ProgressRewind",
        "1m",
        "The committed offset of " + GROUP_TOPIC + " went back on {{ $labels.topic }}.",
        "had their committed offset fall and stay below its high point, away from any rebalance: the messages in "
        "between are consumed again (an offset reset, a client committing an old offset).",
    ),
    QueueState.DOUBLE_OWNED: _progress_alert(
        QueueState.DOUBLE_OWNED,
        "ProgressDoubleOwned",
        "2m",
        "Two or more members of " + GROUP_TOPIC + " hold the same queues of {{ $labels.topic }}.",
        "are listed by two or more members' running info at 2 samples and more: their messages are consumed "
        "twice, whatever their lag (members on different strategies or routes, a dropped process queue that "
        "outlives a rebalance, an orderly lock held elsewhere).",
    ),
    QueueState.HIDDEN_CONSUMER: _progress_alert(
        QueueState.HIDDEN_CONSUMER,
        "ProgressHiddenConsumer",
        "5m",
        "Someone the monitor cannot see consumes queues of {{ $labels.topic }} for " + GROUP_TOPIC + ".",
        "advance their committed offset while no member reports holding them: a twin of a duplicate client ID, "
        "a proxy (gRPC) client, or a client whose running info cannot be read.",
    ),
    QueueState.SLOW: _progress_alert(
        QueueState.SLOW,
        "ProgressSlow",
        "5m",
        GROUP_TOPIC + " consumes {{ $labels.topic }} slower than it is written.",
        "are consumed, but their lag never fell and their time lag stayed over the job's [progress] "
        f"slow_time_lag_s ({DEFAULT_SETTINGS.slow_time_lag_s:.0f} s unless configured) through a whole window: "
        "the group consumes more slowly than producers write.",
    ),
}
OFFLINE_GROUP_BACKLOG = ANOMALY_ALERTS[OFFLINE]


ALERTS: tuple[Alert, ...] = (
    *(a for k, a in ANOMALY_ALERTS.items() if k != OFFLINE),
    *PROGRESS_ALERTS.values(),
    OFFLINE_GROUP_BACKLOG,
    Alert(
        f"{PREFIX}BrokerAvoidedByMostProducers",
        "max by (cluster, broker) (rmqmon_broker_producers_avoiding_ratio) > 0.5",
        "2m",
        "warning",
        "Most producers avoid broker {{ $labels.broker }} of cluster {{ $labels.cluster }}.",
        "{{ $value | humanizePercentage }} of the producers that send to broker {{ $labels.broker }} consider it "
        "unavailable (their latency fault item isolates it): its queues receive no new messages from them.",
        _slug(f"{PREFIX}BrokerAvoidedByMostProducers"),
    ),
    Alert(
        f"{PREFIX}ProducerAllBrokersUnavailable",
        "max by (cluster) (rmqmon_producers_all_brokers_unavailable) > 0",
        "1m",
        "critical",
        "Producers consider every broker of cluster {{ $labels.cluster }} unavailable.",
        '{{ printf "%.0f" $value }} producer(s) have a fault item making every broker they know unavailable: '
        "the client falls back to sending anyway, with the latency or errors that isolated the brokers.",
        _slug(f"{PREFIX}ProducerAllBrokersUnavailable"),
    ),
    Alert(
        JobAlert.VIEW_STALE,
        "max by (cluster, broker) (rmqmon_broker_stale_group_views) > 0",
        "2m",
        "warning",
        "The monitor's polled view of broker {{ $labels.broker }} of cluster {{ $labels.cluster }} is stale.",
        '{{ printf "%.0f" $value }} group view(s) of broker {{ $labels.broker }} had no poll of its connection '
        "list within their stale_after_ms: the collector is down or cannot reach the broker. The monitor keeps "
        "those members as last seen (no removal, no orphaned-queue episode) and cannot see changes there.",
        _slug(JobAlert.VIEW_STALE),
    ),
    Alert(
        JobAlert.STALE,
        f"time() - max by (instance, query) (rmqmon_last_trigger_timestamp_seconds) > {STALE_AFTER_S}",
        "5m",
        "critical",
        "The monitor's {{ $labels.query }} query on {{ $labels.instance }} has not run for over 5 minutes.",
        "Query {{ $labels.query }} of the job at {{ $labels.instance }} neither finished a micro-batch nor looked "
        'at its topics for {{ printf "%.0f" $value }} s: it is stuck (a batch that does not end, a driver that '
        "hangs). Quiet topics do not fire this: a trigger that finds nothing new counts. The monitor's other "
        "alerts from this job cannot be trusted meanwhile.",
        _slug(JobAlert.STALE),
        keep_firing_for="",
    ),
    Alert(
        JobAlert.INPUT_SILENT,
        'sum by (instance) (increase(rmqmon_input_rows_total{query="consumer"}[5m])) == 0',
        "5m",
        "warning",
        "No consumer events reached the monitor at {{ $labels.instance }} for 10 minutes.",
        "The consumer query of the job at {{ $labels.instance }} runs but read no record for 10 minutes: every "
        "consumer heartbeats every 30 s and the collector polls every broker, so silence means nothing publishes "
        "to the monitor's topics (the collector or the client agents are down, or publish elsewhere). Group "
        "views go stale meanwhile; no membership change can be seen.",
        _slug(JobAlert.INPUT_SILENT),
        keep_firing_for="",
    ),
    Alert(
        JobAlert.RESTARTING,
        "sum by (query) (increase(rmqmon_query_restarts_total[15m])) >= 3",
        "5m",
        "warning",
        "The monitor's {{ $labels.query }} query keeps failing and restarting.",
        'Query {{ $labels.query }} was restarted from its checkpoint {{ printf "%.0f" $value }} times in 15 '
        "minutes: something it depends on (Kafka, the Delta storage) fails again and again. Nothing is lost, "
        "but its output lags while it waits; after [supervision] max_consecutive_failures the job exits.",
        _slug(JobAlert.RESTARTING),
        keep_firing_for="",
    ),
    Alert(
        JobAlert.DOWN,
        f'up{{job="{MONITOR_JOB}"}} == 0\nor\nrmqmon_up == 0\nor\nabsent(up{{job="{MONITOR_JOB}"}})',
        "2m",
        "critical",
        "The RocketMQ rebalance monitor is down or not scraped.",
        "Prometheus cannot scrape the monitor's driver (job " + MONITOR_JOB + "), it is not scraped at all, or "
        "its queries stopped (rmqmon_up is 0). Nothing watches the RocketMQ fleet's rebalances meanwhile.",
        _slug(JobAlert.DOWN),
        keep_firing_for="",
    ),
    Alert(
        JobAlert.DEAD_LETTERS,
        "sum by (query) (rate(rmqmon_dead_letters_total[10m]))\n"
        f"  / sum by (query) (rate(rmqmon_input_rows_total[10m])) > {DEAD_LETTER_RATIO}",
        "10m",
        "warning",
        "More than 1% of the {{ $labels.query }} query's input is rejected.",
        "{{ $value | humanizePercentage }} of the input of query {{ $labels.query }} went to the dead_letters "
        "table over the last 10 minutes: a publisher emits events the contract rejects (see the reason label "
        "of rmqmon_dead_letters_total and the dead_letters table).",
        _slug(JobAlert.DEAD_LETTERS),
        keep_firing_for="",
    ),
    Alert(
        JobAlert.LABEL_CAP,
        "sum by (metric) (increase(rmqmon_label_values_dropped_total[15m])) > 0",
        "15m",
        "info",
        "{{ $labels.metric }} exports only label_value_cap groups or brokers.",
        "Updates of {{ $labels.metric }} for groups or brokers beyond metrics.label_value_cap are not exported: "
        "raise the cap if the fleet really has that many, or find what invents group names.",
        _slug(JobAlert.LABEL_CAP),
        keep_firing_for="",
    ),
)

# The alerts on the job's own health (its timestamps, rates and scrape): they judge a restart itself, so they have
# no keep_firing_for; every other alert reads what the job concluded about the fleet.
JOB_HEALTH = frozenset(a.name for a in ALERTS if not a.keep_firing_for)


@dataclass(frozen=True)
class Inhibition:
    """While ``source`` fires, Alertmanager holds back ``targets`` with the same ``equal`` labels: one incident, one
    page, naming its cause. The source is at least as severe as every target, so no page is lost."""

    source: str
    targets: tuple[str, ...]
    equal: tuple[str, ...]
    why: str


_A = ANOMALY_ALERTS
INHIBITIONS: tuple[Inhibition, ...] = (
    Inhibition(
        _A[AnomalyKind.DUPLICATE_CLIENT_ID].name,
        (
            _A[AnomalyKind.ORPHANED_QUEUES].name,
            _A[AnomalyKind.DOUBLE_OWNED_QUEUES].name,
            PROGRESS_ALERTS[QueueState.ORPHAN_CONFIRMED].name,
            PROGRESS_ALERTS[QueueState.DOUBLE_OWNED].name,
        ),
        ("cluster", "consumer_group"),
        "members with one client ID compute identical shares: the group's orphaned and doubly owned queues are "
        "the duplicate's effect",
    ),
    Inhibition(
        _A[AnomalyKind.FLAPPING_MEMBERS].name,
        (_A[AnomalyKind.REBALANCE_STORM].name,),
        ("cluster", "consumer_group"),
        "the flapping members' joins and leaves are the storm's rebalances, and the flapping episode names them",
    ),
)


def alertmanager_config() -> dict[str, object]:
    """An Alertmanager configuration with the inhibition rules (copy ``inhibit_rules`` into yours)."""
    rules = [
        {
            "source_matchers": [f'alertname="{i.source}"'],
            "target_matchers": ['alertname=~"' + "|".join(i.targets) + '"'],
            "equal": list(i.equal),
        }
        for i in INHIBITIONS
    ]
    return {
        "route": {"receiver": "default", "group_by": ["alertname", "cluster", "consumer_group"], "group_wait": "30s"},
        "receivers": [{"name": "default"}],
        "inhibit_rules": rules,
    }


def rule_file(runbook_url_base: str = RUNBOOK_URL_BASE) -> dict[str, object]:
    rules = [a.rule(runbook_url_base) for a in ALERTS]
    return {"groups": [{"name": "rocketmq-rebalance-monitor", "rules": rules}]}


# -- promtool unit tests -------------------------------------------------------------------------------------


def render_annotation(template: str, labels: dict[str, str], value: float) -> str:
    """What Prometheus renders for the few template forms the annotations above use."""
    text = re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels[m.group(1)], template)
    text = text.replace('{{ printf "%.0f" $value }}', f"{value:.0f}")
    return text.replace("{{ $value | humanizePercentage }}", f"{value * 100:.4g}%")


@dataclass(frozen=True)
class Case:
    """One promtool test: input series, and at ``eval_time`` the alert fires with ``fired`` (or not at all)."""

    alert: str
    title: str
    series: dict[str, str]
    eval_time: str
    fired: tuple[tuple[dict[str, str], float], ...] = ()  # (labels besides alertname/severity, $value)
    interval: str = "15s"
    extra: dict[str, object] = field(default_factory=dict)
    also_at: tuple[str, ...] = ()  # more evaluation times with the same expectation (a silent run: every minute)


J = f'job="{MONITOR_JOB}",instance="127.0.0.1:9464"'
# The RocketMQ cluster of the cases' groups and brokers (every such series names one).
CASE_CLUSTER = "east"
C = f'cluster="{CASE_CLUSTER}"'
# A restart of the job in the cases: its driver down for 90 s (6 scrapes; the alert-quality bench's restart took
# 86.5 s on a loaded machine), so Prometheus marks its series stale and has none until the restarted job exports
# them again.
RESTART_STEPS = 6
# The cap counter's series for one capped metric, as the alert tests feed it.
DROPPED_MEMBERS = f'{Metrics.LABEL_VALUES_DROPPED_TOTAL.name}{{{J},metric="{Metrics.GROUP_MEMBERS.name}"}}'
NAME = {kind: alert.name for kind, alert in ANOMALY_ALERTS.items()}  # the anomaly kinds' alerts, by kind
CASES: tuple[Case, ...] = (
    # orphaned queues: fires after 2m of orphans; a 20 s rebalance transient does not
    Case(
        NAME[AnomalyKind.ORPHANED_QUEUES],
        "orphans for 5 minutes fire",
        {
            f'rmqmon_group_queues{{{J},{C},consumer_group="g1",topic="t1",state="orphaned"}}': "0 0 3x40",
            f'rmqmon_group_queues{{{J},{C},consumer_group="g1",topic="t1",state="assigned"}}': "8 8 5x40",
        },
        "6m",
        ((({"cluster": CASE_CLUSTER, "consumer_group": "g1", "topic": "t1"}), 3),),
    ),
    # A job restart while it fires (keep_firing_for): the driver down for 90 s, its series stale then absent, then
    # restored: firing at every evaluation through it, one episode. A real resolution (orphans gone at 5m45s)
    # still resolves, keep_firing_for (5m) later.
    Case(
        NAME[AnomalyKind.ORPHANED_QUEUES],
        "orphans, and the job restarted for 90 s at 5m45s while the alert fires: firing throughout (one episode)",
        {
            f'rmqmon_group_queues{{{J},{C},consumer_group="g1",topic="t1",state="orphaned"}}': (
                "0 0 3x20 stale _x5 3x20"
            ),
            f'rmqmon_group_queues{{{J},{C},consumer_group="g1",topic="t1",state="assigned"}}': (
                "8 8 5x20 stale _x5 5x20"
            ),
        },
        "12m",
        ((({"cluster": CASE_CLUSTER, "consumer_group": "g1", "topic": "t1"}), 3),),
        also_at=tuple(f"{s}s" for s in range(150, 720, 15)),
    ),
    Case(
        NAME[AnomalyKind.ORPHANED_QUEUES],
        "orphans handed over at 5m45s: still firing at 10m30s (keep_firing_for 5m), resolved from 10m45s",
        {f'rmqmon_group_queues{{{J},{C},consumer_group="g1",topic="t1",state="orphaned"}}': "0 0 3x20 0x40"},
        "10m30s",
        ((({"cluster": CASE_CLUSTER, "consumer_group": "g1", "topic": "t1"}), 3),),
    ),
    Case(
        NAME[AnomalyKind.ORPHANED_QUEUES],
        "orphans handed over at 5m45s: resolved at 10m45s, keep_firing_for (5m) after",
        {f'rmqmon_group_queues{{{J},{C},consumer_group="g1",topic="t1",state="orphaned"}}': "0 0 3x20 0x40"},
        "10m45s",
    ),
    Case(
        NAME[AnomalyKind.ORPHANED_QUEUES],
        "a 30 s transient during a rebalance does not fire",
        {f'rmqmon_group_queues{{{J},{C},consumer_group="g1",topic="t1",state="orphaned"}}': "0 0 2 2 0x40"},
        "6m",
    ),
    Case(
        NAME[AnomalyKind.DOUBLE_OWNED_QUEUES],
        "double owners for 5 minutes fire",
        {f'rmqmon_group_queues{{{J},{C},consumer_group="g2",topic="t1",state="double_owned"}}': "2x40"},
        "5m",
        (({"cluster": CASE_CLUSTER, "consumer_group": "g2", "topic": "t1"}, 2),),
    ),
    Case(
        NAME[AnomalyKind.DOUBLE_OWNED_QUEUES],
        "none double-owned: silent",
        {f'rmqmon_group_queues{{{J},{C},consumer_group="g2",topic="t1",state="double_owned"}}': "0x40"},
        "5m",
    ),
    Case(
        NAME[AnomalyKind.DUPLICATE_CLIENT_ID],
        "a duplicate client id held for 5 minutes fires",
        {f'rmqmon_group_duplicate_client_ids{{{J},{C},consumer_group="ledger"}}': "1x40"},
        "5m",
        (({"cluster": CASE_CLUSTER, "consumer_group": "ledger"}, 1),),
    ),
    Case(
        NAME[AnomalyKind.DUPLICATE_CLIENT_ID],
        "a duplicate for one minute (restart overlap) does not fire",
        {f'rmqmon_group_duplicate_client_ids{{{J},{C},consumer_group="ledger"}}': "0 1 1 1 1 0x40"},
        "5m",
    ),
    Case(
        NAME[AnomalyKind.INCONSISTENT_SUBSCRIPTION],
        "an open inconsistent-subscription episode for 10 minutes fires",
        {f'rmqmon_group_open_anomalies{{{J},{C},consumer_group="mailer",anomaly="INCONSISTENT_SUBSCRIPTION"}}': "1x60"},
        "10m",
        (({"cluster": CASE_CLUSTER, "consumer_group": "mailer"}, 1),),
    ),
    Case(
        NAME[AnomalyKind.INCONSISTENT_SUBSCRIPTION],
        "a short episode during a rolling deploy does not fire",
        {
            f'rmqmon_group_open_anomalies{{{J},{C},consumer_group="mailer",anomaly="INCONSISTENT_SUBSCRIPTION"}}': "1x12 0x48"  # noqa: E501 (one series of the test)
        },
        "10m",
    ),
    Case(
        NAME[AnomalyKind.FLAPPING_MEMBERS],
        "an open flapping episode for 10 minutes fires",
        {f'rmqmon_group_open_anomalies{{{J},{C},consumer_group="cache",anomaly="FLAPPING_MEMBERS"}}': "1x60"},
        "10m",
        (({"cluster": CASE_CLUSTER, "consumer_group": "cache"}, 1),),
    ),
    Case(
        NAME[AnomalyKind.FLAPPING_MEMBERS],
        "an episode of 3 minutes does not fire",
        {f'rmqmon_group_open_anomalies{{{J},{C},consumer_group="cache",anomaly="FLAPPING_MEMBERS"}}': "1x12 0x48"},
        "10m",
    ),
    Case(
        NAME[AnomalyKind.ASSIGNMENT_MISMATCH],
        "clients holding other queues than they compute for 10 minutes fire",
        {f'rmqmon_group_open_anomalies{{{J},{C},consumer_group="ledger",anomaly="ASSIGNMENT_MISMATCH"}}': "1x60"},
        "10m",
        (({"cluster": CASE_CLUSTER, "consumer_group": "ledger"}, 1),),
    ),
    Case(
        NAME[AnomalyKind.ASSIGNMENT_MISMATCH],
        "a mismatch for 2 minutes (a slow rebalance after the grace) does not fire",
        {
            f'rmqmon_group_open_anomalies{{{J},{C},consumer_group="ledger",anomaly="ASSIGNMENT_MISMATCH"}}': (
                "0x4 1x8 0x48"
            )
        },
        "10m",
    ),
    Case(
        f"{PREFIX}BrokerAvoidedByMostProducers",
        "3 of 4 producers avoiding for 5 minutes fire",
        {f'rmqmon_broker_producers_avoiding_ratio{{{J},{C},broker="broker-b"}}': "0.75x40"},
        "5m",
        (({"cluster": CASE_CLUSTER, "broker": "broker-b"}, 0.75),),
    ),
    Case(
        f"{PREFIX}BrokerAvoidedByMostProducers",
        "3 of 4 producers avoiding, the job restarted for 90 s at 4m while it fires: firing throughout",
        {f'rmqmon_broker_producers_avoiding_ratio{{{J},{C},broker="broker-b"}}': "0.75x15 stale _x5 0.75x20"},
        "9m",
        (({"cluster": CASE_CLUSTER, "broker": "broker-b"}, 0.75),),
        also_at=tuple(f"{s}s" for s in range(120, 540, 15)),
    ),
    Case(
        f"{PREFIX}BrokerAvoidedByMostProducers",
        "a minority avoiding does not fire",
        {f'rmqmon_broker_producers_avoiding_ratio{{{J},{C},broker="broker-b"}}': "0.25x40"},
        "5m",
    ),
    Case(
        f"{PREFIX}ProducerAllBrokersUnavailable",
        "a producer with every broker unavailable for 3 minutes fires",
        {
            f"rmqmon_producers_all_brokers_unavailable{{{J},{C}}}": "2x40",
            f'rmqmon_producers_all_brokers_unavailable{{{J},cluster="west"}}': "0x40",
        },
        "3m",
        (({"cluster": CASE_CLUSTER}, 2),),
    ),
    Case(
        f"{PREFIX}ProducerAllBrokersUnavailable",
        "no such producer: silent",
        {f"rmqmon_producers_all_brokers_unavailable{{{J},{C}}}": "0x40"},
        "3m",
    ),
    Case(
        NAME[AnomalyKind.DIVERGING_BROKER_VIEWS],
        "views diverging for 10 minutes fire",
        {f'rmqmon_group_views_diverging{{{J},{C},consumer_group="risk"}}': "1x60"},
        "10m",
        (({"cluster": CASE_CLUSTER, "consumer_group": "risk"}, 1),),
    ),
    Case(
        NAME[AnomalyKind.DIVERGING_BROKER_VIEWS],
        "views diverging for one heartbeat round do not fire",
        {f'rmqmon_group_views_diverging{{{J},{C},consumer_group="risk"}}': "1x4 0x56"},
        "10m",
    ),
    Case(
        JobAlert.VIEW_STALE,
        "a broker's views stale for 5 minutes fire",
        {
            f'rmqmon_broker_stale_group_views{{{J},{C},broker="broker-b"}}': "0 0 12x40",
            f'rmqmon_broker_stale_group_views{{{J},{C},broker="broker-a"}}': "0x42",
        },
        "6m",
        (({"cluster": CASE_CLUSTER, "broker": "broker-b"}, 12),),
    ),
    Case(
        JobAlert.VIEW_STALE,
        "a poll late for one minute, then fresh again: silent",
        {f'rmqmon_broker_stale_group_views{{{J},{C},broker="broker-b"}}': "0 0 5x4 0x36"},
        "6m",
    ),
    Case(
        JobAlert.STALE,
        "no trigger since the start (a driver that hangs): fires after 5 + 5 minutes",
        {f'rmqmon_last_trigger_timestamp_seconds{{{J},query="consumer"}}': "0x80"},
        "15m",
        (({"instance": "127.0.0.1:9464", "query": "consumer"}, 900),),
    ),
    Case(
        JobAlert.STALE,
        "quiet producers: no send batch for 20 minutes, but idle triggers every 5 s: silent",
        {
            f'rmqmon_last_batch_timestamp_seconds{{{J},query="send-ingest"}}': "0x80",
            f'rmqmon_last_trigger_timestamp_seconds{{{J},query="send-ingest"}}': "0+15x80",
        },
        "15m",
        also_at=("6m", "11m"),
    ),
    Case(
        JobAlert.STALE,
        "one of two jobs stuck after 2 minutes: fires for that instance, the other one's triggers do not hide it",
        {
            f'rmqmon_last_trigger_timestamp_seconds{{{J},query="consumer"}}': "0+15x8 120x72",
            f'rmqmon_last_trigger_timestamp_seconds{{{J.replace("9464", "9465")},query="consumer"}}': "0+15x80",
        },
        "15m",
        (({"instance": "127.0.0.1:9464", "query": "consumer"}, 780),),
    ),
    Case(
        JobAlert.INPUT_SILENT,
        "the collector and agents stop publishing at minute 2: fires",
        {f'rmqmon_input_rows_total{{{J},query="consumer"}}': "0+40x8 320x72"},
        "15m",
        (({"instance": "127.0.0.1:9464"}, 0),),
    ),
    Case(
        JobAlert.INPUT_SILENT,
        "heartbeats and polls every 15 s, sends stopped: silent",
        {
            f'rmqmon_input_rows_total{{{J},query="consumer"}}': "0+40x80",
            f'rmqmon_input_rows_total{{{J},query="send-ingest"}}': "0x80",
        },
        "15m",
        also_at=("6m", "11m"),
    ),
    Case(
        JobAlert.RESTARTING,
        "a restart every 2.5 minutes fires",
        {f'rmqmon_query_restarts_total{{{J},query="send-ingest"}}': "0+0.1x120"},
        "25m",
        (({"query": "send-ingest"}, 6),),
    ),
    Case(
        JobAlert.RESTARTING,
        "one restart (a Kafka blip) is silent",
        {f'rmqmon_query_restarts_total{{{J},query="send-ingest"}}': "0x40 1x80"},
        "25m",
    ),
    Case(
        JobAlert.DOWN,
        "a failed scrape for 3 minutes fires",
        {f"up{{{J}}}": "0x20", f"rmqmon_up{{{J}}}": "1x20"},
        "3m",
        (({"job": MONITOR_JOB, "instance": "127.0.0.1:9464"}, 0),),
    ),
    Case(
        JobAlert.DOWN,
        "queries stopped (rmqmon_up 0) fires",
        {f"up{{{J}}}": "1x20", f"rmqmon_up{{{J}}}": "0x20"},
        "3m",
        (({"job": MONITOR_JOB, "instance": "127.0.0.1:9464"}, 0),),
    ),
    Case(
        JobAlert.DOWN,
        "never scraped (absent) fires",
        {'up{job="something-else",instance="x:1"}': "1x20"},
        "3m",
        (({"job": MONITOR_JOB}, 1),),
    ),
    Case(JobAlert.DOWN, "scraped and running: silent", {f"up{{{J}}}": "1x20", f"rmqmon_up{{{J}}}": "1x20"}, "3m"),
    Case(
        JobAlert.DEAD_LETTERS,
        "5% of the input rejected for 20 minutes fires",
        {
            f'rmqmon_dead_letters_total{{{J},query="consumer",reason="SCHEMA"}}': "0+5x120",
            f'rmqmon_input_rows_total{{{J},query="consumer"}}': "0+100x120",
        },
        "25m",
        (({"query": "consumer"}, 0.05),),
    ),
    Case(
        JobAlert.DEAD_LETTERS,
        "0.1% rejected: silent",
        {
            f'rmqmon_dead_letters_total{{{J},query="consumer",reason="SCHEMA"}}': "0+1x120",
            f'rmqmon_input_rows_total{{{J},query="consumer"}}': "0+1000x120",
        },
        "25m",
    ),
    Case(
        JobAlert.LABEL_CAP,
        "updates dropped by the cap for 20 minutes fire",
        {DROPPED_MEMBERS: "0+10x120"},
        "25m",
        (({"metric": Metrics.GROUP_MEMBERS.name}, 600),),
    ),
    Case(
        JobAlert.LABEL_CAP,
        "nothing dropped: silent",
        {DROPPED_MEMBERS: "0x120"},
        "25m",
    ),
)


# -- consume progress: series as the job exports them at each 30 s sample (scraped every 15 s), every state of a
# (group, topic) present, 0 included; the lag and the max time lag beside them.
STEPS = 60  # 15 minutes of 15 s samples


def progress_series(
    group: str, topic: str, states: dict[QueueState, str], lag: str, time_lag: str = ""
) -> dict[str, str]:
    """The series of one (group, topic): ``states`` the queues' counts by state (the others 0 throughout)."""
    labels = f'{J},{C},consumer_group="{group}",topic="{topic}"'
    series = {
        f'rmqmon_group_progress_queues{{{labels},state="{state}"}}': states.get(state, f"0x{STEPS}")
        for state in QueueState
    }
    series[f"rmqmon_group_progress_lag{{{labels}}}"] = lag
    series[f"rmqmon_group_progress_max_time_lag_seconds{{{labels}}}"] = time_lag or f"0x{STEPS}"
    return series


# Benign groups: no progress alert may fire on any of them.
BENIGN_PROGRESS: dict[str, dict[str, str]] = {
    "an idle group (lag 0, nothing written)": progress_series(
        "audit", "t1", {QueueState.IDLE: f"8x{STEPS}"}, f"0x{STEPS}"
    ),
    "an OK group whose lag builds up and drains, time lag over 180 s for a while": progress_series(
        "orders", "t1", {QueueState.OK: f"8x{STEPS}"}, "0+400x12 4800-400x12 0x36", "0+20x12 240-20x12 0x36"
    ),
    "a BROADCASTING / POP group (NOT_OWNED_MODEL) with a growing lag": progress_series(
        "notify", "t1", {QueueState.NOT_OWNED_MODEL: f"8x{STEPS}"}, "1000+50x60", "600+15x60"
    ),
    "a group the monitor cannot judge (UNKNOWN, INCOMPLETE, NO_OFFSET) with a lag": progress_series(
        "dark",
        "t1",
        {QueueState.UNKNOWN: f"4x{STEPS}", QueueState.INCOMPLETE: f"2x{STEPS}", QueueState.NO_OFFSET: f"2x{STEPS}"},
        "5000x60",
        "900x60",
    ),
    "a rewind at a rebalance (REBALANCE_REWIND, info)": progress_series(
        "cache", "t1", {QueueState.OK: "8x8 7x52", QueueState.REBALANCE_REWIND: "0x8 1x52"}, "0x8 300x52"
    ),
}


def _progress_cases() -> tuple[Case, ...]:
    orphan, stuck, rewind, double, hidden, slow = (
        PROGRESS_ALERTS[s].name
        for s in (
            QueueState.ORPHAN_CONFIRMED,
            QueueState.STUCK_HOLDER,
            QueueState.REWIND,
            QueueState.DOUBLE_OWNED,
            QueueState.HIDDEN_CONSUMER,
            QueueState.SLOW,
        )
    )
    offline = OFFLINE_GROUP_BACKLOG.name
    g, t = {"cluster": CASE_CLUSTER, "consumer_group": "g1", "topic": "t1"}, "t1"
    # A group whose members all die at 2 min while producers write: its queues turn ORPHAN_CONFIRMED and its
    # OFFLINE_GROUP_BACKLOG episode opens at the first sample without a member.
    offline_group = {
        **progress_series(
            "g1", t, {QueueState.OK: "8x8 0x52", QueueState.ORPHAN_CONFIRMED: "0x8 8x52"}, "0x8 100+100x51"
        ),
        f'rmqmon_group_open_anomalies{{{J},{C},consumer_group="g1",anomaly="{OFFLINE}"}}': "0x8 1x51",
    }
    cases = [
        Case(
            orphan,
            "3 queues go from OK to ORPHAN_CONFIRMED (a member lost its queues) and stay: fires",
            progress_series(
                "g1", t, {QueueState.OK: "8x8 5x52", QueueState.ORPHAN_CONFIRMED: "0x8 3x52"}, "0x8 0+30x51"
            ),
            "4m",
            ((g, 3),),
        ),
        Case(
            orphan,
            "ORPHAN_CONFIRMED at one sample, then handed over at a rebalance: silent",
            progress_series(
                "g1", t, {QueueState.OK: "8x8 5 5 8x50", QueueState.ORPHAN_CONFIRMED: "0x8 3 3 0x50"}, "0x8 90 90 0x50"
            ),
            "4m",
        ),
        Case(orphan, "a group with no member: the offline alert's, not this one", offline_group, "8m"),
        Case(
            orphan,
            "a non-subscriber's share, unconsumed while the group's inconsistent subscription is open: that "
            "alert's, not this one",
            {
                **progress_series(
                    "g1", t, {QueueState.OK: "8x8 4x52", QueueState.ORPHAN_CONFIRMED: "0x8 4x52"}, "0x8 100+100x51"
                ),
                f'rmqmon_group_open_anomalies{{{J},{C},consumer_group="g1",anomaly="{INCONSISTENT}"}}': "0x5 1x54",
            },
            "8m",
            also_at=("3m", "4m", "5m", "6m", "7m"),
        ),
        Case(
            stuck,
            "a holder's 2 queues STUCK_HOLDER after a whole window flat, and staying: fires",
            progress_series("g1", t, {QueueState.OK: "8x20 6x40", QueueState.STUCK_HOLDER: "0x20 2x40"}, "0x4 0+20x55"),
            "7m",
            ((g, 2),),
        ),
        Case(
            stuck,
            "a stuck holder, the job restarted for 90 s at 7m30s while it fires: firing throughout (one episode)",
            restarted(
                progress_series("g1", t, {QueueState.OK: "8x20 6x40", QueueState.STUCK_HOLDER: "0x20 2x40"}, "100x60"),
                30,
                RESTART_STEPS,
            ),
            "12m",
            ((g, 2),),
            also_at=tuple(f"{s}s" for s in range(390, 720, 15)),
        ),
        Case(
            stuck,
            "a stuck holder restarted after one sample: silent",
            progress_series(
                "g1", t, {QueueState.OK: "8x20 6 6 8x38", QueueState.STUCK_HOLDER: "0x20 2 2 0x38"}, "0x4 0+20x55"
            ),
            "7m",
        ),
        Case(
            rewind,
            "a queue's committed offset reset back and kept there: fires",
            progress_series("g1", t, {QueueState.OK: "8x8 7x52", QueueState.REWIND: "0x8 1x52"}, "0x8 5000x52"),
            "4m",
            ((g, 1),),
        ),
        Case(
            double,
            "2 queues held by two members for 4 minutes: fires",
            progress_series("g1", t, {QueueState.OK: "8x8 6x52", QueueState.DOUBLE_OWNED: "0x8 2x52"}, "0x60"),
            "5m",
            ((g, 2),),
        ),
        Case(
            double,
            "two holders for one minute during a rebalance: silent",
            progress_series("g1", t, {QueueState.OK: "8x8 6x4 8x48", QueueState.DOUBLE_OWNED: "0x8 2x4 0x48"}, "0x60"),
            "5m",
        ),
        Case(
            hidden,
            "4 queues consumed with no visible holder for 7 minutes: fires",
            progress_series("g1", t, {QueueState.OK: "8x8 4x52", QueueState.HIDDEN_CONSUMER: "0x8 4x52"}, "10x60"),
            "9m",
            ((g, 4),),
        ),
        Case(
            hidden,
            "a running-info call failing for 2 minutes: silent",
            progress_series(
                "g1", t, {QueueState.OK: "8x8 4x8 8x44", QueueState.HIDDEN_CONSUMER: "0x8 4x8 0x44"}, "10x60"
            ),
            "9m",
        ),
        Case(
            slow,
            "every queue SLOW, lag and time lag growing, for 7 minutes: fires",
            progress_series(
                "g1", t, {QueueState.OK: "8x20 0x40", QueueState.SLOW: "0x20 8x40"}, "100+50x59", "60+15x59"
            ),
            "12m",
            ((g, 8),),
        ),
        Case(
            slow,
            "SLOW for 3 minutes, then the group catches up: silent",
            progress_series(
                "g1", t, {QueueState.OK: "8x20 0x12 8x28", QueueState.SLOW: "0x20 8x12 0x28"}, "100+50x32 0x27"
            ),
            "12m",
        ),
        Case(
            offline,
            "every member dead at 2 min, producers writing: fires with the backlog",
            offline_group,
            "8m",
            (({"cluster": CASE_CLUSTER, "consumer_group": "g1"}, 2400),),  # the lag at 8 min: 100 + 100 x (32 - 9)
        ),
        Case(
            offline,
            "a recreate deploy: no member for 2 minutes, then consumers back: silent",
            {
                **progress_series("g1", t, {QueueState.OK: f"8x{STEPS}"}, "0x8 100+100x8 0x43"),
                f'rmqmon_group_open_anomalies{{{J},{C},consumer_group="g1",anomaly="{OFFLINE}"}}': "0x8 1x8 0x43",
            },
            "8m",
        ),
    ]
    for alert in (*PROGRESS_ALERTS.values(), OFFLINE_GROUP_BACKLOG):
        for title, series in BENIGN_PROGRESS.items():
            cases.append(Case(alert.name, f"{title}: silent", series, "15m"))
    return tuple(cases)


CASES += _progress_cases()


# -- scripted operations: the series the engine and the job's metric mapping produce for them -------------------
# (dashboards/scripted_series.py). Benign ones fire no group alert; incidents fire theirs once the episode has
# held for the alert's `for`.
GROUP_ALERTS = tuple(a for k, a in ANOMALY_ALERTS.items() if k != OFFLINE)
STEP_S = 15


@functools.cache
def scripted_cases() -> tuple[Case, ...]:
    """The cases of scripted operations (run on first use: each runs the engine over its script)."""
    cases: list[Case] = []
    for members in (5, 10, 20, 50):
        script = operations.rolling_restart(members)
        series = series_of(script, J, cluster=CASE_CLUSTER)
        cases += _silent_throughout(script)
    cases += _silent_throughout(operations.scale(4, 12))
    # A subscription rolled out member by member: until its last member runs it, the others' shares of the new
    # topic go to nobody -- the inconsistent subscription's queues, for less than its `for`: nothing pages.
    cases += _silent_throughout(operations.subscription_rollout(5))
    for script, kind in (
        (operations.crash_loop(5, crashes=30, same_id=False), AnomalyKind.REBALANCE_STORM),
        (operations.crash_loop(5, crashes=30, same_id=True), AnomalyKind.FLAPPING_MEMBERS),
        (operations.stale_holdings(), AnomalyKind.OBSERVED_DOUBLE_HOLDING),
        (operations.stale_holdings(), AnomalyKind.OBSERVED_UNHELD_QUEUES),
        (operations.inconsistent_subscription(3), AnomalyKind.INCONSISTENT_SUBSCRIPTION),  # last: used below
    ):
        alert = ANOMALY_ALERTS[kind]
        series = series_of(script, J, cluster=CASE_CLUSTER)
        key = next(k for k in series if f'anomaly="{kind}"' in k)
        fired_at = first_sustained(series[key], 1.0, _seconds(alert.for_) // STEP_S)
        assert fired_at is not None, f"{script.name}: {kind} never held for {alert.for_}"
        at = f"{(fired_at + 1) * STEP_S}s"
        fired = (({"cluster": CASE_CLUSTER, "consumer_group": "g1"}, 1.0),)
        cases.append(Case(alert.name, f"{script.name} (the engine's series): fires", series, at, fired))
        cases.append(_through_a_restart(alert, script.name, series, key, fired_at))
    # Clients that report holding what the allocation does not give them: the observed kinds fire (above), the
    # predicted ones (orphaned, double-owned queues) stay silent.
    stale = operations.stale_holdings()
    stale_series = series_of(stale, J, cluster=CASE_CLUSTER)
    for kind in (AnomalyKind.ORPHANED_QUEUES, AnomalyKind.DOUBLE_OWNED_QUEUES):
        cases.append(
            Case(
                NAME[kind],
                f"{stale.name} (the engine's series): seen, not predicted",
                stale_series,
                f"{stale.until_ms // 1000}s",
                also_at=tuple(f"{m}m" for m in range(1, stale.until_ms // 60_000)),
            )
        )
    # The same reports in a group whose consume progress is sampled (4 queues tracked, as the progress path
    # publishes them): the progress alerts page for those holders, the observed kinds stay silent throughout.
    steps = stale.until_ms // (STEP_S * 1000) + 1
    tracked = {**stale_series, **progress_series("g1", "t1", {QueueState.OK: f"4x{steps}"}, f"0x{steps}")}
    for kind in (AnomalyKind.OBSERVED_DOUBLE_HOLDING, AnomalyKind.OBSERVED_UNHELD_QUEUES):
        cases.append(
            Case(
                NAME[kind],
                f"{stale.name} (the engine's series), the group's progress sampled: silent",
                tracked,
                f"{stale.until_ms // 1000}s",
                also_at=tuple(f"{m}m" for m in range(1, stale.until_ms // 60_000)),
            )
        )
    # A member that never subscribes a topic the others do: its share is the inconsistent subscription's (which
    # fires above), never orphaned queues'.
    minutes = tuple(f"{m}m" for m in range(1, script.until_ms // 60_000))
    cases.append(
        Case(
            NAME[AnomalyKind.ORPHANED_QUEUES],
            f"{script.name} (the engine's series): the non-subscriber's share is not orphaned queues'",
            series,
            f"{script.until_ms // 1000}s",
            also_at=minutes,
        )
    )
    return tuple(cases)


def _through_a_restart(alert: Alert, title: str, series: dict[str, str], key: str, fired_at: int) -> Case:
    """The incident's series with the job restarted a minute after the alert fired: firing at every evaluation
    from then until a minute after the job is back (one firing episode: without keep_firing_for it would resolve
    in the gap and be pending again for its whole ``for`` after it)."""
    restart_at = fired_at + 4
    back = restart_at + RESTART_STEPS
    end = back + 4
    values = expand(series[key])
    assert len(values) > end and set(values[fired_at - 1 : end + 1]) == {1.0}, f"{title}: episode too short"
    return Case(
        alert.name,
        f"{alert.name}: {title} (the engine's series), the job restarted for {RESTART_STEPS * STEP_S} s while it "
        "fires: one firing episode",
        restarted(series, restart_at, RESTART_STEPS),
        f"{(end + 1) * STEP_S}s",
        (({"cluster": CASE_CLUSTER, "consumer_group": "g1"}, 1.0),),
        also_at=tuple(f"{(i + 1) * STEP_S}s" for i in range(fired_at, end)),
    )


def _silent_throughout(script: operations.Script) -> list[Case]:
    """Every group alert silent at every minute of the script's run (one that fired and resolved would show);
    the cases share one series, so ``test_file`` writes them as one promtool test."""
    series = series_of(script, J, cluster=CASE_CLUSTER)
    minutes = tuple(f"{m}m" for m in range(1, script.until_ms // 60_000))
    end = f"{script.until_ms // 1000}s"
    title = f"{script.name} (the engine's series): silent"
    return [Case(alert.name, title, series, end, also_at=minutes) for alert in GROUP_ALERTS]


def _seconds(duration: str) -> int:
    value, unit = re.fullmatch(r"(\d+)([smh])", duration).groups()  # type: ignore[union-attr]
    return int(value) * {"s": 1, "m": 60, "h": 3600}[unit]


def test_file(rule_file_name: str = "alerts.yml", runbook_url_base: str = RUNBOOK_URL_BASE) -> dict[str, object]:
    by_name = {a.name: a for a in ALERTS}
    tests: list[dict[str, object]] = []
    shared: dict[int, dict[str, object]] = {}  # id of a series shared by several cases -> their one test
    for case in (*CASES, *scripted_cases()):
        alert = by_name[case.alert]
        expected = [
            {
                "exp_labels": {"severity": alert.severity, **labels},
                "exp_annotations": {
                    "summary": render_annotation(alert.summary, labels, value),
                    "description": render_annotation(alert.description, labels, value),
                    "runbook_url": alert.runbook_url(runbook_url_base),
                },
            }
            for labels, value in case.fired
        ]
        checks = [
            {"eval_time": at, "alertname": case.alert, "exp_alerts": expected} for at in (*case.also_at, case.eval_time)
        ]
        test = shared.get(id(case.series))
        if test is not None and test["name"] == case.title:
            test["alert_rule_test"] += checks  # type: ignore[operator]
            continue
        test = {
            "name": case.title if case.also_at else f"{case.alert}: {case.title}",
            "interval": case.interval,
            "input_series": [{"series": s, "values": v} for s, v in case.series.items()],
            "alert_rule_test": checks,
        }
        if case.also_at:
            shared[id(case.series)] = test
        tests.append(test)
    return {"rule_files": [rule_file_name], "evaluation_interval": "15s", "tests": tests}
