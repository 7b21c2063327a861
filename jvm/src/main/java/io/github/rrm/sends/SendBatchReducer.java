package io.github.rrm.sends;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.XXH64;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;
import scala.reflect.ClassTag;
import scala.reflect.ClassTag$;

/**
 * One pass over a micro-batch of classified send results, per Spark partition, with no shuffle and no sort of
 * the batch: it does what {@code send_reduce.reduce_for_fault_windows} and {@code send_reduce.minute_statistics}
 * do in SQL (those stay the reference, and the fallback), and passes the rejected records through.
 *
 * <p>Input columns (by name): {@code reason} (NULL for a valid send result); for rejects the dead-letter
 * columns {@code event_type, kafka_topic, kafka_partition, kafka_offset, kafka_timestamp, raw_value, reason,
 * detail}; for sends {@code cluster, producer_id, producer_group, broker, event_time_ms, latency_ms, outcome,
 * client_version, fault_table, kafka_partition, kafka_offset} and {@code notable} (the send can open or extend
 * a fault window, {@code send_reduce.notable_send}). {@code cluster} is the send's RocketMQ cluster, already
 * resolved ({@code classify.cluster_sql}): two clusters' producers and brokers of one name are different keys.
 *
 * <p>Output rows ({@link #OUTPUT_DDL}), told apart by {@code kind}:
 *
 * <ul>
 *   <li>{@code reject}: a rejected record, its dead-letter columns copied;
 *   <li>{@code send}: a send the fault-window replay needs. Per (cluster, producer, broker), ordered by event
 *       time, then Kafka partition and offset: the first and the last send, every notable send and the send
 *       right after a notable one. This is exact for the batch only when all sends of a key are in one Spark partition
 *       (the contract keys send results by {@code producer_id}), so each row carries its
 *       {@code spark_partition} and the caller re-reduces the keys seen in more than one;
 *   <li>{@code minute}: the partition's partial statistics per (cluster, broker, producer group, UTC minute): sends,
 *       errors (outcome other than OK), latency sum and maximum, and cumulative counts of sends with latency at
 *       or below each bucket bound. Readers add the partials up ({@code send_reduce.sum_minutes});
 *   <li>{@code unsure}: only from {@link KafkaSendReducer}, which reads Kafka records itself: a record its strict
 *       reader did not take, with its Kafka columns ({@code kafka_value} the bytes), for the rules to classify;
 *   <li>{@code summary}: one per partition, what it left: {@code rejected_rows}, {@code kept_send_rows},
 *       {@code minute_rows}, {@code latest_send_ms} (its newest kept send, 0 without one), {@code unsure_rows}
 *       and {@code key_fingerprints}, a 64-bit hash of each (cluster, producer, broker) it kept sends of.
 *       {@link #summarize} adds them up and finds the keys kept in more than one partition, without a shuffle.
 * </ul>
 *
 * <p>It reads and writes Spark's internal rows: the batch's strings stay UTF-8 bytes, and only the few values it
 * keeps (a key's first sighting, the kept sends, the rejects) are copied out of the reused input row, where
 * external {@code Row}s would decode every string of every send into a Java {@code String} and back.
 */
public final class SendBatchReducer implements FlatMapFunction<Iterator<InternalRow>, InternalRow> {
  private static final long serialVersionUID = 1L;

  public static final String OUTPUT_DDL =
      "kind STRING, spark_partition INT, event_type STRING, kafka_topic STRING, kafka_partition INT, "
          + "kafka_offset BIGINT, kafka_timestamp TIMESTAMP, raw_value STRING, reason STRING, detail STRING, "
          + "producer_id STRING, producer_group STRING, broker STRING, event_time_ms BIGINT, latency_ms BIGINT, "
          + "outcome STRING, client_version STRING, fault_table STRING, minute_start_ms BIGINT, sends BIGINT, "
          + "errors BIGINT, latency_sum_ms BIGINT, latency_max_ms BIGINT, bucket_counts ARRAY<BIGINT>, "
          + "rejected_rows BIGINT, kept_send_rows BIGINT, minute_rows BIGINT, latest_send_ms BIGINT, "
          + "key_fingerprints ARRAY<BIGINT>, unsure_rows BIGINT, kafka_value BINARY, batch_id BIGINT, "
          + "cluster STRING";

