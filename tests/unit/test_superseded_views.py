"""A call's outcomes keep, of each polled view, only the states its current table keeps (``group_rows``)."""

from __future__ import annotations

from streaming.domain.consumers.group_rows import without_superseded_views
from streaming.domain.consumers.outcomes import BrokerViewChanged, BrokerViewGone, BrokerViewState
from streaming.domain.consumers.polled_views import ViewFreshness, ViewStatus
from tests.support.engine import TableModel

FRESH, STALE = ViewFreshness.FRESH, ViewFreshness.STALE


def state(time_ms: int, group: str = "G", broker: str = "broker-a", status: ViewFreshness = FRESH) -> BrokerViewState:
    return BrokerViewState(ViewStatus(time_ms, group, broker, status, time_ms, 30_000, 2, "collector-1"))


def test_a_view_polled_several_times_in_a_call_keeps_its_latest_state_and_every_change():
    went_stale = state(20, status=STALE)
    outcomes = [
        state(10),
        state(11, broker="broker-b"),
        BrokerViewChanged(went_stale.view),
        went_stale,
        state(30),
        state(31, broker="broker-b"),
        state(40, group="H"),
    ]
    kept = without_superseded_views(outcomes)
    assert kept == [BrokerViewChanged(went_stale.view), state(30), state(31, broker="broker-b"), state(40, group="H")]


def test_a_later_state_of_an_older_time_leaves_the_newer_one_and_the_same_time_keeps_the_last():
    newer, older = state(30), state(20, status=STALE)
    assert without_superseded_views([newer, older]) == [newer, older]
    first, last = state(30), state(30, status=STALE)
    assert without_superseded_views([first, last]) == [last]


def test_a_group_gone_after_its_states_drops_them_and_one_back_after_is_kept():
    back = state(50)
    outcomes = [state(10), BrokerViewGone("G", "broker-a", 20), back, state(12, group="H")]
    assert without_superseded_views(outcomes) == [outcomes[1], back, outcomes[3]]


def test_the_tables_rows_are_the_same_with_or_without_the_superseded_states():
    outcomes = [state(10), state(20, status=STALE), state(20), state(15), state(11, broker="broker-b"), state(12)]
    whole, kept = TableModel(), TableModel()
    whole.apply(outcomes)
    kept.apply(without_superseded_views(outcomes))
    assert kept.tables() == whole.tables() and whole.tables()
