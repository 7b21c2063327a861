"""Configuration flows one way: ``MonitorConfig`` builds the engines' frozen settings once, the job hands those
very objects to its queries, the workers never parse configuration, and each kind of rule has one matcher."""

from __future__ import annotations

import fnmatch
import logging
import pickle
from dataclasses import replace
from pathlib import Path
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

import streaming.app.demo
import streaming.app.demo_rocketmq
from streaming.config import MonitorConfig, load_config
from streaming.domain.allocation.group_rules import GroupRule
from streaming.domain.consumers.engine_settings import EngineSettings
from streaming.domain.faults import tracker as fault_tracker
from streaming.domain.faults.settings import ProducerRule
from streaming.domain.faults.shard import ClusterFaultShards
from streaming.domain.faults.tolerance import ROCKETMQ_4, ROCKETMQ_5, FaultSemantics, FaultTable
from streaming.domain.faults.tracker import FaultWindowTracker
from streaming.domain.rules import glob_regex, name_matches
from tests.unit.test_fault_replay import Replay

CONFIG = """
[membership]
channel_expiry_ms = 90000
convergence_grace_ms = 5000
[progress]
sample_interval_ms = 2000
window = 6
[[allocation.groups]]
group = "orders-*"
strategy = "CONSISTENT_HASH"
virtual_node_count = 40
[producers]
default_fault_table = "rocketmq-4"
[[producers.rules]]
fault_table = "slow"
producer_group = "pay_*"
client_line = "5"
[producers.fault_tables.slow]
latency_max_ms = [10, 20]
not_available_duration_ms = [0, 5000]
isolation_latency_ms = 20
semantics = "extend"
"""


def configured(tmp_path: Path) -> MonitorConfig:
    path = tmp_path / "monitor.toml"
    path.write_text(CONFIG)
    return load_config(path, env={})


def test_the_configuration_builds_each_engines_settings_once_as_frozen_values(tmp_path):
    config = configured(tmp_path)
    fault_settings, engine_settings = config.fault_settings, config.engine_settings
    assert config.fault_settings is fault_settings and config.engine_settings is engine_settings
    assert fault_settings.rules == (ProducerRule("slow", "pay_*", "5"),)
    assert fault_settings.default_table == "rocketmq-4"
    assert fault_settings.table("rocketmq-4") is ROCKETMQ_4 and fault_settings.table("rocketmq-5") is ROCKETMQ_5
    assert fault_settings.table("slow") == FaultTable("slow", (10, 20), (0, 5000), 20, FaultSemantics.EXTEND_ONLY)
    assert engine_settings.group_rules == (GroupRule("orders-*", "CONSISTENT_HASH", virtual_node_count=40),)
    assert (engine_settings.expiry_ms, engine_settings.convergence_grace_ms) == (90_000, 5_000)
    progress = engine_settings.progress  # [progress] over the domain's defaults
    assert (progress.sample_interval_ms, progress.window, progress.orphan_samples) == (2_000, 6, 3)
    for value in (fault_settings, engine_settings):  # what the workers receive
        assert pickle.loads(pickle.dumps(value)) == value


def test_the_job_hands_its_queries_the_configurations_own_settings_objects(tmp_path):
    from streaming.job.runner import MonitorJob

    config = configured(tmp_path)
    config = replace(config, paths=replace(config.paths, checkpoint_root=str(tmp_path / "checkpoints")))
    job = MonitorJob(config, session=mock.MagicMock(), tables=mock.MagicMock())
    with (
        mock.patch("streaming.job.consumer.query.build_consumer_stream") as consumer,
        mock.patch("streaming.job.sends.query.start_send_ingest") as send_ingest,
    ):
        job._start_consumer_query()
        job._start_send_ingest()
    assert consumer.call_args.args[5] is config.engine_settings
    assert send_ingest.call_args.args[4] is config.fault_settings
    assert send_ingest.call_args.kwargs["fault"].settings is config.fault_settings


