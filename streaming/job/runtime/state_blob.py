"""A stateful query's state per key as one compressed JSON document (state schema ``blob BINARY``).

The consumer query and the fault replay key their state by a few shards and keep everything of a shard in
one value, read and rewritten once per batch; this is the codec both use. A document is one zlib stream of its
JSON, or, when it holds maps of JSON texts (``compress``'s ``texts``: the consumer shard's groups), *segmented*:
the rest of the document in one stream and each map's texts in segments of their own, a text's segment chosen by
its name, so that a segment whose texts are those the blob was read with is written again as it was read, not
compressed again; ``load`` inflates a segment only when one of its texts is read (``UnreadText``). Why:
``docs/design/state-snapshots.md``, "The state blob".
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Collection, Mapping
from typing import Any

SCHEMA = "blob BINARY"

# One encoder for every state: ``json.dumps`` with separators builds a new encoder per call.
encode = json.JSONEncoder(separators=(",", ":")).encode
# A segmented blob starts with these bytes (a zlib stream never starts with 0), then its frames, each its length
# (4 bytes, little-endian) and its bytes: the rest of the document first, then the segments.
SEGMENTED = b"\x00rsb"
# A segment holds about this many characters of texts: a map's segments are the fewest power of two that keeps
# them below it (so that a map growing or shrinking moves its texts to other segments only at a doubling).
SEGMENT_CHARS = 64 * 1024
# Level 1: the blob is rewritten every batch; higher levels cost more CPU than the bytes they save.
LEVEL = 1
_MAP = "\x00texts"  # in the stored document: {_MAP: n}, the n-th map of texts
_FRAME = struct.Struct("<I")
# The segments of the blob decoded last ((its map's place, names) -> (texts, compressed bytes)), for ``compress`` to
# write again those whose texts are still the very objects it decoded (held here, so no other object can be one).
_read: dict[tuple[int, tuple[str, ...]], tuple[tuple[Any, ...], bytes]] = {}


class _Segment:
    """A segment's compressed bytes, inflated at the first read of one of its texts."""

    __slots__ = ("data", "_joined")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self._joined: str | None = None

    def joined(self) -> str:
        if self._joined is None:
            self._joined = zlib.decompress(self.data).decode()
        return self._joined


class UnreadText:
    """A text of a map of texts as ``load`` hands it over: its length known, its segment inflated by ``str`` (once
    per segment). Written unchanged, its segment is the bytes read."""

    __slots__ = ("_segment", "_start", "_length")

    def __init__(self, segment: _Segment, start: int, length: int) -> None:
        self._segment, self._start, self._length = segment, start, length

    def __str__(self) -> str:
        return self._segment.joined()[self._start : self._start + self._length]

    def __len__(self) -> int:
        return self._length


_TEXTS = (str, UnreadText)  # what a map of texts holds


def load(state: Any) -> Any | None:
    """The stored document of a ``GroupState``, None when the key has no state; its maps' texts ``UnreadText``
    (the engine reads a text with ``str``, ``encoded_states``)."""
    if not state.exists:
        return None
    (blob,) = state.get
    return decode(blob, unread=True)


def decode(blob: bytes | bytearray, unread: bool = False) -> Any:
    """A stored document from its blob (as ``GroupState`` or Spark's state data source hands it over); ``unread``:
    its maps' texts as ``UnreadText``, not inflated yet."""
    blob = bytes(blob)
    if not blob.startswith(SEGMENTED):
        return json.loads(zlib.decompress(blob))
    frames, at = [], len(SEGMENTED)
    while at < len(blob):
        (size,) = _FRAME.unpack_from(blob, at)
        frames.append(blob[at + _FRAME.size : at + _FRAME.size + size])
        at += _FRAME.size + size
    stored = json.loads(zlib.decompress(frames[0]))
    _read.clear()
    maps = [_read_map(place, spec, frames, unread) for place, spec in enumerate(stored["maps"])]
    return _with_maps(stored["document"], maps)


