"""Every kind of kept state through the one codec (``streaming.domain.state_codec``).

Checkpoints written before the codec must still restore: one literal snapshot per kind, as that code wrote it
(a JSON round trip, as the state store keeps it), restores and snapshots again to the same document, key
order included. A snapshot of a schema version no chain of migrations leads from (newer, or older than the kind's
chain) raises ``StateVersionError`` naming the kind and the versions; an older one within the chain is migrated
step by step (the consumer shard's, with snapshots older code wrote: ``test_state_migrations.py``). The version
rule: ``docs/design/state-snapshots.md``.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping
from typing import Any
from unittest import mock

import pytest

from streaming.domain.consumers import membership_snapshot
from streaming.domain.consumers.encoded_states import encode_text
from streaming.domain.consumers.engine_settings import EngineSettings
from streaming.domain.consumers.shard_engine import TEXT_KEYS, ShardEngine
from streaming.domain.faults import shard as fault_shard
from streaming.domain.faults.tolerance import PRESETS
from streaming.domain.faults.tracker import FaultWindowTracker
from streaming.domain.state_codec import StateVersionError, unwrap_state, wrap_state
from streaming.job.runtime import state_blob

MEMBERSHIP = {
    "schema_version": 2,
    "group": "G",
    "views": {
        "broker-a": {
            "channels": ["10.0.0.1:1"],
            "client_ids": ["c1"],
            "last_update_ms": [130000],
            "client_versions": ["V5_3_3"],
            "allocate_strategies": [None],
            "message_models": ["CLUSTERING"],
            "consume_types": ["CONSUME_PASSIVELY"],
            "topics": [0],
            "topic_lists": [[["T", "*"]]],
            "subscriptions": [["T", "*", 1]],
            "removed_at_ms": {"10.0.0.2:1": 121001},
            "poll": None,
        },
        "broker-b": {
            "channels": ["10.0.0.1:1", "10.0.0.9:1"],
            "client_ids": ["c1", "c1"],
            "last_update_ms": [1500, 1500],
            "client_versions": [None, None],
            "allocate_strategies": [None, None],
            "message_models": ["CLUSTERING", "CLUSTERING"],
            "consume_types": ["CONSUME_PASSIVELY", "CONSUME_PASSIVELY"],
            "topics": [0, 0],
            "topic_lists": [[["T", "*"]]],
            "subscriptions": [["T", "*", 1]],
            "removed_at_ms": {},
            "poll": [1500, 30000, True, "collector-1"],
        },
    },
}

SHARD = {
    "schema_version": 8,
    "routes": {"T": {"event_time_ms": 0, "queues": [["broker-a", 0], ["broker-a", 1]]}},
    "groups": {
        "G": {
            "membership": MEMBERSHIP,  # the membership literal above: the same group, as the shard holds it
            "generation": 2,
            "owners": {"T": {"broker-a/0": ["c1"], "broker-a/1": ["c1"]}},
            "assigned": {"T": ["c1"]},
            "episodes": [],
            "rebalances_ms": [1000, 121001, 130000],
            "reported": {"c1\x00T": [["broker-a", 0]]},
            "member_changes": {"c1": [[1000, "JOIN"], [121001, "LEAVE"], [130000, "JOIN"]]},
            "converge_by_ms": 150000,
            "holders": {
                "c1\x00T": {"orderly": False, "queues": [["broker-a", 0, 10, 2, 1, 10, 11, None, None, 1000, 1000]]}
            },
            # the storm detector's changes (episodes.StormDetector): c1 left and came back, T's route changed
            "storm_changes": [[121001, "c1", "LEAVE"], [125000, "T", "ROUTE"], [130000, "c1", "JOIN"]],
            # the changes not cut yet (first, last, triggers, rebalance times): c1's join, then its report
            "pending": [130000, 130400, ["JOIN", "REPORTED_ASSIGNMENT"], [130000]],
            # their cut made where the last call ended: its time, its outcomes' digest, the current rows it wrote
            "provisional": [130400, "0f3c2a9b1d4e5f607182", {"assign": [["T", "c1"]], "episodes": [], "views": []}],
            # each open episode's current row: its last transition's time and generation (none open here)
            "episode_rows": {},
            # c1's report of T: reported since 130400, last at 130400; the generation of 130000; no observed
            # candidate waiting; the holders rows written of T's queues
            "reported_ms": {"c1\x00T": [130400, 130400]},
            "generation_ms": 130000,
            "observing": False,
            "holder_rows": {"T": ["broker-a/0", "broker-a/1"]},
        }
    },
    "retired": {},
    "lanes": {"consumer-events/0": 150000, "consumer-events/3": 149000},
    "progress": {
        "G": {
            "queues": [
                [
                    "T",
                    "broker-a",
                    0,
                    "OK",
                    None,
                    140000,
                    [
                        [
                            140000,
                            True,
                            12,
                            10,
                            139000,
                            None,
                            None,
                            [["c1", 10, 2, 1, 10, 11, 140000, 140000, False, True, 140000]],
                            "c1",
                            True,
                        ]
                    ],
                    # the open rebalance cost (rebalance_cost.Handoff): c0 left at 130 s, c1 owns the queue
                    [3, 130000, "c0", "c1", 110000, False, 2, 10, 10, 140000, 10, 10, 1, 10000, 0, None, 2, None],
                ]
            ],
            "episodes": [],
        }
    },
}

ROCKETMQ_5_TABLE = {
    "name": "rocketmq-5",
    "latency_max_ms": [50, 100, 550, 1800, 3000, 5000, 15000],
    "not_available_duration_ms": [0, 0, 2000, 5000, 6000, 10000, 30000],
    "isolation_latency_ms": 10000,
    "semantics": "extend-only",
}

FAULT_TRACKER = {
    "schema_version": 1,
    "fault_table": ROCKETMQ_5_TABLE,
    "detector_enabled": True,
    "clock_ms": 20,
    "items": [
        {
            "producer_id": "P",
            "broker": "broker-a",
            "current_latency_ms": 5,
            "start_timestamp_ms": 10000,
            "reachable": False,
            "last_event_ms": 0,
            "fault_enabled": True,
            "window": {
                "window_start_ms": 0,
                "window_end_ms": 10000,
                "opened_by": {
                    "event_time_ms": 0,
                    "latency_ms": 5,
                    "outcome": "REMOTING_ERROR",
                    "isolation": True,
                    "level": 5,
                    "duration_ms": 10000,
                },
                "last_moved_by": {
                    "event_time_ms": 0,
                    "latency_ms": 5,
                    "outcome": "REMOTING_ERROR",
                    "isolation": True,
                    "level": 5,
                    "duration_ms": 10000,
                },
            },
        },
        {
            "producer_id": "P",
            "broker": "broker-b",
            "current_latency_ms": 3000,
            "start_timestamp_ms": 6010,
            "reachable": True,
            "last_event_ms": 10,
            "fault_enabled": True,
            "window": {
                "window_start_ms": 10,
                "window_end_ms": 6010,
                "opened_by": {
                    "event_time_ms": 10,
                    "latency_ms": 3000,
                    "outcome": "OK",
                    "isolation": False,
                    "level": 4,
                    "duration_ms": 6000,
                },
                "last_moved_by": {
                    "event_time_ms": 10,
                    "latency_ms": 3000,
                    "outcome": "OK",
                    "isolation": False,
                    "level": 4,
                    "duration_ms": 6000,
                },
            },
        },
        {
            "producer_id": "P",
            "broker": "broker-c",
            "current_latency_ms": 0,
            "start_timestamp_ms": 0,
            "reachable": True,
            "last_event_ms": 20,
            "fault_enabled": False,
            "window": None,
        },
    ],
}

FAULT_SHARD = {
    "schema_version": 1,
    "pairs": [
        [
            "P",
            "broker-a",
            5000,
            "PG",
            {
                "schema_version": 1,
                "fault_table": ROCKETMQ_5_TABLE,  # each tracker stores its table whole
                "detector_enabled": False,
                "clock_ms": 0,
                "items": [
                    {
                        "producer_id": "P",
                        "broker": "broker-a",
                        "current_latency_ms": 2000,
                        "start_timestamp_ms": 5000,
                        "reachable": True,
                        "last_event_ms": 0,
                        "fault_enabled": True,
                        "window": {
                            "window_start_ms": 0,
                            "window_end_ms": 5000,
                            "opened_by": {
                                "event_time_ms": 0,
                                "latency_ms": 2000,
                                "outcome": "OK",
                                "isolation": False,
                                "level": 3,
                                "duration_ms": 5000,
                            },
                            "last_moved_by": {
                                "event_time_ms": 0,
                                "latency_ms": 2000,
                                "outcome": "OK",
                                "isolation": False,
                                "level": 3,
                                "duration_ms": 5000,
                            },
                        },
                    }
                ],
            },
        ]
    ],
}


# Version 9 keeps each group's state and progress as its JSON text, with the times each wakes: the same shard.
SHARD_V9 = {
    "schema_version": 9,
    "routes": SHARD["routes"],
    "groups": {g: encode_text(state) for g, state in SHARD["groups"].items()},
    "group_times": {"G": [131400, 0]},  # its channel's expiry; 0: changes pending, every call's end cuts them
    "retired": SHARD["retired"],
    "lanes": SHARD["lanes"],
    "progress": {g: encode_text(progress) for g, progress in SHARD["progress"].items()},
    "progress_times": {"G": [440001]},
}


# Version 10 notes, with a group's times, each polled view's last poll (none here) and whether a view is fed by
# heartbeats (this group's is).
SHARD_V10 = {**SHARD_V9, "schema_version": 10, "group_times": {"G": [131400, 0, {}, True]}}
# Version 11 notes each polled view's channels and collector too (none here).
SHARD_V11 = {**SHARD_V10, "schema_version": 11}


def same_document(got: Mapping[str, Any], expected: Mapping[str, Any]) -> None:
    assert got == expected
    assert state_blob.encode(got) == state_blob.encode(expected)  # the stored bytes: key order included


def test_a_membership_snapshot_restores_and_snapshots_to_the_same_document():
    same_document(membership_snapshot.snapshot(membership_snapshot.restore(MEMBERSHIP)), MEMBERSHIP)


def test_a_shard_snapshot_restores_and_snapshots_to_the_same_document():
    same_document(ShardEngine.restore(SHARD_V11, EngineSettings()).snapshot(), SHARD_V11)
    same_document(ShardEngine.restore(SHARD_V10, EngineSettings()).snapshot(), SHARD_V11)  # version 10, migrated
    same_document(ShardEngine.restore(SHARD_V9, EngineSettings()).snapshot(), SHARD_V11)  # version 9, migrated
    same_document(ShardEngine.restore(SHARD, EngineSettings()).snapshot(), SHARD_V11)  # version 8, migrated


def test_a_fault_tracker_snapshot_restores_and_snapshots_to_the_same_document():
    same_document(FaultWindowTracker.from_dict(FAULT_TRACKER, PRESETS.values()).to_dict(), FAULT_TRACKER)
    same_document(FaultWindowTracker.from_dict(FAULT_TRACKER).to_dict(), FAULT_TRACKER)  # table read from the data


def test_a_fault_shard_snapshot_restores_and_snapshots_to_the_same_document():
    pairs = fault_shard.pairs_from_snapshot(FAULT_SHARD)
    same_document(fault_shard.pairs_snapshot(pairs), FAULT_SHARD)
    for stored in pairs.values():  # and the trackers inside it
        same_document(FaultWindowTracker.from_dict(stored.tracker).to_dict(), stored.tracker)


RESTORES: list[tuple[str, Callable[[Mapping[str, Any]], object], Mapping[str, Any], int]] = [
    ("membership", membership_snapshot.restore, MEMBERSHIP, 2),
    ("shard", lambda data: ShardEngine.restore(data, EngineSettings()), SHARD_V11, 11),
    ("fault tracker", FaultWindowTracker.from_dict, FAULT_TRACKER, 1),
    ("fault shard", fault_shard.pairs_from_snapshot, FAULT_SHARD, 1),
]


@pytest.mark.parametrize(("kind", "restore", "snapshot", "version"), RESTORES, ids=[r[0] for r in RESTORES])
@pytest.mark.parametrize("missing", [False, True], ids=["another version", "no version"])
def test_a_snapshot_of_another_version_raises_the_one_error(kind, restore, snapshot, version, missing):
    assert snapshot["schema_version"] == version
    if missing:
        data, found = {k: v for k, v in snapshot.items() if k != "schema_version"}, None
    else:
        data, found = {**snapshot, "schema_version": version + 1}, version + 1
    with pytest.raises(StateVersionError) as raised:
        restore(data)
    error = raised.value
    assert isinstance(error, ValueError)  # callers that catch ValueError still do
    assert (error.kind, error.found, error.expected) == (kind, found, version)
    reads = f"{error.oldest} to {version}" if error.oldest < version else str(version)
    assert str(error) == (
        f"{kind} snapshot schema_version {found!r} is not supported (this code reads {reads}); "
        "a new checkpoint is needed, see docs/deploy.md, Upgrading for what it loses"
    )


def step(added: str):  # type: ignore[no-untyped-def]
    """A migration adding one key, recording the order the chain applies them in."""
    return lambda snapshot: {**snapshot, added: True, "order": [*snapshot.get("order", []), added]}


def test_an_older_snapshot_is_migrated_step_by_step_up_to_the_version_read():
    chain = {2: step("three"), 3: step("four")}
    migrated = unwrap_state("thing", 4, {"schema_version": 2, "a": 1}, chain)
    assert migrated == {"schema_version": 4, "a": 1, "three": True, "four": True, "order": ["three", "four"]}
    assert list(migrated)[0] == "schema_version"
    assert unwrap_state("thing", 4, {"schema_version": 3, "a": 1}, chain)["order"] == ["four"]


@pytest.mark.parametrize("found", [1, 5, "3", None], ids=["older than the chain", "newer", "a string", "none"])
def test_a_version_no_chain_leads_from_names_what_the_code_reads(found):
    with pytest.raises(StateVersionError) as raised:
        unwrap_state("thing", 4, {"schema_version": found}, {2: step("three"), 3: step("four")})
    assert (raised.value.found, raised.value.oldest, raised.value.expected) == (found, 2, 4)
    assert f"schema_version {found!r} is not supported (this code reads 2 to 4); a new checkpoint" in str(raised.value)
    assert "\n" not in str(raised.value)


def test_wrap_puts_the_version_first_and_unwrap_hands_back_the_snapshot():
    snapshot = wrap_state("thing", 3, {"a": 1, "b": [2]})
    assert list(snapshot) == ["schema_version", "a", "b"] and snapshot["schema_version"] == 3
    assert unwrap_state("thing", 3, snapshot) is snapshot
    with pytest.raises(ValueError, match="thing snapshot payload must not carry its own 'schema_version'"):
        wrap_state("thing", 3, {"schema_version": 2})


def shard_document(groups: int) -> dict[str, Any]:
    """A two-cluster shard document whose groups' texts fill several segments."""
    texts = {f"G{g:04d}": encode_text({"group": g, "filler": "x" * (500 + g % 7)}) for g in range(groups)}
    engine = {**SHARD_V11, "groups": texts, "progress": dict(SHARD_V11["progress"])}
    return {"schema_version": 12, "clusters": {"east": engine, "west": {**engine, "groups": {}}}}