def test_the_fault_replay_reads_its_tables_without_parsing_any(tmp_path):
    fault_settings = configured(tmp_path).fault_settings
    replay = Replay(fault_settings)
    parse = mock.Mock(side_effect=AssertionError("a fault table was parsed"))
    with mock.patch.object(fault_tracker, "fault_table_from_config", parse):
        replay.run([(1_000, 15, "OK", "slow")])
        replay.run([(2_000, 30, "OK", "slow"), (3_000, 600, "OK", "rocketmq-4")])  # a window until 33_000
        replay.set_watermark(replay.timeout_ms() + 1)
        replay.run([])  # the timeout: restored from the stored state only
    (shard,) = ClusterFaultShards.restore(replay.state.shards[0].snapshot, fault_settings).shards.values()
    (stored,) = shard.pairs.values()
    assert stored.tracker["fault_table"]["name"] == "rocketmq-4"


def test_a_stored_table_the_settings_do_not_know_is_still_read(tmp_path):
    tracker = FaultWindowTracker(replace(ROCKETMQ_5, isolation_latency_ms=1)).to_dict()
    assert FaultWindowTracker.from_dict(tracker, (ROCKETMQ_5,)).fault_table.isolation_latency_ms == 1
    assert (
        FaultWindowTracker.from_dict(tracker | {"fault_table": ROCKETMQ_5.to_dict()}, (ROCKETMQ_5,)).fault_table
        is ROCKETMQ_5
    )


# -- one matcher per kind of rule ------------------------------------------------------------------------------


@settings(max_examples=500, deadline=None, derandomize=True)
@given(st.text("ab_%-!]*?[.\\^", max_size=6), st.text("ab_%-!]*?[.\\^", max_size=5))
def test_a_rule_names_what_fnmatchcase_or_the_exact_name_names(pattern, name):
    assert name_matches(pattern, name) == (name == pattern or fnmatch.fnmatchcase(name, pattern))


def test_the_regex_is_anchored_and_takes_sql_wildcards_literally():
    assert glob_regex("pay_*").startswith("(?s)\\A") and glob_regex("pay_*").endswith("(?!.)")
    assert name_matches("pay_*", "pay_eu") and not name_matches("pay_*", "payXeu")
    assert not name_matches("pay%", "payments") and name_matches("a[1]", "a[1]") and name_matches("a[1]", "a1")


def test_the_configurations_lookups_are_the_engines(tmp_path):
    config = configured(tmp_path)
    for group in ("orders-eu", "orders", "billing"):
        rule = config.engine_settings.rule_for(group)
        strategy, params = config.strategy_for_group(group)
        assert strategy == (rule.strategy if rule else config.allocation.default_strategy)
        assert params.virtual_node_count == (rule.virtual_node_count if rule else 10)
    for group, line in (("pay_eu", "5"), ("pay_eu", "4.9"), ("payXeu", "5"), ("pay_eu", None)):
        name, _ = config.fault_table_for(group, line)
        assert config.fault_settings.table_for(group, line).name == name
    assert (
        config.fault_table_for("pay_eu", "5")[0] == "slow" and config.fault_table_for("payXeu", "5")[0] == "rocketmq-4"
    )


def test_engine_settings_has_no_mapping_form():
    assert not hasattr(EngineSettings, "from_mapping")


# -- options nobody reads --------------------------------------------------------------------------------------


def test_the_retired_heartbeat_interval_still_loads_with_a_warning(tmp_path, caplog):
    path = tmp_path / "monitor.toml"
    path.write_text("[membership]\nheartbeat_interval_ms = 3000\n")
    with caplog.at_level(logging.WARNING, logger="streaming.config"):
        assert load_config(path, env={"RRM__MEMBERSHIP__HEARTBEAT_INTERVAL_MS": "5000"}) == MonitorConfig()
    (message,) = [r.getMessage() for r in caplog.records]
    assert "membership.heartbeat_interval_ms: ignored" in message
    assert "RRM__MEMBERSHIP__HEARTBEAT_INTERVAL_MS" in message


