"""Every golden vector produced by the real RocketMQ Java classes is reproduced without a JVM."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streaming.domain.versions import ClientLine
from tests.reference.vectors import replay_conformance_case

CONFORMANCE = Path(__file__).parents[1] / "data" / "conformance"
FILES = {"allocate-rocketmq-all-4.9.8.jsonl": ClientLine.V4_9, "allocate-develop.jsonl": ClientLine.V5}


def _cases(name: str) -> list[dict]:
    return [json.loads(line) for line in (CONFORMANCE / name).read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("file_name", sorted(FILES))
def test_every_allocation_vector_matches_the_java_client(file_name):
    cases = _cases(file_name)
    assert len(cases) >= 1000
    mismatches = []
    for number, case in enumerate(cases, start=1):
        outcome = replay_conformance_case(case, FILES[file_name])
        expected = ("exception", case["exception"]) if "exception" in case else ("result", case["result"])
        actual = ("exception", outcome.exception) if outcome.exception else ("result", outcome.result)
        if actual != expected:
            mismatches.append(
                f"case {number} ({case['strategy']}, extra={case.get('extra')!r}): expected {expected}, got {actual}"
            )
    assert not mismatches, f"{len(mismatches)} of {len(cases)} vectors differ:\n" + "\n".join(mismatches[:20])


def test_the_vectors_exercise_every_strategy_and_both_outcomes():
    cases = _cases("allocate-develop.jsonl") + _cases("allocate-rocketmq-all-4.9.8.jsonl")
    assert {c["strategy"] for c in cases} == {"AVG", "CIRCLE", "CH", "MR", "NEARBY_AVG", "NEARBY_CIRCLE"}
    assert any("exception" in c for c in cases) and any("result" in c for c in cases)
