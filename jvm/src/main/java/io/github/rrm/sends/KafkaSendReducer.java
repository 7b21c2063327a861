package io.github.rrm.sends;

import io.github.rrm.ingest.StrictEvents;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection$;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.execution.LogicalRDD;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;
import scala.collection.immutable.Seq;
import scala.reflect.ClassTag;
import scala.reflect.ClassTag$;

/**
 * The send-result path's whole per-record work in one pass over a micro-batch's Kafka records, per Spark
 * partition: read each record with the ingest fast path ({@link StrictEvents}, the same reader and value checks
 * {@code ingest.classify} calls), work out its fault table and whether it is notable, and reduce it as {@link
 * SendBatchReducer} does, without building a row of classified columns per send in between.
 *
 * <p>A record is taken here exactly when {@code classify} would take it on its fast path: its value is at most
 * {@code maxEventBytes} long, the strict reader reads it as a {@code send_result} (the topic's default type
 * applies), and its event time is not more than {@code maxFutureSkewMs} after its Kafka timestamp. Every other
 * record leaves as a row of kind {@code unsure} with its Kafka columns: the caller classifies those with the
 * rules. They are rejects almost always; a valid send among them (one the fast path leaves to the rules, such as
 * {@code 1.0} for a number) would have to join the reduction in its place, so then the caller reduces the whole
 * batch again the classic way ({@link SendBatchReducer} over {@code send_query.send_batch}).
 *
 * <p>The fault table of a send and its latency floor are the values of the job's own SQL expressions ({@code
 * send_query.fault_table_in_use}, {@code latency_floor_column}), bound to (producer group, client version,
 * send_latency_fault_enable) and evaluated once per distinct triple in a partition: the same answers as the SQL,
 * by construction.
 *
 * <p>A send's RocketMQ cluster is resolved here as {@code classify.cluster_sql} resolves it: its {@code cluster}
 * from contract version {@code clusterSinceVersion} on, else the job's default cluster; sends are reduced per
 * (cluster, producer, broker).
 */
public final class KafkaSendReducer implements FlatMapFunction<Iterator<InternalRow>, InternalRow> {
  private static final long serialVersionUID = 1L;
  private static final String SEND_RESULT = "send_result";
  private static final UTF8String OK = UTF8String.fromString("OK");
  private static final UTF8String KIND_UNSURE = UTF8String.fromString("unsure");
  /** A partition's cache of decoded strings stops growing here (a batch with ever new producer ids). */
  private static final int STRING_CACHE_LIMIT = 65_536;
  /** What the fault-table template may read, by name (STRING, STRING, BOOLEAN). */
  private static final String[] FAULT_TABLE_INPUTS = {"producer_group", "client_version", "send_latency_fault_enable"};

  private final StrictEvents strict;
  private final int typedIndex;
  private final int eventTimeField;
  private final int producerIdField;
  private final int producerGroupField;
  private final int brokerField;
  private final int latencyField;
  private final int outcomeField;
  private final int clientVersionField;
  private final int faultEnableField;
  private final int clusterField;  // -1: the contract has no cluster field, every send is the default cluster's
  private final int schemaVersionField;
  private final long clusterSinceVersion;
  private final String defaultCluster;
  private final int[] requiredFields;  // the contract's required fields this pass reads
  private final Map<String, String> topicDefaults;
  private final int maxEventBytes;
  private final long maxFutureSkewMs;
  private final Seq<Expression> faultTableExpression;
  private final Seq<Attribute> faultTableInputs;
  private final int[] faultTableSlots;  // per template input, its place in FAULT_TABLE_INPUTS
  private final long[] bucketUpperMs;
  private final long batchId;
  private final int value;
  private final int topic;
  private final int partition;
  private final int offset;
  private final int timestamp;