  static final StructType OUTPUT = StructType.fromDDL(OUTPUT_DDL);
  private static final int BATCH_ID = OUTPUT.fieldIndex("batch_id");
  private static final String[] REJECT_COLUMNS = {
    "event_type", "kafka_topic", "kafka_partition", "kafka_offset", "kafka_timestamp", "raw_value", "reason", "detail"
  };
  private static final long MINUTE_MS = 60_000L;
  private static final UTF8String OK = UTF8String.fromString("OK");
  private static final UTF8String KIND_REJECT = UTF8String.fromString("reject");
  private static final UTF8String KIND_SEND = UTF8String.fromString("send");
  private static final UTF8String KIND_MINUTE = UTF8String.fromString("minute");
  private static final UTF8String KIND_SUMMARY = UTF8String.fromString("summary");
  /** Spark's own xxhash64 seed, so a fingerprint is {@code xxhash64(cluster, producer_id, broker)} in SQL. */
  private static final long FINGERPRINT_SEED = 42L;

  private final long[] bucketUpperMs;
  private final long batchId;
  private final int reason;
  private final int[] rejectIn;
  private final DataType[] rejectTypes;
  private final int[] rejectOut;
  private final int cluster;
  private final int producerId;
  private final int producerGroup;
  private final int broker;
  private final int eventTime;
  private final int latency;
  private final int outcome;
  private final int clientVersion;
  private final int faultTable;
  private final int kafkaPartition;
  private final int kafkaOffset;
  private final int notable;

  private SendBatchReducer(StructType input, long[] bucketUpperMs, long batchId) {
    this.bucketUpperMs = bucketUpperMs.clone();
    this.batchId = batchId;
    reason = input.fieldIndex("reason");
    rejectIn = new int[REJECT_COLUMNS.length];
    rejectTypes = new DataType[REJECT_COLUMNS.length];
    rejectOut = new int[REJECT_COLUMNS.length];
    for (int i = 0; i < REJECT_COLUMNS.length; i++) {
      rejectIn[i] = input.fieldIndex(REJECT_COLUMNS[i]);
      rejectTypes[i] = input.fields()[rejectIn[i]].dataType();
      rejectOut[i] = OUTPUT.fieldIndex(REJECT_COLUMNS[i]);
      if (!rejectTypes[i].sameType(OUTPUT.fields()[rejectOut[i]].dataType())) {
        throw new IllegalArgumentException(REJECT_COLUMNS[i] + " is " + rejectTypes[i].simpleString()
            + ", expected " + OUTPUT.fields()[rejectOut[i]].dataType().simpleString());
      }
    }
    cluster = input.fieldIndex("cluster");
    producerId = input.fieldIndex("producer_id");
    producerGroup = input.fieldIndex("producer_group");
    broker = input.fieldIndex("broker");
    eventTime = input.fieldIndex("event_time_ms");
    latency = input.fieldIndex("latency_ms");
    outcome = input.fieldIndex("outcome");
    clientVersion = input.fieldIndex("client_version");
    faultTable = input.fieldIndex("fault_table");
    kafkaPartition = input.fieldIndex("kafka_partition");
    kafkaOffset = input.fieldIndex("kafka_offset");
    notable = input.fieldIndex("notable");
  }

  /**
   * The reduced batch (see the class comment); {@code bucketUpperMs} are the cumulative buckets' bounds, and
   * {@code batchId} fills every row's {@code batch_id}.
   */
  public static Dataset<Row> reduce(Dataset<Row> batch, List<? extends Number> bucketUpperMs, long batchId) {
    long[] bounds = new long[bucketUpperMs.size()];
    for (int i = 0; i < bounds.length; i++) {
      bounds[i] = bucketUpperMs.get(i).longValue();
    }
    org.apache.spark.sql.classic.Dataset<Row> classic = (org.apache.spark.sql.classic.Dataset<Row>) batch;
    ClassTag<InternalRow> tag = ClassTag$.MODULE$.apply(InternalRow.class);
    RDD<InternalRow> reduced = JavaRDD.fromRDD(classic.queryExecution().toRdd(), tag)
        .mapPartitions(new SendBatchReducer(batch.schema(), bounds, batchId))
        .rdd();
    return classic.sparkSession().internalCreateDataFrame(reduced, OUTPUT, false);
  }

