"""Canaries for the Spark, Delta and Hadoop internals the project's JVM classes use.

The project's classes (``jvm/src``) are compiled once per source hash, not per Spark or Delta version, and several
use internal APIs (Delta's log and snapshot, Catalyst rows and plans, Spark's ``Utils``). Every class, method,
constructor and field of those libraries that the compiled classes reference (read from their bytecode with
``javap``), and every library supertype they extend, must exist with the same signature (and static-ness) on the
classpath the job runs with: an upgrade that changes one fails here, naming the class, instead of deep in a
micro-batch with a ``NoSuchMethodError``. The few internals the Python side calls over Py4J are listed by hand.
"""

from __future__ import annotations

import re
import subprocess
import zipfile
from collections import defaultdict
from functools import cache
from typing import NamedTuple

import pytest

from connectors.jvm_artifacts import ingest_jar

# The libraries whose internals are checked (Scala's and the JDK's own classes are stable under a Spark release).
LIBRARIES = ("org/apache/spark/", "io/delta/", "org/apache/hadoop/")
# ``javap -c`` comments of an instruction's constant: kind, owner, and for members name and descriptor.
REFERENCE = re.compile(
    r"\b(?P<op>invoke\w+|[gp]et(?:static|field)|new|checkcast|instanceof|ldc\w*|anewarray)\s+#\d+\s+// "
    r"(?P<kind>Method|InterfaceMethod|Field|class) (?P<owner>[\w/$]+)(?:\.(?P<name>[\w$<>\"]+):(?P<desc>\S+))?"
)
SUPERTYPES = re.compile(
    r"^(?:public |final |abstract )*(?:class|interface) \S+(?: extends ([\w.$, ]+?))?(?: implements ([\w.$, ]+))? ?\{"
)
# Internals the Python side calls through Py4J: (class, method, static).
PY4J_CALLS = (
    ("org.apache.spark.sql.classic.SparkSession", "cloneSession", False),  # exactly_once: a session of its own
    ("org.apache.spark.api.java.JavaSparkContext", "hadoopConfiguration", False),
)


class Member(NamedTuple):
    kind: str  # Method, InterfaceMethod, Field, class (a referenced or extended type)
    name: str
    descriptor: str
    static: bool


@cache
def referenced() -> dict[str, frozenset[Member]]:
    """The library members the project's compiled classes reference, by owner class (dotted name)."""
    jar = ingest_jar()
    with zipfile.ZipFile(jar) as archive:
        classes = [n.removesuffix(".class").replace("/", ".") for n in archive.namelist() if n.endswith(".class")]
    listing = subprocess.run(
        ["javap", "-c", "-p", "-classpath", str(jar), *classes], capture_output=True, text=True, check=True
    ).stdout
    found: defaultdict[str, set[Member]] = defaultdict(set)
    for line in listing.splitlines():
        header = SUPERTYPES.match(line)
        if header:
            for group in header.groups():
                for supertype in (group or "").split(","):
                    if supertype.strip() and supertype.strip().replace(".", "/").startswith(LIBRARIES):
                        found[supertype.strip()].add(Member("class", "", "", False))
            continue
        match = REFERENCE.search(line)
        if not match or not match["owner"].startswith(LIBRARIES):
            continue
        owner = match["owner"].replace("/", ".")
        if match["kind"] == "class":
            found[owner].add(Member("class", "", "", False))
        else:
            static = match["op"] in ("invokestatic", "getstatic", "putstatic")
            found[owner].add(Member(match["kind"], match["name"].strip('"'), match["desc"], static))
    return {owner: frozenset(members) for owner, members in found.items()}


def _hierarchy(jvm, cls) -> list:  # type: ignore[no-untyped-def]
    """``cls``, its superclasses and every interface they implement, nearest first."""
    seen, order, queue = set(), [], [cls]
    while queue:
        current = queue.pop(0)
        if current is None or current.getName() in seen:
            continue
        seen.add(current.getName())
        order.append(current)
        queue.append(current.getSuperclass())
        queue.extend(current.getInterfaces())
    return order


