"""One entry per anomaly kind: its severity, what it means, its runbook section and its alert.

The domain's findings take their severity from here, ``dashboards/alerts.py`` builds the kind's alert rule from
here, ``docs/runbook.md``'s index and ``docs/tables.md``'s list of kinds are rendered from here, so none of them
can disagree (``tests/unit/test_anomaly_catalogue.py`` fails if a kind's severity, alert or runbook anchor is
written anywhere else). Why each severity: ``docs/design/alert-catalogue.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from streaming.domain.vocabulary import AnomalyKind, Severity

ALERT_PREFIX = "RocketMQMonitor"
CLUSTER = "{{ $labels.cluster }}"
GROUP = "{{ $labels.consumer_group }}"
TOPIC = "{{ $labels.topic }}"
VALUE = '{{ printf "%.0f" $value }}'
QUERY_ANOMALIES = "rebalance-monitor query anomalies --cluster " + CLUSTER + " --group " + GROUP
# How long an alert on what the job concluded keeps firing once its condition is gone (Prometheus'
# ``keep_firing_for``): longer than a restart of the job, whose series are absent while its driver is down, so a
# restart neither resolves nor re-fires an open alert (Down pages a driver down for over 2 minutes). The price:
# a real resolution shows this much later. Why 5 minutes: ``docs/design/alert-quality.md``.
KEEP_FIRING_FOR = "5m"


@dataclass(frozen=True)
class AlertSpec:
    """A kind's Prometheus alert: name (without the prefix), expression, ``for``, annotation templates."""

    name: str
    expr: str
    for_: str
    summary: str
    description: str


@dataclass(frozen=True)
class AnomalySpec:
    kind: AnomalyKind
    severity: Severity
    meaning: str  # one sentence: the runbook index and docs/tables.md
    alert: AlertSpec | None  # None: recorded in the tables, never alerted (severity info)

    @property
    def alert_name(self) -> str | None:
        return None if self.alert is None else ALERT_PREFIX + self.alert.name

    @property
    def anchor(self) -> str:
        """The id of the kind's section in ``docs/runbook.md``: its alert's heading, else the kind's own."""
        return (self.alert_name or self.kind.value).lower()


def _open(kind: AnomalyKind) -> str:
    return f'max by (cluster, consumer_group) (rmqmon_group_open_anomalies{{anomaly="{kind}"}}) > 0'


# A group whose consume progress is sampled: its queues' holders come from the same running info, judged with
# their offsets, so the progress alerts (double owned, confirmed orphan, hidden consumer) page for what the
# observed kinds see, and the observed kinds' alerts only speak for groups without progress samples.
PROGRESS_TRACKED = "sum by (cluster, consumer_group) (rmqmon_group_progress_queues) > 0"


def _unless_progress_tracked(expr: str) -> str:
    return f"{expr}\nunless on (cluster, consumer_group)\n{PROGRESS_TRACKED}"