def test_a_segmented_blob_reads_back_the_document_and_a_whole_one_still_reads():
    document = shard_document(300)
    blob = state_blob.compress(document, TEXT_KEYS)
    assert blob.startswith(state_blob.SEGMENTED)
    same_document(state_blob.decode(blob), document)
    same_document(state_blob.decode(state_blob.compress(document)), document)  # a blob written before segments


def test_a_segment_whose_texts_are_those_read_is_written_again_without_compressing_it():
    """Only the segments holding a changed, added or removed text are compressed again; the rest are the bytes read."""
    blob = state_blob.compress(shard_document(300), TEXT_KEYS)
    read = state_blob.decode(blob)
    with mock.patch.object(state_blob.zlib, "compress", wraps=zlib.compress) as compressed:
        again = state_blob.compress(read, TEXT_KEYS)
    assert again == blob and compressed.call_count == 1  # the rest of the document alone
    read = state_blob.decode(again)
    east = read["clusters"]["east"]
    east["groups"]["G0007"] = encode_text({"group": 7, "filler": "changed"})
    del east["groups"]["G0100"]
    with mock.patch.object(state_blob.zlib, "compress", wraps=zlib.compress) as compressed:
        changed = state_blob.compress(read, TEXT_KEYS)
    assert 2 <= compressed.call_count <= 3  # and the segments of G0007 and G0100
    same_document(state_blob.decode(changed), read)
    assert len(_frames(blob)) == len(_frames(changed)) > 4  # the texts are in several segments


