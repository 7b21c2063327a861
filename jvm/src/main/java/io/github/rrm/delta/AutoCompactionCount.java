package io.github.rrm.delta;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.delta.DeltaLog;
import org.apache.spark.sql.delta.Snapshot;
import org.apache.spark.sql.delta.VersionChecksum;
import org.apache.spark.sql.delta.stats.AutoCompactPartitionStats;
import scala.Option;
import scala.collection.immutable.Map;
import scala.collection.immutable.Map$;
import scala.collection.immutable.Set;
import scala.collection.immutable.Set$;
import scala.collection.mutable.LinkedHashMap;

/**
 * Keeps the file count Delta's auto compaction decides on equal to the table's real number of files.
 *
 * <p>Why: auto compaction (a post-commit hook) compacts a table when its entry in {@code
 * AutoCompactPartitionStats}, a counter kept in the driver's memory and moved by the files each commit of
 * this process adds and removes, reaches {@code spark.databricks.delta.autoCompact.minNumFiles}, or when the
 * entry is not yet marked as compacted. A restarted driver starts without entries; its first compaction then
 * removes the files written before the restart as well, the counter drops to zero or below, Delta deletes
 * the entry, and the next commit creates a new, unmarked one: every later commit was followed by a
 * compaction of two files (the last compacted file and the new one). A DELETE that removes more files than
 * the process counted does the same. Setting the entry from the snapshot's own file count (from its checksum,
 * so no log replay) before each write, and marking it compacted, makes the threshold hold whatever the
 * driver's age. Only unpartitioned tables (the monitor's) are aligned; a table whose snapshot has no checksum
 * is left to Delta.
 */
public final class AutoCompactionCount {
  private AutoCompactionCount() {}

  /** Align the count of the table at {@code path} with its latest snapshot (before a MERGE or DELETE). */
  public static void align(SparkSession spark, String path) {
    DeltaLog log = DeltaLog.forTable(spark, path);
    align(spark, log.update(false, Option.empty(), Option.empty()));
  }

  /** Align the count of {@code snapshot}'s table with the number of files of {@code snapshot}. */
  public static void align(SparkSession spark, Snapshot snapshot) {
    if (!snapshot.metadata().partitionColumns().isEmpty()) {
      return;
    }
    // The checksum's count, not numOfFilesIfKnown: on the snapshot a commit leaves, that one reconstructs the
    // table's state (three Spark jobs over the log) although the commit computed the checksum incrementally.
    Option<VersionChecksum> checksum = snapshot.checksumOpt();
    if (checksum.isEmpty()) {
      return;
    }
    long files = checksum.get().numFiles();
    String tableId = snapshot.deltaLog().tableId();
    Map<String, String> unpartitioned = Map$.MODULE$.empty();
    Set<Map<String, String>> partitions = Set$.MODULE$.<Map<String, String>>empty().incl(unpartitioned);
    AutoCompactPartitionStats stats = AutoCompactPartitionStats.instance(spark);
    // The same lock as the statistics' own methods: a concurrent commit's update waits for the whole step.
    synchronized (stats) {
      long counted = stats.maxNumFilesInTable(tableId); // the only partition of an unpartitioned table
      if (files != counted) {
        LinkedHashMap<Object, Object> change = new LinkedHashMap<>();
        change.update(unpartitioned.hashCode(), files - counted);
        stats.merge(tableId, change);
      }
      stats.markPartitionsAsCompacted(tableId, partitions);
    }
  }
}