PRIMITIVES = {
    "boolean": "Z",
    "byte": "B",
    "char": "C",
    "short": "S",
    "int": "I",
    "long": "J",
    "float": "F",
    "double": "D",
    "void": "V",
}


def _descriptor(cls) -> str:  # type: ignore[no-untyped-def]
    """A reflected class as a JVM type descriptor (``I``, ``[J``, ``Ljava/lang/String;``)."""
    name = cls.getName()
    if name in PRIMITIVES:
        return PRIMITIVES[name]
    return name.replace(".", "/") if name.startswith("[") else f"L{name.replace('.', '/')};"


def _signature(executable, returns) -> str:  # type: ignore[no-untyped-def]
    parameters = "".join(_descriptor(c) for c in executable.getParameterTypes())
    return f"({parameters}){_descriptor(returns) if returns is not None else 'V'}"


def _find(jvm, cls, member: Member):  # type: ignore[no-untyped-def]
    """The reflected member ``member`` names on ``cls`` or a supertype, else None."""
    if member.name == "<init>":
        return next((c for c in cls.getDeclaredConstructors() if _signature(c, None) == member.descriptor), None)
    for owner in _hierarchy(jvm, cls):
        if member.kind == "Field":
            for field in owner.getDeclaredFields():
                if field.getName() == member.name and _descriptor(field.getType()) == member.descriptor:
                    return field
            continue
        for method in owner.getDeclaredMethods():
            if method.getName() == member.name and _signature(method, method.getReturnType()) == member.descriptor:
                return method
    return None


def _load(jvm, name: str, loader):  # type: ignore[no-untyped-def]
    return jvm.java.lang.Class.forName(name, False, loader)


def test_the_scan_finds_the_internals_and_the_check_refuses_a_changed_signature(spark):
    """Controls: the bytecode scan finds what the sources say they use (Delta's log, Catalyst rows, the log store's
    supertype), and a member with another descriptor or name is not found."""
    owners = referenced()
    assert "org.apache.spark.sql.delta.DeltaLog" in owners
    assert "org.apache.spark.sql.catalyst.InternalRow" in owners
    assert "io.delta.storage.HDFSLogStore" in owners  # the local log store's supertype
    (for_table, *_) = [m for m in owners["org.apache.spark.sql.delta.DeltaLog"] if m.name == "forTable"]
    jvm = spark.sparkContext._jvm
    loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    delta_log = _load(jvm, "org.apache.spark.sql.delta.DeltaLog", loader)
    assert _find(jvm, delta_log, for_table) is not None
    assert _find(jvm, delta_log, for_table._replace(descriptor="(Ljava/lang/String;)I")) is None
    assert _find(jvm, delta_log, for_table._replace(name="forTableGone")) is None


@pytest.mark.parametrize("owner", sorted(referenced()))
def test_every_member_the_project_uses_exists_at_run_time(spark, owner):
    jvm = spark.sparkContext._jvm
    loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    cls = _load(jvm, owner, loader)  # a class gone raises ClassNotFoundException here
    modifier = jvm.java.lang.reflect.Modifier
    missing = []
    for member in sorted(referenced()[owner]):
        if member.kind == "class":
            continue
        found = _find(jvm, cls, member)
        if found is None:
            missing.append(f"{member.name}{member.descriptor}")
        elif member.name != "<init>" and bool(modifier.isStatic(found.getModifiers())) != member.static:
            missing.append(f"{member.name}{member.descriptor} ({'no longer ' if member.static else ''}static)")
    assert not missing, f"{owner}: " + ", ".join(missing)


@pytest.mark.parametrize(("owner", "name", "static"), PY4J_CALLS)
def test_every_internal_the_python_side_calls_exists_at_run_time(spark, owner, name, static):
    jvm = spark.sparkContext._jvm
    loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    modifier = jvm.java.lang.reflect.Modifier
    methods = [
        m
        for c in _hierarchy(jvm, _load(jvm, owner, loader))
        for m in c.getDeclaredMethods()
        if m.getName() == name and bool(modifier.isStatic(m.getModifiers())) == static
    ]
    assert methods, f"{owner}.{name}"
