"""The project's Python code as one zip for Spark executors on other machines.

A cluster's executors run the job's state functions and so import ``streaming`` (and what it imports); they
must not depend on the driver's ``PYTHONPATH`` or on an installed copy that may be another version. The zip
holds the packages the project installs (``streaming``, ``connectors``, ``localenv``: sources and package data,
no bytecode) and is named after their contents' hash under the cache, so an edited source gives a new zip on
next use. The session factory ships it with ``SparkContext.addPyFile`` (``spark_session``).
"""

from __future__ import annotations

import hashlib
import tempfile
import zipfile
from pathlib import Path

from connectors.jvm_artifacts import PROJECT_ROOT, cache_dir

PACKAGES = ("streaming", "connectors", "localenv")
_SKIPPED_SUFFIXES = (".pyc", ".pyo")


def package_files(root: Path = PROJECT_ROOT) -> list[Path]:
    """Every file of the packages, relative to ``root``, in a stable order."""
    files = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and not path.name.endswith(_SKIPPED_SUFFIXES):
                files.append(path.relative_to(root))
    return files


def python_zip(root: Path = PROJECT_ROOT) -> Path:
    """The packages zipped into ``<cache>/python/rrm-py-<hash>.zip`` (built when missing; earlier ones removed)."""
    files = package_files(root)
    digest = hashlib.sha256()
    for relative in files:
        digest.update(relative.as_posix().encode() + b"\0" + (root / relative).read_bytes() + b"\0")
    target = cache_dir() / "python" / f"rrm-py-{digest.hexdigest()[:16]}.zip"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(prefix=".build-", suffix=".zip", dir=target.parent, delete=False) as staging:
        with zipfile.ZipFile(staging, "w", zipfile.ZIP_DEFLATED) as archive:
            for relative in files:
                # A fixed timestamp: the same sources give the same bytes.
                info = zipfile.ZipInfo(relative.as_posix(), date_time=(1980, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                archive.writestr(info, (root / relative).read_bytes())
    for stale in target.parent.glob("rrm-py-*.zip"):
        stale.unlink(missing_ok=True)
    Path(staging.name).rename(target)
    return target
