"""The test tools built with Go (alertmanager, amtool, dashboard-linter) in ``.cache/go-bin``: a test that runs one
asks for the folder here, which builds them or waits for the build ``make test`` started in the background."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
BIN = ROOT / ".cache" / "go-bin"
INSTALLER = ROOT / "scripts" / "install_observability_tools.sh"
BUILD_TIMEOUT_S = 1800  # a fresh machine downloads and compiles a few hundred Go modules


@functools.cache
def go_bin() -> Path:
    """``.cache/go-bin`` with every Go-built tool in it; the test fails with the build's output otherwise."""
    built = subprocess.run(
        ["bash", str(INSTALLER), "--go"], cwd=ROOT, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S
    )
    if built.returncode != 0:
        log = BIN / "build.log"
        background = log.read_text()[-3000:] if log.exists() else ""
        pytest.fail(f"building the Go test tools failed:\n{built.stdout[-2000:]}{built.stderr[-3000:]}\n{background}")
    return BIN
