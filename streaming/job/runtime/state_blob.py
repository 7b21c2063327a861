"""A stateful query's state per key as one zlib-compressed JSON document (state schema ``blob BINARY``).

The consumer query and the fault replay key their state by a few shards and keep everything of a shard in
one value, read and rewritten once per batch; this is the codec both use.
"""

from __future__ import annotations

import json
import zlib
from typing import Any

SCHEMA = "blob BINARY"

# One encoder for every state: ``json.dumps`` with separators builds a new encoder per call.
encode = json.JSONEncoder(separators=(",", ":")).encode


def load(state: Any) -> Any | None:
    """The stored document of a ``GroupState``, None when the key has no state."""
    if not state.exists:
        return None
    (blob,) = state.get
    return decode(blob)


def decode(blob: bytes | bytearray) -> Any:
    """A stored document from its blob (as ``GroupState`` or Spark's state data source hands it over)."""
    return json.loads(zlib.decompress(bytes(blob)))


def compress(value: Any) -> bytes:
    """A document as the blob ``decode`` reads back."""
    # Level 1: the blob is rewritten every batch; higher levels cost more CPU than the bytes they save.
    return zlib.compress(encode(value).encode(), 1)


def store(state: Any, value: Any) -> None:
    state.update((compress(value),))
