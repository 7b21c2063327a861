"""Configuration: the reference file equals the defaults; overrides; each rule gives its own line; secrets stay hidden."""

from __future__ import annotations

import dataclasses
import re
import tomllib
from pathlib import Path

import pytest

from streaming.config import (
    PRESET_FAULT_TABLES,
    ConfigError,
    FaultTableConfig,
    MonitorConfig,
    Options,
    StrategyParams,
    interval_ms,
    load_config,
)
from streaming.contract.events import DEFAULT_MAX_EVENT_BYTES, DEFAULT_MAX_FUTURE_SKEW_MS
from streaming.domain.errors import ConfigurationError
from streaming.domain.faults.tolerance import ROCKETMQ_4, ROCKETMQ_5

REFERENCE = Path(__file__).parents[2] / "conf" / "monitor.toml"


def load(tmp_path: Path, text: str, env: dict[str, str] | None = None) -> MonitorConfig:
    path = tmp_path / "monitor.toml"
    path.write_text(text)
    return load_config(path, env=env or {})


def problems(tmp_path: Path, text: str, env: dict[str, str] | None = None) -> tuple[str, ...]:
    with pytest.raises(ConfigError) as raised:
        load(tmp_path, text, env)
    return raised.value.problems


# -- the reference file -------------------------------------------------------------------------------------


def test_reference_file_equals_the_built_in_defaults():
    assert load_config(REFERENCE, env={}) == MonitorConfig()


def test_the_defaults_are_written_once_and_reach_the_domain_unchanged():
    # conf/monitor.toml equals the config classes (above); the classes take the defaults of what the domain, the
    # session factory and the metrics state hold from them, so the default configuration builds their defaults.
    from connectors.metrics import MetricsState
    from streaming.domain.consumers.engine_settings import EngineSettings
    from streaming.domain.faults.settings import FaultSettings
    from streaming.job.runtime.spark_session import SparkSettings

    config = load_config(REFERENCE, env={})
    assert config.engine_settings == EngineSettings()
    assert config.fault_settings == FaultSettings()
    assert SparkSettings.of(config.spark) == SparkSettings()
    assert config.metrics.label_value_cap == MetricsState().label_value_cap
    assert (config.ingest.max_event_bytes, config.ingest.max_future_skew_ms) == (
        DEFAULT_MAX_EVENT_BYTES,
        DEFAULT_MAX_FUTURE_SKEW_MS,
    )


def test_reference_file_sets_every_option_explicitly():
    # Loading equal to the defaults could also mean "the file is empty"; here every option must be written out,
    # except collections whose default is empty (they are shown as commented examples).
    data = tomllib.loads(REFERENCE.read_text())

    def walk(cls: type, node: dict, path: str) -> None:
        for f in dataclasses.fields(cls):
            where = f"{path}.{f.name}".lstrip(".")
            sub = cls.__dataclass_fields__[f.name]
            default = sub.default if sub.default is not dataclasses.MISSING else sub.default_factory()  # type: ignore[misc]
            if dataclasses.is_dataclass(default):
                assert isinstance(node.get(f.name), dict), f"[{where}] missing from conf/monitor.toml"
                walk(type(default), node[f.name], where)
            elif default in ((), {}, None) or isinstance(default, Options) and not default:
                assert f.name not in node or node[f.name] in ({}, []), where
            else:
                assert f.name in node, f"{where} missing from conf/monitor.toml"

    walk(MonitorConfig, data, "")


def test_reference_file_documents_every_rule_and_table_key():
    text = REFERENCE.read_text()
    from streaming.config import FaultTableConfig, GroupAllocationConfig, ProducerRuleConfig

    for cls in (GroupAllocationConfig, ProducerRuleConfig, FaultTableConfig):
        for f in dataclasses.fields(cls):
            assert re.search(rf"^#? ?{f.name} = ", text, re.M), f"{cls.__name__}.{f.name} not in conf/monitor.toml"


# -- overrides ----------------------------------------------------------------------------------------------


