"""The shard-call benchmark's smoke case: a tiny shard prepared and called in this checkout's code, CPU times only
(valgrind's count runs a process fifty times slower: the benchmark itself, not the suite, runs it)."""

from __future__ import annotations

from bench.bench_shard_call import ROOT, measure_tree, ratios


def test_a_tiny_shard_is_prepared_with_collector_shaped_input_and_its_call_measured():
    measured = measure_tree(ROOT, groups=2, warm_s=40, call_s=30, repeat=1, valgrind=False)
    # two groups on four brokers: 30 s of polls every 10 s and a progress sample of each group and broker
    assert measured["input_rows"] >= 2 * 4 * 3 + 2 * 4
    assert measured["state_bytes"] > 0
    assert measured["whole_cpu_ms"] > measured["engine_cpu_ms"] > 0
    assert "whole_instructions" not in measured


def test_ratios_are_taken_where_both_trees_have_the_figure():
    head = {"whole_instructions": 80, "engine_cpu_ms": 3.0, "input_rows": 10}
    base = {"whole_instructions": 100, "engine_cpu_ms": 0, "input_rows": 10}
    assert ratios(head, base) == {"whole_instructions": 0.8}
