"""JVM artifacts from Maven Central, resolved once into a git-ignored cache and reused.

``jvm/pom.xml`` is the one manifest: each Maven profile is an independent classpath. ``resolve(profile)``
runs ``mvn dependency:copy-dependencies`` for it into ``<cache>/jars/<profile>`` (atomically, so an
interrupted download is retried next time). For the ``spark`` profile, jars that the pyspark wheel already
ships (by artifact name, any version) are left out so the session never sees two copies of a library.

The project's own JVM code (``jvm/src/main/java``: the ingest fast path) is compiled by ``ingest_jar()``
with ``javac`` against the pyspark wheel's jars -- the exact Spark and Jackson it runs with, nothing
downloaded -- into a jar named after the sources' hash, so an edited source is rebuilt on next use.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

from connectors.maven_settings import settings_for_resolution

PROJECT_ROOT = Path(__file__).resolve().parent.parent
PROFILES = (
    "spark",
    "kafka",
    "rocketmq-4",
    "rocketmq-5",
    "rocketmq-server-5",
    "rocketmq-server-4.9",
    "collector",
    "s3",
    "s3proxy",
)
# Resolved on first use, not at set-up: about 730 MB that only tables on an object store (the AWS SDK bundle) and
# the object-store tests (the S3 server) need.
ON_DEMAND_PROFILES = ("s3", "s3proxy")
# Profiles added to the pyspark wheel's own jars: what the wheel already ships is left out of them.
SPARK_CLASSPATH_PROFILES = ("spark", "s3")
_VERSIONED_JAR = re.compile(r"^(?P<artifact>.+?)-\d[\w.\-]*\.jar$")
# Maven's transfer lines (batch mode, not quiet): "Downloaded from central: https://.../x-1.0.jar (12 kB at 3 MB/s)"
_DOWNLOADED = re.compile(r"Downloaded from [^:]+: (?P<url>\S+)(?: \((?P<size>[\d.,]+ [kMG]?B))?")

Progress = Callable[[str], None]
"""Called with one short line per step of a resolution (what is being fetched, how much so far)."""


class ArtifactError(RuntimeError):
    """Maven could not provide a jar set; the message says which and why."""


def cache_dir() -> Path:
    """Where downloaded and generated things live (``RRM_CACHE_DIR``, default ``<project>/.cache``)."""
    return Path(os.environ.get("RRM_CACHE_DIR", PROJECT_ROOT / ".cache")).resolve()


def jar_dir(profile: str) -> Path:
    return cache_dir() / "jars" / profile


def jars(profile: str, progress: Progress | None = None) -> list[Path]:
    """The resolved jars of ``profile``; resolves them first when the cache lacks them (telling ``progress``)."""
    directory = jar_dir(profile)
    if not (directory / ".complete").exists():
        resolve(profile, progress)
    return sorted(directory.glob("*.jar"))


def _artifact_name(jar_name: str) -> str:
    match = _VERSIONED_JAR.match(jar_name)
    return match.group("artifact") if match else jar_name


def _maven_home() -> Path:
    mvn = shutil.which("mvn")
    if not mvn:
        raise ArtifactError("Maven (mvn) is not on PATH; install Maven to resolve the JVM artifacts")
    return Path(os.path.realpath(mvn)).parent.parent


@functools.cache
def _maven_central_url() -> str:
    """The Maven Central URL Maven itself is built with (its super-POM), so no host is hard-coded."""
    maven_home = _maven_home()
    for builder in (maven_home / "lib").glob("maven-model-builder-*.jar"):
        with zipfile.ZipFile(builder) as archive:
            super_pom = archive.read("org/apache/maven/model/pom-4.0.0.xml").decode()
        match = re.search(r"<url>(https://[^<]+)</url>", super_pom)
        if match:
            return match.group(1)
    raise ArtifactError(f"cannot find Maven's super-POM under {maven_home}")


def _settings_file(staging: Path) -> Path | None:
    """The user settings file ``mvn`` runs with (``maven_settings``), written beside ``staging``; None: Maven's
    own settings as they are."""
    user, installed = Path.home() / ".m2" / "settings.xml", _maven_home() / "conf" / "settings.xml"
    found = [path.read_text() if path.is_file() else None for path in (user, installed)]
    document = settings_for_resolution(found[0], found[1], _maven_central_url())
    if document is None:
        return None
    path = staging.with_name(f"{staging.name}-settings.xml")
    path.write_text(document)
    return path


def pyspark_jar_names() -> set[str]:
    import pyspark  # local import: only the spark profile needs it

    return {_artifact_name(p.name) for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}


def resolve(profile: str, progress: Progress | None = None) -> Path:
    """Download ``profile``'s jars (idempotent; a complete cache is left alone).

    With ``progress``, Maven runs verbosely and each file it downloads is reported as it arrives
    (``"spark: 12 files, 3.4 MB downloaded -- delta-spark_2.13-4.4.0.jar"``)."""
    if profile not in PROFILES:
        raise ArtifactError(f"unknown jar profile {profile!r}; expected one of {', '.join(PROFILES)}")
    target = jar_dir(profile)
    if (target / ".complete").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{profile}-", dir=target.parent))
    env = dict(os.environ)
    settings = _settings_file(staging)
    command = [
        "mvn",
        "-B",
        *(["-s", str(settings)] if settings else []),
        "-f",
        str(PROJECT_ROOT / "jvm" / "pom.xml"),
        "-P",
        profile,
        "dependency:copy-dependencies",
        "-DincludeScope=runtime",
        f"-DoutputDirectory={staging}",
    ]
    if progress is None:
        command.insert(1, "-q")
        result = subprocess.run(command, env=env, capture_output=True, text=True)
        returncode, output = result.returncode, result.stdout.splitlines()
    else:
        progress(f"{profile}: resolving with Maven ...")
        returncode, output = _run_reporting(command, env, profile, progress)
    if settings is not None:
        settings.unlink()
    if returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        errors = [line for line in output if "ERROR" in line][:3]
        raise ArtifactError(f"mvn could not resolve jar profile {profile!r}: " + " | ".join(errors))
    if profile in SPARK_CLASSPATH_PROFILES:
        shipped = pyspark_jar_names()
        for jar in staging.glob("*.jar"):
            if _artifact_name(jar.name) in shipped:
                jar.unlink()
    (staging / ".complete").write_text("resolved by connectors.jvm_artifacts\n")
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    if progress is not None:
        progress(f"{profile}: {len(list(target.glob('*.jar')))} jars ready in {target}")
    return target


_UNITS = {"B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9}


def _run_reporting(command: list[str], env: dict[str, str], profile: str, progress: Progress) -> tuple[int, list[str]]:
    """Run Maven, reporting each downloaded file; returns (exit code, output lines)."""
    lines: list[str] = []
    files, size = 0, 0.0
    with subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as mvn:
        assert mvn.stdout is not None
        for line in mvn.stdout:
            lines.append(line.rstrip("\n"))
            match = _DOWNLOADED.search(line)
            if match:
                files += 1
                if match.group("size"):
                    number, unit = match.group("size").split()
                    size += float(number.replace(",", "")) * _UNITS.get(unit, 1)
                name = match.group("url").rsplit("/", 1)[-1]
                progress(f"{profile}: {files} files, {size / 1e6:.1f} MB downloaded -- {name}")
    return mvn.returncode, lines


JAVA_SOURCES = PROJECT_ROOT / "jvm" / "src" / "main" / "java"


UNUSED_JAR_DAYS = 7


def mark_used(path: Path) -> None:
    """Touch a built jar in use, so that it is not removed as unused; at most once a day, since a jar's time is
    part of what a class-data-sharing archive of its class path checks (``connectors/jvm_cds.py``)."""
    if path.stat().st_mtime < time.time() - 86400:
        os.utime(path)


def compiled_jar(sources_root: Path, prefix: str, classpath: Callable[[], list[str]]) -> Path:
    """``sources_root``'s Java classes compiled (JDK 17) into ``<cache>/jars/project/<prefix>-<hash>.jar``, named
    after the sources' hash so an edited source is rebuilt on next use. A jar is touched when it is used
    (``mark_used``); other sources' jars unused for ``UNUSED_JAR_DAYS`` are removed at a build (several trees may
    share one cache, each using its own sources' jar)."""
    sources = sorted(sources_root.rglob("*.java"))
    digest = hashlib.sha256()
    for source in sources:
        digest.update(source.relative_to(sources_root).as_posix().encode() + b"\0" + source.read_bytes())
    target = cache_dir() / "jars" / "project" / f"{prefix}-{digest.hexdigest()[:16]}.jar"
    if target.exists():
        mark_used(target)
        return target
    for tool in ("javac", "jar"):
        if not shutil.which(tool):
            raise ArtifactError(f"'{tool}' (JDK 17) is not on PATH; it compiles the project's JVM classes")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".build-", dir=target.parent) as build:
        compiled = subprocess.run(
            [
                "javac",
                "--release",
                "17",
                "-encoding",
                "UTF-8",
                "-cp",
                os.pathsep.join(classpath()),
                "-d",
                f"{build}/classes",
                *map(str, sources),
            ],
            capture_output=True,
            text=True,
        )
        if compiled.returncode != 0:
            where = sources_root.relative_to(PROJECT_ROOT).as_posix()
            raise ArtifactError(f"javac failed on {where}: " + compiled.stderr.strip()[-2000:])
        staging = Path(build) / target.name
        subprocess.run(["jar", "cf", str(staging), "-C", f"{build}/classes", "."], check=True)
        unused_since = time.time() - UNUSED_JAR_DAYS * 86400
        for other in target.parent.glob(f"{prefix}-*.jar"):
            with contextlib.suppress(FileNotFoundError):
                if other.stat().st_mtime < unused_since:
                    other.unlink()
        staging.rename(target)
    return target