def test_environment_overrides_the_file_with_typed_values(tmp_path):
    config = load(
        tmp_path,
        '[kafka]\nbootstrap_servers = "file:9092"\n[spark]\nshuffle_partitions = 6\n',
        {
            "RRM__KAFKA__BOOTSTRAP_SERVERS": "env:9092",
            "RRM__KAFKA__TOPICS__SEND_RESULT": "sends",
            "RRM__METRICS__ENABLED": "false",
            "RRM__MEMBERSHIP__SHARDS": "2",
            "RRM__INGEST__WATERMARK_DELAY": '"0 seconds"',
            "RRM__SPARK__APP_NAME": "123",  # a string option takes the text, not the integer
            "PATH": "/usr/bin",  # other variables are ignored
        },
    )
    assert config.kafka.bootstrap_servers == "env:9092" and config.kafka.topics.send_result == "sends"
    assert config.spark.shuffle_partitions == 6 and config.metrics.enabled is False and config.membership.shards == 2
    assert config.ingest.watermark_delay == "0 seconds" and config.spark.app_name == "123"


def test_environment_sets_options_tables_and_rule_arrays():
    config = load_config(
        None,
        env={
            "RRM__KAFKA__OPTIONS__SECURITY_PROTOCOL": "SASL_SSL",
            "RRM__KAFKA__OPTIONS__SSL.TRUSTSTORE.LOCATION": "/etc/ts.jks",
            "RRM__SPARK__CONF__spark.sql.streaming.stateStore.providerClass": "x.Y",
            "RRM__ALLOCATION__GROUPS": '[{group = "orders-*", strategy = "CONSISTENT_HASH", virtual_node_count = 40}]',
            "RRM__PRODUCERS__FAULT_TABLES__SLOW__LATENCY_MAX_MS": "[10, 20]",
            "RRM__PRODUCERS__FAULT_TABLES__SLOW__NOT_AVAILABLE_DURATION_MS": "[0, 5000]",
            "RRM__PRODUCERS__FAULT_TABLES__SLOW__ISOLATION_LATENCY_MS": "20",
            "RRM__PRODUCERS__FAULT_TABLES__SLOW__SEMANTICS": "extend",
        },
    )
    assert dict(config.kafka.options) == {"security.protocol": "SASL_SSL", "ssl.truststore.location": "/etc/ts.jks"}
    assert dict(config.spark.conf) == {"spark.sql.streaming.stateStore.providerClass": "x.Y"}
    assert config.strategy_for_group("orders-eu") == ("CONSISTENT_HASH", StrategyParams(virtual_node_count=40))
    assert config.fault_tables()["slow"] == FaultTableConfig((10, 20), (0, 5000), 20, "extend")


def test_tables_merge_key_by_key_and_rule_arrays_replace_the_default(tmp_path):
    config = load(
        tmp_path,
        '[kafka.topics]\nsend_result = "s"\n[[producers.rules]]\nproducer_group = "legacy-*"\n'
        'fault_table = "rocketmq-4"\n',
    )
    assert config.kafka.topics.send_result == "s" and config.kafka.topics.topic_route == "rocketmq.topic-routes"
    assert [r.producer_group for r in config.producers.rules] == ["legacy-*"]


# -- one line per problem ------------------------------------------------------------------------------------

FAULT = "[producers.fault_tables.t]\nlatency_max_ms = {}\nnot_available_duration_ms = {}\nisolation_latency_ms = 1\nsemantics = {}\n"

