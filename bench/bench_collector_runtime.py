"""Benchmark (not a test): where the collector's cycle should run -- its own JVM, or the Python process over JPype.

Run: ``.venv/bin/python -m bench.bench_collector_runtime`` -> prints the figures and writes
``bench/results/collector_runtime.json``. Both sides use the same jars (profile ``collector``), no cluster:

* from cold: a JVM process that starts RocketMQ's admin client, makes one call and exits, vs the same from
  Python through an embedded JVM (wall and CPU seconds: the wall time is mostly the admin client's own retries
  against the absent name server, and swings with the machine's load), and the peak resident set of each;
* the per-cycle bridge: 2,000 connection lists of 10 channels (1,000 groups x 2 brokers), decoded as the admin
  client decodes a broker's answer, then turned into event JSON field by field from Python (what a JPype
  collector must do) vs by one call into the JVM per list (what the JVM collector does), wall and CPU seconds.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from connectors import jvm_artifacts

RESULTS = Path(__file__).parent / "results" / "collector_runtime.json"
LISTS, CHANNELS = 2_000, 10


def connection_list_json(index: int) -> str:
    """A broker's answer to GET_CONSUMER_CONNECTION_LIST as RocketMQ serialises it."""
    group = f"group-{index // 2:04d}"
    return json.dumps(
        {
            "connectionSet": [
                {
                    "clientId": f"10.0.{c}.{index % 250}@{c}#{index}",
                    "clientAddr": f"10.0.{c}.1:{40000 + c}",
                    "language": "JAVA",
                    "version": 479,
                }
                for c in range(CHANNELS)
            ],
            "subscriptionTable": {
                t: {
                    "topic": t,
                    "subString": "*",
                    "subVersion": 1700000000000 + index,
                    "tagsSet": [],
                    "codeSet": [],
                    "expressionType": "TAG",
                    "classFilterMode": False,
                }
                for t in (f"topic-{index // 2:04d}", f"%RETRY%{group}")
            },
            "consumeType": "CONSUME_PASSIVELY",
            "messageModel": "CLUSTERING",
            "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
        }
    )


def jvm_process_start() -> dict[str, float]:
    """The collector's JVM running RocketMQ's admin client once (``ClusterAdmin cluster`` against a name server that
    is not there): launch to exit, and the child's peak resident set."""
    start = time.perf_counter()
    subprocess.run(
        [
            "java",
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-cp",
            jvm_artifacts.collector_classpath(),
            "io.github.rrm.collector.ClusterAdmin",
            "cluster",
            "127.0.0.1:1",
        ],
        capture_output=True,
    )
    wall = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "rss_mb": usage.ru_maxrss / 1024}


def jpype_start() -> dict[str, float]:
    """The same admin call from Python: an embedded JVM through JPype, the admin client started, asked, shut down."""
    import jpype

    start, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
    jpype.startJVM(
        "-Xmx256m",
        "-XX:+UseSerialGC",
        classpath=[str(jvm_artifacts.collector_jar()), *map(str, jvm_artifacts.jars("collector"))],
        convertStrings=True,
    )
    admin = jpype.JClass("org.apache.rocketmq.tools.admin.DefaultMQAdminExt")(5000)
    admin.setNamesrvAddr("127.0.0.1:1")
    admin.start()
    try:
        admin.examineBrokerClusterInfo()
    except Exception:  # noqa: BLE001 - nobody listens there, as for the JVM side
        pass
    admin.shutdown()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = usage.ru_utime + usage.ru_stime - before.ru_utime - before.ru_stime
    return {"wall_s": time.perf_counter() - start, "cpu_s": cpu, "rss_mb": usage.ru_maxrss / 1024}


def decoded_answers() -> list:
    """``LISTS`` connection lists, decoded as the admin client decodes a broker's answer."""
    import jpype

    ConsumerConnection = jpype.JClass("org.apache.rocketmq.remoting.protocol.body.ConsumerConnection")
    RemotingSerializable = jpype.JClass("org.apache.rocketmq.remoting.protocol.RemotingSerializable")
    return [RemotingSerializable.decode(connection_list_json(i).encode(), ConsumerConnection) for i in range(LISTS)]


def from_python(answers: list) -> int:
    """Every answer turned into event JSON field by field from Python, as a JPype collector must."""
    size = 0
    for answer in answers:
        subscriptions = [
            {"topic": s.getTopic(), "expression": s.getSubString(), "sub_version": s.getSubVersion()}
            for s in answer.getSubscriptionTable().values()
        ]
        connections = [
            {
                "channel": c.getClientAddr(),
                "client_id": c.getClientId(),
                "language": str(c.getLanguage().name()),
                "client_version": str(c.getVersion()),
            }
            for c in answer.getConnectionSet()
        ]
        size += len(
            json.dumps(
                {
                    "message_model": str(answer.getMessageModel().name()),
                    "consume_type": str(answer.getConsumeType().name()),
                    "subscriptions": subscriptions,
                    "connections": connections,
                }
            )
        )
    return size


def in_jvm(to_json, answers: list) -> int:  # type: ignore[no-untyped-def]
    """Every answer turned into JSON by one call into the JVM, as the JVM collector does."""
    return sum(len(to_json.toJSONString(answer)) for answer in answers)


def measure(fn) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """The median of three runs after a warm-up one, wall and CPU seconds."""
    fn()  # warm-up
    samples = []
    for _ in range(3):
        wall, cpu = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
        fn()
        after = resource.getrusage(resource.RUSAGE_SELF)
        samples.append((time.perf_counter() - wall, after.ru_utime + after.ru_stime - cpu.ru_utime - cpu.ru_stime))
    samples.sort()
    return {"wall_s": samples[1][0], "cpu_s": samples[1][1]}


def results_document(jvm: dict, embedded: dict, python_side: dict, jvm_side: dict) -> dict:
    return {
        "connection_lists": LISTS,
        "channels_per_list": CHANNELS,
        "admin_call_from_cold": {
            side: {"wall_s": round(m["wall_s"], 2), "cpu_s": round(m["cpu_s"], 2)}
            for side, m in (("jvm_process", jvm), ("jpype", embedded))
        },
        "peak_rss_mb": {"jvm_process": round(jvm["rss_mb"]), "python_with_jpype": round(embedded["rss_mb"])},
        "bridge_per_cycle": {
            "python_over_jpype": python_side,
            "in_jvm": jvm_side,
            "wall_ratio": round(python_side["wall_s"] / jvm_side["wall_s"], 1),
            "cpu_ratio": round(python_side["cpu_s"] / max(jvm_side["cpu_s"], 1e-6), 1),
        },
        "load_average": os.getloadavg()[0],
        "python": sys.version.split()[0],
    }


def main() -> None:
    import jpype

    jvm = jvm_process_start()
    embedded = jpype_start()

    to_json = jpype.JClass("com.alibaba.fastjson.JSON")
    answers = decoded_answers()
    python_side = measure(lambda: from_python(answers))
    jvm_side = measure(lambda: in_jvm(to_json, answers))
    results = results_document(jvm, embedded, python_side, jvm_side)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
