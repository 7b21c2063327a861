"""The project's compiled-jar cache shared by several source trees: each tree's jar survives the other's builds."""

from __future__ import annotations

import os
import time
import zipfile
from pathlib import Path

import pytest

from connectors import jvm_artifacts


def java_tree(root: Path, greeting: str) -> Path:
    source = root / "io" / "example" / "Hello.java"
    source.parent.mkdir(parents=True)
    source.write_text(
        f'package io.example;\npublic class Hello {{ public static String say() {{ return "{greeting}"; }} }}\n'
    )
    return root


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RRM_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_two_trees_keep_their_jars_and_an_unused_one_goes(tmp_path: Path, cache: Path) -> None:
    first = jvm_artifacts.compiled_jar(java_tree(tmp_path / "a", "a"), "hello", list)
    second = jvm_artifacts.compiled_jar(java_tree(tmp_path / "b", "b"), "hello", list)
    assert first != second and first.exists() and second.exists()
    assert "io/example/Hello.class" in zipfile.ZipFile(second).namelist()
    # The first tree uses its jar again: found, not rebuilt, and marked as used.
    long_ago = time.time() - (jvm_artifacts.UNUSED_JAR_DAYS + 1) * 86400
    os.utime(first, (long_ago, long_ago))
    assert jvm_artifacts.compiled_jar(tmp_path / "a", "hello", list) == first
    assert first.stat().st_mtime > long_ago
    # A jar nobody used for longer than the limit is removed at the next build; the ones in use stay.
    os.utime(second, (long_ago, long_ago))
    third = jvm_artifacts.compiled_jar(java_tree(tmp_path / "c", "c"), "hello", list)
    assert sorted(p.name for p in third.parent.glob("hello-*.jar")) == sorted([first.name, third.name])