  @Override
  public Iterator<InternalRow> call(Iterator<InternalRow> rows) {
    TaskContext task = TaskContext.get();
    int partition = task == null ? 0 : task.partitionId();
    Reduction reduction = new Reduction(bucketUpperMs, batchId);
    while (rows.hasNext()) {
      InternalRow row = rows.next();
      if (!row.isNullAt(reason)) {
        reduction.addRejected(reject(row, partition));
        continue;
      }
      // The input row is reused by the next record: the reduction copies what it keeps past it.
      reduction.addSend(row.getUTF8String(cluster), row.getUTF8String(producerId),
          row.getUTF8String(producerGroup), row.getUTF8String(broker), row.getLong(eventTime), row.getInt(kafkaPartition), row.getLong(kafkaOffset), row.getLong(latency),
          row.getUTF8String(outcome), stringOrNull(row, clientVersion), stringOrNull(row, faultTable),
          row.getBoolean(notable), false);
    }
    return reduction.finish(partition).iterator();
  }

  /**
   * One partition's reduction in progress: the sends per (cluster, producer, broker), the minute statistics and
   * the rows passed through (rejects, or records left to the rules), until {@link #finish} emits them with the summary.
   */
  static final class Reduction {
    private final long[] bucketUpperMs;
    private final long batchId;
    private final List<InternalRow> out = new ArrayList<>();
    private final Map<SendKey, KeySends> keys = new HashMap<>();
    private final Map<MinuteKey, long[]> minutes = new HashMap<>();
    // Few distinct groups, outcomes, versions and tables: keep one copy of each, not one per send. The strings
    // handed in may belong to a reused input row, so every string kept past a call is a copy (this map's or a
    // key's).
    private final Map<UTF8String, UTF8String> interned = new HashMap<>();
    private long rejected;
    private long unsure;

    Reduction(long[] bucketUpperMs, long batchId) {
      this.bucketUpperMs = bucketUpperMs;
      this.batchId = batchId;
    }

    void addRejected(InternalRow row) {
      out.add(row);
      rejected++;
    }

    /** A record the one-pass reader did not take (kind {@code unsure}): the rules classify it later. */
    void addUnsure(InternalRow row) {
      out.add(row);
      unsure++;
    }

    /**
     * One valid send. {@code owned}: its strings are the caller's own, never changed (a partition's cache of
     * decoded strings, one instance per value), so they are kept as they are; otherwise they may belong to a
     * reused input row and are copied (one copy per distinct value) before anything keeps them.
     */
    void addSend(UTF8String clusterName, UTF8String producerId, UTF8String producerGroup, UTF8String brokerName,
        long time,
        int kafkaPartition, long kafkaOffset, long latencyMs, UTF8String outcomeName, UTF8String clientVersion,
        UTF8String faultTable, boolean notable, boolean owned) {
      UTF8String cluster = owned ? clusterName : intern(interned, clusterName);
      UTF8String group = owned ? producerGroup : intern(interned, producerGroup);
      UTF8String broker = owned ? brokerName : intern(interned, brokerName);
      UTF8String outcome = owned ? outcomeName : intern(interned, outcomeName);
      addToMinute(new MinuteKey(cluster, broker, group, Math.floorDiv(time, MINUTE_MS) * MINUTE_MS), latencyMs,
          !OK.equals(outcome));
      SendKey probe = new SendKey(cluster, producerId, broker);
      KeySends sends = keys.get(probe);
      if (sends == null) {
        sends = new KeySends();
        keys.put(owned ? probe : new SendKey(cluster, producerId.clone(), broker), sends);
      }
      sends.add(time, kafkaPartition, kafkaOffset, latencyMs, notable, group, outcome,
          owned ? clientVersion : intern(interned, clientVersion), owned ? faultTable : intern(interned, faultTable));
    }

    /** Minute accumulator layout: sends, errors, latency sum, latency max, then one count per bucket. */
    private void addToMinute(MinuteKey key, long latencyMs, boolean error) {
      long[] acc = minutes.get(key);
      if (acc == null) {
        acc = new long[4 + bucketUpperMs.length];
        acc[3] = Long.MIN_VALUE;
        minutes.put(key, acc);
      }
      acc[0]++;
      if (error) {
        acc[1]++;
      }
      acc[2] += latencyMs;
      acc[3] = Math.max(acc[3], latencyMs);
      for (int b = 0; b < bucketUpperMs.length; b++) {
        if (latencyMs <= bucketUpperMs[b]) {
          acc[4 + b]++;
        }
      }
    }

