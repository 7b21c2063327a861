"""The collector's settings from the monitor's configuration: every [collector] and [kafka] option reaches the
JVM's properties file as written, secrets are redacted when the configuration is printed, and the cross-field
rules name the option at fault."""

from __future__ import annotations

import pytest

from connectors.rocketmq_collector import _properties_text, collector_settings, parse_metrics
from streaming.config import ConfigError, load_config


def test_settings_carry_the_collector_and_kafka_sections():
    config = load_config(
        env={
            "RRM__KAFKA__BOOTSTRAP_SERVERS": "k1:9092, k2:9092",
            "RRM__KAFKA__TOPICS__CONSUMER_CHANNEL": "prod.channels",
            "RRM__KAFKA__TOPICS__CONSUME_PROGRESS": "prod.progress",
            "RRM__COLLECTOR__PROGRESS_INTERVAL_MS": "15000",
            "RRM__INGEST__MAX_EVENT_BYTES": "32768",
            "RRM__KAFKA__OPTIONS__SECURITY_PROTOCOL": "SASL_SSL",
            "RRM__COLLECTOR__NAMESRV_ADDR": "ns1:9876;ns2:9876",
            "RRM__COLLECTOR__POLL_INTERVAL_MS": "5000",
            "RRM__COLLECTOR__INCLUDE_GROUPS": '["orders-*", "pay?"]',
            "RRM__COLLECTOR__EXCLUDE_GROUPS": '["orders-test*"]',
            "RRM__COLLECTOR__ACCESS_KEY": "ak",
            "RRM__COLLECTOR__SECRET_KEY": "sk",
            "RRM__COLLECTOR__SHARD_INDEX": "2",
            "RRM__COLLECTOR__SHARD_COUNT": "3",
            "RRM__COLLECTOR__CLUSTER": "east",
        }
    )
    settings = collector_settings(config, max_cycles=2, metrics_port=0)
    assert settings["namesrv.addr"] == "ns1:9876;ns2:9876"
    assert settings["cluster"] == "east"
    assert collector_settings(load_config(env={}))["cluster"] == ""  # the broker cluster name of cluster info
    assert settings["stale.after.ms"] == "15000"  # three poll intervals when unset
    assert (settings["groups.include"], settings["groups.exclude"]) == ("orders-*,pay?", "orders-test*")
    assert (settings["shard.index"], settings["shard.count"]) == ("2", "3")
    assert (settings["in.flight.per.broker"], settings["running.info.per.cycle"]) == ("8", "2000")
    assert (settings["access.key"], settings["secret.key"]) == ("ak", "sk")
    assert settings["topic.consumer_connections"] == "prod.channels"
    assert settings["topic.topic_route"] == "rocketmq.topic-routes"
    assert settings["topic.consume_progress"] == "prod.progress"
    assert (settings["progress.interval.ms"], settings["progress.in.flight.per.broker"]) == ("15000", "8")
    assert (settings["progress.min.offset.every"], settings["max.event.bytes"]) == ("10", "32768")
    assert settings["kafka.bootstrap.servers"] == "k1:9092,k2:9092"
    assert settings["kafka.security.protocol"] == "SASL_SSL"
    assert (settings["max.cycles"], settings["metrics.port"]) == ("2", "0")
    assert "sk" not in repr(config.collector) and "ak" not in repr(config.collector)


def test_properties_text_escapes_what_java_properties_would_misread():
    text = _properties_text({"kafka.sasl.jaas.config": 'Module required user="u" pass="a=b:c#d";\n'})
    assert text == 'kafka.sasl.jaas.config=Module required user\\="u" pass\\="a\\=b\\:c\\#d";\\n\n'


@pytest.mark.parametrize(
    ("env", "option"),
    [
        ({"RRM__COLLECTOR__ACCESS_KEY": "ak"}, "collector.secret_key"),
        ({"RRM__COLLECTOR__SECRET_KEY": "sk"}, "collector.access_key"),
        ({"RRM__COLLECTOR__STALE_AFTER_MS": "10000"}, "collector.stale_after_ms"),
        ({"RRM__COLLECTOR__NAMESRV_ADDR": "ns1"}, "collector.namesrv_addr"),
        ({"RRM__COLLECTOR__INCLUDE_GROUPS": '[" "]'}, "collector.include_groups[0]"),
        ({"RRM__COLLECTOR__SHARD_INDEX": "2", "RRM__COLLECTOR__SHARD_COUNT": "2"}, "collector.shard_index"),
        ({"RRM__COLLECTOR__SHARD_COUNT": "0"}, "collector.shard_count"),
        ({"RRM__COLLECTOR__IN_FLIGHT_PER_BROKER": "0"}, "collector.in_flight_per_broker"),
        ({"RRM__COLLECTOR__RUNNING_INFO_PER_CYCLE": "0"}, "collector.running_info_per_cycle"),
        ({"RRM__COLLECTOR__CLUSTER": '"east\\n"'}, "collector.cluster"),
    ],
)
def test_bad_collector_options_name_the_option(env, option):
    with pytest.raises(ConfigError) as raised:
        load_config(env=env)
    assert [p.split(":")[0] for p in raised.value.problems] == [option]


def test_metrics_text_is_read_by_series():
    text = '# HELP x\n# TYPE rmqcol_cycles_total counter\nrmqcol_cycles_total 3\nrmqcol_problems_total{kind="a"} 2\n'
    assert parse_metrics(text) == {"rmqcol_cycles_total": 3.0, 'rmqcol_problems_total{kind="a"}': 2.0}