# (number, TOML, the problem line it must produce)
CASES = [
    # unknown keys
    (
        1,
        '[kafka]\nbootstrap_server = "x:1"',
        "kafka.bootstrap_server: unknown option (did you mean bootstrap_servers?)",
    ),
    (2, "[kafak]\nx = 1", "kafak: unknown option (did you mean kafka?)"),
    (3, "[metrics]\nzzz = 1", "metrics.zzz: unknown option; known keys: enabled, host, label_value_cap, port"),
    (
        4,
        '[[allocation.groups]]\ngroup = "g"\nvirtual_nodes = 4',
        "allocation.groups[0].virtual_nodes: unknown option (did you mean virtual_node_count?)",
    ),
    # wrong types
    (5, '[spark]\nshuffle_partitions = "four"', 'spark.shuffle_partitions: expected an integer, got "four" (a string)'),
    (6, '[kafka]\nfail_on_data_loss = "no"', 'kafka.fail_on_data_loss: expected true or false, got "no" (a string)'),
    (7, "[spark]\nmaster = 2", "spark.master: expected a string, got 2 (an integer)"),
    (8, "kafka = 1", "kafka: expected a table, got 1 (an integer)"),
    (9, '[allocation]\ngroups = "g"', 'allocation.groups: expected an array, got "g" (a string)'),
    (10, "[spark]\nshuffle_partitions = 4.0", "spark.shuffle_partitions: expected an integer, got 4.0 (a float)"),
    # ranges, choices and formats
    (11, "[spark]\nshuffle_partitions = 0", "spark.shuffle_partitions: must be between 1 and 10000, got 0"),
    (12, "[metrics]\nport = 70000", "metrics.port: must be between 1 and 65535, got 70000"),
    (13, "[kafka]\nmax_offsets_per_trigger = -1", "kafka.max_offsets_per_trigger: must be at least 0, got -1"),
    (
        14,
        '[kafka]\nstarting_offsets = "earlist"',
        'kafka.starting_offsets: must be one of "earliest", "latest", got "earlist" (did you mean "earliest"?)',
    ),
    (
        15,
        '[allocation]\ndefault_client_line = "4"',
        'allocation.default_client_line: must be one of "4.9", "5", got "4"',
    ),
    (
        16,
        '[spark]\ntrigger_interval = "10s"',
        'spark.trigger_interval: must be a Spark interval such as "10 seconds" or "2 minutes", got "10s"',
    ),
    (
        17,
        '[ingest]\nwatermark_delay = "soon"',
        'ingest.watermark_delay: must be a Spark interval such as "10 seconds" or "2 minutes", got "soon"',
    ),
    (
        18,
        '[kafka]\nbootstrap_servers = "kafka-1"',
        'kafka.bootstrap_servers: must be a comma-separated list of host:port, got "kafka-1"',
    ),
    (
        19,
        '[kafka.topics]\nsend_result = "has space"',
        'kafka.topics.send_result: must be a Kafka topic name, got "has space"',
    ),
    (20, '[spark]\nmaster = "local[two]"', "spark.master: must be local[N]"),
    (
        21,
        '[spark]\ndriver_memory = "2 GB"',
        'spark.driver_memory: must be a JVM memory size such as "2g" or "512m", got "2 GB"',
    ),
    (
        22,
        '[delta]\napp_id_prefix = "my app"',
        "delta.app_id_prefix: must be 1-64 letters, digits, '.', '_' or '-', got \"my app\"",
    ),
    (23, '[paths]\ndelta_root = " "', 'paths.delta_root: must not be empty, got " "'),
    # membership
    (24, "[membership]\nshards = 0", "membership.shards: must be between 1 and 4096, got 0"),
    # allocation
    (
        25,
        '[allocation]\ndefault_strategy = "RANDOM"',
        'allocation.default_strategy: unknown allocation strategy "RANDOM"; expected one of AVG, AVG_BY_CIRCLE',
    ),
    (
        26,
        '[allocation]\ndefault_strategy = "CONSISTENT-HASH"',
        'allocation.default_strategy: unknown allocation strategy "CONSISTENT-HASH" (did you mean "CONSISTENT_HASH"?)',
    ),
    (
        27,
        '[allocation]\ndefault_strategy = "MACHINE_ROOM"',
        "allocation.default_strategy: MACHINE_ROOM needs consumer_idcs, which exist only per group",
    ),
    (
        28,
        '[[allocation.groups]]\ngroup = "g"\nstrategy = "MACHINE_ROOM"',
        "allocation.groups[0].consumer_idcs: MACHINE_ROOM needs consumer_idcs (group 'g')",
    ),
    (
        29,
        '[[allocation.groups]]\ngroup = "g"\nstrategy = "MACHINE_ROOM_NEARBY-MACHINE_ROOM"',
        "allocation.groups[0].consumer_idcs: MACHINE_ROOM_NEARBY-MACHINE_ROOM needs consumer_idcs",
    ),
    (
        30,
        '[[allocation.groups]]\ngroup = "g"\nstrategy = "CONFIG"',
        "allocation.groups[0].config_queues: CONFIG needs config_queues (group 'g')",
    ),
    (31, '[[allocation.groups]]\nstrategy = "AVG"', "allocation.groups[0].group: required"),
    (
        32,
        '[[allocation.groups]]\ngroup = "g"\nconfig_queues = [["T", "b"]]',
        'allocation.groups[0].config_queues[0]: must be ["topic", "broker", queue_id]',
    ),
    (
        33,
        '[[allocation.groups]]\ngroup = "g"\nmachine_room_regex = "[A-Z]+-"',
        'allocation.groups[0].machine_room_regex: needs a capturing group: the room is the first group\'s text, got "[A-Z]+-"',
    ),
    (
        34,
        '[[allocation.groups]]\ngroup = "g"\nmachine_room_regex = "(["',
        "allocation.groups[0].machine_room_regex: is not a valid regular expression",
    ),
    (
        35,
        '[[allocation.groups]]\ngroup = "g"\n[[allocation.groups]]\ngroup = "g"',
        'allocation.groups[1].group: "g" repeats allocation.groups[0], which matches first: this rule is never used',
    ),
    (
        36,
        '[[allocation.groups]]\ngroup = "g"\nvirtual_node_count = -1',
        "allocation.groups[0].virtual_node_count: must be between 0 and 100000, got -1",
    ),
    # fault tables and producers
    (
        37,
        FAULT.format("[100, 50]", "[0, 1]", '"overwrite"'),
        "producers.fault_tables.t.latency_max_ms: must be strictly ascending, but 50 follows 100",
    ),
    (
        38,
        FAULT.format("[50]", "[0, 1]", '"overwrite"'),
        "producers.fault_tables.t: latency_max_ms has 1 thresholds but not_available_duration_ms has 2 durations",
    ),
    (
        39,
        FAULT.format("[]", "[]", '"overwrite"'),
        "producers.fault_tables.t.latency_max_ms: needs at least one threshold",
    ),
    (
        40,
        FAULT.format("[-1]", "[0]", '"overwrite"'),
        "producers.fault_tables.t.latency_max_ms[0]: must be at least 0, got -1",
    ),
    (
        41,
        FAULT.format("[1]", "[0]", '"extend-forever"'),
        'producers.fault_tables.t.semantics: must be one of "overwrite", "extend", "extend-only", got "extend-forever"',
    ),
    (
        42,
        "[producers.fault_tables.t]\nlatency_max_ms = [1]\nnot_available_duration_ms = [0]\nisolation_latency_ms = 1",
        "producers.fault_tables.t.semantics: required",
    ),
    (
        43,
        FAULT.replace(".t]", ".rocketmq-4]").format("[1]", "[0]", '"overwrite"'),
        "producers.fault_tables.rocketmq-4: rocketmq-4 is a built-in preset",
    ),
    (
        44,
        '[producers]\ndefault_fault_table = "rocketmq-6"',
        'producers.default_fault_table: unknown fault table "rocketmq-6" (did you mean "rocketmq-5"?); known: rocketmq-4, rocketmq-5',
    ),
    (45, '[[producers.rules]]\nfault_table = "nope"', 'producers.rules[0].fault_table: unknown fault table "nope"'),
    (
        46,
        '[[producers.rules]]\nfault_table = "rocketmq-4"\nclient_line = "4.8"',
        'producers.rules[0].client_line: must be one of "4.9", "5", got "4.8"',
    ),
    (
        47,
        '[[producers.rules]]\nfault_table = "rocketmq-4"\n[[producers.rules]]\nfault_table = "rocketmq-5"',
        "producers.rules[1]: repeats producers.rules[0], which matches first",
    ),
    (
        48,
        '[producers]\nstate_ttl_ms = 60000\ndefault_fault_table = "rocketmq-4"',
        "producers.state_ttl_ms: must be at least the longest not-available duration of the fault tables in use (600000 ms in rocketmq-4), got 60000",
    ),
    # passthrough options
    (
        49,
        '[kafka.options]\n"bootstrap.servers" = "x:1"',
        'kafka.options."bootstrap.servers": not allowed: set [kafka] bootstrap_servers instead',
    ),
    (
        50,
        '[kafka.options]\n"kafka.enable.auto.commit" = true',
        'kafka.options."kafka.enable.auto.commit": not allowed: Spark tracks offsets in its checkpoint',
    ),
    (
        51,
        '[kafka.options]\n"linger.ms" = [1]',
        'kafka.options."linger.ms": expected a string, number or boolean, got [1] (an array)',
    ),
    (
        52,
        '[spark.conf]\n"executor.memory" = "4g"',
        'spark.conf."executor.memory": Spark configuration keys start with "spark."',
    ),
    (
        53,
        '[spark.conf]\n"spark.sql.shuffle.partitions" = 8',
        'spark.conf."spark.sql.shuffle.partitions": not allowed: set [spark] shuffle_partitions instead',
    ),
    (
        54,
        "[delta]\nlog_retention_hours = 48",
        "delta.log_retention_hours: must be at least delta.deleted_file_retention_hours (168), got 48",
    ),
    (
        55,
        "[delta]\nlog_retention_hours = 23\ndeleted_file_retention_hours = 1",
        "delta.log_retention_hours: must be between 24 and 87600, got 23",
    ),
]


