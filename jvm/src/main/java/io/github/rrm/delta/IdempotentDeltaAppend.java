package io.github.rrm.delta;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SaveMode;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.delta.DeltaLog;
import org.apache.spark.sql.delta.DeltaOperations;
import org.apache.spark.sql.delta.DeltaOptions;
import org.apache.spark.sql.delta.OptimisticTransaction;
import org.apache.spark.sql.delta.OptimisticTransaction$;
import org.apache.spark.sql.delta.Snapshot;
import org.apache.spark.sql.delta.VersionChecksum;
import org.apache.spark.sql.delta.actions.Action;
import org.apache.spark.sql.delta.actions.AddFile;
import org.apache.spark.sql.delta.actions.SetTransaction;
import org.apache.spark.sql.delta.commands.DMLUtils;
import org.apache.spark.sql.delta.commands.WriteIntoDelta;
import org.apache.spark.sql.delta.sources.DeltaSQLConf;
import org.apache.spark.sql.execution.metric.SQLMetric;
import org.apache.spark.sql.execution.metric.SQLMetrics;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import scala.Option;
import scala.collection.immutable.Map;
import scala.collection.immutable.Map$;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * An exactly-once Delta append ({@code txnAppId}/{@code txnVersion}), or overwrite of the whole table, that reads
 * the table's committed version for the app id from the snapshot's checksum file when it holds the table's
 * transactions.
 *
 * <p>Why: the writer options make Delta ask the snapshot for its transactions ({@code txnVersion}), and Delta
 * 4.4 answers that by replaying the whole log (state reconstruction: three Spark jobs over the checkpoint and
 * the commits since) on every append, although each commit also writes the table's transactions into its
 * {@code .crc} file, computed incrementally from the previous one. For the monitor's one-row to few-thousand-row
 * appends that replay was about two thirds of an append's wall and CPU time (bench/bench_delta_commit.py).
 * Delta's own checks keep the checksum's list complete or leave it out: it is written only while no
 * {@code delta.setTransactionRetentionDuration} is set and the table has at most
 * {@code setTransactionsInCrc.maxAllowed} app ids; when it is absent (another writer, an older table, a missing
 * {@code .crc}) this asks Delta's own {@code txnVersion}, the replay, as before.
 *
 * <p>Everything else is Delta's own write path ({@code WriteIntoDelta}, the command behind
 * {@code df.write.format("delta").mode("append")} and {@code mode("overwrite")}): schema enforcement, the
 * {@code SetTransaction} action, the commit, its conflict checks and post-commit hooks (auto compaction
 * counting the table's real files, see {@link AutoCompactionCount}). The app id is registered as read by the
 * transaction, as {@code txnVersion} does, so a concurrent commit of the same app id still fails this one.
 *
 * <p>An overwrite removes the files the snapshot's checksum lists, when it lists them (Delta keeps the file
 * list there while a table has at most 50 files, as a table the job rewrites whole has). Delta's own overwrite
 * asks the snapshot for its files, and on the snapshot the previous commit left that rebuilds its state: the
 * same log replay, about 0.55 of an overwrite's 0.9 CPU seconds. The files are written by Delta's append path,
 * and the commit carries what Delta's overwrite adds to it: a removal of every listed file, the whole table
 * marked as read (so a concurrent change of the table fails this commit), the overwrite as its operation and
 * the removed files and bytes as its metrics. Without the list, Delta's overwrite runs as it is.
 */
public final class IdempotentDeltaAppend {
  private static final Logger LOG = LoggerFactory.getLogger(IdempotentDeltaAppend.class);
  /** Tables already reported as taking the slow path, so the log says it once per table and process. */
  private static final Set<String> SLOW_TABLES = ConcurrentHashMap.newKeySet();

  private IdempotentDeltaAppend() {}

  /**
   * Append {@code data} to the Delta table at {@code path} unless the table already committed
   * ({@code appId}, {@code version}) or a later version of the app id; true when it appended.
   */
  public static boolean append(Dataset<Row> data, String path, String appId, long version) {
    return write(data, path, appId, version, SaveMode.Append);
  }

  /**
   * Replace every row of the Delta table at {@code path} with {@code data}, as {@link #append} does once per
   * ({@code appId}, {@code version}); true when it wrote. The table's schema stays as it is.
   */
  public static boolean overwrite(Dataset<Row> data, String path, String appId, long version) {
    return write(data, path, appId, version, SaveMode.Overwrite);
  }

