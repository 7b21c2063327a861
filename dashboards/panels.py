# ruff: noqa: E501 -- the panel tables read best with each query on one line
"""The monitor's Grafana dashboards, as plain dicts: overview, group drill-down, broker faults, monitor health.

General to specific: the overview answers "is anything wrong" — its first row the open anomalies (each group
linking to its dashboard), the monitor's firing alerts and the coverage the answers rest on (stale broker views,
the oldest poll, the job's freshness and Kafka backlog), then orphaned queues, isolated brokers and consume
progress; the group drill-down shows one group's members, owner states,
skew and churn, and a row of its consume progress (lag, time lag, queues by progress state); broker faults
shows isolation as producers see it and the send-latency histogram whose buckets are the fault table's
thresholds; monitor health shows the job itself.

Every dashboard has a ``${datasource}`` variable of type prometheus, ``job`` and ``instance`` variables
(Grafana's dashboard-linter expects them on every query), ``label_values`` variables for clusters, groups,
topics, brokers and queries (every fleet series names its RocketMQ cluster: the fleet dashboards filter by it), a unit and a description on every panel, and ``$__rate_interval`` in every
``rate``/``increase``; counters are always aggregated with ``rate``/``increase`` before display.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from connectors.metric_catalogue import Metrics, MetricSpec
from dashboards.alerts import PROGRESS_ALERTS
from streaming.domain.anomaly_catalogue import RECORDED_ONLY

DS = {"type": "prometheus", "uid": "${datasource}"}
SEL = 'job=~"$job", instance=~"$instance"'
# Every series naming a group, broker, topic or producer names its RocketMQ cluster (docs/metrics.md): the fleet
# dashboards filter them by a ``cluster`` variable too.
CL = f'{SEL}, cluster=~"$cluster"'


def cluster_variable(metric: MetricSpec) -> tuple[str, str, str]:
    """The ``cluster`` variable: the clusters ``metric``'s series name (first of the variables it chains)."""
    return ("cluster", "Cluster", f"label_values({metric.name}{{{SEL}}}, cluster)")


# The anomaly kinds that alert (the others are recorded, never alerted: a rolling deploy, an unknown strategy).
ALERTING_KINDS = 'anomaly!~"' + "|".join(RECORDED_ONLY) + '"'
TAGS = ["rocketmq", "rebalance-monitor"]


@dataclass(frozen=True)
class Panel:
    title: str
    description: str
    unit: str
    targets: tuple[tuple[str, str], ...]  # (expr, legend)
    kind: str = "timeseries"  # timeseries | stat | state-timeline | heatmap | table | alertlist
    width: int = 12
    height: int = 8
    target_units: tuple[str, ...] = ()  # a unit per target where they differ (else ``unit`` for all)
    links: tuple[tuple[str, str], ...] = ()  # (title, url) data links of every value


# The group dashboard, opened on one group from a panel's row or series (its ``consumer_group`` label).
GROUP_LINK = (
    "Consumer group dashboard",
    "/d/rmqmon-group?var-consumer_group=${__data.fields.consumer_group}&var-cluster=${__data.fields.cluster}&${__url_time_range}",
)
# The alerts the firing-alerts list shows: the monitor's own rules (dashboards/alerts.py names them all so).
ALERT_NAME_PREFIX = "RocketMQMonitor"


def _variable(name: str, label: str, query: str) -> dict[str, object]:
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DS,
        "query": {"query": query, "refId": f"{name}-variable"},
        "definition": query,
        "refresh": 2,
        "multi": True,
        "includeAll": True,
        "allValue": ".+",
        "sort": 1,
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        "options": [],
        "hide": 0,
    }


def _templating(extra: Iterable[tuple[str, str, str]]) -> dict[str, object]:
    variables: list[dict[str, object]] = [
        {
            "name": "datasource",
            "label": "Data source",
            "type": "datasource",
            "query": "prometheus",
            "current": {},
            "hide": 0,
            "options": [],
            "refresh": 1,
            "regex": "",
        },
        _variable("job", "Job", "label_values(rmqmon_up, job)"),
        _variable("instance", "Instance", 'label_values(rmqmon_up{job=~"$job"}, instance)'),
    ]
    variables += [_variable(name, label, query) for name, label, query in extra]
    return {"list": variables}