K = AnomalyKind
CATALOGUE: Mapping[AnomalyKind, AnomalySpec] = {
    spec.kind: spec
    for spec in (
        AnomalySpec(
            K.ORPHANED_QUEUES,
            Severity.CRITICAL,
            "queues of a topic that no member pulls as every client computes its share: their messages are not "
            "consumed (a queue that is the share of a member not subscribing the topic is the inconsistent "
            "subscription's)",
            AlertSpec(
                "OrphanedQueues",
                'max by (cluster, consumer_group, topic) (rmqmon_group_queues{state="orphaned"}) > 0',
                "2m",
                f"Queues of {TOPIC} that no member of {GROUP} consumes.",
                f"{VALUE} queue(s) of topic {TOPIC} have no owner in consumer group {GROUP} as every client "
                "computes its share: their messages are not consumed and lag grows.",
            ),
        ),
        AnomalySpec(
            K.DOUBLE_OWNED_QUEUES,
            Severity.WARNING,
            "queues of a topic that two or more members pull: their messages are consumed twice",
            AlertSpec(
                "DoubleOwnedQueues",
                'max by (cluster, consumer_group, topic) (rmqmon_group_queues{state="double_owned"}) > 0',
                "2m",
                f"Queues of {TOPIC} consumed by two or more members of {GROUP}.",
                f"{VALUE} queue(s) of topic {TOPIC} are pulled by more than one member of {GROUP}: their messages "
                "are consumed twice and offsets are committed by both. Nothing is lost (RocketMQ delivers at least "
                "once); a non-idempotent consumer needs the cause fixed today.",
            ),
        ),
        AnomalySpec(
            K.DUPLICATE_CLIENT_ID,
            Severity.CRITICAL,
            "one client ID presented by several connections: those members compute identical shares, so queues "
            "go orphaned and doubly owned",
            AlertSpec(
                "DuplicateClientIds",
                "max by (cluster, consumer_group) (rmqmon_group_duplicate_client_ids) > 0",
                "2m",
                f"Several connections of {GROUP} present the same client ID.",
                f"{VALUE} client ID(s) of consumer group {GROUP} are held by more than one connection (typically "
                "containers with host networking and PID 1): the members compute identical shares, so some queues "
                "are consumed by nobody and others twice. This alert inhibits the group's orphaned and double-owned "
                "queue alerts: it is their cause.",
            ),
        ),
        AnomalySpec(
            K.INCONSISTENT_SUBSCRIPTION,
            Severity.CRITICAL,
            "members of one group subscribe different topics: the non-subscribers' shares go to nobody (those "
            "queues are this anomaly's, not orphaned queues' episodes) and the broker's one subscription table per "
            "group flips with each member's heartbeat (those flips are this anomaly's, not rebalances of a storm)",
            AlertSpec(
                "InconsistentSubscriptions",
                _open(K.INCONSISTENT_SUBSCRIPTION),
                "5m",
                f"Members of {GROUP} subscribe different topics: their shares of a topic go to nobody.",
                f"Consumer group {GROUP} has members whose subscriptions differ: queues of a topic are shared among "
                "all members, so the shares of those that do not subscribe it are consumed by nobody (the "
                "episode's unpulled_queues), and the broker's subscription table of the group flips with every "
                "member's heartbeat. A subscription rolled out member by member does this until its last member "
                "runs it; the 5 minute `for` lets such a rollout finish. The episode's details name the "
                f"non-subscribers: {QUERY_ANOMALIES}.",
            ),
        ),
        AnomalySpec(
            K.DIVERGING_BROKER_VIEWS,
            Severity.WARNING,
            "brokers hold different member lists for the group: clients asking different brokers compute "
            "different shares",
            AlertSpec(
                "DivergingBrokerViews",
                "max by (cluster, consumer_group) (rmqmon_group_views_diverging) > 0",
                "5m",
                f"Brokers disagree about the members of {GROUP}.",
                f"Brokers have held different member lists for consumer group {GROUP} for longer than a heartbeat "
                "round: clients that ask different brokers compute different shares (orphaned or doubly consumed "
                "queues).",
            ),
        ),
        AnomalySpec(
            K.REBALANCE_STORM,
            Severity.WARNING,
            "the group keeps rebalancing without converging: more membership or route changes within the storm "
            "window than members joining, leaving or restarting once explain (anomalies.storm_threshold)",
            AlertSpec(
                "RebalanceStorm",
                _open(K.REBALANCE_STORM),
                "5m",
                f"Consumer group {GROUP} keeps rebalancing without converging.",
                f"Consumer group {GROUP} is in a rebalance storm: members keep joining and leaving again (crash "
                "loops, short-lived members, an oscillating autoscaler) or its routes keep changing, beyond what a "
                "deploy or a scaling causes. Every rebalance pauses consumption of the moved queues. The episode's "
                f"details name the members that did not settle: {QUERY_ANOMALIES}.",
            ),
        ),
        AnomalySpec(
            K.FLAPPING_MEMBERS,
            Severity.WARNING,
            "a member that joined or left more than anomalies.flapping_threshold times within the flapping window",
            AlertSpec(
                "FlappingMembers",
                _open(K.FLAPPING_MEMBERS),
                "5m",
                f"Members of {GROUP} keep joining and leaving.",
                f"Consumer group {GROUP} has member(s) that joined or left more often than the flapping threshold "
                "allows within its window (crash loops, dropped connections): each join and leave rebalances the "
                f"whole group. The episode's details name the client IDs: {QUERY_ANOMALIES}.",
            ),
        ),
        AnomalySpec(
            K.ASSIGNMENT_MISMATCH,
            Severity.WARNING,
            "clients report holding other queues than they compute (only after membership.convergence_grace_ms, "
            "and only reports taken after the group's latest generation plus membership.client_rebalance_delay_ms)",
            AlertSpec(
                "AssignmentMismatch",
                _open(K.ASSIGNMENT_MISMATCH),
                "5m",
                f"Members of {GROUP} hold other queues than they should compute.",
                f"What clients of consumer group {GROUP} report holding (their running info) differs from what "
                "they compute with the group's strategy, long after the convergence grace: a client on another "
                "strategy or version, a stuck rebalance, an orderly lock held elsewhere. The episode's details name "
                f"each client with its missing and unexpected queues: {QUERY_ANOMALIES}.",
            ),
        ),
        AnomalySpec(
            K.OBSERVED_DOUBLE_HOLDING,
            Severity.WARNING,
            "queues two or more clients report holding at once, for membership.observed_grace_ms, in reports taken "
            "after the group's latest generation plus membership.client_rebalance_delay_ms: seen, not predicted",
            AlertSpec(
                "ObservedDoubleHolding",
                _unless_progress_tracked(_open(K.OBSERVED_DOUBLE_HOLDING)),
                "2m",
                f"Clients of {GROUP} report holding the same queues.",
                f"Two or more clients of consumer group {GROUP} report holding the same queues (their running "
                "info or agent reports, taken well after the group's last rebalance): those queues are pulled and "
                "consumed twice now, whatever the computed allocation says (a client on a stale route or member "
                "list, another strategy, a stuck rebalance). The episode's details name each queue with its "
                f"holders: {QUERY_ANOMALIES}. Silent for a group whose consume progress is sampled: "
                "ProgressDoubleOwned pages for it there.",
            ),
        ),
        AnomalySpec(
            K.OBSERVED_UNHELD_QUEUES,
            Severity.CRITICAL,
            "queues no client holds while every subscriber's report counts (taken after the group's latest "
            "generation plus membership.client_rebalance_delay_ms), for membership.observed_grace_ms: seen, not "
            "predicted",
            AlertSpec(
                "ObservedUnheldQueues",
                _unless_progress_tracked(_open(K.OBSERVED_UNHELD_QUEUES)),
                "2m",
                f"No client of {GROUP} reports holding some queues.",
                f"Every client of consumer group {GROUP} reported what it holds, well after the group's last "
                "rebalance, and none holds some queues: nobody consumes them now, whatever the computed allocation "
                "says (a client on a stale route or member list, a failed rebalance). The episode's details name "
                f"the queues: {QUERY_ANOMALIES}. Silent for a group whose consume progress is sampled: there the "
                "queues' offsets tell whether messages wait (ProgressOrphanConfirmed) or someone unseen consumes "
                "them (ProgressHiddenConsumer).",
            ),
        ),
        AnomalySpec(
            K.UNKNOWN_STRATEGY,
            Severity.INFO,
            "a strategy the monitor cannot compute: nothing is expected of the group (its consume progress is "
            "still judged)",
            None,
        ),
        AnomalySpec(
            K.OFFLINE_GROUP_BACKLOG,
            Severity.CRITICAL,
            "no member on any broker while consume progress shows messages waiting; judged at each progress "
            "sample of the group",
            AlertSpec(
                "OfflineGroupBacklog",
                "sum by (cluster, consumer_group) (rmqmon_group_progress_lag)\nand on (cluster, consumer_group)\n"
                + _open(K.OFFLINE_GROUP_BACKLOG),
                "5m",
                f"Consumer group {GROUP} has no member while messages wait for it.",
                f"{VALUE} message(s) wait for consumer group {GROUP}, which has no member on any broker (its "
                f"{K.OFFLINE_GROUP_BACKLOG} episode is open): nobody consumes them. Confirm: "
                f"rebalance-monitor query progress --cluster {CLUSTER} --group {GROUP}.",
            ),
        ),
        AnomalySpec(
            K.ROLLING_DEPLOY,
            Severity.INFO,
            "members replaced one by one (each old member gone or restarted once, each new one stable): a deploy, "
            "recorded and never alerted",
            None,
        ),
    )
}


def severity_of(kind: AnomalyKind) -> Severity:
    return CATALOGUE[kind].severity


# What an expression selecting "open anomalies worth a look" leaves out: the kinds recorded, never alerted.
RECORDED_ONLY = tuple(k for k, spec in CATALOGUE.items() if spec.alert is None)