@pytest.mark.parametrize(("number", "toml", "line"), CASES, ids=[f"{c[0]:02d}" for c in CASES])
def test_each_problem_gets_its_own_line(tmp_path, number, toml, line):
    found = problems(tmp_path, toml)
    assert any(p.startswith(line) for p in found), (number, found)
    assert len(found) == 1, (number, found)  # one mistake, one line: no follow-up noise


def test_case_numbers_are_in_order():
    assert [c[0] for c in CASES] == list(range(1, len(CASES) + 1))


def test_several_problems_of_every_kind_are_reported_together(tmp_path):
    found = problems(
        tmp_path,
        '[metrics]\nport = 70000\nhots = "x"\n[delta]\nlog_retention_hours = 48\n'
        '[spark]\nshuffle_partitions = "8"\n[allocation]\ndefault_strategy = "X"\n',
    )
    # In the order of the sections, unknown keys of a table before its values, rules across fields last.
    assert [p.split(":")[0] for p in found] == [
        "spark.shuffle_partitions",
        "allocation.default_strategy",
        "metrics.hots",
        "metrics.port",
        "delta.log_retention_hours",
    ]
    with pytest.raises(ConfigError) as raised:
        load(tmp_path, "[metrics]\nport = 0\n[spark]\nshuffle_partitions = 0\n")
    message = str(raised.value)
    assert message.splitlines()[0].endswith("2 problems") and message.count("\n  - ") == 2
    assert isinstance(raised.value, ConfigurationError)


