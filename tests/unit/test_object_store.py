"""Locations as URIs and the one ``[storage]`` section as Spark's S3A settings and delta-rs' storage options."""

from __future__ import annotations

from pathlib import Path

import pytest

from connectors.object_store import delta_rs_options, hadoop_conf, is_local, join, needs_s3, resolve
from streaming.config import ConfigError, StorageConfig, load_config

SERVER = StorageConfig(
    endpoint="http://127.0.0.1:9000",
    region="eu-west-1",
    path_style_access=True,
    allow_http=True,
    access_key="AK",
    secret_key="SK-very-secret",
)


@pytest.mark.parametrize(
    ("location", "local"),
    [("rel/delta", True), ("/abs/delta", True), ("file:///abs/delta", True), ("s3a://b/rrm", False)],
)
def test_local_paths_and_file_uris_are_local_object_store_uris_are_not(location, local):
    assert is_local(location) is local
    assert needs_s3([location]) is (not local)


def test_resolve_makes_local_paths_absolute_and_leaves_uris_as_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert resolve("rel/delta") == str(tmp_path / "rel" / "delta")
    assert resolve(f"file://{tmp_path}/x") == str(tmp_path / "x")
    assert resolve("s3a://bucket/rrm/") == "s3a://bucket/rrm"
    # the bug this replaces: an s3a:// root taken for a relative path under the working directory
    assert not Path(resolve("s3a://bucket/rrm")).is_relative_to(tmp_path)


def test_join_names_a_table_under_a_path_or_a_uri_alike():
    assert join("/abs/delta", "dead_letters") == "/abs/delta/dead_letters"
    assert join("s3a://bucket/rrm/delta/", "dead_letters") == "s3a://bucket/rrm/delta/dead_letters"


def test_one_storage_section_configures_s3a_and_delta_rs_the_same_way():
    conf = hadoop_conf(SERVER)
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert conf["spark.hadoop.fs.s3a.endpoint.region"] == "eu-west-1"
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    assert (conf["spark.hadoop.fs.s3a.access.key"], conf["spark.hadoop.fs.s3a.secret.key"]) == ("AK", "SK-very-secret")
    options = delta_rs_options(SERVER)
    assert options == {
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
        "AWS_REGION": "eu-west-1",
        "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false",
        "AWS_ALLOW_HTTP": "true",
        "AWS_ACCESS_KEY_ID": "AK",
        "AWS_SECRET_ACCESS_KEY": "SK-very-secret",
    }


def test_without_credentials_both_clients_use_the_default_aws_chain():
    aws = StorageConfig()
    assert not any("key" in k for k in hadoop_conf(aws))
    assert "spark.hadoop.fs.s3a.endpoint" not in hadoop_conf(aws)
    assert set(delta_rs_options(aws)) == {"AWS_REGION", "AWS_VIRTUAL_HOSTED_STYLE_REQUEST", "AWS_ALLOW_HTTP"}
    assert hadoop_conf(aws)["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "true"


def test_storage_comes_from_rrm_variables_and_its_secrets_are_never_shown(tmp_path):
    env = {"RRM__STORAGE__ENDPOINT": "http://127.0.0.1:9000", "RRM__STORAGE__SECRET_KEY": "SK-very-secret"}
    config = load_config(None, env=env)
    assert (config.storage.endpoint, config.storage.secret_key) == ("http://127.0.0.1:9000", "SK-very-secret")
    assert "SK-very-secret" not in repr(config)
    wrong = tmp_path / "monitor.toml"
    wrong.write_text("[storage]\nsecret_key = 987654321\n")
    with pytest.raises(ConfigError) as refused:  # a wrong type: named, its value not echoed
        load_config(wrong, env={})
    assert "storage.secret_key" in str(refused.value) and "987654321" not in str(refused.value)