def ingest_jar() -> Path:
    """The compiled project classes (built on first use and whenever a source changes)."""

    def classpath() -> list[str]:
        import pyspark  # local import: only the Spark classpath needs it

        # Spark's own jars, and the resolved ones for the Delta classes (io.github.rrm.delta).
        return [str(Path(pyspark.__file__).parent / "jars" / "*"), *map(str, jars("spark"))]

    return compiled_jar(JAVA_SOURCES, "rrm-jvm", classpath)


COLLECTOR_SOURCES = PROJECT_ROOT / "jvm" / "collector" / "src" / "main" / "java"


def collector_jar() -> Path:
    """The compiled collector classes (``jvm/collector``: the ``collect`` cycle and the local cluster's admin
    commands), built with ``javac`` against the ``collector`` profile on first use and whenever a source changes."""
    return compiled_jar(COLLECTOR_SOURCES, "rrm-collector", lambda: list(map(str, jars("collector"))))


def collector_classpath() -> str:
    """The collector's classpath: its compiled classes, then the ``collector`` profile's jars."""
    return os.pathsep.join([str(collector_jar()), str(jar_dir("collector") / "*")])


def main() -> None:
    """``python -m connectors.jvm_artifacts [profile ...]``: resolve the given profiles (default: all but
    ``ON_DEMAND_PROFILES``)."""
    import sys

    for profile in sys.argv[1:] or [p for p in PROFILES if p not in ON_DEMAND_PROFILES]:
        path = resolve(profile)
        print(f"{profile}: {len(list(path.glob('*.jar')))} jars in {path}")
    if not sys.argv[1:]:
        print(f"project classes: {ingest_jar()}")
        print(f"collector classes: {collector_jar()}")


if __name__ == "__main__":
    main()
