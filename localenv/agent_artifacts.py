"""The client agent (``jvm/agent``) and the project's RocketMQ test clients (``jvm/testclients``), built locally.

``agent()`` runs ``mvn install`` on the agent's own Maven module: the jar goes into the local Maven repository
(so applications on this machine can depend on ``io.github.rocketmq-rebalance-monitor:rocketmq-rebalance-agent``)
and, with its runtime dependencies (kafka-clients and what it needs), into ``<cache>/jars/agent``, next to the
``-javaagent`` jar (classifier ``javaagent``: its dependencies shaded in).
``test_clients_jar(line)`` compiles the test clients with ``javac`` against one RocketMQ client line's jars
(profiles ``rocketmq-4`` / ``rocketmq-5`` of ``jvm/pom.xml``) and the agent. Both are keyed by a hash of their
sources, so an edit rebuilds them on next use and an unchanged tree is skipped in milliseconds.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from connectors import jvm_artifacts
from connectors.jvm_artifacts import PROJECT_ROOT, ArtifactError, cache_dir

AGENT_MODULE = PROJECT_ROOT / "jvm" / "agent"
TEST_CLIENT_SOURCES = PROJECT_ROOT / "jvm" / "testclients" / "src" / "main" / "java"
AGENT_COORDINATES = ("io.github.rocketmq-rebalance-monitor", "rocketmq-rebalance-agent", "0.1.0")
CLIENT_PROFILE_BY_LINE = {"4.9": "rocketmq-4", "5": "rocketmq-5"}
TEST_CLIENT_MAIN = "io.github.rrm.testclients.TestClient"
JAVAAGENT_SUFFIX = "-javaagent.jar"


@dataclass(frozen=True)
class AgentBuild:
    jar: Path
    libraries: tuple[Path, ...]  # runtime dependencies: kafka-clients and its own
    javaagent: Path  # the jar for -javaagent, with its dependencies relocated inside it


def _digest(paths: list[Path], root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(paths):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


UNUSED_AFTER_S = 86_400


def _remove_unused(builds: Iterable[Path]) -> None:
    """Delete builds of other sources not touched for a day. Not at once: checkouts of different sources may share
    one cache, each using its own build, and a build deleted under another's running test would fail it."""
    cutoff = time.time() - UNUSED_AFTER_S
    for build in builds:
        if build.name.startswith(".") or build.stat().st_mtime > cutoff:
            continue
        if build.is_dir():
            shutil.rmtree(build, ignore_errors=True)
        else:
            build.unlink(missing_ok=True)


def _local_repository_jar() -> Path:
    group, artifact, version = AGENT_COORDINATES
    return (
        Path.home() / ".m2" / "repository" / group.replace(".", "/") / artifact / version / f"{artifact}-{version}.jar"
    )


def agent() -> AgentBuild:
    """The built agent (``mvn install`` first when its pom or sources changed since the last build)."""
    sources = [AGENT_MODULE / "pom.xml", *(AGENT_MODULE / "src").rglob("*.java")]
    target = cache_dir() / "jars" / "agent" / _digest(sources, AGENT_MODULE)
    if not ((target / ".complete").exists() and _local_repository_jar().exists()):
        _build_agent(target)
    os.utime(target)  # in use: not to be removed as unused
    libraries = tuple(sorted((target / "lib").glob("*.jar")))
    jars = sorted(target.glob("rocketmq-rebalance-agent-*.jar"))
    javaagent = next(j for j in jars if j.name.endswith(JAVAAGENT_SUFFIX))
    return AgentBuild(next(j for j in jars if j != javaagent), libraries, javaagent)


