"""What ``rebalance-monitor --version`` prints: the release, the state versions its checkpoints hold (and the older
ones it migrates), and what every Delta commit it makes records as ``userMetadata``. An operator compares them
before an upgrade (``docs/deploy.md``, Upgrading)."""

from __future__ import annotations

from collections.abc import Mapping

from streaming import __version__
from streaming.domain.consumers import membership_snapshot, shard, shard_engine, shard_migrations
from streaming.domain.faults import shard as fault_shard
from streaming.domain.faults import tracker
from streaming.domain.state_codec import Migration, oldest_readable
from streaming.domain.vocabulary import DEFAULT_CLUSTER
from streaming.job.runtime.spark_session import COMMIT_METADATA
from streaming.job.sends import fault_replay

# Each kind of kept state: (kind as its errors name it, the version written, its chain of migrations).
STATE_KINDS: tuple[tuple[str, int, Mapping[int, Migration]], ...] = (
    (shard_engine.SNAPSHOT_KIND, shard.SCHEMA_VERSION, shard_migrations.migrations(DEFAULT_CLUSTER)),
    (membership_snapshot.SNAPSHOT_KIND, membership_snapshot.SCHEMA_VERSION, {}),
    (tracker.SNAPSHOT_KIND, tracker.SNAPSHOT_SCHEMA_VERSION, {}),
    (fault_shard.SNAPSHOT_KIND, fault_shard.CLUSTERS_SCHEMA_VERSION, fault_shard.MIGRATIONS),
    (fault_replay.STATE_KIND, fault_replay.STATE_SCHEMA_VERSION, {}),
)


def state_versions() -> str:
    """``shard 12 (reads 5 to 12), membership 2, ...``: each kind's version, and the oldest it migrates from."""
    parts = []
    for kind, version, migrations in STATE_KINDS:
        oldest = oldest_readable(version, migrations)
        parts.append(f"{kind} {version}" + (f" (reads {oldest} to {version})" if oldest < version else ""))
    return ", ".join(parts)


def version_text(prog: str) -> str:
    return "\n".join(
        [
            f"{prog} {__version__}",
            f"state versions: {state_versions()}",
            f"Delta commits record userMetadata: {COMMIT_METADATA}",
        ]
    )