def _panel(panel: Panel, panel_id: int, x: int, y: int) -> dict[str, object]:
    shape = {"format": "table", "instant": True, "range": False} if panel.kind == "table" else {"range": True}
    targets = [
        {
            "datasource": DS,
            "expr": expr,
            "legendFormat": legend,
            "refId": chr(ord("A") + i),
            **shape,
            **({"format": "heatmap"} if panel.kind == "heatmap" else {}),
        }
        for i, (expr, legend) in enumerate(panel.targets)
    ]
    overrides = [
        {"matcher": {"id": "byFrameRefID", "options": chr(ord("A") + i)}, "properties": [{"id": "unit", "value": u}]}
        for i, u in enumerate(panel.target_units)
    ]
    defaults: dict[str, object] = {"unit": panel.unit}
    if panel.links:
        defaults["links"] = [{"title": title, "url": url} for title, url in panel.links]
    body: dict[str, object] = {
        "id": panel_id,
        "type": panel.kind,
        "title": panel.title,
        "description": panel.description,
        "datasource": DS,
        "targets": targets,
        "gridPos": {"h": panel.height, "w": panel.width, "x": x, "y": y},
        "fieldConfig": {"defaults": defaults, "overrides": overrides},
    }
    if panel.kind == "stat":
        body["options"] = {
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "colorMode": "value",
            "graphMode": "area",
        }
    elif panel.kind == "heatmap":
        body["options"] = {"calculate": False, "yAxis": {"unit": panel.unit}, "cellGap": 1}
    elif panel.kind == "table":
        body["options"] = {"showHeader": True, "sortBy": [{"displayName": "consumer_group", "desc": False}]}
        body["transformations"] = [{"id": "organize", "options": {"excludeByName": {"Time": True}}}]
    elif panel.kind == "alertlist":
        body["options"] = {
            "viewMode": "list",
            "groupMode": "default",
            "groupBy": [],
            "maxItems": 50,
            "sortOrder": 1,
            "dashboardAlerts": False,
            "alertName": ALERT_NAME_PREFIX,
            "alertInstanceLabelFilter": "",
            "stateFilter": {"firing": True, "pending": True, "noData": False, "normal": False, "error": True},
        }
    elif panel.kind == "timeseries":
        body["options"] = {
            "legend": {"displayMode": "table", "placement": "bottom", "calcs": ["lastNotNull", "max"]},
            "tooltip": {"mode": "multi", "sort": "desc"},
        }
    return body


def dashboard(
    uid: str, title: str, description: str, panels: list[Panel], variables: Iterable[tuple[str, str, str]] = ()
) -> dict[str, object]:
    laid_out, x, y, row_height = [], 0, 0, 0
    for i, panel in enumerate(panels, start=1):
        if x + panel.width > 24:
            x, y, row_height = 0, y + row_height, 0
        laid_out.append(_panel(panel, i, x, y))
        x, row_height = x + panel.width, max(row_height, panel.height)
    return {
        "uid": uid,
        "title": title,
        "description": description,
        "tags": TAGS,
        "editable": False,
        "schemaVersion": 39,
        "version": 1,
        "timezone": "utc",
        "refresh": "30s",
        "graphTooltip": 1,
        "time": {"from": "now-3h", "to": "now"},
        "timepicker": {},
        "annotations": {"list": []},
        "links": [{"title": "RocketMQ rebalance monitor", "type": "dashboards", "tags": TAGS, "asDropdown": True}],
        "templating": _templating(variables),
        "panels": laid_out,
    }


G = f'{CL}, consumer_group=~"$consumer_group"'
GT = f'{G}, topic=~"$topic"'
B = f'{CL}, broker=~"$broker"'
Q = f'{SEL}, query=~"$query"'


