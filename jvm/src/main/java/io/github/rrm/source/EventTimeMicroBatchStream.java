package io.github.rrm.source;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.io.InterruptedIOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InterruptException;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.streaming.CompositeReadLimit;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReadMaxRows;
import org.apache.spark.sql.connector.read.streaming.ReportsSourceMetrics;
import org.apache.spark.sql.connector.read.streaming.SupportsAdmissionControl;
import org.apache.spark.sql.connector.read.streaming.SupportsTriggerAvailableNow;

/**
 * Spark's Kafka micro-batch stream with batches planned by event time: everything is Kafka's but
 * {@link #latestOffset(Offset, ReadLimit)}, which asks Kafka's stream for everything available and, when more than
 * the limit waits, ends every partition at one event time ({@link EventTimePlanner}, the times from
 * {@link KafkaRecordTimes}). Offsets stay Kafka's ({@code {"topic": {"partition": offset}}}), so a checkpoint
 * moves between this source and Kafka's either way.
 */
final class EventTimeMicroBatchStream
    implements MicroBatchStream, SupportsTriggerAvailableNow, ReportsSourceMetrics {
  private static final ObjectMapper JSON = new ObjectMapper();
  private final MicroBatchStream kafka;
  private final SupportsAdmissionControl admission;
  private final long limit;
  private final KafkaRecordTimes times;

  EventTimeMicroBatchStream(MicroBatchStream kafka, long limit, KafkaRecordTimes times) {
    if (!(kafka instanceof SupportsAdmissionControl)) {
      throw new IllegalStateException("Spark's Kafka stream " + kafka.getClass().getName()
          + " no longer supports admission control: event-time planning cannot wrap it");
    }
    this.kafka = kafka;
    this.admission = (SupportsAdmissionControl) kafka;
    this.limit = limit;
    this.times = times;
  }

  @Override
  public ReadLimit getDefaultReadLimit() {
    return limit > 0 ? ReadLimit.maxRows(limit) : ReadLimit.allAvailable();
  }

  @Override
  public Offset latestOffset(Offset start, ReadLimit readLimit) {
    Offset available = admission.latestOffset(start, ReadLimit.allAvailable());
    long cap = maxRows(readLimit);
    if (available == null || start == null || cap <= 0) {
      return available;
    }
    try {
      return planned(start, available, cap);
    } catch (InterruptException e) {
      // The query is being stopped while this looks up a record: say so as Spark recognises a stop (an
      // UncheckedIOException caused by an InterruptedIOException), not as a failure of the query.
      InterruptedIOException stop = new InterruptedIOException("batch planning interrupted by the query's stop");
      stop.initCause(e);
      throw new UncheckedIOException(stop);
    }
  }

  /**
   * Kafka's {@code available} end offsets, or each partition's offset at one event time when more than
   * {@code cap} records wait after {@code start}.
   */
  private Offset planned(Offset start, Offset available, long cap) {
    Map<TopicPartition, Long> from = offsets(start.json());
    Map<TopicPartition, Long> latest = offsets(available.json());
    List<TopicPartition> fresh = new ArrayList<>();
    for (TopicPartition tp : latest.keySet()) {
      if (!from.containsKey(tp)) {
        fresh.add(tp);  // new since start: Kafka's planning starts it at its first offset
      }
    }
    if (!fresh.isEmpty()) {
      from.putAll(times.beginnings(fresh));
    }
    long unread = 0;
    for (Map.Entry<TopicPartition, Long> entry : latest.entrySet()) {
      unread += Math.max(0, entry.getValue() - from.getOrDefault(entry.getKey(), entry.getValue()));
    }
    if (unread <= cap) {
      return available;  // the live case: everything available fits, no record is looked up
    }
    List<TopicPartition> partitions = new ArrayList<>(latest.keySet());
    int n = partitions.size();
    long[] begins = new long[n];
    long[] ends = new long[n];
    for (int p = 0; p < n; p++) {
      begins[p] = from.getOrDefault(partitions.get(p), latest.get(partitions.get(p)));
      ends[p] = latest.get(partitions.get(p));
    }
    long[] planned = EventTimePlanner.plan(begins, ends, cap,
        (p, offset) -> times.eventTime(partitions.get(p), offset, ends[p]));
    ObjectNode json = JSON.createObjectNode();
    for (int p = 0; p < n; p++) {
      TopicPartition tp = partitions.get(p);
      ObjectNode topic = json.has(tp.topic()) ? (ObjectNode) json.get(tp.topic()) : json.putObject(tp.topic());
      topic.put(String.valueOf(tp.partition()), planned[p]);
    }
    return kafka.deserializeOffset(json.toString());
  }

  /** The rows a read limit allows (the smallest of a composite's), 0 for no limit. */
  private static long maxRows(ReadLimit readLimit) {
    if (readLimit instanceof ReadMaxRows) {
      return ((ReadMaxRows) readLimit).maxRows();
    }
    if (readLimit instanceof CompositeReadLimit) {
      long cap = 0;
      for (ReadLimit part : ((CompositeReadLimit) readLimit).getReadLimits()) {
        long rows = maxRows(part);
        cap = rows > 0 && (cap == 0 || rows < cap) ? rows : cap;
      }
      return cap;
    }
    return 0;  // ReadAllAvailable, or a limit this source does not plan by
  }

  /** Kafka's offset JSON as partitions to offsets. */
  static Map<TopicPartition, Long> offsets(String json) {
    Map<TopicPartition, Long> result = new LinkedHashMap<>();
    try {
      JsonNode root = JSON.readTree(json);
      for (Iterator<Map.Entry<String, JsonNode>> topics = root.fields(); topics.hasNext(); ) {
        Map.Entry<String, JsonNode> topic = topics.next();
        for (Iterator<Map.Entry<String, JsonNode>> parts = topic.getValue().fields(); parts.hasNext(); ) {
          Map.Entry<String, JsonNode> part = parts.next();
          result.put(new TopicPartition(topic.getKey(), Integer.parseInt(part.getKey())), part.getValue().asLong());
        }
      }
    } catch (IOException e) {
      throw new UncheckedIOException("not Kafka's offset JSON: " + json, e);
    }
    return result;
  }

  @Override
  public Offset reportLatestOffset() {
    return admission.reportLatestOffset();
  }

  @Override
  public void prepareForTriggerAvailableNow() {
    if (kafka instanceof SupportsTriggerAvailableNow) {
      ((SupportsTriggerAvailableNow) kafka).prepareForTriggerAvailableNow();
    }
  }

  @Override
  public Map<String, String> metrics(Optional<Offset> latestConsumedOffset) {
    return kafka instanceof ReportsSourceMetrics
        ? ((ReportsSourceMetrics) kafka).metrics(latestConsumedOffset)
        : java.util.Collections.emptyMap();
  }

  @Override
  public Offset latestOffset() {
    return kafka.latestOffset();
  }

  @Override
  public InputPartition[] planInputPartitions(Offset start, Offset end) {
    return kafka.planInputPartitions(start, end);
  }

  @Override
  public PartitionReaderFactory createReaderFactory() {
    return kafka.createReaderFactory();
  }

  @Override
  public Offset initialOffset() {
    return kafka.initialOffset();
  }

  @Override
  public Offset deserializeOffset(String json) {
    return kafka.deserializeOffset(json);
  }

  @Override
  public void commit(Offset end) {
    kafka.commit(end);
    times.clear();
  }

  @Override
  public void stop() {
    try {
      kafka.stop();
    } finally {
      times.close();
    }
  }

  @Override
  public String toString() {
    return "EventTimeKafka[" + kafka + "]";
  }
}
