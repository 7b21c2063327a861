"""Configuration: the reference file equals the defaults; overrides; one clear line per problem."""

from __future__ import annotations

from pathlib import Path

import pytest

from streaming.config import ConfigError, MonitorConfig, load_config

REFERENCE = Path(__file__).parents[2] / "conf" / "monitor.toml"


def test_reference_file_equals_the_built_in_defaults():
    assert load_config(REFERENCE, env={}) == MonitorConfig()


def test_environment_overrides_file_values(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[kafka]\nbootstrap_servers = "file:9092"\n[spark]\nshuffle_partitions = 6\n')
    config = load_config(
        path,
        env={
            "RRM__KAFKA__BOOTSTRAP_SERVERS": "env:9092",
            "RRM__KAFKA__TOPICS__SEND_RESULT": "sends",
            "RRM__METRICS__ENABLED": "false",
        },
    )
    assert config.kafka.bootstrap_servers == "env:9092"
    assert config.kafka.topics.send_result == "sends"
    assert config.spark.shuffle_partitions == 6 and config.metrics.enabled is False


@pytest.mark.parametrize(("toml", "problem"), [
    ('[kafka]\nbootstrap_server = "x"', "kafka.bootstrap_server: unknown option (did you mean 'bootstrap_servers'?)"),
    ("[spark]\nshuffle_partitions = \"four\"", "spark.shuffle_partitions: expected an integer, got 'four'"),
    ("[membership]\nchannel_expiry_ms = 20000", "membership.channel_expiry_ms (20000) must exceed membership.heartbeat_interval_ms (30000)"),
    ('[allocation]\ndefault_strategy = "RANDOM"', "allocation.default_strategy: unknown allocation strategy 'RANDOM'"),
    ('[[allocation.groups]]\ngroup = "g"\nstrategy = "MACHINE_ROOM"', "allocation.groups[0] (g): MACHINE_ROOM needs consumer_idcs"),
    ('[producers.fault_tables.t]\nlatency_max_ms = [100, 50]\nnot_available_duration_ms = [0, 1]\nisolation_latency_ms = 1',
     "producers.fault_tables.t: latency_max_ms must be strictly ascending"),
    ('[producers.fault_tables.t]\nlatency_max_ms = [50]\nnot_available_duration_ms = [0, 1]\nisolation_latency_ms = 1',
     "producers.fault_tables.t: latency_max_ms and not_available_duration_ms must be non-empty and the same length"),
    ('[producers]\ndefault_fault_table = "nope"', "producers.default_fault_table: unknown fault table 'nope'"),
    ('[kafka]\nstarting_offsets = "middle"', "kafka.starting_offsets must be 'earliest' or 'latest'"),
])  # fmt: skip
def test_each_problem_gets_its_line(tmp_path, toml, problem):
    path = tmp_path / "c.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError) as raised:
        load_config(path, env={})
    assert any(line.startswith(problem) for line in raised.value.problems), raised.value.problems


def test_several_problems_are_reported_together(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[metrics]\nport = 70000\n[membership]\nshards = 0\n[kafka]\nstarting_offsets = "x"\n')
    with pytest.raises(ConfigError) as raised:
        load_config(path, env={})
    assert len(raised.value.problems) == 3
    assert str(raised.value).count("\n  - ") == 3


def test_secrets_never_printed():
    config = load_config(None, env={"RRM__KAFKA__OPTIONS__SASL.JAAS.CONFIG": "user=u password=hunter2",
                                    "RRM__KAFKA__OPTIONS__SECURITY.PROTOCOL": "SASL_SSL"})  # fmt: skip
    assert config.kafka.options["sasl.jaas.config"] == "user=u password=hunter2"
    assert "hunter2" not in repr(config) and "SASL_SSL" in repr(config)