def test_problems_from_the_environment_name_the_variable(tmp_path):
    found = problems(tmp_path, "", {"RRM__SPARK__SHUFFLE_PARTITIONS": "zero", "RRM__SPARK__SHUFFLE_PARTITONS": "4"})
    assert found == (  # unknown keys of a table first, then its values
        "spark.shuffle_partitons: unknown option (did you mean shuffle_partitions?) (from RRM__SPARK__SHUFFLE_PARTITONS)",
        'spark.shuffle_partitions: expected an integer, got "zero" (a string) (from RRM__SPARK__SHUFFLE_PARTITIONS)',
    )


def test_unreadable_files_are_one_line_errors(tmp_path):
    assert problems(tmp_path, "[kafka\n")[0].startswith(f"{tmp_path / 'monitor.toml'}: not valid TOML: ")
    with pytest.raises(ConfigError, match="no such file"):
        load_config(tmp_path / "missing.toml", env={})


# -- secrets -------------------------------------------------------------------------------------------------


def test_secrets_never_appear_in_repr_str_or_errors(tmp_path):
    config = load_config(
        None,
        env={
            "RRM__KAFKA__OPTIONS__SASL_JAAS_CONFIG": "user=u password=hunter2",
            "RRM__KAFKA__OPTIONS__SSL_KEY_PASSWORD": "swordfish",
            "RRM__KAFKA__OPTIONS__SECURITY_PROTOCOL": "SASL_SSL",
            "RRM__SPARK__CONF__spark.hadoop.fs.s3a.secret.key": "s3cr3t",
        },
    )
    assert config.kafka.options["sasl.jaas.config"] == "user=u password=hunter2"  # the job gets the real value
    for text in (repr(config), str(config), repr(config.kafka), str(config.kafka.options), repr(config.spark.conf)):
        assert "hunter2" not in text and "swordfish" not in text and "s3cr3t" not in text
    assert "SASL_SSL" in repr(config) and "<redacted>" in repr(config.kafka.options)
    found = problems(tmp_path, '[kafka.options]\n"sasl.jaas.config" = ["password=hunter2"]')
    assert found == (
        'kafka.options."sasl.jaas.config": expected a string, number or boolean, got <redacted> (an array)',
    )