def _build_agent(target: Path) -> None:
    if not shutil.which("mvn"):
        raise ArtifactError("Maven (mvn) is not on PATH; it builds the client agent (jvm/agent)")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".agent-", dir=target.parent))
    command = [
        "mvn",
        "-B",
        "-q",
        "-f",
        str(AGENT_MODULE / "pom.xml"),
        f"-Dagent.build.directory={staging / 'build'}",
        "install",
        "dependency:copy-dependencies",
        "-DincludeScope=runtime",
        "-DexcludeArtifactIds=byte-buddy,slf4j-nop",  # only for the -javaagent jar
        f"-DoutputDirectory={staging / 'lib'}",
    ]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        errors = [line for line in result.stdout.splitlines() if "ERROR" in line][:5]
        raise ArtifactError("mvn could not build the client agent: " + " | ".join(errors))
    for jar in (staging / "build").glob("rocketmq-rebalance-agent-*.jar"):
        jar.rename(staging / jar.name)
    shutil.rmtree(staging / "build")
    (staging / ".complete").write_text("built by localenv.agent_artifacts\n")
    _remove_unused(target.parent.iterdir())
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)


def test_clients_jar(line: str) -> Path:
    """The test clients compiled against RocketMQ client line ``"4.9"`` or ``"5"`` (and the agent)."""
    profile = CLIENT_PROFILE_BY_LINE[line]
    build = agent()
    sources = sorted(TEST_CLIENT_SOURCES.rglob("*.java"))
    key = _digest(sources, TEST_CLIENT_SOURCES) + build.jar.parent.name[:8]
    target = cache_dir() / "jars" / "testclients" / f"testclients-{profile}-{key}.jar"
    if target.exists():
        jvm_artifacts.mark_used(target)  # in use: not to be removed as unused
        return target
    for tool in ("javac", "jar"):
        if not shutil.which(tool):
            raise ArtifactError(f"'{tool}' (JDK) is not on PATH; it compiles the RocketMQ test clients")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".build-", dir=target.parent) as work:
        classpath = ":".join(str(p) for p in [*jvm_artifacts.jars(profile), build.jar, *build.libraries])
        compiled = subprocess.run(
            [
                "javac",
                "--release",
                "8",
                "-nowarn",
                "-encoding",
                "UTF-8",
                "-cp",
                classpath,
                "-d",
                f"{work}/classes",
                *map(str, sources),
            ],
            capture_output=True,
            text=True,
        )
        if compiled.returncode != 0:
            raise ArtifactError("javac failed on jvm/testclients: " + compiled.stderr.strip()[-2000:])
        staging = Path(work) / target.name
        subprocess.run(["jar", "cf", str(staging), "-C", f"{work}/classes", "."], check=True)
        _remove_unused(target.parent.glob(f"testclients-{profile}-*.jar"))
        staging.rename(target)
    return target


def client_classpath(line: str, *, with_agent: bool = True) -> list[Path]:
    """Everything a test client JVM of ``line`` needs: the test clients, the agent, the RocketMQ client's jars,
    and the agent's libraries that the RocketMQ client does not already bring (same artifact, its version).
    ``with_agent=False``: the test clients and the RocketMQ client's jars only (the agent comes by -javaagent)."""
    build = agent()
    rocketmq = jvm_artifacts.jars(CLIENT_PROFILE_BY_LINE[line])
    if not with_agent:
        return [test_clients_jar(line), *rocketmq]
    present = {jvm_artifacts._artifact_name(p.name) for p in rocketmq}
    libraries = [p for p in build.libraries if jvm_artifacts._artifact_name(p.name) not in present]
    return [test_clients_jar(line), build.jar, *rocketmq, *libraries]


def main() -> None:
    """``python -m localenv.agent_artifacts``: build the agent and the test clients of both lines."""
    build = agent()
    print(f"client agent: {build.jar} (+{len(build.libraries)} libraries; installed as {':'.join(AGENT_COORDINATES)})")
    print(f"-javaagent jar: {build.javaagent}")
    for line in CLIENT_PROFILE_BY_LINE:
        print(f"test clients {line}: {test_clients_jar(line)}")


if __name__ == "__main__":
    main()
