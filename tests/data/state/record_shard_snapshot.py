"""Records a consumer shard's snapshot, as the code on the Python path writes it, for the state-migration tests.

The input is the simulator's ``mixed`` scenario with its members' reports and consume progress, applied in calls
of ``CALL_EVENTS`` events, each call's watermark the newest event of the calls before it less ``DELAY_MS``, each
lane's newest channel event passed as the job passes it (``tests/unit/test_batch_invariance.py``). The first
``UPGRADE_AFTER`` calls run here; the file written holds every call's input, the snapshot after those calls, and
the rows the calls wrote (``table_rows``), so that a test replays the rest with the current code.

    PYTHONPATH=<a checkout of the version to record> python tests/data/state/record_shard_snapshot.py OUT.json
"""

from __future__ import annotations

import json
import sys
import zlib
from typing import Any

from streaming.app.simulation.fleet import Simulation, build_scenario
from streaming.domain.consumers.engine_settings import EngineSettings
from streaming.domain.consumers.outcomes import IgnoredEvent
from streaming.domain.consumers.shard_engine import SCHEMA_VERSION, ShardEngine
from streaming.job.delta.table_rows import table_rows
from tests.support.engine import typed

START_MS = 1_700_000_000_000
FLEET_MS = 100_000
DELAY_MS = 10_000
CALL_EVENTS = 40
UPGRADE_AFTER = 6
_RANK = {"topic_route": 0, "consumer_channel": 1, "consumer_connections": 1}


def lane(event: dict[str, Any]) -> str:
    return f"consumer-events/{zlib.crc32(event['group'].encode()) % 2}"


def calls() -> list[dict[str, Any]]:
    simulation = Simulation(build_scenario("mixed", 1), START_MS, 1, sends_per_second=0, assignment_reports=True)
    events = [e for e in simulation.events_until(START_MS + FLEET_MS) if e["type"] != "send_result"]
    events.sort(key=lambda e: (int(e["event_time"]), _RANK.get(e["type"], 2)))
    out, newest = [], None
    for start in range(0, len(events), CALL_EVENTS):
        call = events[start : start + CALL_EVENTS]
        lanes: dict[str, int] = {}
        for e in call:
            if e["type"] == "consumer_channel":
                lanes[lane(e)] = max(int(e["event_time"]), lanes.get(lane(e), 0))
        out.append({"events": call, "watermark_ms": 0 if newest is None else newest - DELAY_MS, "lanes": lanes})
        newest = max([int(e["event_time"]) for e in call] + ([] if newest is None else [newest]))
    return out


def main(path: str) -> None:
    inputs = calls()
    snapshot: dict[str, Any] | None = None
    rows = []
    for call in inputs[:UPGRADE_AFTER]:
        engine = ShardEngine.restore(snapshot, EngineSettings())
        outcomes = engine.apply(typed(call["events"]), call["watermark_ms"], call["lanes"])
        rows.append(json.loads(json.dumps(table_rows(o for o in outcomes if type(o) is not IgnoredEvent), default=str)))
        snapshot = json.loads(json.dumps(engine.snapshot()))
    document = {"schema_version": SCHEMA_VERSION, "calls": inputs, "upgrade_after": UPGRADE_AFTER}
    document |= {"rows": rows, "snapshot": snapshot}
    with open(path, "w") as out:
        json.dump(document, out, separators=(",", ":"), sort_keys=True)
        out.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
