"""Class-data-sharing archives for short-lived JVMs started again and again (JDK dynamic AppCDS).

The first JVM of a class path writes the classes it loaded to an archive when it exits; every later JVM of that
class path maps them from the archive instead of loading and verifying them from the jars. One archive per JDK and
class path (the jars' names, sizes and times in its key: ``jvm_artifacts.mark_used`` moves a built jar's time at
most once a day), in ``<cache>/jvm-cds/``. A JVM the archive does not fit starts as without it, silently: the
archive changes start-up cost, never what the JVM does.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
import uuid
from pathlib import Path

from connectors import jvm_artifacts
from connectors.processes import pid_alive

# Quiet whether or not the archive fits the JVM (the JVM then loads classes as usual).
QUIET = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off")
# Archives older than this are removed when another of the same main class is made (its jars changed since).
UNUSED_DAYS = 7


def archive_dir() -> Path:
    return jvm_artifacts.cache_dir() / "jvm-cds"


def _entries(classpath: str) -> list[str]:
    """Each class path entry with its size and time; a ``dir/*`` entry as its jars."""
    described = []
    for entry in classpath.split(os.pathsep):
        paths = sorted(Path(entry[:-2]).glob("*.jar")) if entry.endswith("/*") else [Path(entry)]
        for path in paths:
            try:
                stat = path.stat()
            except OSError:
                described.append(f"{path} missing")
                continue
            described.append(f"{path} {stat.st_size} {stat.st_mtime_ns}")
    return described


def archive_path(main_class: str, classpath: str) -> Path:
    """The archive of ``classpath`` for this JDK (``main_class``, the class of the JVM that makes it, names it)."""
    java = os.path.realpath(shutil.which("java") or "java")
    key = hashlib.sha256("\n".join([java, main_class, classpath, *_entries(classpath)]).encode()).hexdigest()[:16]
    return archive_dir() / f"{main_class.rsplit('.', 1)[-1]}-{key}.jsa"


class SharedClasses:
    """The options that map the archive of ``classpath`` made by a JVM of ``main_class`` into a JVM, or, while there
    is none and no other JVM is making it, with ``make``, that make it at the JVM's exit (``ended`` then names it
    the archive, if that JVM ended well); a JVM of another main class on the same class path may map it too."""

    def __init__(self, main_class: str, classpath: str, make: bool = True) -> None:
        self.archive = archive_path(main_class, classpath)
        self.partial: Path | None = None
        self.options: list[str] = []
        if self.archive.is_file():
            self.options = [f"-XX:SharedArchiveFile={self.archive}", *QUIET]
        elif make and not self._being_made():
            self.partial = self.archive.with_name(f".{self.archive.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}")
            self.partial.touch()
            self.options = [f"-XX:ArchiveClassesAtExit={self.partial}", *QUIET]

    def _being_made(self) -> bool:
        """Whether a JVM started by a live process is making the archive (a making left by a dead one is removed)."""
        self.archive.parent.mkdir(parents=True, exist_ok=True)
        making = False
        for partial in self.archive.parent.glob(f".{self.archive.name}.*"):
            if pid_alive(int(partial.name.split(".")[-2])):
                making = True
            else:
                partial.unlink(missing_ok=True)
        return making

    def ended(self, well: bool) -> None:
        """After the JVM ended: the archive it wrote becomes the class path's, if it ended ``well``."""
        if self.partial is None:
            return
        if well and self.partial.is_file() and self.partial.stat().st_size > 0:
            os.replace(self.partial, self.archive)
            label = self.archive.name.rsplit("-", 1)[0]
            for older in self.archive.parent.glob(f"{label}-*.jsa"):  # of jars since changed, made a week ago
                if older.stat().st_mtime < time.time() - UNUSED_DAYS * 86400:
                    older.unlink(missing_ok=True)
        else:
            self.partial.unlink(missing_ok=True)
        self.partial = None
