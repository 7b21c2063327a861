package io.github.rrm.ingest;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.api.java.UDF1;
import org.apache.spark.sql.catalyst.CatalystTypeConverters$;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.BindReferences$;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.InterpretedMutableProjection;
import org.apache.spark.sql.catalyst.expressions.MutableProjection;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.expressions.package$;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.execution.LogicalRDD;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.util.Utils;
import scala.Function1;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The dead-letter verdict of a record off the ingest fast path: the contract's rule walk, evaluated in the JVM.
 *
 * <p>The rule walk (streaming/job/ingest/validation.py) is SQL with hundreds of terms and {@code exists(...)} lambdas.
 * Written into the ingest projection, it kept that projection out of whole-stage codegen, so every task
 * generated the Java source of the whole walk again before reading its first record, although valid records
 * (nearly all) skip the walk: on the heartbeat topic its mere presence cost about twice what parsing does.
 * Here the same SQL is analyzed and optimized once, on the driver, into expression trees that reach executors as
 * a broadcast variable, once per executor; on an executor they are evaluated by an interpreted projection,
 * built once per deserialized instance and only when a record actually needs a verdict. The ingest projection
 * is left with one function call in place of the walk.
 *
 * <p>Why a broadcast: the trees serialize to several hundred kilobytes, and a function's fields travel in the
 * task binary of every stage whose lineage holds the ingest projection (all of a batch's writes, which read
 * the stateful operator's output), so every stage of every batch serialized them again, every task
 * deserialized them, and Spark warned of a task binary over 1 MB four times per consumer batch. Each instance
 * still evaluates a copy of its own, deserialized from the broadcast bytes only when a verdict is needed: the
 * trees hold mutable state (lambda variables), and concurrent tasks of an executor share a broadcast value.
 *
 * <p>{@code register(spark, name, inputDdl, outputNames, outputSqls)}: the function takes one struct shaped
 * as {@code inputDdl} and returns a struct of STRING fields {@code outputNames}; each output is the SQL at the
 * same index over the input's fields and the outputs before it (the detail of a rejection names its reason).
 */
public final class RuleVerdict implements UDF1<Row, Row> {
  private static final long serialVersionUID = 1L;

  private final StructType input;
  // The Java-serialized stages (each bound to the previous stage's output, in order): deserialized per instance.
  private final Broadcast<byte[]> stages;
  private transient Function1<Object, Object> toCatalyst;
  private transient List<MutableProjection> projections;

  private RuleVerdict(StructType input, Broadcast<byte[]> stages) {
    this.input = input;
    this.stages = stages;
  }

  /** Registers the function as {@code name} in {@code spark}'s function registry (see the class comment). */
  public static void register(
      SparkSession spark, String name, String inputDdl, String[] outputNames, String[] outputSqls) {
    if (outputNames.length == 0 || outputNames.length != outputSqls.length) {
      throw new IllegalArgumentException("one SQL expression per output name is required");
    }
    if (spark.catalog().functionExists(name)) {
      // The name carries a hash of the inputs and SQL: the same function, already there. send-ingest
      // classifies each batch's records the fast path left, and analysing the walk again cost every such batch.
      return;
    }
    StructType input = StructType.fromDDL(inputDdl);
    JavaSparkContext context = JavaSparkContext.fromSparkContext(spark.sparkContext());
    // An RDD-backed frame rather than a local relation: the optimizer would fold an empty local one away.
    Dataset<Row> frame = spark.createDataFrame(context.<Row>emptyRDD(), input);
    StructType output = new StructType();
    for (int i = 0; i < outputNames.length; i++) {
      frame = frame.selectExpr("*", "(" + outputSqls[i] + ") AS " + quote(outputNames[i]));
      output = output.add(outputNames[i], DataTypes.StringType);
    }
    String[] outputs = new String[outputNames.length];
    for (int i = 0; i < outputs.length; i++) {
      outputs[i] = quote(outputNames[i]);
    }
    frame = frame.selectExpr(outputs);
    Broadcast<byte[]> stages = context.broadcast(Utils.serialize(stagesOf(frame.queryExecution().optimizedPlan())));
    spark.udf().register(name, new RuleVerdict(input, stages), output);
  }

  private static String quote(String name) {
    return "`" + name.replace("`", "``") + "`";
  }

  /** The optimized plan's projections, innermost first, each bound to its child's output. */
  private static List<List<Expression>> stagesOf(LogicalPlan plan) {
    List<List<Expression>> stages = new ArrayList<>();
    LogicalPlan node = plan;
    while (node instanceof Project) {
      Project project = (Project) node;
      Seq<Attribute> childOutput = project.child().output();
      List<Expression> bound = new ArrayList<>();
      for (NamedExpression expression : CollectionConverters.asJava(project.projectList())) {
        bound.add(BindReferences$.MODULE$.<Expression>bindReference(
            (Expression) expression, package$.MODULE$.AttributeSeq(childOutput), false));
      }
      stages.add(bound);
      node = project.child();
    }
    if (!(node instanceof LogicalRDD) || stages.isEmpty()) {
      throw new IllegalStateException("expected projections over the input, got:\n" + plan);
    }
    Collections.reverse(stages);
    return stages;
  }

  @Override
  public Row call(Row record) {
    if (projections == null) {
      toCatalyst = CatalystTypeConverters$.MODULE$.createToCatalystConverter(input);
      projections = new ArrayList<>();
      // This instance's own copy of the trees (see the class comment).
      List<List<Expression>> own = Utils.deserialize(stages.value());
      for (List<Expression> stage : own) {
        MutableProjection projection =
            InterpretedMutableProjection.createProjection(CollectionConverters.asScala(stage).toSeq());
        projection.initialize(0); // deterministic expressions only; the call is required before use
        projections.add(projection);
      }
    }
    InternalRow row = (InternalRow) toCatalyst.apply(record);
    for (MutableProjection projection : projections) {
      row = projection.apply(row); // each stage writes its own row, which only the next stage reads
    }
    Object[] values = new Object[row.numFields()];
    for (int i = 0; i < values.length; i++) {
      values[i] = row.isNullAt(i) ? null : row.getUTF8String(i).toString();
    }
    return RowFactory.create(values);
  }
}
