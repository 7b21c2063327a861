"""Benchmark (not a test): whole-group allocation vs the Java client's way (one allocate call per client).

Run: ``.venv/bin/python -m bench.bench_allocation`` -> prints a table and writes
``bench/results/allocation.json``. Cases (issue targets in brackets):

* AVG, 10,000 clients x 100,000 queues            [whole group <= 50 ms]
* AVG_BY_CIRCLE, 10,000 clients x 100,000 queues  [<= 50 ms]
* CONSISTENT_HASH (10 virtual nodes), 1,000 clients x 10,000 queues  [<= 300 ms]

The baseline does the same work as a fleet of Java clients: every distinct client calls ``allocate`` with
the sorted lists, and the owner counts are summed from the shares. Inputs are built and sorted once,
outside the timed region (both sides get them presorted). Median of several repeats.
"""

from __future__ import annotations

import json
import platform
import statistics
import time
from collections import Counter
from pathlib import Path

from streaming.domain.allocation.group import allocate_group
from streaming.domain.allocation.strategies import Averagely, AveragelyByCircle, ConsistentHash
from streaming.domain.queues import MessageQueue, sorted_client_ids, sorted_queues

RESULTS = Path(__file__).parent / "results" / "allocation.json"


def inputs(clients: int, queues: int) -> tuple[list[str], list[MessageQueue]]:
    brokers = 10
    mqs = [MessageQueue("TopicTest", f"broker-{b:02d}", q) for b in range(brokers) for q in range(queues // brokers)]
    cids = [f"10.{i // 65536 % 256}.{i // 256 % 256}.{i % 256}@{1000 + i}#{i * 7919}" for i in range(clients)]
    return sorted_client_ids(cids), sorted_queues(mqs)


def whole_group(strategy, cids, mqs):  # type: ignore[no-untyped-def]
    return allocate_group(strategy, cids, mqs, presorted=True).owner_counts


def per_client(strategy, cids, mqs, sample=None):  # type: ignore[no-untyped-def]
    """One allocate call per distinct client (or per client of ``sample``, to extrapolate a slow baseline)."""
    counts: Counter[MessageQueue] = Counter()
    for cid in sample or dict.fromkeys(cids):
        for mq in strategy.allocate("G", cid, mqs, cids):
            counts[mq] += 1
    return tuple(counts[mq] for mq in mqs)


def timed(fn, *args, repeats: int) -> tuple[float, object]:  # type: ignore[no-untyped-def]
    samples, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn(*args)
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples), result


def main() -> None:
    cases = [
        ("AVG", Averagely(), 10_000, 100_000, 50.0, 5, 1),
        ("AVG_BY_CIRCLE", AveragelyByCircle(), 10_000, 100_000, 50.0, 5, 1),
        ("CONSISTENT_HASH(10)", ConsistentHash(10), 1_000, 10_000, 300.0, 5, 1),
    ]
    rows = []
    for name, strategy, clients, queues, target, repeats, sample_size in cases:
        cids, mqs = inputs(clients, queues)
        ours_ms, ours = timed(whole_group, strategy, cids, mqs, repeats=repeats)
        if sample_size is None:
            base_ms, base = timed(per_client, strategy, cids, mqs, repeats=1)
            assert ours == base, f"{name}: whole-group result differs from per-client allocation"
        else:
            # A ring per call makes the full baseline take minutes: time a sample of clients, scale linearly.
            sample = list(dict.fromkeys(cids))[:: clients // sample_size][:sample_size]
            sample_ms, _ = timed(per_client, strategy, cids, mqs, sample, repeats=1)
            base_ms = sample_ms * len(set(cids)) / len(sample)
        rows.append(
            {
                "case": name,
                "clients": clients,
                "queues": queues,
                "whole_group_ms": round(ours_ms, 2),
                "per_client_baseline_ms": round(base_ms, 2),
                "speedup": round(base_ms / ours_ms, 1),
                "target_ms": target,
                "meets_target": ours_ms <= target,
            }
        )
        verdict = "OK" if ours_ms <= target else "MISSED"
        print(
            f"{name:22} {clients:>6} x {queues:>7}: whole group {ours_ms:9.2f} ms | per-client baseline "
            f"{base_ms:11.2f} ms | x{base_ms / ours_ms:8.1f} | target {target} ms: {verdict}"
        )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "machine": {
                    "python": platform.python_version(),
                    "processor": platform.machine(),
                    "cpus": __import__("os").cpu_count(),
                },
                "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "results": rows,
            },
            indent=2,
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