  private KafkaSendReducer(StructType kafka, StrictEvents strict, StructType strictType,
      Map<String, String> topicDefaults, int maxEventBytes, long maxFutureSkewMs, Dataset<Row> faultTableTemplate,
      long[] bucketUpperMs, long batchId, String defaultCluster, long clusterSinceVersion) {
    this.strict = strict;
    this.batchId = batchId;
    typedIndex = strictType.fieldIndex("e_" + SEND_RESULT);
    StructType typed = (StructType) strictType.fields()[typedIndex].dataType();
    eventTimeField = typed.fieldIndex("event_time");
    producerIdField = typed.fieldIndex("producer_id");
    producerGroupField = typed.fieldIndex("producer_group");
    brokerField = typed.fieldIndex("broker");
    latencyField = typed.fieldIndex("latency_ms");
    outcomeField = typed.fieldIndex("outcome");
    clientVersionField = typed.fieldIndex("client_version");
    faultEnableField = typed.fieldIndex("send_latency_fault_enable");
    clusterField = List.of(typed.fieldNames()).indexOf("cluster");
    schemaVersionField = typed.fieldIndex("schema_version");
    this.clusterSinceVersion = clusterSinceVersion;
    this.defaultCluster = defaultCluster;
    requiredFields = new int[] {eventTimeField, producerIdField, producerGroupField, brokerField, latencyField,
      outcomeField};
    this.topicDefaults = new HashMap<>(topicDefaults);
    this.maxEventBytes = maxEventBytes;
    this.maxFutureSkewMs = maxFutureSkewMs;
    LogicalPlan plan = faultTableTemplate.queryExecution().analyzed();
    if (!(plan instanceof Project project) || project.projectList().size() != 2) {
      throw new IllegalArgumentException("the fault-table template is not (table, floor) projected: " + plan);
    }
    @SuppressWarnings("unchecked")
    Seq<Expression> projected = (Seq<Expression>) (Seq<?>) project.projectList();
    faultTableExpression = projected;
    faultTableInputs = project.child().output();
    faultTableSlots = new int[faultTableInputs.size()];
    for (int i = 0; i < faultTableSlots.length; i++) {
      String name = faultTableInputs.apply(i).name();
      faultTableSlots[i] = List.of(FAULT_TABLE_INPUTS).indexOf(name);
      if (faultTableSlots[i] < 0) {
        throw new IllegalArgumentException("the fault-table template reads " + name + ", not one of "
            + String.join(", ", FAULT_TABLE_INPUTS));
      }
    }
    this.bucketUpperMs = bucketUpperMs.clone();
    value = kafka.fieldIndex("value");
    topic = kafka.fieldIndex("topic");
    partition = kafka.fieldIndex("partition");
    offset = kafka.fieldIndex("offset");
    timestamp = kafka.fieldIndex("timestamp");
  }

  /**
   * The reduced batch ({@link SendBatchReducer#OUTPUT_DDL}) of {@code kafka}, a micro-batch as the Kafka source
   * gives it. {@code strictType}/{@code checksJson}: the fast path's {@link StrictEvents} for the send path's
   * contract; {@code topicDefaults}: each topic's default event type; {@code faultTableTemplate}: the fault
   * table in use and its latency floor (the smallest latency with a positive not-available duration) projected
   * over {@code (producer_group, client_version, send_latency_fault_enable)}; {@code batchId} fills every row's
   * {@code batch_id}; {@code defaultCluster}: the cluster of a send that names none or whose contract version is
   * below {@code clusterSinceVersion}.
   */
  public static Dataset<Row> reduce(Dataset<Row> kafka, String strictDdl, String checksJson,
      Map<String, String> topicDefaults, int maxEventBytes, long maxFutureSkewMs, Dataset<Row> faultTableTemplate,
      List<? extends Number> bucketUpperMs, long batchId, String defaultCluster, long clusterSinceVersion) {
    StructType strictType = StructType.fromDDL(strictDdl);
    long[] bounds = new long[bucketUpperMs.size()];
    for (int i = 0; i < bounds.length; i++) {
      bounds[i] = bucketUpperMs.get(i).longValue();
    }
    KafkaSendReducer reducer = new KafkaSendReducer(kafka.schema(), new StrictEvents(strictType, checksJson),
        strictType, topicDefaults, maxEventBytes, maxFutureSkewMs, faultTableTemplate, bounds, batchId,
        defaultCluster, clusterSinceVersion);
    org.apache.spark.sql.classic.Dataset<Row> classic = (org.apache.spark.sql.classic.Dataset<Row>) kafka;
    ClassTag<InternalRow> tag = ClassTag$.MODULE$.apply(InternalRow.class);
    RDD<InternalRow> reduced = JavaRDD.fromRDD(records(classic), tag).mapPartitions(reducer).rdd();
    return classic.sparkSession().internalCreateDataFrame(reduced, SendBatchReducer.OUTPUT, false);
  }

