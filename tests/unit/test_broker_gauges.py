"""The driver's per-broker values (``streaming.job.delta.broker_gauges``): a current table's rows as its MERGE leaves
them, and the per-broker polled-view and fault-item summaries the gauges and ``broker_status_current`` take."""

from __future__ import annotations

from streaming.job.delta.broker_gauges import (
    ITEM_COLUMNS,
    ITEM_KEY,
    CurrentRows,
    broker_status,
    producers_all_down,
    view_summary,
)


def item(producer: str, broker: str, until: int | None, t: int = 0) -> dict:
    return {
        "cluster": "DefaultCluster",
        "producer_id": producer,
        "broker": broker,
        "unavailable_until_ms": until,
        "event_time_ms": t,
    }


def kept(row: dict) -> tuple[dict, bool]:
    return row, False


def gone(row: dict) -> tuple[dict, bool]:
    return row, True


def test_a_batch_replaces_each_key_by_its_latest_row_and_deletes_on_deletions():
    rows = CurrentRows(ITEM_KEY, ITEM_COLUMNS, [item("p1", "a", 5), item("p2", "a", 7)])
    rows.apply([kept(item("p1", "a", 9, t=2)), kept(item("p1", "a", 8, t=1)), gone(item("p2", "a", None, t=3))])
    assert rows.rows() == [{"cluster": "DefaultCluster", "producer_id": "p1", "broker": "a", "unavailable_until_ms": 9}]


def test_a_deletion_wins_over_a_row_of_the_same_time_as_in_the_merge():
    rows = CurrentRows(ITEM_KEY, ITEM_COLUMNS, [item("p1", "a", 5)])
    rows.apply([gone(item("p1", "a", None, t=3)), kept(item("p1", "a", 9, t=3))])
    assert rows.rows() == []


def test_of_two_rows_of_the_same_time_the_last_given_wins():
    rows = CurrentRows(ITEM_KEY, ITEM_COLUMNS)
    rows.apply([kept(item("p1", "a", 5, t=3)), kept(item("p1", "a", 9, t=3))])
    assert rows.rows() == [{"cluster": "DefaultCluster", "producer_id": "p1", "broker": "a", "unavailable_until_ms": 9}]


def test_applying_a_batch_twice_leaves_what_applying_it_once_does():
    batch = [kept(item("p1", "a", 9, t=2)), gone(item("p2", "a", None, t=3)), kept(item("p3", "b", 1, t=3))]
    once = CurrentRows(ITEM_KEY, ITEM_COLUMNS, [item("p2", "a", 7)])
    once.apply(batch)
    twice = CurrentRows(ITEM_KEY, ITEM_COLUMNS, [item("p2", "a", 7)])
    twice.apply(batch)
    twice.apply(batch)
    assert once.rows() == twice.rows()


def test_broker_status_counts_avoiding_producers_at_the_event_time():
    items = [item("p1", "a", 200), item("p2", "a", 100), item("p3", "a", None), item("p1", "b", 50)]
    by_broker = {r["broker"]: r for r in broker_status(items, 100)}
    assert by_broker["a"] == {
        "cluster": "DefaultCluster",
        "broker": "a",
        "producers_avoiding": 1,
        "producers_seen": 3,
        "avoiding_ratio": 1 / 3,
        "avoided_until_ms": 200,
        "isolated": True,
        "event_time_ms": 100,
    }
    assert by_broker["b"]["producers_avoiding"] == 0
    assert by_broker["b"]["avoided_until_ms"] is None
    assert by_broker["b"]["isolated"] is False


def test_a_producer_is_all_down_when_every_item_with_an_end_is_unavailable():
    items = [
        item("down", "a", 200),
        item("down", "b", 300),
        item("down", "c", None),  # no end: not counted either way
        item("half", "a", 200),
        item("half", "b", 50),
        item("none", "a", None),
    ]
    assert producers_all_down(items, 100) == 1


def test_view_summary_counts_views_stale_ones_and_the_latest_poll():
    views = [
        {"broker": "a", "status": "FRESH", "polled_at_ms": 10},
        {"broker": "a", "status": "STALE", "polled_at_ms": 30},
        {"broker": "b", "status": "FRESH", "polled_at_ms": 20},
    ]
    by_broker = {r["broker"]: r for r in view_summary(views)}
    assert by_broker["a"] == {"cluster": None, "broker": "a", "views": 2, "stale": 1, "last_poll_ms": 30}
    assert by_broker["b"] == {"cluster": None, "broker": "b", "views": 1, "stale": 0, "last_poll_ms": 20}


def test_the_same_broker_and_producer_names_in_two_clusters_are_two_brokers_and_two_producers():
    items = [item("p1", "a", 200), {**item("p1", "a", 50), "cluster": "east"}]
    by_cluster = {r["cluster"]: r for r in broker_status(items, 100)}
    assert (by_cluster["DefaultCluster"]["isolated"], by_cluster["east"]["isolated"]) == (True, False)
    assert producers_all_down(items, 100) == 1  # p1 of the default cluster only
    rows = CurrentRows(ITEM_KEY, ITEM_COLUMNS, items)
    assert len(rows.rows()) == 2
