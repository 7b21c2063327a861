"""The real RocketMQ client classes, loaded from Maven Central jars through JPype.

One embedded JVM per test process (JPype cannot restart it). The 4.9.8 and 5.3.x clients share class
names, so each line gets its own ``URLClassLoader`` over its own jar set; ``RocketMQClasses.cls(name)``
returns the class as that line defines it. RocketMQ 4.9 logs to ``~/logs`` unless told otherwise, so the
log root is pointed into the cache.
"""

from __future__ import annotations

from functools import cache

import jpype
import jpype.imports  # noqa: F401  (enables the java.* import hooks used by callers)

from connectors import jvm_artifacts

PROFILE_BY_LINE = {"4.9": "rocketmq-4", "5": "rocketmq-5"}


def _start_jvm() -> None:
    if jpype.isJVMStarted():
        return
    log_root = jvm_artifacts.cache_dir() / "rocketmq-client-logs"
    log_root.mkdir(parents=True, exist_ok=True)
    jpype.startJVM(
        "-Xmx512m",
        f"-Drocketmq.client.logRoot={log_root}",
        "-Drocketmq.client.logLevel=ERROR",
        "-Dfile.encoding=UTF-8",
        convertStrings=True,
    )


class RocketMQClasses:
    """Classes of one RocketMQ client line, from its own class loader."""

    def __init__(self, line: str) -> None:
        _start_jvm()
        urls = [jar.resolve().as_uri() for jar in jvm_artifacts.jars(PROFILE_BY_LINE[line])]
        URL = jpype.JClass("java.net.URL")
        URLClassLoader = jpype.JClass("java.net.URLClassLoader")
        parent = jpype.JClass("java.lang.ClassLoader").getPlatformClassLoader()
        self.line = line
        self.loader = URLClassLoader(jpype.JArray(URL)([URL(u) for u in urls]), parent)
        self._classes: dict[str, jpype.JClass] = {}

    def cls(self, name: str) -> jpype.JClass:
        if name not in self._classes:
            self._classes[name] = jpype.JClass(name, loader=self.loader)
        return self._classes[name]

    def message_queue(self, topic: str, broker: str, queue_id: int):
        return self.cls("org.apache.rocketmq.common.message.MessageQueue")(topic, broker, queue_id)

    def array_list(self, items) -> jpype.JObject:
        result = jpype.JClass("java.util.ArrayList")()
        for item in items:
            result.add(item)
        return result

    def set_private(self, obj, field_name: str, value) -> None:
        """Set a private field by reflection (e.g. a ThreadLocalIndex's ``threadLocalIndex``)."""
        field = obj.getClass().getDeclaredField(field_name)
        field.setAccessible(True)
        field.set(obj, value)

    def get_private(self, obj, field_name: str):
        field = obj.getClass().getDeclaredField(field_name)
        field.setAccessible(True)
        return field.get(obj)


@cache
def rocketmq(line: str) -> RocketMQClasses:
    """The (cached) classes of client line ``"4.9"`` or ``"5"``."""
    return RocketMQClasses(line)