def overview() -> dict[str, object]:
    return dashboard(
        "rmqmon-overview",
        "RocketMQ rebalance monitor / Overview",
        "Is anything wrong with the fleet's consumer groups, brokers or the monitor itself?",
        [
            Panel(
                "Open anomalies",
                "Every group with an open anomaly episode of a kind that alerts, by kind (the value: open episodes); "
                "a group opens its own dashboard. The episodes themselves: rebalance-monitor query anomalies.",
                "none",
                (
                    (
                        f"max by (cluster, consumer_group, anomaly) (rmqmon_group_open_anomalies{{{CL}, {ALERTING_KINDS}}}) > 0",
                        "{{cluster}} {{consumer_group}} {{anomaly}}",
                    ),
                ),
                "table",
                9,
                8,
                links=(GROUP_LINK,),
            ),
            Panel(
                "Firing alerts",
                f"The monitor's alerts ({ALERT_NAME_PREFIX}*) firing or pending now, from the alert rules the data "
                "source evaluates; each names its runbook section.",
                "none",
                (),
                "alertlist",
                9,
                8,
            ),
            Panel(
                "Coverage",
                "What the answers above rest on: broker views kept as last seen because their polls stopped (a "
                "collector or broker down), seconds since the oldest broker's last poll, seconds since the slowest "
                "query's last micro-batch, and Kafka offsets the job has yet to read.",
                "none",
                (
                    (f"sum(rmqmon_broker_stale_group_views{{{CL}}}) or vector(0)", "stale broker views"),
                    (f"time() - min(rmqmon_broker_last_poll_timestamp_seconds{{{CL}}})", "oldest poll"),
                    (f"time() - min(rmqmon_last_batch_timestamp_seconds{{{SEL}}})", "job freshness"),
                    (f"sum(rmqmon_kafka_offsets_behind{{{SEL}}}) or vector(0)", "offsets behind"),
                ),
                "stat",
                6,
                8,
                target_units=("none", "s", "s", "none"),
            ),
            Panel(
                "Groups with open anomalies",
                "Consumer groups with at least one open anomaly episode of a kind that alerts (a rolling deploy, "
                "recorded as an info episode, does not count).",
                "none",
                (
                    (
                        f"count(max by (cluster, consumer_group) (rmqmon_group_open_anomalies{{{CL}, {ALERTING_KINDS}}}) > 0)"
                        " or vector(0)",
                        "groups",
                    ),
                ),
                "stat",
                4,
                5,
            ),
            Panel(
                "Orphaned queues",
                "Queues no member consumes, over all groups and topics (unconsumed messages).",
                "none",
                ((f'sum(rmqmon_group_queues{{{CL}, state="orphaned"}}) or vector(0)', "orphaned"),),
                "stat",
                5,
                5,
            ),
            Panel(
                "Double-owned queues",
                "Queues two or more members consume, over all groups (double consumption).",
                "none",
                ((f'sum(rmqmon_group_queues{{{CL}, state="double_owned"}}) or vector(0)', "double-owned"),),
                "stat",
                5,
                5,
            ),
            Panel(
                "Isolated brokers",
                "Brokers that at least one producer currently avoids.",
                "none",
                ((f"sum(rmqmon_broker_isolated{{{CL}}}) or vector(0)", "brokers"),),
                "stat",
                5,
                5,
            ),
            Panel(
                "Producers with no broker",
                "Producers for which every broker is unavailable.",
                "none",
                ((f"max(rmqmon_producers_all_brokers_unavailable{{{CL}}})", "producers"),),
                "stat",
                5,
                5,
            ),
            Panel(
                "Open anomalies by kind",
                "Open anomaly episodes over all groups, by kind.",
                "none",
                ((f"sum by (anomaly) (rmqmon_group_open_anomalies{{{CL}}})", "{{anomaly}}"),),
            ),
            Panel(
                "Rebalances (top 10 groups)",
                "Rebalances per second of the ten most rebalancing groups.",
                "cps",
                (
                    (
                        f"topk(10, sum by (cluster, consumer_group) (rate(rmqmon_group_rebalances_total{{{CL}}}[$__rate_interval])))",
                        "{{cluster}} {{consumer_group}}",
                    ),
                ),
            ),
            Panel(
                "Queues by owner state",
                "Queues over all groups by owner state (assigned, orphaned, double_owned).",
                "none",
                ((f"sum by (state) (rmqmon_group_queues{{{CL}}})", "{{state}}"),),
            ),
            Panel(
                "Producers avoiding each broker",
                "Fraction of the producers sending to a broker that avoid it.",
                "percentunit",
                (
                    (
                        f"max by (cluster, broker) (rmqmon_broker_producers_avoiding_ratio{{{CL}}})",
                        "{{cluster}} {{broker}}",
                    ),
                ),
            ),
            Panel(
                "Queues by progress state",
                f"Tracked queues over all groups by consume-progress state; {', '.join(PROGRESS_ALERTS)} alert.",
                "none",
                ((f"sum by (state) (rmqmon_group_progress_queues{{{CL}}}) > 0", "{{state}}"),),
            ),
            Panel(
                "Consume lag (top 10 groups)",
                "Messages waiting per group, summed over its topics' tracked queues, for the ten groups most behind.",
                "none",
                (
                    (
                        f"topk(10, sum by (cluster, consumer_group) (rmqmon_group_progress_lag{{{CL}}}))",
                        "{{cluster}} {{consumer_group}}",
                    ),
                ),
            ),
        ],
        [cluster_variable(Metrics.GROUP_MEMBERS)],
    )