  /**
   * The micro-batch's records as rows of its schema. A Python {@code foreachBatch} hands over each batch as a
   * {@code LogicalRDD} over the streaming plan's own rows; its physical plan ({@code Scan ExistingRDD}) copies
   * every row into a new {@code UnsafeRow} on the way out, an eighth of this pass's CPU for nothing, since the
   * pass reads each record once through {@link InternalRow} and copies what it keeps. So that RDD is read
   * directly; any other plan is executed as usual.
   */
  private static RDD<InternalRow> records(org.apache.spark.sql.classic.Dataset<Row> batch) {
    LogicalPlan plan = batch.queryExecution().analyzed();
    if (plan instanceof LogicalRDD existing) {
      return existing.rdd();
    }
    return batch.queryExecution().toRdd();
  }

  @Override
  public Iterator<InternalRow> call(Iterator<InternalRow> records) {
    TaskContext task = TaskContext.get();
    int sparkPartition = task == null ? 0 : task.partitionId();
    SendBatchReducer.Reduction reduction = new SendBatchReducer.Reduction(bucketUpperMs, batchId);
    FaultTables faultTables = new FaultTables();
    Map<String, UTF8String> utf8 = new HashMap<>();
    Map<UTF8String, String> topicDefault = new HashMap<>();
    while (records.hasNext()) {
      InternalRow record = records.next();
      Row typed = read(record, topicDefault);
      if (typed == null) {
        reduction.addUnsure(unsure(record, sparkPartition));
        continue;
      }
      String group = typed.getString(producerGroupField);
      String version = typed.isNullAt(clientVersionField) ? null : typed.getString(clientVersionField);
      Boolean faultEnable = typed.isNullAt(faultEnableField) ? null : typed.getBoolean(faultEnableField);
      FaultTable table = faultTables.of(group, version, faultEnable);
      UTF8String outcome = utf8(utf8, typed.getString(outcomeField));
      long latencyMs = typed.getLong(latencyField);
      boolean notable = table.name != null && (!OK.equals(outcome) || latencyMs >= table.floorMs);
      reduction.addSend(utf8(utf8, cluster(typed)), utf8(utf8, typed.getString(producerIdField)),
          utf8(utf8, group), utf8(utf8, typed.getString(brokerField)), typed.getLong(eventTimeField),
          record.getInt(partition), record.getLong(offset), latencyMs, outcome, version == null ? null : utf8(utf8, version), table.name,
          notable, true);
      if (utf8.size() > STRING_CACHE_LIMIT) {
        utf8.clear();
      }
    }
    return reduction.finish(sparkPartition).iterator();
  }

