"""The sizing bench end to end at a tiny point (``bench/bench_sizing.py``): its collector-shaped fleet through the
session's Kafka broker into the real job (on the session's Spark, its metrics endpoint on), incidents timed to
the metric and the Delta row, and a results entry with every field the curve's renderer reads. The silent
member is left out: it needs the brokers' 120 s expiry, the bench's own runs time it."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from bench.bench_detection_latency import KINDS
from bench.bench_sizing import ROLES, code, merge
from bench.sizing_table import render
from tests.support.job import job_config

KINDS_HERE = tuple(k for k in KINDS if k != "silent_member")


class InProcessJob:
    """The job on the tests' Spark session: this process is its driver."""

    def __init__(self, config) -> None:  # type: ignore[no-untyped-def]
        from streaming.job.runner import MonitorJob

        self.job = MonitorJob(config)

    @property
    def pid(self) -> int:
        return os.getpid()

    def start(self) -> None:
        self.job.start()

    def stop(self) -> float:
        self.job.stop()
        return 0.0


def test_a_tiny_point_measures_every_field_of_the_curve(kafka_broker, spark, tmp_path: Path):
    from bench.bench_sizing import measure_point

    def make_job(work: Path, bootstrap: str, metrics_port: int, prefix: str):  # type: ignore[no-untyped-def]
        config, topics = job_config(
            bootstrap, work, prefix, RRM__METRICS__ENABLED="true", RRM__METRICS__PORT=str(metrics_port)
        )
        return InProcessJob(config), topics

    args = argparse.Namespace(incidents=3, spacing=1.0, settle=6.0, sample_every=1.0, timeout=120.0)
    entry = measure_point(args, 12, 40, 1 / 6, tmp_path, kafka_broker.bootstrap_servers, make_job, KINDS_HERE)

    latency = entry["latency"]
    assert latency["overall"]["incidents"] == 3 and latency["overall"]["never_handed"] == 0
    # the incidents reach the job through collector-shaped input: in the metrics within the window, or in Delta
    shown = latency["overall"]["to_metric_s"]["n"] + latency["overall"]["to_delta_row_s"]["n"]
    assert shown >= 1, latency
    assert entry["job_cores"] > 0 and entry["peak_rss_bytes"]["summed_per_role"]["driver_python"] > 0
    assert set(entry["peak_rss_bytes"]["per_process"]) == set(ROLES)
    assert entry["input_lag"]["series_s_lag"] and entry["input_lag"]["verdict"] in ("flat", "growing")
    assert entry["input_lag"]["input_events_per_s"] > 0
    assert entry["delta"]["commits_per_min"] > 0 and entry["delta"]["data_bytes_per_min"] > 0
    document = merge(tmp_path / "sizing.json", [entry], "smoke", code())
    assert entry["code"] == code() and entry["code"] != "unknown"  # the test runs in a checkout
    assert "| 12 | 40 |" in render(document)
