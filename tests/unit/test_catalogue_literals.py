"""Every metric, table and event-type name is written once, in its catalogue.

Product code names them through the catalogues' handles and constants; these tests scan the product's source with
``ast`` and fail on a string literal equal to a catalogued name outside its catalogue (docstrings aside), and check
that the metrics state refuses a name that is not the catalogue's handle.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import fields
from pathlib import Path

import pytest

from connectors.metric_catalogue import CATALOGUE as METRICS
from connectors.metric_catalogue import Metrics, MetricSpec, UnknownMetric
from connectors.metrics import MetricsState
from streaming.config.sections import KafkaTopics
from streaming.contract.events import DEFAULT_TOPICS, EVENT_TYPES, TOPIC_OPTIONS, EventType
from streaming.contract.tables import TABLES, Table
from streaming.job.consumer.events import CONSUMER_EVENTS
from streaming.job.sends.query import SEND_EVENTS

ROOT = Path(__file__).parents[2]
PRODUCT = ("streaming", "connectors", "localenv", "dashboards")


def _docstrings(tree: ast.AST) -> set[int]:
    owners = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, owners)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }


def literals(names: Iterable[str], owners: Iterable[str]) -> Iterator[str]:
    """``path:line: name`` for every string literal of the product equal to one of ``names``, outside ``owners``."""
    wanted, skip = set(names), set(owners)
    for path in sorted(p for d in PRODUCT for p in (ROOT / d).rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if relative in skip:
            continue
        tree = ast.parse(path.read_text())
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in wanted and id(node) not in docs:
                yield f"{relative}:{node.lineno}: {node.value}"


def test_no_metric_name_is_a_literal_outside_the_metric_catalogue():
    assert list(literals((m.name for m in METRICS), ["connectors/metric_catalogue.py"])) == []


def test_no_table_name_is_a_literal_outside_the_table_catalogue():
    # a table named like an event type (consume_progress) is the event-type test's to find
    names = set(TABLES) - set(EVENT_TYPES)
    assert list(literals(names, ["streaming/contract/tables.py"])) == []


def test_no_event_type_is_a_literal_outside_the_domains_vocabulary():
    # the table catalogue names a table consume_progress too
    shared = set(EVENT_TYPES) & set(TABLES)
    found = literals(EVENT_TYPES, ["streaming/domain/vocabulary.py"])
    assert [
        f for f in found if not (f.startswith("streaming/contract/tables.py:") and f.split(": ")[1] in shared)
    ] == []


def test_the_topics_config_is_keyed_by_event_type():
    topics = KafkaTopics()
    assert {f.name for f in fields(KafkaTopics)} == set(TOPIC_OPTIONS.values())
    assert topics.by_type() == DEFAULT_TOPICS
    assert KafkaTopics(consumer_channel="c").of(EventType.CONSUMER_CONNECTIONS) == "c"  # polls ride with channels


def test_each_query_declares_its_event_set_once_and_together_they_read_every_type():
    assert sorted(CONSUMER_EVENTS + SEND_EVENTS) == sorted(EVENT_TYPES)
    assert CONSUMER_EVENTS[0] == EventType.CONSUMER_CHANNEL  # the default type of the channel events' topic


def test_the_table_names_are_the_catalogues_in_its_order():
    assert list(Table) == list(TABLES) and all(spec.name is name for name, spec in TABLES.items())


def test_every_handle_is_named_after_its_metric_and_in_the_catalogue():
    handles = {k: v for k, v in vars(Metrics).items() if isinstance(v, MetricSpec)}
    assert list(handles.values()) == list(METRICS)
    assert all(m.name == "rmqmon_" + k.lower() for k, m in handles.items())


@pytest.mark.parametrize(
    "update",
    [
        lambda s: s.set_gauge("rmqmon_group_members", ("G",), 1),  # type: ignore[arg-type]
        lambda s: s.set_gauge(MetricSpec("rmqmon_group_members", "gauge", ("consumer_group",), "", ""), ("G",), 1),
        lambda s: s.set_gauge(Metrics.GROUP_REBALANCES_TOTAL, ("G",), 1),  # a counter
        lambda s: s.inc(Metrics.GROUP_MEMBERS, ("G",)),  # a gauge
        lambda s: s.replace_series("rmqmon_group_queues", ("c", "G"), {}),  # type: ignore[arg-type]
        lambda s: s.observe_histogram(Metrics.GROUP_MEMBERS, ("b",), [0.1], [1], 1, 0.1),
        lambda s: s.retain("broker", [("c", "b")], ["rmqmon_broker_isolated"]),  # type: ignore[list-item]
    ],
    ids=["name", "copy", "counter-as-gauge", "gauge-as-counter", "replace-name", "gauge-as-histogram", "retain"],
)
def test_the_metrics_state_refuses_what_is_not_the_catalogues_handle(update):
    state = MetricsState()
    with pytest.raises(UnknownMetric):
        update(state)
    assert state.gauges == {} and state.counters == {} and state.histograms == {}


def test_a_handle_updates_its_series():
    state = MetricsState()
    state.set_gauge(Metrics.GROUP_MEMBERS, ("c", "G"), 3)
    state.inc(Metrics.GROUP_REBALANCES_TOTAL, ("c", "G"), 2)
    assert state.gauges == {"rmqmon_group_members": {("c", "G"): 3.0}}
    assert state.counters == {"rmqmon_group_rebalances_total": {("c", "G"): 2.0}}
