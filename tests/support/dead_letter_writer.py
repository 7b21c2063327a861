"""A separate driver that appends one-row batches to a ``dead_letters`` table, as the job's sinks append.

Run as ``python -m tests.support.dead_letter_writer ROOT FIRST_BATCH COUNT MIN_NUM_FILES``: a new process is a
new JVM, so it starts with none of the in-memory state a previous writer's driver kept about the table (what
a restarted job starts with).
"""

from __future__ import annotations

import sys
import tempfile

DEAD_LETTER_DDL = (
    "source STRING, kafka_topic STRING, kafka_partition INT, kafka_offset BIGINT, kafka_timestamp TIMESTAMP, "
    "raw_value STRING, reason STRING, detail STRING, batch_id BIGINT"
)
MIN_NUM_FILES = "spark.databricks.delta.autoCompact.minNumFiles"


def append_batches(spark, root: str, first: int, count: int) -> None:  # type: ignore[no-untyped-def]
    from streaming.job.delta.sinks import DeltaTables

    tables = DeltaTables(spark, root, auto_compact=True)
    tables.ensure_all(["dead_letters"])
    for batch in range(first, first + count):
        frame = spark.createDataFrame(
            [("send_result", "t", 0, batch, None, "{", "NOT_JSON", "x", batch)], DEAD_LETTER_DDL
        )
        tables.append("dead_letters", frame, "app", batch, 1)


def main(root: str, first: int, count: int, min_num_files: int) -> None:
    from streaming.job.runtime.spark_session import SparkSettings, build_spark_session

    with tempfile.TemporaryDirectory() as scratch:
        spark = build_spark_session(
            SparkSettings(
                app_name="rrm-writer",
                local_dir=scratch,
                checkpoint_root=scratch,
                extra_conf={MIN_NUM_FILES: str(min_num_files)},
            )
        )
        try:
            append_batches(spark, root, first, count)
        finally:
            spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
