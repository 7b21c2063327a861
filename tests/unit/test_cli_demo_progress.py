"""The demo's start-up progress: Maven's per-file download lines condensed into one progress line each."""

from __future__ import annotations

import sys

from connectors import jvm_artifacts

MAVEN_OUTPUT = """\
[INFO] Scanning for projects...
Downloading from central: https://repo.maven.apache.org/maven2/io/delta/delta-spark_4.2_2.13/4.4.0/delta-spark_4.2_2.13-4.4.0.pom
Downloaded from central: https://repo.maven.apache.org/maven2/io/delta/delta-spark_4.2_2.13/4.4.0/delta-spark_4.2_2.13-4.4.0.pom (3.1 kB at 12 kB/s)
Downloaded from central: https://repo.maven.apache.org/maven2/io/delta/delta-spark_4.2_2.13/4.4.0/delta-spark_4.2_2.13-4.4.0.jar (6.5 MB at 4.0 MB/s)
Downloaded from central: https://repo.maven.apache.org/maven2/org/x/y/1/y-1.jar (1,200 B at 3 kB/s)
[ERROR] something went wrong
"""


def test_each_downloaded_file_is_reported_with_the_running_total(tmp_path):
    script = tmp_path / "fake_mvn.py"
    script.write_text(f"import sys\nsys.stdout.write({MAVEN_OUTPUT!r})\nsys.exit(3)\n")
    seen: list[str] = []
    code, lines = jvm_artifacts._run_reporting([sys.executable, str(script)], {}, "spark", seen.append)
    assert code == 3 and lines[-1] == "[ERROR] something went wrong"  # the caller reports the ERROR lines
    assert seen == [
        "spark: 1 files, 0.0 MB downloaded -- delta-spark_4.2_2.13-4.4.0.pom",
        "spark: 2 files, 6.5 MB downloaded -- delta-spark_4.2_2.13-4.4.0.jar",
        "spark: 3 files, 6.5 MB downloaded -- y-1.jar",
    ]


def test_a_complete_cache_is_not_resolved_again_and_reports_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("RRM_CACHE_DIR", str(tmp_path))
    target = jvm_artifacts.jar_dir("kafka")
    target.mkdir(parents=True)
    (target / "a-1.0.jar").write_bytes(b"")
    (target / ".complete").write_text("")
    seen: list[str] = []
    assert jvm_artifacts.jars("kafka", seen.append) == [target / "a-1.0.jar"] and seen == []
