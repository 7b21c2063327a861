"""A shard's per-group states kept as their stored JSON text until a call reads them.

``EncodedStates`` maps a group to its state (``GroupState``, ``GroupProgress``): restored from a snapshot, each
value stays the text the snapshot held, with the times the snapshot noted for it (which the call may move,
``retimed``), until it is read; a value read or written in the call is re-encoded at the next snapshot, the others
keep their text. So a call decodes and encodes only the groups it touches. Why exact:
``docs/design/state-snapshots.md``, "Groups a batch does not touch".
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from typing import Any, Generic, NamedTuple, TypeVar

T = TypeVar("T")

# One encoder for every group's text (``json.dumps`` with separators builds a new encoder per call).
encode_text = json.JSONEncoder(separators=(",", ":")).encode


class Encoded(NamedTuple):
    """A group's state as the snapshot held it: its JSON text and the times noted with it (None: none noted). The
    text may be an object whose ``str`` is the text (the job's state blob hands over texts it has not inflated
    yet, ``state_blob.UnreadText``): it is read only when the state is, and handed on as it is otherwise."""

    text: Any
    times: Any


class EncodedStates(MutableMapping[str, T], Generic[T]):
    """Group -> state, decoding (``decode``, from the JSON object and the times noted with it) a stored text at its
    first read."""

    __slots__ = ("_items", "_decode")

    def __init__(self, items: dict[str, Any], decode: Callable[[Any, Any], T]) -> None:
        self._items = items  # group -> a decoded state, or its ``Encoded`` text
        self._decode = decode

    @classmethod
    def restored(
        cls, texts: Mapping[str, str], times: Mapping[str, Any], decode: Callable[[Any, Any], T]
    ) -> EncodedStates[T]:
        return cls({g: Encoded(text, times.get(g)) for g, text in texts.items()}, decode)

    def encoded(self, group: str) -> Encoded | None:
        """The group's stored text and times when the call has not read its state, else None."""
        value = self._items.get(group)
        return value if type(value) is Encoded else None

    def encoded_items(self) -> Iterator[tuple[str, Encoded]]:
        """Each group the call has not read, with its stored text and times."""
        return ((g, v) for g, v in self._items.items() if type(v) is Encoded)

    def retimed(self, group: str, times: Any) -> None:
        """The times noted with a group the call has not read, replaced (its text kept)."""
        value = self._items[group]
        assert type(value) is Encoded
        self._items[group] = Encoded(value.text, times)

    def __getitem__(self, group: str) -> T:
        value = self._items[group]
        if type(value) is Encoded:
            text = value.text if type(value.text) is str else str(value.text)
            value = self._items[group] = self._decode(json.loads(text), value.times)
        return value  # type: ignore[no-any-return]

    def get(self, group: str, default: Any = None) -> Any:
        return self[group] if group in self._items else default

    def __setitem__(self, group: str, value: T) -> None:
        self._items[group] = value

    def __delitem__(self, group: str) -> None:
        del self._items[group]

    def __contains__(self, group: object) -> bool:
        return group in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)


def encoded_payload(
    states: Mapping[str, T], to_json: Callable[[T], Any], times_of: Callable[[str, T], Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The states as a snapshot keeps them, in group order: each group's JSON text, and the times noted with it
    (``times_of(group, state)``; a group whose state was not read keeps its text and times as held)."""
    texts: dict[str, Any] = {}
    times: dict[str, Any] = {}
    held = states.encoded if isinstance(states, EncodedStates) else None
    for group in sorted(states):
        kept = held(group) if held is not None else None
        if kept is not None and kept.times is not None:
            texts[group], times[group] = kept.text, kept.times
            continue
        state = states[group]
        texts[group], times[group] = encode_text(to_json(state)), times_of(group, state)
    return texts, times
