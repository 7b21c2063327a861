package io.github.rrm.ingest;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.sql.Timestamp;
import java.time.Instant;
import java.util.Arrays;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.NoSuchElementException;
import org.apache.spark.api.java.function.MapPartitionsFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoder;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.encoders.RowEncoder;
import org.apache.spark.sql.catalyst.expressions.GenericRow;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * Heartbeat runs: the consumer query's rows ({@code consumer_query.shard_input}) with the steady heartbeats of a
 * channel folded into one row per Spark partition, before the stateful operator, so Python receives a channel's
 * heartbeats of a micro-batch as one row instead of one row each.
 *
 * <p>A row is a <em>typed heartbeat</em> when {@code reason} and {@code raw_value} are NULL, {@code event_type}
 * is {@code consumer_channel} and {@code c_kind} is {@code HEARTBEAT} (and, defensively, {@code event_time_ms}
 * and {@code kafka_offset} are set, as they always are for such a row). Typed heartbeats are grouped per
 * partition by {@link #KEY_COLUMNS}, NULL equal to NULL: everything a heartbeat says apart from its time, so the
 * heartbeats of a run are the same event repeated. Output ({@link #OUTPUT_EXTRA_DDL} after the input columns):
 *
 * <ul>
 *   <li>every other row unchanged, with a NULL {@code run}, emitted as it arrives;
 *   <li>per key, after the partition's input is exhausted and in first-seen order, one row: the columns of the
 *       key's first heartbeat in ({@code event_time_ms}, {@code kafka_offset}) order (the head), except that
 *       {@code event_time} is the key's latest event time (so a watermark on {@code event_time} downstream sees
 *       the maximum it would see on the uncompressed rows), and in {@code run} every heartbeat's
 *       ({@code event_time_ms}, {@code kafka_offset}), sorted by time then offset, duplicates kept, as
 *       little-endian int64 pairs;
 *   <li>except for a key seen once: that heartbeat's row as it was, with a NULL {@code run}, like any other row (a
 *       fleet the job keeps up with sends one heartbeat per channel and micro-batch, and the consumer then
 *       handles plain rows, not runs of one).
 * </ul>
 *
 * <p>A partition holds one entry per key (its head row and two growable long arrays) and no pass-through row.
 * Rows are compared within a partition only: the same channel in two partitions (two Kafka partitions, or a
 * batch split otherwise) gives two rows, which the consumer of the runs must accept anyway.
 *
 * <p>It is a typed {@code mapPartitions} on external {@link Row}s, not a map over the plan's RDD as
 * {@code SendBatchReducer} is: a streaming plan cannot be turned into an RDD and back, and this one must run
 * inside the consumer query. The row encoders decode every row into Java objects (about half of this operator's
 * cost) and encode every output row; beyond that the fold allocates an entry per new key, array growth, and one
 * output row per pass-through row and per run (a {@code Row} cannot be widened in place).
 */
public final class HeartbeatRuns implements MapPartitionsFunction<Row, Row> {
  private static final long serialVersionUID = 1L;

  /**
   * Every heartbeat of a run as (event_time_ms, kafka_offset), sorted, packed as little-endian int64 pairs. One
   * BINARY column rather than two arrays: the Python side receives it as one bytes object per run (arrays cross
   * the Arrow-to-pandas conversion element by element, which cost about 0.25 s per batch of 40,000 rows even
   * when they were NULL).
   */
  public static final String RUN = "run";
  /** The columns appended to the input's. */
  public static final String OUTPUT_EXTRA_DDL = RUN + " BINARY";
  /** What makes two typed heartbeats one run (besides their partition); NULL equals NULL. */
  public static final String[] KEY_COLUMNS = {
    "shard", "c_cluster", "c_group", "c_broker", "c_channel", "c_client_id", "c_message_model", "c_consume_type",
    "c_client_version", "c_allocate_strategy", "c_subscriptions", "kafka_topic", "kafka_partition",
  };

  private static final String CHANNEL_EVENT = "consumer_channel";
  private static final String HEARTBEAT = "HEARTBEAT";

  private final int width;
  private final int[] key;
  private final int reason;
  private final int rawValue;
  private final int eventType;
  private final int kind;
  private final int eventTimeMs;
  private final int eventTime;
  private final int kafkaOffset;

  private HeartbeatRuns(StructType input) {
    if (Arrays.asList(input.fieldNames()).contains(RUN)) {
      throw new IllegalArgumentException("the input already has a column " + RUN);
    }
    width = input.length();
    key = new int[KEY_COLUMNS.length];
    for (int k = 0; k < KEY_COLUMNS.length; k++) {
      key[k] = input.fieldIndex(KEY_COLUMNS[k]);
    }
    reason = index(input, "reason", DataTypes.StringType);
    rawValue = index(input, "raw_value", DataTypes.StringType);
    eventType = index(input, "event_type", DataTypes.StringType);
    kind = index(input, "c_kind", DataTypes.StringType);
    eventTimeMs = index(input, "event_time_ms", DataTypes.LongType);
    eventTime = index(input, "event_time", DataTypes.TimestampType);
    kafkaOffset = index(input, "kafka_offset", DataTypes.LongType);
  }

  private static int index(StructType input, String name, DataType expected) {
    int i = input.fieldIndex(name);
    DataType actual = input.fields()[i].dataType();
    if (!actual.sameType(expected)) {
      throw new IllegalArgumentException(name + " is " + actual.simpleString() + ", expected "
          + expected.simpleString());
    }
    return i;
  }

  /** The input's schema with {@link #OUTPUT_EXTRA_DDL} appended. */
  public static StructType outputSchema(StructType input) {
    StructType out = input;
    for (StructField extra : StructType.fromDDL(OUTPUT_EXTRA_DDL).fields()) {
      out = out.add(extra);
    }
    return out;
  }

  /** {@code sharded} (batch or streaming) with its heartbeats folded into runs (see the class comment). */
  public static Dataset<Row> compress(Dataset<Row> sharded) {
    StructType input = sharded.schema();
    // Lenient: a timestamp is encoded from java.sql.Timestamp or java.time.Instant alike, so the head's
    // event_time, a pass-through row's timestamps and the run's latest time (built in the head's class) never
    // depend on which of the two spark.sql.datetime.java8API.enabled made the input's decoder produce.
    // (Encoders.row(schema) is the same encoder, strict: only the class the setting names is accepted.)
    Encoder<Row> encoder = RowEncoder.encoderFor(outputSchema(input), true);
    return sharded.mapPartitions(new HeartbeatRuns(input), encoder);
  }

  @Override
  public Iterator<Row> call(Iterator<Row> rows) {
    return new Folding(rows);
  }

  /** The row's values with room for {@link #RUN} after them (left NULL). */
  private Object[] widened(Row row) {
    Object[] values = new Object[width + 1];
    for (int i = 0; i < width; i++) {
      values[i] = row.get(i);
    }
    return values;
  }

  private boolean isTypedHeartbeat(Row row) {
    return row.isNullAt(reason) && row.isNullAt(rawValue) && CHANNEL_EVENT.equals(row.get(eventType))
        && HEARTBEAT.equals(row.get(kind)) && !row.isNullAt(eventTimeMs) && !row.isNullAt(kafkaOffset);
  }

  /**
   * The output of one partition, pulled by Spark: pass-through rows as they come, then the runs. Lazy, so only
   * the runs are held, never the rows that pass through.
   */
  private final class Folding implements Iterator<Row> {
    private final Iterator<Row> input;
    /** Insertion-ordered: the runs come out in the order their keys were first seen, deterministically. */
    private final Map<RunKey, Run> runs = new LinkedHashMap<>();
    /** One mutable key, refilled per heartbeat to look the run up; a run's own key is a copy of it. */
    private final RunKey probe = new RunKey(new Object[key.length]);
    private Iterator<Run> pending;
    private Row next;

    Folding(Iterator<Row> input) {
      this.input = input;
    }

    @Override
    public boolean hasNext() {
      if (next != null) {
        return true;
      }
      while (pending == null && input.hasNext()) {
        Row row = input.next();
        if (!isTypedHeartbeat(row)) {
          next = new GenericRow(widened(row));
          return true;
        }
        fold(row);
      }
      if (pending == null) {
        pending = runs.values().iterator();
      }
      if (pending.hasNext()) {
        Run run = pending.next();
        pending.remove(); // emitted: its head and arrays can go
        next = run.toRow();
        return true;
      }
      return false;
    }

    @Override
    public Row next() {
      if (!hasNext()) {
        throw new NoSuchElementException();
      }
      Row row = next;
      next = null;
      return row;
    }

    private void fold(Row row) {
      probe.fill(row, key);
      Run run = runs.get(probe);
      long time = row.getLong(eventTimeMs);
      long offset = row.getLong(kafkaOffset);
      if (run == null) {
        runs.put(probe.copy(), new Run(row, time, offset));
      } else {
        run.add(row, time, offset);
      }
    }
  }

  /**
   * The key of a run: the key columns' values as the decoder made them (String, Integer; null for NULL), compared
   * with {@code equals}, so two different keys are never one run (the hash only picks the bucket). The probe's
   * values change between lookups; a key stored in the map never does.
   */
  private static final class RunKey {
    private final Object[] values;
    private int hash;

    RunKey(Object[] values) {
      this.values = values;
      this.hash = Arrays.hashCode(values);
    }

    void fill(Row row, int[] columns) {
      int h = 1;
      for (int k = 0; k < columns.length; k++) {
        Object value = row.get(columns[k]);
        values[k] = value;
        h = 31 * h + (value == null ? 0 : value.hashCode());
      }
      hash = h;
    }

    RunKey copy() {
      return new RunKey(values.clone());
    }

    @Override
    public int hashCode() {
      return hash;
    }

    @Override
    public boolean equals(Object other) {
      return other instanceof RunKey that && hash == that.hash && Arrays.equals(values, that.values);
    }
  }

  /** One key's heartbeats in this partition: its head row and every (time, offset), in arrival order. */
  private final class Run {
    private Row head;
    private long headTime;
    private long headOffset;
    private long maxTime;
    private long[] times = new long[4];
    private long[] offsets = new long[4];
    private int size;
    /** Whether (times, offsets) arrived in order so far: the usual case, which then needs no sort. */
    private boolean ordered = true;

    Run(Row row, long time, long offset) {
      head = row;
      headTime = time;
      headOffset = offset;
      maxTime = time;
      times[0] = time;
      offsets[0] = offset;
      size = 1;
    }

    void add(Row row, long time, long offset) {
      if (size == times.length) {
        times = Arrays.copyOf(times, size * 2);
        offsets = Arrays.copyOf(offsets, size * 2);
      }
      if (compare(time, offset, times[size - 1], offsets[size - 1]) < 0) {
        ordered = false;
      }
      times[size] = time;
      offsets[size] = offset;
      size++;
      maxTime = Math.max(maxTime, time);
      // Strictly earlier only: of two heartbeats with the same time and offset the first seen stays the head.
      if (compare(time, offset, headTime, headOffset) < 0) {
        head = row;
        headTime = time;
        headOffset = offset;
      }
    }

    Row toRow() {
      Object[] values = widened(head);
      if (size == 1) {
        return new GenericRow(values); // a heartbeat seen once is no run: the row it was, NULL run
      }
      if (!ordered) {
        sort();
      }
      // Millisecond precision, as shard_input derives event_time (timestamp_millis of event_time_ms); the head's
      // value tells which external class the input's decoder uses.
      values[eventTime] = head.get(eventTime) instanceof Instant
          ? Instant.ofEpochMilli(maxTime) : new Timestamp(maxTime);
      ByteBuffer packed = ByteBuffer.allocate(16 * size).order(ByteOrder.LITTLE_ENDIAN);
      for (int k = 0; k < size; k++) {
        packed.putLong(times[k]).putLong(offsets[k]);
      }
      values[width] = packed.array();
      return new GenericRow(values);
    }

    /** Sorts the pairs by (time, offset): TimSort over indexes, quick on the nearly sorted runs that occur. */
    private void sort() {
      Integer[] order = new Integer[size];
      for (int i = 0; i < size; i++) {
        order[i] = i;
      }
      Arrays.sort(order, (a, b) -> compare(times[a], offsets[a], times[b], offsets[b]));
      long[] sortedTimes = new long[size];
      long[] sortedOffsets = new long[size];
      for (int i = 0; i < size; i++) {
        sortedTimes[i] = times[order[i]];
        sortedOffsets[i] = offsets[order[i]];
      }
      times = sortedTimes;
      offsets = sortedOffsets;
      ordered = true;
    }
  }

  private static int compare(long timeA, long offsetA, long timeB, long offsetB) {
    int byTime = Long.compare(timeA, timeB);
    return byTime != 0 ? byTime : Long.compare(offsetA, offsetB);
  }
}