def compress(value: Any, texts: Collection[str] = ()) -> bytes:
    """A document as the blob ``decode`` reads back; ``texts``: the keys of its maps of JSON texts (name -> text),
    stored segmented (at any depth of nested objects)."""
    if not texts:
        return zlib.compress(encode(value).encode(), LEVEL)
    specs: list[dict[str, Any]] = []
    segments: list[bytes] = []
    document = _without_maps(value, frozenset(texts), specs, segments)
    _read.clear()
    head = zlib.compress(encode({"document": document, "maps": specs}).encode(), LEVEL)
    return b"".join([SEGMENTED, *(part for frame in (head, *segments) for part in (_FRAME.pack(len(frame)), frame))])


def store(state: Any, value: Any, texts: Collection[str] = ()) -> None:
    state.update((compress(value, texts),))


def _buckets(names: list[str], count: int) -> list[list[int]]:
    """Each segment's names (their indices, in the map's order)."""
    buckets: list[list[int]] = [[] for _ in range(count)]
    for i, name in enumerate(names):
        buckets[zlib.crc32(name.encode()) % count].append(i)
    return buckets


def _without_maps(value: Any, keys: frozenset[str], specs: list[dict[str, Any]], segments: list[bytes]) -> Any:
    """``value`` with each map of texts under ``keys`` replaced by its reference, its segments appended."""
    if not isinstance(value, Mapping):
        return value
    out = {}
    for key, item in value.items():
        if key in keys and isinstance(item, Mapping) and all(type(t) in _TEXTS for t in item.values()):
            out[key] = {_MAP: len(specs)}
            specs.append(_segmented(len(specs), item, segments))
        elif isinstance(item, Mapping):
            out[key] = _without_maps(item, keys, specs, segments)
        else:
            out[key] = item
    return out


def _segmented(place: int, texts: Mapping[str, str], segments: list[bytes]) -> dict[str, Any]:
    """A map's texts as segments (appended to ``segments``; a segment read unchanged as it was read) and the map's
    reference: its names in order, each text's length, how many segments and each one's frame (0: empty)."""
    names, values = list(texts), list(texts.values())
    lengths = [len(t) for t in values]
    count = 1
    while sum(lengths) > count * SEGMENT_CHARS:
        count *= 2
    frames = []
    for members in _buckets(names, count):
        if not members:
            frames.append(0)
            continue
        key, held = (place, tuple(names[i] for i in members)), tuple(values[i] for i in members)
        read = _read.get(key)
        if read is not None and all(a is b for a, b in zip(read[0], held, strict=True)):
            segment = read[1]
        else:
            segment = zlib.compress("".join(map(str, held)).encode(), LEVEL)
        segments.append(segment)
        frames.append(len(segments))  # frame 0 is the document
    return {"names": names, "lengths": lengths, "segments": frames}


def _read_map(place: int, spec: Mapping[str, Any], frames: list[bytes], unread: bool) -> dict[str, Any]:
    names, lengths, placed = spec["names"], spec["lengths"], spec["segments"]
    texts: list[Any] = [""] * len(names)
    for members, frame in zip(_buckets(names, len(placed)), placed, strict=True):
        if not members:
            continue
        at = 0
        if unread:
            segment = _Segment(frames[frame])
            for i in members:
                texts[i] = UnreadText(segment, at, lengths[i])
                at += lengths[i]
        else:
            joined = zlib.decompress(frames[frame]).decode()
            for i in members:
                texts[i] = joined[at : at + lengths[i]]
                at += lengths[i]
        _read[place, tuple(names[i] for i in members)] = (tuple(texts[i] for i in members), frames[frame])
    return dict(zip(names, texts, strict=True))


def _with_maps(value: Any, maps: list[dict[str, str]]) -> Any:
    """The stored document with each reference replaced by its map of texts (in place)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, dict):
                value[key] = maps[item[_MAP]] if _MAP in item else _with_maps(item, maps)
    return value
