"""Kafka refusing the job's authentication is told apart from every other query failure: one line naming the
job and the query, never retried (a restart cannot fix credentials). The texts are the ones Spark's query
exceptions carried against the project's SASL_SSL broker (``tests/rocketmq/test_secure_transport.py``)."""

from __future__ import annotations

import pytest

from streaming.job.runtime.supervision import KafkaRefused, QueryFailedRepeatedly, kafka_refusal

SASL = (
    "[STREAM_FAILED] Query [id = 5ee5c3c7, runId = 43ff6506] terminated with exception: "
    "org.apache.kafka.common.errors.SaslAuthenticationException: Authentication failed during authentication due "
    "to invalid credentials with SASL mechanism SCRAM-SHA-512 SQLSTATE: XXKST\n=== Streaming Query ===\n"
    "Identifier: consumer [id = 5ee5c3c7]\nCurrent Committed Offsets: {}\n"
)
TLS = (
    "terminated with exception: java.util.concurrent.ExecutionException: "
    "org.apache.kafka.common.errors.SslAuthenticationException: SSL handshake failed\n\tat org.apache.kafka..."
)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (SASL, "SaslAuthenticationException: Authentication failed during authentication due to invalid credentials"),
        (TLS, "SslAuthenticationException: SSL handshake failed"),
    ],
)
def test_a_refused_authentication_is_one_line_naming_the_job_and_the_query(text, reason):
    refused = kafka_refusal(RuntimeError(text), "consumer")
    assert isinstance(refused, KafkaRefused) and isinstance(refused, QueryFailedRepeatedly)
    line = str(refused)
    assert line.startswith("job: Kafka refused the job's query consumer (") and reason in line, line
    assert len(line.splitlines()) == 1 and "Streaming Query" not in line and "\tat " not in line, line


@pytest.mark.parametrize(
    "text",
    [
        "org.apache.kafka.common.errors.TimeoutException: Timed out waiting for a node assignment",
        "sink unavailable (failing)",
        "org.apache.kafka.common.errors.TopicAuthorizationException: Not authorized to access topics: [t]",
    ],
)
def test_other_failures_are_left_to_the_restarts(text):
    assert kafka_refusal(RuntimeError(text), "consumer") is None
