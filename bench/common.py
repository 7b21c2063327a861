"""Shared pieces of the benchmarks' results documents: the machine they ran on, when, and the file write.

Each benchmark assembles its own document (its keys are its own); these only keep the few values every
document carries spelled one way.
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path
from typing import Any


def machine() -> dict[str, Any]:
    """The Python version and core count a result was measured with."""
    return {"python": platform.python_version(), "cpus": os.cpu_count()}


def measured_at() -> str:
    """The current UTC time, to the second, as the results documents record it."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def write_results(path: Path, document: dict[str, Any]) -> None:
    """Write ``document`` as indented JSON to ``path``, creating its directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2) + "\n")
