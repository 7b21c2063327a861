"""The domain's fixed words are written as their plain text: JSON, str, format and Arrow see no enum.

The Delta tables and metric labels hold these words; a vocabulary whose members serialised as
``ChangeKind.JOIN`` (or as anything but their value) would change every table's text.
"""

from __future__ import annotations

import json
from enum import StrEnum

import pyarrow as pa
import pytest

from streaming.domain import vocabulary
from streaming.domain.consumers import membership as ms
from streaming.domain.vocabulary import ChangeKind, ChangeReason, ChannelEventKind, Trigger

VOCABULARIES = [
    v for v in vars(vocabulary).values() if isinstance(v, type) and issubclass(v, StrEnum) and v is not StrEnum
]


@pytest.mark.parametrize("vocabulary", VOCABULARIES, ids=lambda v: v.__name__)
def test_every_word_serialises_as_its_text(vocabulary):
    for word in vocabulary:
        text = word.value
        assert type(text) is str
        assert json.dumps(word) == json.dumps(text)
        assert json.dumps({word: [word]}) == json.dumps({text: [text]})
        assert str(word) == text and f"{word}" == text
        assert pa.array([word]).to_pylist() == [text]
        assert type(pa.array([word]).to_pylist()[0]) is str


def test_every_membership_change_and_channel_event_kind_has_its_trigger_and_reason():
    # The engine marks a group with ``Trigger(change.change)`` and a leave's reason is ``ChangeReason(event.kind)``.
    assert {Trigger(k) for k in ChangeKind} <= set(Trigger)
    assert {ChangeReason(k) for k in ChannelEventKind} <= set(ChangeReason)


def test_a_membership_change_row_keeps_the_words_text():
    event = ms.ChannelEvent(
        1_000, "broker-a", "HEARTBEAT", "10.0.0.1:1", "c1", "G", subscriptions=(ms.Subscription("T", "*", 1),)
    )
    _, changes = ms.apply_event(ms.GroupMembership("G"), event)
    (join,) = [c for c in changes if c.change == ChangeKind.JOIN]
    assert join.change is ChangeKind.JOIN and join.reason is ChangeReason.HEARTBEAT
    assert json.loads(json.dumps(join._asdict()))["change"] == "JOIN"
    assert json.dumps(join._asdict()).count('"HEARTBEAT"') == 1
