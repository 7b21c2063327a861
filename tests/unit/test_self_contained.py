"""The repository carries everything its tests, benches and docs read: nothing reaches a folder beside the clone.

A clone on its own (a user's, a CI runner's) must pass the suite, so no tracked file may name a path outside the
checkout, as ``../<folder>`` or built up from ``Path(__file__).parents``.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).parents[2]
OUTSIDE = "sha" + "red"  # the folder that once held the golden vectors beside the clone (split: this file is tracked)
PATTERNS = (
    re.compile(r"\.\./" + OUTSIDE + r"\b"),
    re.compile(r"""["']""" + OUTSIDE + r"""["']\s*/"""),
    re.compile(r"parents\[\d+\]\s*/\s*[\"']" + OUTSIDE),
)


def _tracked_text_files() -> list[Path]:
    names = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.split(b"\0")
    return [ROOT / n.decode() for n in names if n and not n.endswith((b".jsonl", b".json", b".jar"))]


def test_no_tracked_file_reads_outside_the_repository():
    offenders = []
    for path in _tracked_text_files():
        try:
            text = path.read_text()
        except (UnicodeDecodeError, FileNotFoundError):
            continue
        for number, line in enumerate(text.splitlines(), start=1):
            if any(p.search(line) for p in PATTERNS):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not offenders, "files reading outside the clone:\n" + "\n".join(offenders)


def test_the_golden_vectors_are_in_the_repository():
    vectors = ROOT / "tests" / "data" / "conformance"
    tracked = subprocess.run(
        ["git", "ls-files", str(vectors.relative_to(ROOT))], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    assert {Path(t).name for t in tracked} >= {
        "README.md",
        "allocate-develop.jsonl",
        "allocate-rocketmq-all-4.9.8.jsonl",
        "producer-select-develop.jsonl",
        "producer-select-rocketmq-all-4.9.8.jsonl",
    }
