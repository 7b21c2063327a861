package io.github.rrm.ingest;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.StreamReadFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.api.java.UDF2;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * The ingest fast path: one strict JSON parse per Kafka record into the contract's typed fields, and the
 * contract's value checks on them.
 *
 * <p>{@code call(value, topicDefaultType)} returns {@code (event_type, e_<type1>, e_<type2>, ...)} with only
 * the event's own typed struct set, or NULL when the record is not plainly valid. NULL is not a verdict: the
 * job then walks its SQL rules (streaming/job/validation.py), which name the dead-letter reason. So this class
 * only has to be <em>stricter</em> than those rules, never more lenient, and its typed values must equal what
 * {@code try_variant_get(parse_json(value), '$', struct)} gives for the records it accepts:
 *
 * <ul>
 *   <li>the value must parse with Jackson and duplicate keys rejected (Spark's parse_json rejects them too);
 *   <li>it must be an object whose {@code type} is a string naming a contract type, or, without {@code type},
 *       whose topic names one;
 *   <li>every field present must be declared by the type's struct, at every depth (unknown fields fall back);
 *   <li>a STRING field must be a JSON string without unpaired surrogates (Spark would store {@code ?} for
 *       one, which the checks below would not see), a BIGINT field a JSON integer that fits a long (no
 *       {@code 1.0}, no exponent: Spark reads those differently), a BOOLEAN field true or false; arrays must
 *       not hold null;
 *   <li>JSON null is a NULL field, as in Spark;
 *   <li>the typed event must meet its type's value checks ({@link ValueChecks}: required fields, enums,
 *       ranges, lengths, patterns, cross-field rules), compiled once from the description the job passes.
 * </ul>
 *
 * <p>Text after the top-level object is ignored, as Spark's parse_json ignores it.
 */
public final class StrictEvents implements UDF2<String, String, Row> {
  private static final long serialVersionUID = 1L;

  /** Marks a value that is not plainly of its declared type (NULL is a legitimate field value). */
  private static final Object INVALID = new Object();

  private static final ObjectMapper MAPPER =
      new ObjectMapper(JsonFactory.builder().enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION).build());

  private final String[] types;
  private final StructType[] structs;
  private final ValueChecks[] checks;

  /**
   * {@code returnType}: {@code event_type STRING} then one {@code e_<type> STRUCT<...>} per event type;
   * {@code checksJson}: a JSON object with each type's value checks (see {@link ValueChecks}) by type name.
   */
  public StrictEvents(StructType returnType, String checksJson) {
    StructField[] fields = returnType.fields();
    if (fields.length < 2 || !fields[0].name().equals("event_type")) {
      throw new IllegalArgumentException("expected (event_type, e_<type>...), got " + returnType.simpleString());
    }
    types = new String[fields.length - 1];
    structs = new StructType[fields.length - 1];
    for (int i = 1; i < fields.length; i++) {
      if (!fields[i].name().startsWith("e_") || !(fields[i].dataType() instanceof StructType)) {
        throw new IllegalArgumentException("field " + fields[i].name() + " is not e_<type> STRUCT<...>");
      }
      types[i - 1] = fields[i].name().substring(2);
      structs[i - 1] = (StructType) fields[i].dataType();
    }
    JsonNode described;
    try {
      described = MAPPER.readTree(checksJson);
    } catch (Exception error) {
      throw new IllegalArgumentException("checks are not JSON: " + error.getMessage(), error);
    }
    checks = new ValueChecks[types.length];
    for (int i = 0; i < types.length; i++) {
      if (!described.has(types[i])) {
        throw new IllegalArgumentException("no checks for event type " + types[i]);
      }
      checks[i] = ValueChecks.compile(described.get(types[i]), structs[i], types[i]);
    }
  }

  /** Registers the UDF as {@code name} in {@code spark}'s function registry; the arguments as above. */
  public static void register(SparkSession spark, String name, String returnDdl, String checksJson) {
    StructType returnType = StructType.fromDDL(returnDdl);
    spark.udf().register(name, new StrictEvents(returnType, checksJson), returnType);
  }

  @Override
  public Row call(String value, String topicDefaultType) {
    if (value == null) {
      return null;
    }
    JsonNode root;
    try {
      root = MAPPER.readTree(value);
    } catch (Exception notPlainJson) {
      return null;
    }
    if (root == null || !root.isObject()) {
      return null;
    }
    JsonNode typeNode = root.get("type");
    String type;
    if (typeNode == null || typeNode.isNull()) {
      type = topicDefaultType;
    } else if (typeNode.isTextual()) {
      type = typeNode.textValue();
    } else {
      return null;
    }
    int index = indexOf(type);
    if (index < 0) {
      return null;
    }
    Object typed = convert(root, structs[index]);
    if (typed == INVALID || !checks[index].accepts(typed)) {
      return null;
    }
    Object[] out = new Object[types.length + 1];
    out[0] = type;
    out[index + 1] = typed;
    return RowFactory.create(out);
  }

  private int indexOf(String type) {
    if (type == null) {
      return -1;
    }
    for (int i = 0; i < types.length; i++) {
      if (types[i].equals(type)) {
        return i;
      }
    }
    return -1;
  }

  private static Object convert(JsonNode node, DataType type) {
    if (node == null || node.isNull()) {
      return null;
    }
    if (type instanceof StringType) {
      return node.isTextual() && pairsAllSurrogates(node.textValue()) ? node.textValue() : INVALID;
    }
    if (type instanceof LongType) {
      // IntNode/LongNode only: BigIntegerNode does not fit, DoubleNode/DecimalNode (1.0, 1e3) fall back.
      return node.isInt() || node.isLong() ? (Object) node.longValue() : INVALID;
    }
    if (type instanceof BooleanType) {
      return node.isBoolean() ? (Object) node.booleanValue() : INVALID;
    }
    if (type instanceof ArrayType) {
      if (!node.isArray()) {
        return INVALID;
      }
      DataType element = ((ArrayType) type).elementType();
      List<Object> items = new ArrayList<>(node.size());
      for (JsonNode item : node) {
        Object converted = item.isNull() ? INVALID : convert(item, element);
        if (converted == INVALID) {
          return INVALID;
        }
        items.add(converted);
      }
      return items;
    }
    if (type instanceof StructType) {
      if (!node.isObject()) {
        return INVALID;
      }
      StructType struct = (StructType) type;
      StructField[] fields = struct.fields();
      if (node.size() > fields.length || !declaresAll(node, struct)) {
        return INVALID;
      }
      Object[] values = new Object[fields.length];
      for (int i = 0; i < fields.length; i++) {
        Object converted = convert(node.get(fields[i].name()), fields[i].dataType());
        if (converted == INVALID) {
          return INVALID;
        }
        values[i] = converted;
      }
      return RowFactory.create(values);
    }
    return INVALID; // a type the fast path does not model (e.g. DOUBLE): the rules decide
  }

  private static boolean pairsAllSurrogates(String text) {
    for (int i = 0; i < text.length(); i++) {
      char c = text.charAt(i);
      if (Character.isHighSurrogate(c) && i + 1 < text.length() && Character.isLowSurrogate(text.charAt(i + 1))) {
        i++;
      } else if (Character.isSurrogate(c)) {
        return false;
      }
    }
    return true;
  }

  private static boolean declaresAll(JsonNode node, StructType struct) {
    for (Iterator<String> names = node.fieldNames(); names.hasNext(); ) {
      if (struct.getFieldIndex(names.next()).isEmpty()) {
        return false;
      }
    }
    return true;
  }
}