# -- lookups and values ---------------------------------------------------------------------------------------


def test_strategy_for_group_takes_the_first_matching_rule(tmp_path):
    config = load(
        tmp_path,
        '[[allocation.groups]]\ngroup = "orders-eu"\nstrategy = "AVG_BY_CIRCLE"\n'
        '[[allocation.groups]]\ngroup = "orders-*"\nstrategy = "MACHINE_ROOM"\nconsumer_idcs = ["IDC1"]\n'
        '[[allocation.groups]]\ngroup = "billing"\nvirtual_node_count = 3\n'
        '[[allocation.groups]]\ngroup = "cfg"\nstrategy = "CONFIG"\nconfig_queues = [{topic = "T", broker = "b", queue_id = 2}]\n',
    )
    assert config.strategy_for_group("orders-eu") == ("AVG_BY_CIRCLE", StrategyParams())
    assert config.strategy_for_group("orders-us") == ("MACHINE_ROOM", StrategyParams(consumer_idcs=("IDC1",)))
    assert config.strategy_for_group("billing") == ("AVG", StrategyParams(virtual_node_count=3))  # params only
    assert config.strategy_for_group("cfg")[1].config_queues == (("T", "b", 2),)
    assert config.strategy_for_group("other") == ("AVG", StrategyParams())


def test_fault_table_for_takes_the_first_matching_rule_else_the_default(tmp_path):
    defaults = MonitorConfig()
    assert defaults.fault_table_for("any", "4.9") == ("rocketmq-4", PRESET_FAULT_TABLES["rocketmq-4"])
    assert defaults.fault_table_for("any", "5")[0] == defaults.fault_table_for("any", None)[0] == "rocketmq-5"
    config = load(
        tmp_path,
        FAULT.format("[1, 2]", "[0, 1000]", '"extend"')
        + '[[producers.rules]]\nproducer_group = "pay-*"\nfault_table = "t"\n'
        '[[producers.rules]]\nproducer_group = "*"\nclient_line = "5"\nfault_table = "rocketmq-5"\n'
        '[producers]\ndefault_fault_table = "rocketmq-4"\n',
    )
    assert config.fault_table_for("pay-eu", "5") == ("t", FaultTableConfig((1, 2), (0, 1000), 1, "extend"))
    assert config.fault_table_for("orders", "5")[0] == "rocketmq-5"
    assert config.fault_table_for("orders", None)[0] == "rocketmq-4"


def test_presets_are_the_domain_tables():
    for table in (ROCKETMQ_4, ROCKETMQ_5):
        preset = PRESET_FAULT_TABLES[table.name]
        assert (preset.latency_max_ms, preset.not_available_duration_ms) == (
            table.latency_max_ms,
            table.not_available_duration_ms,
        )
        assert preset.isolation_latency_ms == table.isolation_latency_ms
    assert (
        PRESET_FAULT_TABLES["rocketmq-4"].semantics == "overwrite"
        and PRESET_FAULT_TABLES["rocketmq-5"].semantics == "extend"
    )


def test_configuration_is_immutable():
    config = load_config(None, env={"RRM__KAFKA__OPTIONS__ACKS": "all"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.kafka.bootstrap_servers = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        config.kafka.options["acks"] = "1"  # type: ignore[index]
    with pytest.raises(TypeError):
        config.producers.fault_tables["x"] = PRESET_FAULT_TABLES["rocketmq-4"]  # type: ignore[index]


def test_intervals_in_milliseconds():
    config = MonitorConfig()
    assert config.spark.trigger_interval_ms == 2_000 and config.ingest.watermark_delay_ms == 120_000
    assert interval_ms("1 minute 30 seconds") == 90_000 and interval_ms("0 seconds") == 0
    with pytest.raises(ValueError):
        interval_ms("10s")