def group_drilldown() -> dict[str, object]:
    return dashboard(
        "rmqmon-group",
        "RocketMQ rebalance monitor / Consumer group",
        "One consumer group: members, owner states per topic, skew, rebalances and churn.",
        [
            Panel(
                "Members",
                "Distinct client IDs in the group's merged broker view.",
                "none",
                (
                    (
                        f"max by (cluster, consumer_group) (rmqmon_group_members{{{G}}})",
                        "{{cluster}} {{consumer_group}}",
                    ),
                ),
            ),
            Panel(
                "Duplicate client IDs and channels",
                "Client IDs held by several connections, and cidAll entries (channels on one broker).",
                "none",
                (
                    (
                        f"max by (cluster, consumer_group) (rmqmon_group_duplicate_client_ids{{{G}}})",
                        "{{cluster}} {{consumer_group}} duplicates",
                    ),
                    (
                        f"max by (cluster, consumer_group) (rmqmon_group_channels{{{G}}})",
                        "{{cluster}} {{consumer_group}} channels",
                    ),
                ),
            ),
            Panel(
                "Queues by owner state",
                "Queues of each subscribed topic by owner state.",
                "none",
                (
                    (
                        f"sum by (cluster, consumer_group, topic, state) (rmqmon_group_queues{{{GT}}})",
                        "{{cluster}} {{consumer_group}} {{topic}} {{state}}",
                    ),
                ),
            ),
            Panel(
                "Skew",
                "Most minus fewest queues per subscribing member, per topic.",
                "none",
                (
                    (
                        f"max by (cluster, consumer_group, topic) (rmqmon_group_skew_queues{{{GT}}})",
                        "{{cluster}} {{consumer_group}} {{topic}}",
                    ),
                ),
            ),
            # consume progress: one row of three per (group, topic)
            Panel(
                "Consume lag",
                "Messages waiting in the topic's tracked queues (broker minus consumer offset at each queue's latest "
                "answered sample, summed; consume_progress).",
                "none",
                (
                    (
                        f"sum by (cluster, consumer_group, topic) (rmqmon_group_progress_lag{{{GT}}})",
                        "{{cluster}} {{consumer_group}} {{topic}}",
                    ),
                ),
                width=8,
            ),
            Panel(
                "Max time lag",
                "How long ago the oldest unconsumed message of the topic was stored: the largest interpolated "
                "estimate among its queues (a lower bound when older than their samples).",
                "s",
                (
                    (
                        f"max by (cluster, consumer_group, topic) (rmqmon_group_progress_max_time_lag_seconds{{{GT}}})",
                        "{{cluster}} {{consumer_group}} {{topic}}",
                    ),
                ),
                width=8,
            ),
            Panel(
                "Queues by progress state",
                "Tracked queues of each topic by consume-progress state (OK, IDLE, ORPHAN_CONFIRMED, STUCK_HOLDER, "
                "SLOW, ...); query progress --group G names the queues, their cause and holders.",
                "none",
                (
                    (
                        f"sum by (cluster, consumer_group, topic, state) (rmqmon_group_progress_queues{{{GT}}}) > 0",
                        "{{cluster}} {{consumer_group}} {{topic}} {{state}}",
                    ),
                ),
                width=8,
            ),
            Panel(
                "Idle and non-subscribing members",
                "Subscribing members without a queue; members not subscribing.",
                "none",
                (
                    (
                        f"max by (cluster, consumer_group, topic) (rmqmon_group_idle_members{{{GT}}})",
                        "{{cluster}} {{consumer_group}} {{topic}} idle",
                    ),
                    (
                        f"max by (cluster, consumer_group, topic) (rmqmon_group_non_subscribing_members{{{GT}}})",
                        "{{cluster}} {{consumer_group}} {{topic}} not subscribing",
                    ),
                ),
            ),
            Panel(
                "Rebalances",
                "Rebalances (new generations) per second.",
                "cps",
                (
                    (
                        f"sum by (cluster, consumer_group) (rate(rmqmon_group_rebalances_total{{{G}}}[$__rate_interval]))",
                        "{{cluster}} {{consumer_group}}",
                    ),
                ),
            ),
            Panel(
                "Moved queues",
                "Queues per second whose expected owner changed at a rebalance (churn).",
                "cps",
                (
                    (
                        f"sum by (cluster, consumer_group, topic) (rate(rmqmon_group_moved_queues_total{{{GT}}}[$__rate_interval]))",
                        "{{cluster}} {{consumer_group}} {{topic}}",
                    ),
                ),
            ),
            Panel(
                "Open anomalies",
                "Open anomaly episodes of the group by kind.",
                "none",
                (
                    (
                        f"sum by (cluster, consumer_group, anomaly) (rmqmon_group_open_anomalies{{{G}}})",
                        "{{cluster}} {{consumer_group}} {{anomaly}}",
                    ),
                ),
            ),
            Panel(
                "Broker views diverging",
                "1 while brokers disagree about the group's members.",
                "bool",
                (
                    (
                        f"max by (cluster, consumer_group) (rmqmon_group_views_diverging{{{G}}})",
                        "{{cluster}} {{consumer_group}}",
                    ),
                ),
            ),
            Panel(
                "Last rebalance",
                "Event time of the group's last rebalance.",
                "dateTimeFromNow",
                (
                    (
                        f"max by (cluster, consumer_group) (rmqmon_group_last_rebalance_timestamp_seconds{{{G}}}) * 1000",
                        "{{cluster}} {{consumer_group}}",
                    ),
                ),
                "stat",
                12,
                6,
            ),
            Panel(
                "Generation",
                "The group's current generation number.",
                "none",
                (
                    (
                        f"max by (cluster, consumer_group) (rmqmon_group_generation{{{G}}})",
                        "{{cluster}} {{consumer_group}}",
                    ),
                ),
                "stat",
                12,
                6,
            ),
        ],
        [
            cluster_variable(Metrics.GROUP_MEMBERS),
            ("consumer_group", "Consumer group", f"label_values(rmqmon_group_members{{{CL}}}, consumer_group)"),
            ("topic", "Topic", f"label_values(rmqmon_group_queues{{{G}}}, topic)"),
        ],
    )


