"""The job's Delta tables created once per test session, then copied into each test root before its job starts.

A job creates its tables on start (``DeltaTables.ensure_all``), one Delta commit each, and nearly every test
root used to pay for that. An empty Delta table is a directory whose log names no absolute path, so a copy of
one is the table the job would create there, given the same table properties ([delta] settings,
``DeltaTables.properties``): one template per set of them. Each copy gets a table id and a creation time of
its own, as a creation would give it. Tests whose subject is table creation do not use it.
"""

from __future__ import annotations

import atexit
import json
import shutil
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from streaming.config import MonitorConfig
from streaming.contract.tables import TABLES
from streaming.job.delta.sinks import DeltaTables

FIRST_COMMIT = "00000000000000000000.json"
FIRST_CHECKSUM = "00000000000000000000.crc"

# Template directories by the table properties they were created with, for this process's lifetime.
_templates: dict[tuple[tuple[str, str], ...], Path] = {}
_templates_root: list[Path] = []


def job_tables(session: Any, root: str | Path, config: MonitorConfig) -> DeltaTables:
    """The tables under ``root`` with the table properties the job gives them for ``config``
    (as ``MonitorJob.start`` builds its ``DeltaTables``)."""
    d = config.delta
    return DeltaTables(
        session,
        Path(root),
        checkpoint_interval=d.checkpoint_interval,
        auto_compact=d.auto_compact,
        deleted_file_retention_hours=d.deleted_file_retention_hours,
        log_retention_hours=d.log_retention_hours,
        append_checkpoint_interval=d.append_checkpoint_interval,
    )


def properties_key(config: MonitorConfig) -> tuple[tuple[str, str], ...]:
    """What distinguishes one template from another: every table's properties for ``config``."""
    tables = job_tables(None, ".", config)
    return tuple(sorted((f"{name}:{k}", v) for name in TABLES for k, v in tables.properties(TABLES[name].kind).items()))


def seed_tables(delta_root: str | Path, config: MonitorConfig) -> list[str]:
    """Copy into ``delta_root`` every table of the catalogue it does not hold yet, from the template for
    ``config``'s table properties (created first if this process has none: that needs a running Spark session).
    Returns the tables copied; none when no template exists and no Spark session runs here, in which case the
    job creates its tables itself."""
    template = _template(config)
    if template is None:
        return []
    root = Path(delta_root).resolve()
    root.mkdir(parents=True, exist_ok=True)
    copied = []
    for name in TABLES:
        target = root / name
        if target.exists():
            continue  # a table the job already created or wrote, or whatever a test put there on purpose
        shutil.copytree(template / name, target, copy_function=shutil.copyfile)  # commit times are file times
        _new_identity(target)
        copied.append(name)
    return copied


def _template(config: MonitorConfig) -> Path | None:
    key = properties_key(config)
    if key not in _templates:
        from pyspark.errors import PySparkRuntimeError
        from pyspark.sql import SparkSession

        try:
            session = SparkSession.active()  # the thread's active session, else the process's default one
        except PySparkRuntimeError:
            return None
        template = Path(tempfile.mkdtemp(prefix="tables-", dir=_root()))
        job_tables(session, template, config).ensure_all()
        _templates[key] = template
    return _templates[key]


def _root() -> Path:
    if not _templates_root:
        _templates_root.append(Path(tempfile.mkdtemp(prefix="rrm-table-templates-")))
        atexit.register(shutil.rmtree, _templates_root[0], True)
    return _templates_root[0]


def _new_identity(table: Path) -> None:
    """Give the copied table's first commit (and its checksum) a table id, commit id and creation time of its own."""
    log = table / "_delta_log"
    now_ms = int(time.time() * 1000)
    table_id, commit_id = str(uuid.uuid4()), str(uuid.uuid4())

    def rewritten(action: dict[str, Any]) -> dict[str, Any]:
        if "metaData" in action:
            action["metaData"].update(id=table_id, createdTime=now_ms)
        if "commitInfo" in action:
            action["commitInfo"]["timestamp"] = now_ms
            if "txnId" in action["commitInfo"]:
                action["commitInfo"]["txnId"] = commit_id
        return action

    commit = log / FIRST_COMMIT
    actions = [rewritten(json.loads(line)) for line in commit.read_text().splitlines() if line]
    commit.write_text("".join(json.dumps(a, separators=(",", ":")) + "\n" for a in actions))
    checksum = log / FIRST_CHECKSUM
    if checksum.exists():
        text = checksum.read_text()
        state = json.loads(text)
        state["metadata"].update(id=table_id, createdTime=now_ms)
        if "txnId" in state:
            state["txnId"] = commit_id
        checksum.write_text(json.dumps(state, separators=(",", ":")) + text[len(text.rstrip()) :])
    for side_file in log.glob(".*.crc"):  # Hadoop's checksums of the files just rewritten
        side_file.unlink()
