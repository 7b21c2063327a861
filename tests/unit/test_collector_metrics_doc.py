"""docs/collector.md's metrics are the collector's: rendered from ``Counters.java``, whose help map names every
series the Java code updates."""

from __future__ import annotations

import re

from connectors.collector_metrics import BEGIN, DOC, END, collector_metrics, render, used_names


def test_the_doc_s_table_is_what_the_java_source_renders():
    text = DOC.read_text()
    assert text[text.index(BEGIN) : text.index(END) + len(END)] == render()


def test_every_series_the_code_updates_has_help_and_every_help_a_series():
    assert used_names() == {m.name for m in collector_metrics()}


def test_the_doc_names_no_series_outside_the_java_source():
    assert set(re.findall(r"rmqcol_\w+", DOC.read_text())) == {m.name for m in collector_metrics()}


def test_the_rendering_reads_types_labels_and_label_values_from_the_calls():
    by_name = {m.name: m for m in collector_metrics()}
    problems = by_name["rmqcol_problems_total"]
    assert (problems.type, problems.label) == ("counter", "kind")
    assert {"broker_left", "acl_denied", "admin_error", "progress_failed"} <= set(problems.values)
    assert by_name["rmqcol_rpc_total"].label == "call" and "topic_route" in by_name["rmqcol_rpc_total"].values
    assert by_name["rmqcol_events_published_total"].label == "type"
    assert by_name["rmqcol_cycle_seconds"].type == "gauge" and by_name["rmqcol_cycles_total"].type == "counter"