def test_a_blob_loaded_for_the_engine_inflates_a_segment_only_when_one_of_its_texts_is_read():
    """``load`` hands a map's texts over unread (``UnreadText``): compressed again with none read, the document is
    the bytes read, the rest of it alone inflated and compressed; a text read inflates its segment, once."""
    document = shard_document(300)
    blob = state_blob.compress(document, TEXT_KEYS)
    with mock.patch.object(state_blob.zlib, "decompress", wraps=zlib.decompress) as inflated:
        read = state_blob.decode(blob, unread=True)
        groups = read["clusters"]["east"]["groups"]
        assert inflated.call_count == 1 and all(type(t) is state_blob.UnreadText for t in groups.values())
        with mock.patch.object(state_blob.zlib, "compress", wraps=zlib.compress) as compressed:
            assert state_blob.compress(read, TEXT_KEYS) == blob
        assert compressed.call_count == 1 and inflated.call_count == 1
        expected = document["clusters"]["east"]["groups"]
        assert str(groups["G0007"]) == expected["G0007"] and inflated.call_count == 2
        assert str(groups["G0007"]) == expected["G0007"] and inflated.call_count == 2  # inflated once
    same_document({g: str(t) for g, t in groups.items()}, expected)


def _frames(blob: bytes) -> list[bytes]:
    frames, at = [], len(state_blob.SEGMENTED)
    while at < len(blob):
        size = int.from_bytes(blob[at : at + 4], "little")
        frames.append(blob[at + 4 : at + 4 + size])
        at += 4 + size
    return frames
