"""Consumer shard snapshots of older state versions, as their own code wrote them, restored by the current code.

``tests/data/state/shard-v<N>.json.gz`` holds the simulator's ``mixed`` fleet (members' reports, consume progress)
cut into calls, and what the code of state version N wrote for the first calls: the tables' rows and the shard's
snapshot (``record_shard_snapshot.py`` beside them). The snapshot restores through the migration chain
(``shard_migrations``) with everything it held kept: memberships, generations, open episodes, expected
assignments and owners, reported assignments, the consume progress the metrics are set from, the detectors'
windows, pending changes. The rest of the calls then run on the current code; from the previous version (10) the
tables, its recorded rows included, are the ones the current code writes continuing its own state, and so they are
from version 8, the previous release's.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from streaming.contract.tables import Table
from streaming.domain.consumers.engine_settings import EngineSettings
from streaming.domain.consumers.shard_engine import SCHEMA_VERSION, SNAPSHOT_KIND, ShardEngine
from streaming.domain.consumers.shard_migrations import MIGRATIONS
from streaming.domain.state_codec import StateVersionError, oldest_readable
from tests.support.engine import TableModel, typed
from tests.support.state_versions import ENGINE_PREVIOUS_VERSION as PREVIOUS_VERSION
from tests.support.state_versions import PREVIOUS_VERSION as RELEASE_VERSION
from tests.support.state_versions import engine_as_previous as shard_as_previous
from tests.support.state_versions import engine_as_v8, engine_as_v9, v9_as_v8

DATA = Path(__file__).parents[1] / "data" / "state"
VERSIONS = sorted(MIGRATIONS)


def recorded(version: int) -> dict[str, Any]:
    with gzip.open(DATA / f"shard-v{version}.json.gz", "rt") as file:
        document: dict[str, Any] = json.load(file)
    assert document["schema_version"] == document["snapshot"]["schema_version"] == version
    return document


def run_calls(
    model: TableModel, snapshot: dict[str, Any] | None, calls: list[dict[str, Any]], final: bool
) -> dict[str, Any] | None:
    """``calls`` on the current code, each from the snapshot the one before left (a JSON round trip, as the state
    store keeps it); ``final``: then an empty call at the last event's time (``test_batch_invariance.run``)."""
    last = max(int(e["event_time"]) for call in calls for e in call["events"]) if final else None
    for call in calls + ([{"events": [], "watermark_ms": last, "lanes": {}}] if final else []):
        engine = ShardEngine.restore(snapshot, EngineSettings())
        model.apply(engine.apply(typed(call["events"]), call["watermark_ms"], call["lanes"]))
        snapshot = json.loads(json.dumps(engine.snapshot()))
    return snapshot


def test_the_chain_reads_every_version_a_recorded_snapshot_exists_for():
    assert oldest_readable(SCHEMA_VERSION, MIGRATIONS) == VERSIONS[0]
    assert VERSIONS == list(range(VERSIONS[0], SCHEMA_VERSION))
    assert sorted(int(p.name.split("-v")[1].split(".")[0]) for p in DATA.glob("shard-v*.json.gz")) == VERSIONS
    with pytest.raises(
        StateVersionError, match=rf"schema_version {VERSIONS[0] - 1} .* reads {VERSIONS[0]} to {SCHEMA_VERSION}"
    ):
        ShardEngine.restore({**recorded(VERSIONS[0])["snapshot"], "schema_version": VERSIONS[0] - 1}, EngineSettings())
    assert SNAPSHOT_KIND == "shard"