    /** Every row of the partition: the passed-through ones, the kept sends, the minute partials, the summary. */
    List<InternalRow> finish(int partition) {
      long latestSendMs = 0L;
      long[] fingerprints = new long[keys.size()];
      int key = 0;
      int beforeSends = out.size();
      for (Map.Entry<SendKey, KeySends> entry : keys.entrySet()) {
        latestSendMs = Math.max(latestSendMs, entry.getValue().emitKept(entry.getKey(), partition, out));
        fingerprints[key++] = fingerprint(entry.getKey());
      }
      long keptSends = out.size() - beforeSends;
      for (Map.Entry<MinuteKey, long[]> entry : minutes.entrySet()) {
        out.add(minuteRow(entry.getKey(), entry.getValue(), partition));
      }
      out.add(summaryRow(partition, new long[] {rejected, keptSends, minutes.size(), latestSendMs, unsure},
          fingerprints));
      // The batch id comes with the data, not as a literal in the writes' plans: a literal made each batch's
      // generated code new text, compiled again: a 500k-send batch's two appends took about 0.05 s more wall
      // time and 0.1 s more CPU with it (measured over 50 appends of each kind, alternating).
      for (InternalRow row : out) {
        row.setLong(BATCH_ID, batchId);
      }
      return out;
    }
  }

  private static final int[] SUMMARY_COUNTS = {
    OUTPUT.fieldIndex("rejected_rows"), OUTPUT.fieldIndex("kept_send_rows"), OUTPUT.fieldIndex("minute_rows"),
    OUTPUT.fieldIndex("latest_send_ms"), OUTPUT.fieldIndex("unsure_rows"),
  };
  private static final int SUMMARY_FINGERPRINTS = OUTPUT.fieldIndex("key_fingerprints");

  private static InternalRow summaryRow(int partition, long[] counts, long[] fingerprints) {
    Object[] values = new Object[OUTPUT.length()];
    values[0] = KIND_SUMMARY;
    values[1] = partition;
    for (int c = 0; c < SUMMARY_COUNTS.length; c++) {
      values[SUMMARY_COUNTS[c]] = counts[c];
    }
    values[SUMMARY_FINGERPRINTS] = new GenericArrayData(fingerprints);
    return new GenericInternalRow(values);
  }

  /** {@code xxhash64(cluster, producer_id, broker)} as Spark SQL computes it: equal keys, equal fingerprints. */
  static long fingerprint(SendKey key) {
    long hash = FINGERPRINT_SEED;
    for (UTF8String part : new UTF8String[] {key.cluster(), key.producerId(), key.broker()}) {
      hash = XXH64.hashUnsafeBytes(part.getBaseObject(), part.getBaseOffset(), part.numBytes(), hash);
    }
    return hash;
  }

  /**
   * What a reduction left of its batch, from the partitions' {@code summary} rows: {rejected rows, kept send
   * rows, minute rows, keys with kept sends in more than one partition, the newest kept send's event time (0
   * without one), records left to the rules ({@link KafkaSendReducer})}. Collecting those rows is the one job that computes a persisted reduction and fills its cache.
   *
   * <p>Keys are compared by fingerprint. Two different keys in two partitions with equal 64-bit hashes would
   * count as one spanning key, and the caller would re-reduce them for nothing (the re-reduction groups by the
   * keys themselves, so its rows are still exact); a key kept in two partitions is never missed.
   */
  public static long[] summarize(Dataset<Row> reduced) {
    List<Row> rows =
        reduced
            .where(functions.col("kind").equalTo(KIND_SUMMARY.toString()))
            .select("spark_partition", "rejected_rows", "kept_send_rows", "minute_rows", "latest_send_ms",
                "key_fingerprints", "unsure_rows")
            .collectAsList();
    return totals(rows);
  }

