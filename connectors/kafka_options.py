"""The monitor's ``[kafka.options]`` (Java Kafka client names, for Spark's Kafka source) as kafka-python producer
options, for the commands that publish from Python (``simulate``).

Only what a producer needs to reach the same cluster is carried over: the security protocol, SASL PLAIN and
SCRAM credentials from ``sasl.jaas.config``, PEM trust and key stores, host-name checking, and the common
timeouts. Everything else in ``[kafka.options]`` tunes the consumer Spark runs and is reported as not used.
What kafka-python cannot read (JKS or PKCS12 stores, Kerberos or OAuth login modules) is refused with the
option to pass instead, never dropped quietly: a producer without its credentials would only fail later with
a less helpful error.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

# Java name -> kafka-python name, for options whose values mean the same in both.
_SAME_MEANING = {
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
    "ssl.key.password": "ssl_password",
    "request.timeout.ms": "request_timeout_ms",
    "metadata.max.age.ms": "metadata_max_age_ms",
    "connections.max.idle.ms": "connections_max_idle_ms",
    "reconnect.backoff.ms": "reconnect_backoff_ms",
    "reconnect.backoff.max.ms": "reconnect_backoff_max_ms",
    "retry.backoff.ms": "retry_backoff_ms",
    "client.id": "client_id",
}
_INTEGER_OPTIONS = {name for java, name in _SAME_MEANING.items() if java.endswith(".ms")}
_SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_PASSWORD_LOGIN_MODULES = (
    "org.apache.kafka.common.security.plain.PlainLoginModule",
    "org.apache.kafka.common.security.scram.ScramLoginModule",
)
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


class UntranslatableOption(ValueError):
    """A ``[kafka.options]`` entry kafka-python cannot follow; the message says what to pass instead."""


@dataclass
class ProducerOptions:
    options: dict[str, object] = field(default_factory=dict)  # kafka-python producer options
    not_used: list[str] = field(default_factory=list)  # Java options that only concern Spark's consumer


def producer_options(java_options: Mapping[str, str]) -> ProducerOptions:
    """kafka-python producer options for a cluster that ``java_options`` (``[kafka.options]``) reaches."""
    result = ProducerOptions()
    out = result.options
    for key, value in java_options.items():
        if key in _SAME_MEANING:
            name = _SAME_MEANING[key]
            out[name] = int(value) if name in _INTEGER_OPTIONS else value
        elif key == "sasl.jaas.config":
            out.update(_sasl_credentials(value))
        elif key == "ssl.endpoint.identification.algorithm":
            out["ssl_check_hostname"] = value.strip().lower() == "https"
        elif key in ("ssl.truststore.location", "ssl.keystore.location"):
            store = key.split(".")[1]  # truststore | keystore
            option = "ssl_cafile" if store == "truststore" else "ssl_certfile"
            kind = java_options.get(f"ssl.{store}.type", "JKS").upper()
            if kind != "PEM":
                raise UntranslatableOption(
                    f"[kafka.options] {key}: kafka-python reads PEM files only, not {kind}; "
                    f"convert it and pass --producer-option {option}=FILE"
                )
            out[option] = value
        elif key in ("ssl.truststore.type", "ssl.keystore.type", "ssl.truststore.password", "ssl.keystore.password"):
            continue  # read with the store's location above; a PEM file needs no store password
        else:
            result.not_used.append(key)
    mechanism = str(out.get("sasl_mechanism", ""))
    if mechanism and mechanism not in _SASL_MECHANISMS:
        supported = ", ".join(_SASL_MECHANISMS)
        raise UntranslatableOption(
            f"[kafka.options] sasl.mechanism {mechanism}: simulate publishes with "
            f"{supported}; pass --producer-option settings instead"
        )
    return result


def _sasl_credentials(jaas: str) -> dict[str, str]:
    module = jaas.strip().split(None, 1)[0] if jaas.strip() else ""
    if module not in _PASSWORD_LOGIN_MODULES:
        raise UntranslatableOption(
            f"[kafka.options] sasl.jaas.config: {module or 'empty'} is not a PLAIN or SCRAM "
            "login; pass --producer-option sasl_* settings instead"
        )
    values = {name: re.sub(r"\\(.)", r"\1", text) for name, text in _JAAS_OPTION.findall(jaas)}
    if "username" not in values or "password" not in values:
        raise UntranslatableOption('[kafka.options] sasl.jaas.config: no username="..." password="..." in it')
    return {"sasl_plain_username": values["username"], "sasl_plain_password": values["password"]}