@pytest.mark.parametrize("version", VERSIONS)
def test_a_snapshot_its_own_version_wrote_restores_with_everything_it_held(version):
    old = recorded(version)["snapshot"]
    current = ShardEngine.restore(json.loads(json.dumps(old)), EngineSettings()).snapshot()
    assert current["schema_version"] == SCHEMA_VERSION
    migrated = engine_as_v8(current)  # its groups' texts as objects
    if version > RELEASE_VERSION:  # texts: compared as the objects they hold
        old = {**v9_as_v8(old), "schema_version": version}
    shard_keys = {"routes", "retired", "lanes", "progress"}
    assert set(migrated) == set(old) == shard_keys | {"schema_version", "groups"}
    assert {k: migrated[k] for k in shard_keys} == {k: old[k] for k in shard_keys}
    assert migrated["groups"].keys() == old["groups"].keys()
    for group, state in old["groups"].items():
        assert {k: migrated["groups"][group][k] for k in state} == state, group
    # The fleet is one the comparison means something for: open episodes, expected shares, progress, generations.
    groups = old["groups"].values()
    assert sum(len(s["episodes"]) for s in groups) >= 3
    assert sum(len(clients) for s in groups for clients in s["assigned"].values()) >= 20
    assert old["progress"] and max(s["generation"] for s in groups) >= 5
    if version >= 6:
        assert any(s["pending"] for s in groups)  # changes not cut yet carried across


@pytest.mark.parametrize("previous", [PREVIOUS_VERSION, RELEASE_VERSION])
def test_after_upgrading_from_the_previous_version_the_tables_are_those_of_the_current_codes_own_state(previous):
    """Version 10 (and 8, the previous release) wrote the first calls' rows and snapshot; the current code runs the
    rest from that snapshot, and from its own snapshot of the same calls: the tables (every row, the first calls'
    included) are the same."""
    old = recorded(previous)
    split, calls = old["upgrade_after"], old["calls"]
    upgraded = TableModel()
    for rows in old["rows"]:
        upgraded.apply_rows(rows)
    run_calls(upgraded, old["snapshot"], calls[split:], final=True)
    continued = TableModel()
    run_calls(continued, run_calls(continued, None, calls[:split], final=False), calls[split:], final=True)
    tables = continued.tables()
    assert upgraded.tables() == tables
    assert {
        Table.QUEUE_HOLDERS_CURRENT,
        Table.QUEUE_PROGRESS_CURRENT,
        Table.GROUP_SNAPSHOTS,
        Table.ANOMALY_EPISODES,
        Table.ANOMALIES_CURRENT,
        Table.CURRENT_ASSIGNMENT,
    } <= set(tables)


def test_the_previous_version_the_job_tests_write_is_what_that_version_wrote():
    """``state_versions.engine_as_previous`` of the current code's snapshot after the same calls is version 10's,
    ``engine_as_v9`` of that version 9's, and ``engine_as_v8`` version 8's (the previous release's, which the job's
    upgrade test writes)."""
    old = recorded(PREVIOUS_VERSION)
    current = run_calls(TableModel(), None, old["calls"][: old["upgrade_after"]], final=False)
    assert current is not None and current["schema_version"] == PREVIOUS_VERSION + 1
    assert current["group_times"].keys() == current["groups"].keys()  # the keys dropped held something
    assert shard_as_previous(current) == old["snapshot"]
    assert engine_as_v9(shard_as_previous(current)) == recorded(9)["snapshot"]
    assert engine_as_v8(current) == recorded(RELEASE_VERSION)["snapshot"]


def test_a_version_5_state_runs_on_with_its_generations_and_episodes_continued():
    """Version 5 cut every change at its batch's end, so its tables differ from the current code's; the groups'
    numbering and open episodes go on from where it left them."""
    old = recorded(5)
    before = old["snapshot"]["groups"]
    after = run_calls(TableModel(), old["snapshot"], old["calls"][old["upgrade_after"] :], final=True)
    assert after is not None
    after = engine_as_v8(after)
    for group, state in before.items():
        assert after["groups"][group]["generation"] >= state["generation"], group
    opened = {e["episode_id"] for s in before.values() for e in s["episodes"]}
    still = {e["episode_id"] for s in after["groups"].values() for e in s["episodes"]}
    assert opened & still  # an episode open before the upgrade is the same episode after it
