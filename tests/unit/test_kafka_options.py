"""The config's ``[kafka.options]`` (Java client names) as kafka-python producer options for ``simulate``."""

from __future__ import annotations

import pytest

from connectors.kafka_options import UntranslatableOption, producer_options

SCRAM = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="svc-\\"rrm\\"" password="s3cr=t;";'


def test_sasl_ssl_with_scram_and_a_pem_truststore_carries_over():
    translated = producer_options(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": SCRAM,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": "/etc/kafka/ca.pem",
            "ssl.endpoint.identification.algorithm": "",
            "request.timeout.ms": "20000",
        }
    )
    assert translated.options == {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": 'svc-"rrm"',
        "sasl_plain_password": "s3cr=t;",
        "ssl_cafile": "/etc/kafka/ca.pem",
        "ssl_check_hostname": False,
        "request_timeout_ms": 20000,
    }
    assert translated.not_used == []


def test_a_pem_keystore_and_its_key_password_carry_over_and_host_names_are_checked_with_https():
    translated = producer_options(
        {
            "security.protocol": "SSL",
            "ssl.keystore.type": "pem",
            "ssl.keystore.location": "/etc/kafka/client.pem",
            "ssl.key.password": "k",
            "ssl.endpoint.identification.algorithm": "https",
        }
    )
    assert translated.options == {
        "security_protocol": "SSL",
        "ssl_certfile": "/etc/kafka/client.pem",
        "ssl_password": "k",
        "ssl_check_hostname": True,
    }


def test_consumer_tuning_is_reported_as_not_used():
    translated = producer_options({"fetch.max.bytes": "1048576", "max.poll.records": "500", "client.id": "sim"})
    assert translated.options == {"client_id": "sim"}
    assert sorted(translated.not_used) == ["fetch.max.bytes", "max.poll.records"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"security.protocol": "SSL", "ssl.truststore.location": "/t.jks"},
            "PEM files only, not JKS; convert it and pass --producer-option ssl_cafile=FILE",
        ),
        (
            {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": "/k.p12"},
            "not PKCS12; convert it and pass --producer-option ssl_certfile=FILE",
        ),
        ({"sasl.mechanism": "GSSAPI"}, "sasl.mechanism GSSAPI"),
        (
            {"sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true;"},
            "Krb5LoginModule is not a PLAIN or SCRAM login",
        ),
        (
            {"sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required;"},
            'no username="..." password="..."',
        ),
    ],
)
def test_what_kafka_python_cannot_follow_is_refused_with_what_to_pass_instead(options, message):
    with pytest.raises(UntranslatableOption, match="^\\[kafka.options\\]") as refused:
        producer_options(options)
    assert message in str(refused.value)


def test_kafka_python_checksums_record_batches_in_c():
    """The simulator and the benches publish through kafka-python, which checksums each record batch with CRC32C:
    in pure Python without the ``crc32c`` package (``kafka-python[crc32c]``), which made a publisher of 4,100
    events/s use 0.9 cores instead of 0.23."""
    from kafka.record import util

    assert util.crc32c_c is not None
    assert util.calc_crc32c.__defaults__ == (util.crc32c_c,)
    assert util.calc_crc32c(memoryview(b"123456789")) == 0xE3069283  # the algorithm's check value