def broker_faults() -> dict[str, object]:
    bucket = f"rmqmon_broker_send_latency_seconds_bucket{{{B}}}"
    return dashboard(
        "rmqmon-brokers",
        "RocketMQ rebalance monitor / Broker faults",
        "Brokers as producers see them: latency fault isolation, avoidance, send latency by fault-table level.",
        [
            Panel(
                "Isolated",
                "1 while at least one producer's latency fault item makes the broker unavailable.",
                "bool",
                ((f"max by (cluster, broker) (rmqmon_broker_isolated{{{B}}})", "{{cluster}} {{broker}}"),),
                "state-timeline",
                24,
                6,
            ),
            Panel(
                "Producers avoiding",
                "Producers whose fault item makes the broker unavailable now, beside the "
                "producers that have a fault item for it (they sent to it and were not evicted).",
                "none",
                (
                    (
                        f"sum by (cluster, broker) (rmqmon_broker_producers_avoiding{{{B}}})",
                        "{{cluster}} {{broker}} avoiding",
                    ),
                    (f"sum by (cluster, broker) (rmqmon_broker_producers_seen{{{B}}})", "{{cluster}} {{broker}} seen"),
                ),
            ),
            Panel(
                "Fraction of producers avoiding",
                "Avoiding producers / producers that sent to the broker.",
                "percentunit",
                (
                    (
                        f"max by (cluster, broker) (rmqmon_broker_producers_avoiding_ratio{{{B}}})",
                        "{{cluster}} {{broker}}",
                    ),
                ),
            ),
            Panel(
                "Send latency heatmap",
                "Sends per second by latency bucket; buckets are the fault table's latencyMax thresholds.",
                "s",
                ((f"sum by (le) (rate({bucket}[$__rate_interval]))", "{{le}}"),),
                "heatmap",
            ),
            Panel(
                "Send latency p99",
                "99th percentile of send latency (interpolated within fault-table buckets).",
                "s",
                (
                    (
                        f"histogram_quantile(0.99, sum by (cluster, broker, le) (rate({bucket}[$__rate_interval])))",
                        "{{cluster}} {{broker}}",
                    ),
                ),
            ),
            Panel(
                "Sends slower than 100 ms",
                "Fraction of sends above 100 ms: from 550 ms on, both fault tables isolate the broker.",
                "percentunit",
                (
                    (
                        f'1 - sum by (cluster, broker) (rate(rmqmon_broker_send_latency_seconds_bucket{{{B}, le="0.1"}}[$__rate_interval]))'
                        f" / sum by (cluster, broker) (rate(rmqmon_broker_send_latency_seconds_count{{{B}}}[$__rate_interval]))",
                        "{{cluster}} {{broker}}",
                    ),
                ),
            ),
            Panel(
                "Isolation episodes",
                "Fault windows opened against the broker, per second.",
                "cps",
                (
                    (
                        f"sum by (cluster, broker) (rate(rmqmon_broker_isolation_episodes_total{{{B}}}[$__rate_interval]))",
                        "{{cluster}} {{broker}}",
                    ),
                ),
            ),
            Panel(
                "Avoided until",
                "End of the broker's latest fault window.",
                "dateTimeFromNow",
                (
                    (
                        f"max by (cluster, broker) (rmqmon_broker_avoided_until_timestamp_seconds{{{B}}}) * 1000",
                        "{{cluster}} {{broker}}",
                    ),
                ),
                "stat",
            ),
            Panel(
                "Producers with every broker unavailable",
                "Producers whose fault items isolate every broker.",
                "none",
                ((f"max(rmqmon_producers_all_brokers_unavailable{{{CL}}})", "producers"),),
                "stat",
            ),
        ],
        [
            cluster_variable(Metrics.BROKER_ISOLATED),
            ("broker", "Broker", f"label_values(rmqmon_broker_isolated{{{CL}}}, broker)"),
        ],
    )


