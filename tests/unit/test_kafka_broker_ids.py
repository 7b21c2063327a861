"""The local broker's KRaft cluster ids."""

from __future__ import annotations


def test_kafka_cluster_ids_never_look_like_command_line_options():
    import base64

    from localenv.kafka_broker import new_cluster_id

    ids = [new_cluster_id() for _ in range(2000)]
    assert all(not i.startswith("-") and len(base64.urlsafe_b64decode(i + "==")) == 16 for i in ids)