  /** The record's typed send result when {@code classify}'s fast path takes it, else null. */
  private Row read(InternalRow record, Map<UTF8String, String> topicDefault) {
    if (record.isNullAt(value) || record.isNullAt(timestamp)) {
      return null;
    }
    byte[] bytes = record.getBinary(value);
    if (bytes.length > maxEventBytes) {
      return null;
    }
    String defaultType = null;
    if (!record.isNullAt(topic)) {
      UTF8String name = record.getUTF8String(topic);
      defaultType = topicDefault.get(name);
      if (defaultType == null && !topicDefault.containsKey(name)) {
        defaultType = topicDefaults.get(name.toString());
        topicDefault.put(name.clone(), defaultType);
      }
    }
    Row event = strict.call(bytes, defaultType);
    if (event == null || !SEND_RESULT.equals(event.getString(0)) || event.isNullAt(typedIndex)) {
      return null;
    }
    Row typed = event.getStruct(typedIndex);
    for (int required : requiredFields) {
      if (typed.isNullAt(required)) {  // the checks refuse these already; the rules say why, should one get by
        return null;
      }
    }
    // classify: NOT (event_time > unix_millis(kafka_timestamp) + skew); unix_millis floors the microseconds.
    long kafkaMs = Math.floorDiv(record.getLong(timestamp), 1000L);
    if (typed.getLong(eventTimeField) > kafkaMs + maxFutureSkewMs) {
      return null;
    }
    return typed;
  }

  /** The send's cluster: its own from version {@code clusterSinceVersion} on, else the default one. */
  private String cluster(Row typed) {
    if (clusterField < 0 || typed.isNullAt(clusterField) || typed.isNullAt(schemaVersionField)
        || ((Number) typed.get(schemaVersionField)).doubleValue() < clusterSinceVersion) {
      return defaultCluster;
    }
    return typed.getString(clusterField);
  }

  private static UTF8String utf8(Map<String, UTF8String> cache, String text) {
    return cache.computeIfAbsent(text, UTF8String::fromString);
  }

  private static final int[] UNSURE_COLUMNS = {
    SendBatchReducer.OUTPUT.fieldIndex("kafka_topic"), SendBatchReducer.OUTPUT.fieldIndex("kafka_partition"),
    SendBatchReducer.OUTPUT.fieldIndex("kafka_offset"), SendBatchReducer.OUTPUT.fieldIndex("kafka_timestamp"),
    SendBatchReducer.OUTPUT.fieldIndex("kafka_value"),
  };

  private InternalRow unsure(InternalRow record, int sparkPartition) {
    Object[] values = new Object[SendBatchReducer.OUTPUT.length()];
    values[0] = KIND_UNSURE;
    values[1] = sparkPartition;
    values[UNSURE_COLUMNS[0]] = record.isNullAt(topic) ? null : record.getUTF8String(topic).clone();
    values[UNSURE_COLUMNS[1]] = record.getInt(partition);
    values[UNSURE_COLUMNS[2]] = record.getLong(offset);
    values[UNSURE_COLUMNS[3]] = record.isNullAt(timestamp) ? null : record.getLong(timestamp);
    values[UNSURE_COLUMNS[4]] = record.isNullAt(value) ? null : record.getBinary(value).clone();
    return new GenericInternalRow(values);
  }

  /** A fault table in use, {@code name} null for none (no sendLatencyFaultEnable), and its latency floor. */
  private record FaultTable(UTF8String name, long floorMs) {}

  /** A partition's fault table per (producer group, client version, send_latency_fault_enable). */
  private final class FaultTables {
    private final Map<List<Object>, FaultTable> known = new HashMap<>();
    private UnsafeProjection projection;

    FaultTable of(String group, String version, Boolean faultEnable) {
      List<Object> key = java.util.Arrays.asList(group, version, faultEnable);
      FaultTable table = known.get(key);
      if (table == null) {
        if (projection == null) {  // generated in the task: a projection is not serializable
          projection = UnsafeProjection$.MODULE$.create(faultTableExpression, faultTableInputs);
        }
        Object[] named = {
          group == null ? null : UTF8String.fromString(group),
          version == null ? null : UTF8String.fromString(version), faultEnable,
        };
        Object[] inputs = new Object[faultTableSlots.length];
        for (int i = 0; i < inputs.length; i++) {
          inputs[i] = named[faultTableSlots[i]];
        }
        InternalRow result = projection.apply(new GenericInternalRow(inputs));
        table = new FaultTable(result.isNullAt(0) ? null : result.getUTF8String(0).clone(), result.getLong(1));
        known.put(key, table);
      }
      return table;
    }
  }
}