  /**
   * What the driver reads of a reduction, in one job: {@code view}, rows of a reduction (any kinds, any of its
   * columns, {@code kind} and the {@code summary} rows' columns among them), is collected once; returns {the
   * totals {@link #summarize} gives, computed from its {@code summary} rows, a local Dataset of its other rows}.
   * On a persisted reduction that job is the one that fills the cache, and the local rows reach Python without
   * another job.
   */
  public static Object[] collectForDriver(Dataset<Row> view) {
    int kind = view.schema().fieldIndex("kind");
    String summary = KIND_SUMMARY.toString();
    List<Row> summaries = new ArrayList<>();
    List<Row> others = new ArrayList<>();
    for (Row row : view.collectAsList()) {
      (summary.equals(row.getString(kind)) ? summaries : others).add(row);
    }
    return new Object[] {totals(summaries), view.sparkSession().createDataFrame(others, view.schema())};
  }

  /** {@link #summarize}'s totals from a reduction's summary rows (read by column name). */
  private static long[] totals(List<Row> rows) {
    long[] totals = new long[6];
    Map<Long, Integer> partitionOfKey = new HashMap<>();
    Set<Long> spanning = new HashSet<>();
    for (Row row : rows) {
      totals[0] += row.<Long>getAs("rejected_rows");
      totals[1] += row.<Long>getAs("kept_send_rows");
      totals[2] += row.<Long>getAs("minute_rows");
      totals[4] = Math.max(totals[4], row.<Long>getAs("latest_send_ms"));
      totals[5] += row.<Long>getAs("unsure_rows");
      int partition = row.<Integer>getAs("spark_partition");
      for (Long fingerprint : row.<Long>getList(row.fieldIndex("key_fingerprints"))) {
        Integer seenIn = partitionOfKey.putIfAbsent(fingerprint, partition);
        if (seenIn != null && seenIn != partition) {
          spanning.add(fingerprint);
        }
      }
    }
    totals[3] = spanning.size();
    return totals;
  }

  private InternalRow reject(InternalRow row, int partition) {
    Object[] values = new Object[OUTPUT.length()];
    values[0] = KIND_REJECT;
    values[1] = partition;
    for (int i = 0; i < rejectIn.length; i++) {
      Object value = row.isNullAt(rejectIn[i]) ? null : row.get(rejectIn[i], rejectTypes[i]);
      values[rejectOut[i]] = value instanceof UTF8String text ? text.clone() : value;
    }
    return new GenericInternalRow(values);
  }

  private static final int CLUSTER = OUTPUT.fieldIndex("cluster");
  private static final int MINUTE_BROKER = OUTPUT.fieldIndex("broker");
  private static final int MINUTE_GROUP = OUTPUT.fieldIndex("producer_group");
  private static final int MINUTE_START = OUTPUT.fieldIndex("minute_start_ms");
  /** Where the accumulator's sends, errors, latency sum and max go; the buckets follow as one array. */
  private static final int[] MINUTE_TOTALS = {
    OUTPUT.fieldIndex("sends"), OUTPUT.fieldIndex("errors"), OUTPUT.fieldIndex("latency_sum_ms"),
    OUTPUT.fieldIndex("latency_max_ms"),
  };
  private static final int MINUTE_BUCKETS = OUTPUT.fieldIndex("bucket_counts");

  private static InternalRow minuteRow(MinuteKey key, long[] acc, int partition) {
    Object[] values = new Object[OUTPUT.length()];
    values[0] = KIND_MINUTE;
    values[1] = partition;
    values[CLUSTER] = key.cluster();
    values[MINUTE_BROKER] = key.broker();
    values[MINUTE_GROUP] = key.producerGroup();
    values[MINUTE_START] = key.minuteStartMs();
    for (int t = 0; t < MINUTE_TOTALS.length; t++) {
      values[MINUTE_TOTALS[t]] = acc[t];
    }
    values[MINUTE_BUCKETS] = new GenericArrayData(Arrays.copyOfRange(acc, MINUTE_TOTALS.length, acc.length));
    return new GenericInternalRow(values);
  }

  private static UTF8String stringOrNull(InternalRow row, int index) {
    return row.isNullAt(index) ? null : row.getUTF8String(index);
  }

  /** The map's copy of {@code value} (made on first sight): safe to keep after the input row moves on. */
  private static UTF8String intern(Map<UTF8String, UTF8String> interned, UTF8String value) {
    if (value == null) {
      return null;
    }
    UTF8String known = interned.get(value);
    if (known == null) {
      known = value.clone();
      interned.put(known, known);
    }
    return known;
  }