  private static boolean write(Dataset<Row> data, String path, String appId, long version, SaveMode mode) {
    SparkSession spark = data.sparkSession();
    DeltaLog log = DeltaLog.forTable(spark, path);
    java.util.Map<String, String> writerOptions = new java.util.HashMap<>();
    writerOptions.put(DeltaOptions.TXN_APP_ID(), appId);
    writerOptions.put(DeltaOptions.TXN_VERSION(), Long.toString(version));
    DeltaOptions options = new DeltaOptions(immutable(writerOptions), spark.sessionState().conf());
    Seq<String> noPartitionColumns = CollectionConverters.asScala(java.util.List.<String>of()).toSeq();

    OptimisticTransaction txn = log.startTransaction(Option.empty(), Option.empty());
    OptimisticTransaction$.MODULE$.setActive(txn);
    try {
      if (committedVersion(txn, appId) >= version) {
        return false;
      }
      AutoCompactionCount.align(spark, txn.snapshot()); // so the commit's auto compaction counts truly
      Option<Seq<AddFile>> replaced =
          mode == SaveMode.Overwrite ? ListedFilesRead.listed(txn.snapshot()) : Option.<Seq<AddFile>>empty();
      if (replaced.isDefined()) {
        DeltaLog.assertRemovable(txn.snapshot()); // as Delta's overwrite does: not on an append-only table
      }
      WriteIntoDelta write =
          new WriteIntoDelta(
              log,
              replaced.isDefined() ? SaveMode.Append : mode,
              options,
              noPartitionColumns,
              immutable(java.util.Map.of()),
              data,
              Option.empty(),
              Option.empty(),
              false);
      DMLUtils.TaggedCommitData<Action> commit =
          write.writeAndReturnCommitData(txn, spark, Option.empty(), false);
      Seq<Action> actions = commit.actions();
      if (replaced.isDefined()) {
        // What Delta's overwrite adds to the written files: every live file removed, the whole table read.
        txn.readWholeTable();
        txn.trackFilesRead(replaced.get());
        java.util.List<Action> all = new java.util.ArrayList<>(CollectionConverters.asJava(actions));
        long removedBytes = 0;
        for (AddFile file : CollectionConverters.asJava(replaced.get())) {
          all.add(file.remove());
          removedBytes += file.size();
        }
        actions = CollectionConverters.asScala(all).toSeq();
        recordRemoved(spark, txn, replaced.get().size(), removedBytes);
      }
      DeltaOperations.Write operation =
          new DeltaOperations.Write(
              mode,
              Option.apply(noPartitionColumns),
              Option.empty(),
              options.userMetadata(),
              Option.empty(),
              Option.empty(),
              Option.empty(),
              Option.empty(),
              Option.empty());
      txn.commitIfNeeded(actions, operation, commit.stringTags());
      return true;
    } finally {
      OptimisticTransaction$.MODULE$.clearActive();
    }
  }

  /**
   * The last version the table committed for {@code appId}, -1 when none: from the snapshot's checksum when it
   * lists the table's transactions, else from Delta's log replay.
   */
  static long committedVersion(OptimisticTransaction txn, String appId) {
    Snapshot snapshot = txn.snapshot();
    Option<Seq<SetTransaction>> listed = listedTransactions(snapshot);
    if (listed.isDefined()) {
      txn.readTxn().$plus$eq(appId);
      // The list is the log replayed: one entry per app id, its latest version.
      for (SetTransaction transaction : CollectionConverters.asJava(listed.get())) {
        if (transaction.appId().equals(appId)) {
          return transaction.version();
        }
      }
      return -1L;
    }
    if (SLOW_TABLES.add(snapshot.deltaLog().dataPath().toString())) {
      LOG.warn(
          "Delta table {} (version {}): its checksum does not list the table's transactions (no .crc file, "
              + "more app ids than spark.databricks.delta.setTransactionsInCrc.maxAllowed, or "
              + "delta.setTransactionRetentionDuration set), so each exactly-once append replays the log to "
              + "find its txn version; said once per table",
          snapshot.deltaLog().dataPath(),
          snapshot.version());
    }
    return txn.txnVersion(appId);
  }

  /** Whether the snapshot's checksum answered (for tests: the fast path is taken where it should be). */
  public static boolean checksumListsTransactions(SparkSession spark, String path) {
    return listedTransactions(DeltaLog.forTable(spark, path).update(false, Option.empty(), Option.empty()))
        .isDefined();
  }

  /** The table's transactions as the snapshot's checksum lists them, if it does. */
  private static Option<Seq<SetTransaction>> listedTransactions(Snapshot snapshot) {
    Option<VersionChecksum> checksum = snapshot.checksumOpt();
    return checksum.isDefined() ? checksum.get().setTransactions() : Option.empty();
  }

  /** The removal figures Delta's overwrite puts into the table's history (operation metrics). */
  private static void recordRemoved(SparkSession spark, OptimisticTransaction txn, long files, long bytes) {
    if (!Boolean.parseBoolean(
        spark.conf().get(DeltaSQLConf.OVERWRITE_REMOVE_METRICS_ENABLED().key(), "true"))) {
      return;
    }
    java.util.Map<String, SQLMetric> metrics = new java.util.HashMap<>();
    metrics.put("numRemovedFiles", sum(spark, "number of files removed", files));
    metrics.put("numRemovedBytes", sum(spark, "number of bytes removed", bytes));
    txn.registerSQLMetrics(spark, Map$.MODULE$.from(CollectionConverters.asScala(metrics)));
  }

  private static SQLMetric sum(SparkSession spark, String name, long value) {
    SQLMetric metric = SQLMetrics.createMetric(spark.sparkContext(), name);
    metric.set(value);
    return metric;
  }

  private static Map<String, String> immutable(java.util.Map<String, String> entries) {
    return Map$.MODULE$.from(CollectionConverters.asScala(entries));
  }
}
