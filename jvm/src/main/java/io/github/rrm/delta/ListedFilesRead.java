package io.github.rrm.delta;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.delta.DeltaLog;
import org.apache.spark.sql.delta.Snapshot;
import org.apache.spark.sql.delta.VersionChecksum;
import org.apache.spark.sql.delta.actions.AddFile;
import scala.Option;
import scala.collection.immutable.Seq;

/**
 * Reads a Delta table's latest rows from the files its snapshot's checksum lists, without a log replay.
 *
 * <p>Why: a Delta read asks the snapshot for its files, and on the snapshot the previous commit left that
 * rebuilds the table's state (three Spark jobs over the log), the larger part of reading a small table the job
 * rewrites whole every batch. Delta keeps the file list in the checksum while a table has at most 50 files; the
 * rows are read through Delta's own file index over those files ({@code DeltaLog.createDataFrame}, as its MERGE
 * reads the files it rewrites), so deletion vectors, column mapping and the table's schema apply as in any Delta
 * read. Without the list this is Delta's own read.
 */
public final class ListedFilesRead {
  private ListedFilesRead() {}

  /** The rows of the Delta table at {@code path}, as of its latest version. */
  public static Dataset<Row> latest(SparkSession spark, String path) {
    DeltaLog log = DeltaLog.forTable(spark, path);
    Snapshot snapshot = log.update(false, Option.empty(), Option.empty());
    Option<Seq<AddFile>> files = listed(snapshot);
    if (files.isEmpty()) {
      return spark.read().format("delta").load(path);
    }
    return log.createDataFrame(snapshot, files.get(), false, Option.apply("batch"));
  }

  /**
   * The table's live files as the snapshot's checksum lists them, if it does: Delta keeps the list there
   * ({@code allFilesInCrc}) while the table has at most {@code allFilesInCrc.thresholdNumFiles} files (50).
   */
  static Option<Seq<AddFile>> listed(Snapshot snapshot) {
    Option<VersionChecksum> checksum = snapshot.checksumOpt();
    return checksum.isDefined() ? checksum.get().allFiles() : Option.<Seq<AddFile>>empty();
  }
}