  record SendKey(UTF8String cluster, UTF8String producerId, UTF8String broker) {}

  private record MinuteKey(UTF8String cluster, UTF8String broker, UTF8String producerGroup, long minuteStartMs) {}

  /** One key's sends in this partition, column by column (a few primitives per send, no row objects). */
  private static final class KeySends {
    private static final int[] OUTPUT_INDEX = {
      OUTPUT.fieldIndex("producer_group"), OUTPUT.fieldIndex("event_time_ms"), OUTPUT.fieldIndex("latency_ms"),
      OUTPUT.fieldIndex("outcome"), OUTPUT.fieldIndex("client_version"), OUTPUT.fieldIndex("fault_table"),
      OUTPUT.fieldIndex("kafka_partition"), OUTPUT.fieldIndex("kafka_offset"),
    };
    private static final int PRODUCER_ID = OUTPUT.fieldIndex("producer_id");
    private static final int BROKER = OUTPUT.fieldIndex("broker");

    private int size;
    private long[] times = new long[8];
    private int[] partitions = new int[8];
    private long[] offsets = new long[8];
    private long[] latencies = new long[8];
    private boolean[] notables = new boolean[8];
    private UTF8String[] groups = new UTF8String[8];
    private UTF8String[] outcomes = new UTF8String[8];
    private UTF8String[] versions = new UTF8String[8];
    private UTF8String[] tables = new UTF8String[8];

    void add(long time, int partition, long offset, long latencyMs, boolean notable, UTF8String group,
        UTF8String outcome, UTF8String version, UTF8String table) {
      if (size == times.length) {
        int grown = size * 2;
        times = Arrays.copyOf(times, grown);
        partitions = Arrays.copyOf(partitions, grown);
        offsets = Arrays.copyOf(offsets, grown);
        latencies = Arrays.copyOf(latencies, grown);
        notables = Arrays.copyOf(notables, grown);
        groups = Arrays.copyOf(groups, grown);
        outcomes = Arrays.copyOf(outcomes, grown);
        versions = Arrays.copyOf(versions, grown);
        tables = Arrays.copyOf(tables, grown);
      }
      times[size] = time;
      partitions[size] = partition;
      offsets[size] = offset;
      latencies[size] = latencyMs;
      notables[size] = notable;
      groups[size] = group;
      outcomes[size] = outcome;
      versions[size] = version;
      tables[size] = table;
      size++;
    }

    /**
     * Sorts this key's sends into replay order and emits those the fault-window replay needs; returns the last
     * one's event time (the newest: the last send is always kept).
     */
    long emitKept(SendKey key, int partition, List<InternalRow> out) {
      Integer[] order = new Integer[size];
      for (int i = 0; i < size; i++) {
        order[i] = i;
      }
      // Event time, then Kafka partition and offset: a total order, the one the SQL reduction uses.
      Arrays.sort(order, (a, b) -> {
        int byTime = Long.compare(times[a], times[b]);
        if (byTime != 0) {
          return byTime;
        }
        int byPartition = Integer.compare(partitions[a], partitions[b]);
        return byPartition != 0 ? byPartition : Long.compare(offsets[a], offsets[b]);
      });
      for (int position = 0; position < size; position++) {
        int i = order[position];
        boolean kept = position == 0 || position == size - 1 || notables[i]
            || notables[order[position - 1]];
        if (kept) {
          out.add(sendRow(key, i, partition));
        }
      }
      return times[order[size - 1]];
    }

    private InternalRow sendRow(SendKey key, int i, int partition) {
      Object[] values = new Object[OUTPUT.length()];
      values[0] = KIND_SEND;
      values[1] = partition;
      values[CLUSTER] = key.cluster();
      values[PRODUCER_ID] = key.producerId();
      values[BROKER] = key.broker();
      Object[] fields = {groups[i], times[i], latencies[i], outcomes[i], versions[i], tables[i], partitions[i],
        offsets[i]};
      for (int f = 0; f < fields.length; f++) {
        values[OUTPUT_INDEX[f]] = fields[f];
      }
      return new GenericInternalRow(values);
    }
  }
}
