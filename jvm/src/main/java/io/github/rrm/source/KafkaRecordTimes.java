package io.github.rrm.source;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * The event times of single Kafka records, for {@link EventTimePlanner}: a driver-side consumer with the source's
 * {@code kafka.*} options (as Spark's driver reads offsets), {@code assign}, {@code seek} and {@code poll} one
 * record at a time, reading the header {@value #HEADER} (the event time as an 8-byte big-endian long).
 *
 * <p>A record without the header, or with one that is not 8 bytes, takes the time of the nearest earlier record
 * of its partition that has one, looked for among the {@value #LOOK_BACK} records before it; with none there
 * (a partition's head, an older producer), its Kafka timestamp less the future skew, so it goes early. An offset
 * without a record (compacted away, a transaction marker) takes the time of the next record, and the offsets
 * after a partition's last record take {@link Long#MAX_VALUE}: they go with the batch that reads the rest. Times
 * are cached per partition and offset until {@link #clear}.
 */
final class KafkaRecordTimes implements AutoCloseable {
  static final String HEADER = "rrm-event-time";
  static final int LOOK_BACK = 8;
  private final Properties props = new Properties();
  private final long futureSkewMs;
  private final Duration pollTimeout;
  private final Map<TopicPartition, Map<Long, Long>> cache = new HashMap<>();
  private TopicPartition assigned;
  private KafkaConsumer<byte[], byte[]> consumer;  // made on the first lookup: uncapped batches need none

  KafkaRecordTimes(Map<String, String> sourceOptions, long futureSkewMs, long pollTimeoutMs) {
    for (Map.Entry<String, String> option : sourceOptions.entrySet()) {
      String key = option.getKey();
      if (key.regionMatches(true, 0, "kafka.", 0, 6)) {
        props.put(key.substring(6), option.getValue());
      }
    }
    props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    props.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, String.valueOf(LOOK_BACK + 1));
    props.remove(ConsumerConfig.GROUP_ID_CONFIG);  // assigned partitions, nothing committed
    props.putIfAbsent(ConsumerConfig.CLIENT_ID_CONFIG,
        "rrm-event-time-planner-" + Integer.toHexString(System.identityHashCode(this)));
    this.futureSkewMs = futureSkewMs;
    this.pollTimeout = Duration.ofMillis(pollTimeoutMs);
  }

  /** The first offset of each partition (a partition new since the batch's start starts there, as in Kafka's). */
  Map<TopicPartition, Long> beginnings(Collection<TopicPartition> partitions) {
    return consumer().beginningOffsets(partitions);
  }

  private KafkaConsumer<byte[], byte[]> consumer() {
    if (consumer == null) {
      consumer = new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }
    return consumer;
  }

  /** The event time of the record at {@code offset}; {@code latest} bounds the partition's records. */
  long eventTime(TopicPartition tp, long offset, long latest) {
    Map<Long, Long> times = cache.computeIfAbsent(tp, k -> new HashMap<>());
    Long known = times.get(offset);
    if (known != null) {
      return known;
    }
    List<ConsumerRecord<byte[], byte[]>> window = fetch(tp, Math.max(0, offset - LOOK_BACK), offset, latest);
    long time = Long.MAX_VALUE;
    for (ConsumerRecord<byte[], byte[]> record : window) {
      if (record.offset() >= offset) {
        Long own = headerTime(record);
        if (own != null) {
          time = own;
        } else {
          time = record.timestamp() - futureSkewMs;
          for (ConsumerRecord<byte[], byte[]> earlier : window) {
            Long before = earlier.offset() < record.offset() ? headerTime(earlier) : null;
            if (before != null) {
              time = before;  // the window is in offset order: the last one found is the nearest
            }
          }
        }
        break;
      }
    }
    times.put(offset, time);
    return time;
  }

  /** The records from {@code from} up to and including the first at or after {@code offset} (below latest). */
  private List<ConsumerRecord<byte[], byte[]>> fetch(TopicPartition tp, long from, long offset, long latest) {
    KafkaConsumer<byte[], byte[]> consumer = consumer();
    if (!tp.equals(assigned)) {
      consumer.assign(Collections.singletonList(tp));
      assigned = tp;
    }
    consumer.seek(tp, from);
    List<ConsumerRecord<byte[], byte[]>> found = new java.util.ArrayList<>();
    long deadline = System.nanoTime() + pollTimeout.toNanos();
    while (System.nanoTime() < deadline) {
      for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(200)).records(tp)) {
        if (record.offset() >= latest) {
          return found;
        }
        found.add(record);
        if (record.offset() >= offset) {
          return found;
        }
      }
      if (consumer.position(tp) >= latest) {
        return found;
      }
    }
    throw new IllegalStateException("no record of " + tp + " at offset " + offset + " within " + pollTimeout);
  }

  private static Long headerTime(ConsumerRecord<byte[], byte[]> record) {
    Header header = record.headers().lastHeader(HEADER);
    if (header == null || header.value() == null || header.value().length != Long.BYTES) {
      return null;
    }
    return ByteBuffer.wrap(header.value()).getLong();
  }

  /** Forget the cached times (the batch they planned is committed). */
  void clear() {
    cache.clear();
  }

  @Override
  public void close() {
    if (consumer != null) {
      consumer.close(Duration.ofSeconds(5));
    }
  }
}
