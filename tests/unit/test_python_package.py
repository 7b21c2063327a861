"""The zip shipped to executors: complete (sources and package data), importable alone, rebuilt on change."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from connectors.python_package import PACKAGES, package_files, python_zip

ROOT = Path(__file__).parents[2]


def test_the_zip_holds_every_source_and_data_file_and_no_bytecode(tmp_path, monkeypatch):
    monkeypatch.setenv("RRM_CACHE_DIR", str(tmp_path))
    names = set(zipfile.ZipFile(python_zip()).namelist())
    on_disk = {
        p.relative_to(ROOT).as_posix()
        for pkg in PACKAGES
        for p in (ROOT / pkg).rglob("*.py")
        if "__pycache__" not in p.parts
    }
    assert on_disk <= names
    assert any(n.startswith("streaming/contract/schemas/") and n.endswith(".json") for n in names)
    assert not any(n.endswith(".pyc") or "__pycache__" in n for n in names)


def test_a_python_given_only_the_zip_imports_the_job_from_it_and_reads_its_schemas(tmp_path, monkeypatch):
    monkeypatch.setenv("RRM_CACHE_DIR", str(tmp_path))
    archive = python_zip()
    probe = (
        "import sys, json; sys.path.insert(0, sys.argv[1]);"
        "import streaming.job.consumer.query, streaming.contract.validator as e;"
        "r = e.validate_event('{\"type\": \"nope\"}', 0, default_type='consumer_channel');"
        "print(json.dumps([e.__file__, type(r).__name__]))"
    )
    # From a directory outside the project, with no PYTHONPATH: what a worker elsewhere has.
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-c", probe, str(archive)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    where, verdict = json.loads(result.stdout.strip().splitlines()[-1])
    assert where.startswith(str(archive)) and verdict == "Rejection"


def test_an_edited_source_gives_a_new_zip_and_the_old_one_goes(tmp_path, monkeypatch):
    monkeypatch.setenv("RRM_CACHE_DIR", str(tmp_path / "cache"))
    copy = tmp_path / "project"
    for package in PACKAGES:
        shutil.copytree(ROOT / package, copy / package, ignore=shutil.ignore_patterns("__pycache__"))
    first = python_zip(copy)
    assert python_zip(copy) == first
    (copy / "streaming" / "__init__.py").write_text((copy / "streaming" / "__init__.py").read_text() + "\n# edited\n")
    second = python_zip(copy)
    assert second != first and second.exists() and not first.exists()
    assert len(package_files(copy)) == len(zipfile.ZipFile(second).namelist())
