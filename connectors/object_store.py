"""Where the tables and checkpoints live: a local path, a ``file://`` URI or an ``s3a://`` URI, and how each
client reaches it from the one ``[storage]`` section.

Spark (the job, ``maintain``) reaches ``s3a://`` through Hadoop's S3A file system (the ``s3`` jar profile,
``hadoop_conf``); the JVM-free readers (``query``, ``allocate --delta-root``) through delta-rs
(``delta_rs_options``). Local locations are made absolute against the working directory once, here.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from urllib.parse import urlsplit

from streaming.config.sections import StorageConfig

OBJECT_STORE_SCHEMES = ("s3a",)
SIMPLE_CREDENTIALS = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"


def scheme(location: str) -> str:
    """``""`` for a plain path, else the URI's scheme in lower case (``file``, ``s3a``...)."""
    found = urlsplit(location).scheme.lower()
    return "" if len(found) == 1 else found  # a Windows drive letter is not a scheme


def is_local(location: str) -> bool:
    """Whether ``location`` names a directory on this machine's file system."""
    return scheme(location) in ("", "file")


def is_object_store(location: str) -> bool:
    return scheme(location) in OBJECT_STORE_SCHEMES


def resolve(location: str) -> str:
    """A local location as an absolute path (``file://`` stripped), any other URI as written, without a
    trailing ``/`` (Spark reaches it through whatever Hadoop file system its scheme names)."""
    if scheme(location) == "file":
        return str(Path(urlsplit(location).path).resolve())
    if is_local(location):
        return str(Path(location).resolve())
    return location.rstrip("/")


def join(root: str, *names: str) -> str:
    """``root`` (already ``resolve``d) and ``names`` joined with ``/``, a local path or a URI alike."""
    return "/".join([root.rstrip("/"), *names])


def needs_s3(locations: Iterable[str]) -> bool:
    return any(is_object_store(location) for location in locations)


def hadoop_conf(storage: StorageConfig) -> dict[str, str]:
    """Spark settings (``spark.hadoop.fs.s3a.*``) that reach the store of ``[storage]``."""
    prefix = "spark.hadoop.fs.s3a."
    conf = {
        prefix + "endpoint.region": storage.region,
        prefix + "path.style.access": str(storage.path_style_access).lower(),
        prefix + "connection.ssl.enabled": str(not storage.allow_http).lower(),
    }
    if storage.endpoint:
        conf[prefix + "endpoint"] = storage.endpoint
    if storage.access_key or storage.secret_key:
        conf[prefix + "aws.credentials.provider"] = SIMPLE_CREDENTIALS
        conf[prefix + "access.key"] = storage.access_key
        conf[prefix + "secret.key"] = storage.secret_key
    return conf


def delta_rs_options(storage: StorageConfig) -> dict[str, str]:
    """delta-rs (object_store) storage options that reach the store of ``[storage]``."""
    options = {
        "AWS_REGION": storage.region,
        "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": str(not storage.path_style_access).lower(),
        "AWS_ALLOW_HTTP": str(storage.allow_http).lower(),
    }
    if storage.endpoint:
        options["AWS_ENDPOINT_URL"] = storage.endpoint
    if storage.access_key or storage.secret_key:
        options["AWS_ACCESS_KEY_ID"] = storage.access_key
        options["AWS_SECRET_ACCESS_KEY"] = storage.secret_key
    return options
