"""Topics on a Kafka cluster: which of some are missing, and creating them (kafka-python's admin client).

The job never creates its topics. ``rebalance-monitor simulate --create-topics`` creates the ones a test cluster
lacks, with the replication factor asked for, or by default one replica per broker up to ``MAX_DEFAULT_REPLICAS``,
and the settings the contract gives each type's topic (``events.topic_configs``: routes compacted); the local
single-broker setups (demo, smoke pipeline, tests) get one replica that way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

MAX_DEFAULT_REPLICAS = 3


class TopicCreationFailed(Exception):
    """The cluster refused to create a topic (a replication factor above its broker count, say)."""


def admin_options(client_options: dict[str, Any]) -> dict[str, Any]:
    """The options of ``client_options`` (a producer's, say) that the admin client takes too: connection and
    security settings."""
    from kafka import KafkaAdminClient

    return {k: v for k, v in client_options.items() if k in KafkaAdminClient.DEFAULT_CONFIG}


def missing_topics(bootstrap_servers: str, topics: Iterable[str], **client_options: Any) -> list[str]:
    """The topics of ``topics`` the cluster does not have, sorted."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers, **client_options)
    try:
        return sorted(set(topics) - set(admin.list_topics()))
    finally:
        admin.close()


def create_topics(
    bootstrap_servers: str,
    topics: Iterable[str],
    partitions: int = 1,
    replication_factor: int | None = None,
    configs: Mapping[str, Mapping[str, str]] | None = None,
    **client_options: Any,
) -> None:
    """Create the topics that do not exist yet. ``replication_factor`` None: one replica per broker of the
    cluster, up to ``MAX_DEFAULT_REPLICAS``. ``configs``: a topic's settings by name (``cleanup.policy``, say).
    ``client_options`` (security settings, say) go to the admin client. Raises ``TopicCreationFailed`` with the
    broker's reason when it refuses a topic."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic
    from kafka.errors import KafkaError, TopicAlreadyExistsError

    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers, **client_options)
    try:
        existing = set(admin.list_topics())
        wanted = [t for t in dict.fromkeys(topics) if t not in existing]
        if not wanted:
            return
        if replication_factor is None:
            replication_factor = min(MAX_DEFAULT_REPLICAS, len(admin.describe_cluster()["brokers"]))
        try:
            admin.create_topics(
                [
                    NewTopic(t, partitions, replication_factor, topic_configs=dict((configs or {}).get(t, {})))
                    for t in wanted
                ]
            )
        except TopicAlreadyExistsError:
            pass
        except KafkaError as error:
            reason = f"{type(error).__name__} ({getattr(error, 'description', '')})"
            raise TopicCreationFailed(
                f"cannot create topic(s) {', '.join(wanted)} with {partitions} partition(s) and replication factor "
                f"{replication_factor} on {bootstrap_servers}: {reason}"
            ) from None
    finally:
        admin.close()
