package io.github.rrm.source;

import java.util.Collections;
import java.util.EnumSet;
import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.metric.CustomMetric;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.kafka010.KafkaSourceProvider;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * Spark's Kafka source ({@code format("kafka")}, the same options and rows) with micro-batches planned by event
 * time: {@code readStream.format("io.github.rrm.source.EventTimeKafkaSource")}. Reading stays Spark's; only where a
 * batch ends is this source's ({@link EventTimeMicroBatchStream}). Its own options:
 *
 * <ul>
 *   <li>{@value #MAX_OFFSETS}: at most this many records per batch, all of them up to one event time (Kafka's
 *       {@code maxOffsetsPerTrigger} is not used);
 *   <li>{@value #FUTURE_SKEW}: a record without the event-time header at its partition's head is planned at its
 *       Kafka timestamp less this (the job's {@code max_future_skew_ms});
 *   <li>{@value #POLL_TIMEOUT} (Kafka's option): how long one record's lookup may wait.
 * </ul>
 *
 * <p>Only micro-batch reads. The design is in {@code docs/design/batch-invariance.md}.
 */
public final class EventTimeKafkaSource implements TableProvider {
  public static final String MAX_OFFSETS = "eventTimeMaxOffsetsPerTrigger";
  public static final String FUTURE_SKEW = "eventTimeMaxFutureSkewMs";
  public static final String POLL_TIMEOUT = "kafkaConsumer.pollTimeoutMs";
  private final KafkaSourceProvider kafka = new KafkaSourceProvider();

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    return kafka.inferSchema(options);
  }

  @Override
  public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
    Table table = kafka.getTable(schema, partitioning, properties);
    if (!(table instanceof SupportsRead)) {
      throw new IllegalStateException("Spark's Kafka table " + table.getClass().getName() + " is not readable");
    }
    return new EventTimeTable((SupportsRead) table);
  }

  private static final class EventTimeTable implements SupportsRead {
    private final SupportsRead kafka;

    EventTimeTable(SupportsRead kafka) {
      this.kafka = kafka;
    }

    @Override
    public String name() {
      return "EventTimeKafka";
    }

    @Override
    @SuppressWarnings("deprecation")
    public StructType schema() {
      return kafka.schema();
    }

    @Override
    public Set<TableCapability> capabilities() {
      return Collections.unmodifiableSet(EnumSet.of(TableCapability.MICRO_BATCH_READ));
    }

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
      ScanBuilder builder = kafka.newScanBuilder(options);
      return () -> new EventTimeScan(builder.build(), options);
    }
  }

  private static final class EventTimeScan implements Scan {
    private final Scan kafka;
    private final CaseInsensitiveStringMap options;

    EventTimeScan(Scan kafka, CaseInsensitiveStringMap options) {
      this.kafka = kafka;
      this.options = options;
    }

    @Override
    public StructType readSchema() {
      return kafka.readSchema();
    }

    @Override
    public String description() {
      return "EventTimeKafka[" + kafka.description() + "]";
    }

    @Override
    public CustomMetric[] supportedCustomMetrics() {
      return kafka.supportedCustomMetrics();
    }

    @Override
    public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
      MicroBatchStream stream = kafka.toMicroBatchStream(checkpointLocation);
      KafkaRecordTimes times = new KafkaRecordTimes(options.asCaseSensitiveMap(),
          options.getLong(FUTURE_SKEW, 0L), options.getLong(POLL_TIMEOUT, 60_000L));
      return new EventTimeMicroBatchStream(stream, options.getLong(MAX_OFFSETS, 0L), times);
    }
  }
}
