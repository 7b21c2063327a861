"""The domain stays pure: importing it pulls in no Spark, pandas, pyarrow or py4j (and lint-imports agrees)."""

from __future__ import annotations

import pkgutil
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import streaming.domain

ROOT = Path(__file__).parents[2]
FORBIDDEN = ("pyspark", "pandas", "py4j", "pyarrow", "kafka", "delta", "jpype")


def test_importing_every_domain_module_loads_no_heavy_dependency():
    modules = [m.name for m in pkgutil.walk_packages(streaming.domain.__path__, "streaming.domain.")]
    assert "streaming.domain.javacompat" in modules
    assert "streaming.domain.consumers.shard_engine" in modules
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}: importlib.import_module(name)\n"
        f"print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r})))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""


def test_import_contract_holds():
    result = subprocess.run(
        [str(Path(sys.executable).with_name("lint-imports"))], capture_output=True, text=True, cwd=ROOT
    )
    assert result.returncode == 0, result.stdout + result.stderr
    plain = re.sub(r"\x1b\[[0-9;]*m", "", result.stdout)
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    assert "The RocketMQ domain is pure Python" in plain
    assert f"Contracts: {len(contracts)} kept, 0 broken" in plain
