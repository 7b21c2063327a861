package io.github.rrm.collector;

import java.nio.charset.StandardCharsets;
import java.util.Properties;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Publishes events to Kafka (idempotent, acks=all, bounded buffer and blocking time). Kafka being down never
 * stops the collector: a send that fails is logged and counted, and for a back-off period after a send to a topic
 * could not even be buffered the following events for that topic are counted as unpublished without blocking the
 * cycle again (per topic: a missing progress topic does not hold up the membership events). Kafka refusing the
 * collector's authentication (SASL credentials, TLS trust) is its own problem kind and log line.
 *
 * <p>Each record carries the header {@value #EVENT_TIME_HEADER}: the event's {@code event_time} as an 8-byte
 * big-endian long, by which the job plans its batches without reading values ({@code docs/events.md}).
 */
final class EventPublisher implements AutoCloseable {
  static final String EVENT_TIME_HEADER = "rrm-event-time";
  private final KafkaProducer<byte[], byte[]> producer;
  private final Counters counters;
  private final Log log;
  private final long backoffMs;
  /** Per Kafka topic: a topic Kafka cannot take (no such topic, no metadata) must not hold up the others. */
  private final java.util.concurrent.ConcurrentHashMap<String, Long> unavailableUntil =
      new java.util.concurrent.ConcurrentHashMap<>();

  EventPublisher(Properties options, Counters counters, Log log, long backoffMs) {
    Properties props = new Properties();
    props.setProperty(ProducerConfig.LINGER_MS_CONFIG, "20");
    props.setProperty(ProducerConfig.BUFFER_MEMORY_CONFIG, String.valueOf(16 * 1024 * 1024));
    props.setProperty(ProducerConfig.MAX_BLOCK_MS_CONFIG, "2000");
    props.setProperty(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
    props.putAll(options);
    props.setProperty(ProducerConfig.ACKS_CONFIG, "all");
    props.setProperty(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
    props.setProperty(ProducerConfig.CLIENT_ID_CONFIG, props.getProperty(ProducerConfig.CLIENT_ID_CONFIG, "rrm-collector"));
    producer = new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer());
    this.counters = counters;
    this.log = log;
    this.backoffMs = backoffMs;
  }

  /** Publish {@code json}, an event of {@code type} whose {@code event_time} is {@code eventTime}. */
  void publish(String topic, String type, String key, Object eventTime, String json) {
    if (System.currentTimeMillis() < unavailableUntil.getOrDefault(topic, 0L)) {
      counters.add("rmqcol_events_unpublished_total", "type", type);
      return;
    }
    ProducerRecord<byte[], byte[]> record = new ProducerRecord<>(topic, key.getBytes(StandardCharsets.UTF_8),
        json.getBytes(StandardCharsets.UTF_8));
    if (eventTime instanceof Number) {
      record.headers().add(EVENT_TIME_HEADER,
          java.nio.ByteBuffer.allocate(Long.BYTES).putLong(((Number) eventTime).longValue()).array());
    }
    try {
      producer.send(record, (metadata, error) -> {
        if (error == null) {
          counters.add("rmqcol_events_published_total", "type", type);
        } else if (refused(error)) {
          counters.add("rmqcol_events_unpublished_total", "type", type);
        } else {
          counters.add("rmqcol_events_unpublished_total", "type", type);
          counters.problem("kafka_send_failed");
          log.warnEvery("kafka", "Kafka did not take a " + type + " event for topic " + topic + ": " + error);
        }
      });
    } catch (RuntimeException error) {
      if (refused(error)) {
        counters.add("rmqcol_events_unpublished_total", "type", type);
        return;
      }
      unavailableUntil.put(topic, System.currentTimeMillis() + backoffMs);
      counters.add("rmqcol_events_unpublished_total", "type", type);
      counters.problem("kafka_unavailable");
      log.warnEvery("kafka:" + topic, "Kafka unavailable for topic " + topic + " (" + error + "); its events of the "
          + "next " + backoffMs + " ms are counted as unpublished");
    }
  }

  /** True (counted and logged) when {@code error} is Kafka refusing the collector's authentication. */
  private boolean refused(Throwable error) {
    if (!(error instanceof org.apache.kafka.common.errors.AuthenticationException)) {
      return false;
    }
    counters.problem("kafka_auth_failed");
    log.warnEvery("kafka-auth", "Kafka refused the collector's authentication (check [kafka.options]: the SASL "
        + "credentials and the trust store): " + AdminErrors.brief(error));
    return true;
  }

  void flush() {
    producer.flush();
  }

  @Override
  public void close() {
    producer.close(java.time.Duration.ofSeconds(5));
  }
}
