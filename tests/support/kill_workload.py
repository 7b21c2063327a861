"""The driver-kill workload (``driver_kills.workload()``) in Kafka once per test session, and one uninterrupted run
of it in the tests' Spark session: the reference the crash-recovery test's killed runs and the cluster's
worker-kill run are compared with.

Every run compared with it reads the very same records (dead letters carry their Kafka topic, offset and
timestamp) with the same settings (``KillWorkloadRun.settings``): batches of ``MAX_OFFSETS`` records, so the
batches, their watermarks and their ids match.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.driver_kills import Progress, batch_length_s, table_rows, workload
from tests.support.job import job_config, job_env, publish, run_available

PREFIX = "kills"
MAX_OFFSETS = 60  # many micro-batches: room for kills inside the run
_BATCHES = {"RRM__KAFKA__MAX_OFFSETS_PER_TRIGGER": str(MAX_OFFSETS)}

_runs: dict[str, KillWorkloadRun] = {}


@dataclass(frozen=True)
class KillWorkloadRun:
    """The uninterrupted run: its config, the folder of its ``delta`` and ``checkpoints``, a batch's rough
    length (to plan kills by), and how to configure another run of the same input."""

    bootstrap: str
    config: Any
    root: Path
    batch_s: float
    _rows: dict[str, list[str]] = field(default_factory=dict, compare=False, repr=False)

    def settings(self, root: Path) -> dict[str, str]:
        """``RRM__`` settings for another run of the workload, with its tables and checkpoints under ``root``."""
        return job_env(self.bootstrap, root, PREFIX, **_BATCHES)[0]

    def rows(self, spark: Any, table: str) -> list[str]:
        """The table's rows as ``driver_kills.table_rows`` gives them, read once per session: the tables are
        written once, and every test compared with this run reads them."""
        if table not in self._rows:
            self._rows[table] = table_rows(spark, self.root, table)
        return self._rows[table]


def kill_workload_run(kafka_broker: Any, spark: Any, tmp_path_factory: Any) -> KillWorkloadRun:
    """Publish the workload and run the job over it uninterrupted, once per session."""
    if "reference" not in _runs:
        bootstrap = kafka_broker.bootstrap_servers
        root = tmp_path_factory.mktemp("kill-workload") / "uninterrupted"
        config, topics = job_config(bootstrap, root, PREFIX, **_BATCHES)
        publish(bootstrap, workload(), topics)
        started = time.monotonic()
        run_available(spark, config)
        commits = sum(Progress.of(root).commits.values())
        _runs["reference"] = KillWorkloadRun(
            bootstrap, config, root, batch_length_s(time.monotonic() - started, commits)
        )
    return _runs["reference"]