# -- the demos configure their job with values, not environment strings ----------------------------------------

TOPICS = {
    "consumer_channel": "demo-x.consumer-channel",
    "consumer_connections": "demo-x.consumer-connections",
    "reported_assignment": "demo-x.reported-assignment",
    "topic_route": "demo-x.topic-route",
    "send_result": "demo-x.send-result",
}


def test_the_demo_config_is_the_defaults_replaced_as_the_environment_would(tmp_path):
    config = streaming.app.demo.simulated_fleet_config(streaming.app.demo.job_config("k:9092", TOPICS, tmp_path, 9999))
    env = {
        "RRM__KAFKA__BOOTSTRAP_SERVERS": "k:9092",
        "RRM__KAFKA__TOPICS__CONSUMER_CHANNEL": TOPICS["consumer_channel"],
        "RRM__KAFKA__TOPICS__REPORTED_ASSIGNMENT": TOPICS["reported_assignment"],
        "RRM__KAFKA__TOPICS__TOPIC_ROUTE": TOPICS["topic_route"],
        "RRM__KAFKA__TOPICS__SEND_RESULT": TOPICS["send_result"],
        "RRM__PATHS__DELTA_ROOT": str(tmp_path / "delta"),
        "RRM__PATHS__CHECKPOINT_ROOT": str(tmp_path / "checkpoints"),
        "RRM__SPARK__TRIGGER_INTERVAL": '"3 seconds"',
        "RRM__METRICS__PORT": "9999",
        "RRM__INGEST__WATERMARK_DELAY": '"10 seconds"',
        "RRM__MEMBERSHIP__SHARDS": "4",
        "RRM__INGEST__MAX_FUTURE_SKEW_MS": str(streaming.app.demo.MAX_FUTURE_SKEW_MS),
    }
    assert config == load_config(None, env=env)


def test_the_rocketmq_demo_config_is_replaced_as_the_environment_would(tmp_path):
    base = streaming.app.demo.job_config("k:9092", TOPICS, tmp_path, 9999)
    config = streaming.app.demo_rocketmq.rocketmq_cluster_config(base, "demo-1", 9100)
    overrides = {
        "spark": replace(base.spark, stop_grace_seconds=60),
        "ingest": replace(base.ingest, watermark_delay="5 seconds"),
        "membership": replace(base.membership, shards=2),
    }
    assert replace(config, collector=base.collector) == replace(base, **overrides)
    env = {
        "RRM__COLLECTOR__COLLECTOR_ID": '"demo-1"',
        "RRM__COLLECTOR__POLL_INTERVAL_MS": "2000",
        "RRM__COLLECTOR__RUNNING_INFO_INTERVAL_MS": "5000",
        "RRM__COLLECTOR__INCLUDE_GROUPS": '["demo-1-*"]',
        "RRM__COLLECTOR__METRICS_PORT": "9100",
    }
    assert config.collector == load_config(None, env=env).collector


def test_the_demos_set_no_environment_overrides():
    for module in (streaming.app.demo, streaming.app.demo_rocketmq):
        assert "RRM__" not in Path(module.__file__).read_text(), module.__name__


def test_send_ingest_starts_with_its_late_send_series_at_zero(tmp_path):
    # Spark's progress no longer counts late sends (the fault replay does): the series must exist before the
    # first one, or a dashboard's rate() over it has no data.
    from streaming.job.runner import MonitorJob

    config = configured(tmp_path)
    config = replace(config, paths=replace(config.paths, checkpoint_root=str(tmp_path / "checkpoints")))
    job = MonitorJob(config, session=mock.MagicMock(), tables=mock.MagicMock())
    with mock.patch("streaming.job.sends.query.start_send_ingest"):
        job._start_send_ingest()
    assert job.metrics.counters["rmqmon_late_events_total"] == {("send-ingest", "watermark"): 0.0}
