"""JVM artifacts from Maven Central, resolved once into a git-ignored cache and reused.

``jvm/pom.xml`` is the one manifest: each Maven profile is an independent classpath. ``resolve(profile)``
runs ``mvn dependency:copy-dependencies`` for it into ``<cache>/jars/<profile>`` (atomically, so an
interrupted download is retried next time). For the ``spark`` profile, jars that the pyspark wheel already
ships (by artifact name, any version) are left out so the session never sees two copies of a library.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
PROFILES = ("spark", "kafka", "rocketmq-4", "rocketmq-5")
_VERSIONED_JAR = re.compile(r"^(?P<artifact>.+?)-\d[\w.\-]*\.jar$")


class ArtifactError(RuntimeError):
    """Maven could not provide a jar set; the message says which and why."""


def cache_dir() -> Path:
    """Where downloaded and generated things live (``RRM_CACHE_DIR``, default ``<project>/.cache``)."""
    return Path(os.environ.get("RRM_CACHE_DIR", PROJECT_ROOT / ".cache")).resolve()


def jar_dir(profile: str) -> Path:
    return cache_dir() / "jars" / profile


def jars(profile: str) -> list[Path]:
    """The resolved jars of ``profile``; resolves them first when the cache lacks them."""
    directory = jar_dir(profile)
    if not (directory / ".complete").exists():
        resolve(profile)
    return sorted(directory.glob("*.jar"))


def _artifact_name(jar_name: str) -> str:
    match = _VERSIONED_JAR.match(jar_name)
    return match.group("artifact") if match else jar_name


def _maven_central_url() -> str:
    """The Maven Central URL Maven itself is built with (its super-POM), so no host is hard-coded."""
    mvn = shutil.which("mvn")
    if not mvn:
        raise ArtifactError("Maven (mvn) is not on PATH; install Maven to resolve the JVM artifacts")
    maven_home = Path(os.path.realpath(mvn)).parent.parent
    for builder in (maven_home / "lib").glob("maven-model-builder-*.jar"):
        with zipfile.ZipFile(builder) as archive:
            super_pom = archive.read("org/apache/maven/model/pom-4.0.0.xml").decode()
        match = re.search(r"<url>(https://[^<]+)</url>", super_pom)
        if match:
            return match.group(1)
    raise ArtifactError(f"cannot find Maven's super-POM under {maven_home}")


def pyspark_jar_names() -> set[str]:
    import pyspark  # local import: only the spark profile needs it

    return {_artifact_name(p.name) for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}


def resolve(profile: str) -> Path:
    """Download ``profile``'s jars (idempotent; a complete cache is left alone)."""
    if profile not in PROFILES:
        raise ArtifactError(f"unknown jar profile {profile!r}; expected one of {', '.join(PROFILES)}")
    target = jar_dir(profile)
    if (target / ".complete").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{profile}-", dir=target.parent))
    env = dict(os.environ, MAVEN_CENTRAL_URL=_maven_central_url())
    command = [
        "mvn", "-q", "-B",
        "-s", str(PROJECT_ROOT / "jvm" / "settings.xml"),
        "-f", str(PROJECT_ROOT / "jvm" / "pom.xml"),
        "-P", profile,
        "dependency:copy-dependencies",
        "-DincludeScope=runtime",
        f"-DoutputDirectory={staging}",
    ]  # fmt: skip
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        errors = [line for line in result.stdout.splitlines() if "ERROR" in line][:3]
        raise ArtifactError(f"mvn could not resolve jar profile {profile!r}: " + " | ".join(errors))
    if profile == "spark":
        shipped = pyspark_jar_names()
        for jar in staging.glob("*.jar"):
            if _artifact_name(jar.name) in shipped:
                jar.unlink()
    (staging / ".complete").write_text("resolved by connectors.jvm_artifacts\n")
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    return target


def main() -> None:
    """``python -m connectors.jvm_artifacts [profile ...]``: resolve the given (default: all) profiles."""
    import sys

    for profile in sys.argv[1:] or PROFILES:
        path = resolve(profile)
        print(f"{profile}: {len(list(path.glob('*.jar')))} jars in {path}")


if __name__ == "__main__":
    main()
