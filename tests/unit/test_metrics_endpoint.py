"""The driver's ``/metrics`` endpoint over HTTP: the whole page, and one family asked for by ``name[]``.

The endpoint is the real one the job serves (``connectors.metrics.serve`` over ``new_registry``), fed through
``apply_consumer_metrics`` as the consumer query's sink feeds it.
"""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from connectors.metrics import CATALOGUE, MetricsState, new_registry, serve
from streaming.domain.consumers.outcomes import GroupSummary, TopicSummary
from streaming.job.delta.metric_rows import apply_consumer_metrics


def group_row(group: str, members: int, generation: int) -> GroupSummary:
    topics = {"T": TopicSummary(assigned=8, orphaned=0, double_owned=0, idle=0, non_subscribing=0, skew=0, moved=1)}
    return GroupSummary(
        group,
        event_time_ms=1,
        members=members,
        channels=members,
        generation=generation,
        duplicate_client_ids=0,
        views_diverge=False,
        last_rebalance_ms=1_000,
        open_anomalies={},
        topics=topics,
    )


@pytest.fixture
def endpoint() -> Iterator[tuple[str, MetricsState]]:
    state = MetricsState(label_value_cap=2)
    rows = [group_row("G1", 3, 4), group_row("G2", 5, 1), group_row("G3", 2, 2)]
    apply_consumer_metrics(state, [("c", r) for r in rows])
    server = serve(new_registry(state), "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.server_port}/metrics", state
    finally:
        server.shutdown()


def families(url: str) -> dict[str, list[tuple[str, dict[str, str], float]]]:
    with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 - a local test server
        text = response.read().decode()
    return {f.name: [(s.name, s.labels, s.value) for s in f.samples] for f in text_string_to_metric_families(text)}


def test_a_name_filter_returns_exactly_that_family_with_its_series(endpoint):
    url, _ = endpoint
    got = families(url + "?name[]=rmqmon_group_members")
    # Two groups under the cap of two: the third was refused, as on the whole page.
    assert got == {
        "rmqmon_group_members": [
            ("rmqmon_group_members", {"cluster": "c", "consumer_group": "G1"}, 3.0),
            ("rmqmon_group_members", {"cluster": "c", "consumer_group": "G2"}, 5.0),
        ]
    }


def test_filters_name_the_samples_of_counters_and_may_ask_for_several(endpoint):
    url, state = endpoint
    got = families(url + "?name[]=rmqmon_group_rebalances_total&name[]=rmqmon_label_values_dropped_total")
    assert got["rmqmon_group_rebalances"] == [
        ("rmqmon_group_rebalances_total", {"cluster": "c", "consumer_group": "G1"}, 4.0),
        ("rmqmon_group_rebalances_total", {"cluster": "c", "consumer_group": "G2"}, 1.0),
    ]
    dropped = {s[1]["metric"]: s[2] for s in got["rmqmon_label_values_dropped"]}
    assert dropped == state.dropped and dropped["rmqmon_group_members"] == 1.0
    assert set(got) == {"rmqmon_group_rebalances", "rmqmon_label_values_dropped"}


class Unreadable(dict):
    """A family's series that fail the scrape reading them."""

    def items(self):  # type: ignore[override]
        raise AssertionError("a scrape read a family it was not asked for")


def test_a_name_filter_reads_no_other_family(endpoint):
    """A watcher asking for one family every 100 ms must not pay for the whole page: the scrape reads only the
    families it names (the page without a filter reads them all, and here fails on the unreadable one)."""
    url, state = endpoint
    state.gauges["rmqmon_group_queues"] = Unreadable(state.gauges["rmqmon_group_queues"])
    assert {s[1]["consumer_group"] for s in families(url + "?name[]=rmqmon_group_members")["rmqmon_group_members"]} == {
        "G1",
        "G2",
    }
    with pytest.raises(urllib.error.HTTPError):
        families(url)


def test_without_a_filter_the_page_has_every_catalogue_family(endpoint):
    url, _ = endpoint
    got = families(url)
    names = {spec.name.removesuffix("_total") for spec in CATALOGUE}
    assert set(got) == names


def network_address() -> str:
    """This machine's address on its default route, as a scraper on another host reaches it (a UDP socket's
    connect picks the interface and sends nothing)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("10.255.255.255", 9))
        address = str(probe.getsockname()[0])
    assert not address.startswith("127."), address
    return address


def test_bound_to_every_interface_the_page_answers_on_the_machine_s_network_address():
    """``[metrics] host = "0.0.0.0"`` (``docs/deploy.md``, Metrics endpoints) serves the page on the address other
    hosts reach; the default, ``127.0.0.1``, does not answer there."""
    address = network_address()
    state = MetricsState()
    apply_consumer_metrics(state, [("c", group_row("G1", 3, 4))])
    everywhere = serve(new_registry(state), "0.0.0.0", 0)
    try:
        page = families(f"http://{address}:{everywhere.server_port}/metrics")
    finally:
        everywhere.shutdown()
    assert ("rmqmon_group_members", {"cluster": "c", "consumer_group": "G1"}, 3.0) in page["rmqmon_group_members"]
    loopback = serve(new_registry(state), "127.0.0.1", 0)
    try:
        with pytest.raises(OSError):
            urllib.request.urlopen(f"http://{address}:{loopback.server_port}/metrics", timeout=5)  # noqa: S310
    finally:
        loopback.shutdown()