def monitor_health() -> dict[str, object]:
    return dashboard(
        "rmqmon-health",
        "RocketMQ rebalance monitor / Monitor health",
        "The monitor job itself: freshness, throughput, batch duration, state, Kafka lag, rejected and late input.",
        [
            Panel(
                "Up",
                "1 while the job's queries run (rmqmon_up) and Prometheus scrapes the driver (up).",
                "bool",
                ((f"max(rmqmon_up{{{SEL}}})", "queries running"), (f"max(up{{{SEL}}})", "scraped")),
                "stat",
                8,
                5,
            ),
            Panel(
                "Build",
                "Monitor and Spark versions (rmqmon_build_info).",
                "none",
                (
                    (
                        f"max by (version, spark_version) (rmqmon_build_info{{{SEL}}})",
                        "{{version}} / Spark {{spark_version}}",
                    ),
                ),
                "stat",
                8,
                5,
            ),
            Panel(
                "Series dropped by the label cap",
                "Updates per second not exported because a metric reached metrics.label_value_cap groups or brokers.",
                "cps",
                ((f"sum(rate(rmqmon_label_values_dropped_total{{{SEL}}}[$__rate_interval])) or vector(0)", "dropped"),),
                "stat",
                8,
                5,
            ),
            Panel(
                "Seconds since last batch",
                "Wall time since each query's last micro-batch finished.",
                "s",
                ((f"time() - max by (query) (rmqmon_last_batch_timestamp_seconds{{{Q}}})", "{{query}}"),),
            ),
            Panel(
                "Watermark lag",
                "Wall time minus each query's event-time watermark.",
                "s",
                ((f"time() - max by (query) (rmqmon_watermark_timestamp_seconds{{{Q}}})", "{{query}}"),),
            ),
            Panel(
                "Input and processed rows",
                "Rows read per second, and the rows per second the last batch processed.",
                "cps",
                (
                    (f"sum by (query) (rate(rmqmon_input_rows_total{{{Q}}}[$__rate_interval]))", "{{query}} input"),
                    (f"max by (query) (rmqmon_processed_rows_per_second{{{Q}}})", "{{query}} processed"),
                ),
            ),
            Panel(
                "Batch duration",
                "Duration of each query's last micro-batch.",
                "s",
                ((f"max by (query) (rmqmon_batch_duration_seconds{{{Q}}})", "{{query}}"),),
            ),
            Panel(
                "Batch time by phase",
                "Mean seconds per micro-batch in each phase Spark reports, by query: addBatch is the stateful "
                "stage, the Delta writes and the metrics; queryPlanning, walCommit and commitOffsets the fixed "
                "cost around them.",
                "s",
                (
                    (
                        f'sum by (query, phase) (rate(rmqmon_batch_phase_seconds_total{{{Q}, phase!="triggerExecution"}}'
                        f"[$__rate_interval])) / on (query) group_left "
                        f"sum by (query) (rate(rmqmon_batches_total{{{Q}}}[$__rate_interval]))",
                        "{{query}} {{phase}}",
                    ),
                ),
            ),
            Panel(
                "State rows",
                "Rows in each query's state store.",
                "none",
                ((f"sum by (query) (rmqmon_state_rows{{{Q}}})", "{{query}}"),),
            ),
            Panel(
                "State memory",
                "Memory used by each query's state store.",
                "bytes",
                ((f"sum by (query) (rmqmon_state_memory_bytes{{{Q}}})", "{{query}}"),),
            ),
            Panel(
                "Kafka offsets behind",
                "Offsets behind the latest, summed over partitions.",
                "none",
                ((f"sum by (query) (rmqmon_kafka_offsets_behind{{{Q}}})", "{{query}}"),),
            ),
            Panel(
                "Dead letters",
                "Rejected input records per second by query and reason.",
                "cps",
                (
                    (
                        f"sum by (query, reason) (rate(rmqmon_dead_letters_total{{{Q}}}[$__rate_interval]))",
                        "{{query}} {{reason}}",
                    ),
                ),
            ),
            Panel(
                "Late events",
                "Late input per second by query and reason.",
                "cps",
                (
                    (
                        f"sum by (query, reason) (rate(rmqmon_late_events_total{{{Q}}}[$__rate_interval]))",
                        "{{query}} {{reason}}",
                    ),
                ),
            ),
        ],
        [("query", "Query", f"label_values(rmqmon_batch_duration_seconds{{{SEL}}}, query)")],
    )


DASHBOARDS = {
    "overview": overview,
    "group-drilldown": group_drilldown,
    "broker-faults": broker_faults,
    "monitor-health": monitor_health,
}
