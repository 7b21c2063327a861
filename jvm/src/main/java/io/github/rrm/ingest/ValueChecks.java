package io.github.rrm.ingest;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.Serializable;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.math.RoundingMode;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.regex.Pattern;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructType;

/**
 * The value constraints of one typed value on the ingest fast path, compiled once from the description that
 * {@code validation._checks} (Python) builds from the contract's JSON Schema.
 *
 * <p>{@link #accepts} must say yes only where the contract's SQL rule walk finds no violation, so each check
 * reads the value as that rule does: {@code enum} (and {@code const}) compare Spark's string form of the value
 * ({@code CAST(x AS STRING)}: a long in decimal, a boolean as {@code true}/{@code false}); ranges compare a
 * long exactly with the bounds (as the rules compare an integer, in DECIMAL(38,0)), a double with the doubles
 * nearest them (as the rules compare other numbers); lengths count code points ({@code char_length}); a {@code pattern} must be found in the
 * string ({@code RLIKE}, {@link java.util.regex.Matcher#find()}). Where a check meets a value it does not
 * model (a range on a string, a length on an array), it refuses: the rules then decide.
 *
 * <p>Values are what {@link StrictEvents} builds: {@code String}, {@code Long}, {@code Double}, {@code Boolean},
 * a {@code List} of non-null items, or a {@code Row} laid out as the struct. They never hold an unpaired surrogate
 * (StrictEvents refuses those), so Java's string is the one Spark will see.
 */
final class ValueChecks implements Serializable {
  private static final long serialVersionUID = 1L;

  private final Set<String> allowed; // enum and const together; null: anything
  private final long lowest; // the range's smallest and largest long, bounds included ...
  private final long highest;
  private final boolean hasRange;
  private final boolean emptyRange; // ... unless no long lies in it
  private final double[] doubleBounds; // a double's range: minimum, exclusiveMinimum, maximum, exclusiveMaximum
  private final int minLength;
  private final int maxLength;
  private final Pattern pattern;
  private final int minItems;
  private final int maxItems;
  private final ValueChecks items;
  private final int[] required; // field indices of an object
  private final int[] checkedFields;
  private final ValueChecks[] fieldChecks;
  private final int[] requiredWhenField; // the field that must be present ...
  private final int[] requiredWhenOther; // ... when this (string) field ...
  private final String[] requiredWhenEquals; // ... equals this

  private ValueChecks(JsonNode spec, DataType type, String label) {
    Set<String> keys = new HashSet<>();
    spec.fieldNames().forEachRemaining(keys::add);
    keys.removeAll(List.of("enum", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength",
        "maxLength", "pattern", "minItems", "maxItems", "items", "required", "properties", "required_when"));
    if (!keys.isEmpty()) {
      throw new IllegalArgumentException(label + ": unknown checks " + keys);
    }
    if (spec.has("enum")) {
      allowed = new HashSet<>();
      spec.get("enum").forEach(value -> allowed.add(value.textValue()));
    } else {
      allowed = null;
    }
    BigInteger low = BigInteger.valueOf(Long.MIN_VALUE);
    BigInteger high = BigInteger.valueOf(Long.MAX_VALUE);
    if (spec.has("minimum")) {
      low = low.max(exact(spec.get("minimum"), label).setScale(0, RoundingMode.CEILING).toBigIntegerExact());
    }
    if (spec.has("exclusiveMinimum")) {
      BigDecimal bound = exact(spec.get("exclusiveMinimum"), label);
      low = low.max(bound.setScale(0, RoundingMode.FLOOR).toBigIntegerExact().add(BigInteger.ONE));
    }
    if (spec.has("maximum")) {
      high = high.min(exact(spec.get("maximum"), label).setScale(0, RoundingMode.FLOOR).toBigIntegerExact());
    }
    if (spec.has("exclusiveMaximum")) {
      BigDecimal bound = exact(spec.get("exclusiveMaximum"), label);
      high = high.min(bound.setScale(0, RoundingMode.CEILING).toBigIntegerExact().subtract(BigInteger.ONE));
    }
    hasRange = spec.has("minimum") || spec.has("maximum") || spec.has("exclusiveMinimum")
        || spec.has("exclusiveMaximum");
    emptyRange = low.compareTo(high) > 0;
    doubleBounds = new double[] {
      doubleBound(spec, "minimum", Double.NEGATIVE_INFINITY, label),
      doubleBound(spec, "exclusiveMinimum", Double.NEGATIVE_INFINITY, label),
      doubleBound(spec, "maximum", Double.POSITIVE_INFINITY, label),
      doubleBound(spec, "exclusiveMaximum", Double.POSITIVE_INFINITY, label),
    };
    lowest = emptyRange ? 0 : low.longValueExact();
    highest = emptyRange ? 0 : high.longValueExact();
    minLength = spec.path("minLength").asInt(-1);
    maxLength = spec.path("maxLength").asInt(-1);
    pattern = spec.has("pattern") ? Pattern.compile(spec.get("pattern").textValue()) : null;
    minItems = spec.path("minItems").asInt(-1);
    maxItems = spec.path("maxItems").asInt(-1);
    if (spec.has("items")) {
      if (!(type instanceof ArrayType)) {
        throw new IllegalArgumentException(label + ": items checks on " + type.simpleString());
      }
      items = new ValueChecks(spec.get("items"), ((ArrayType) type).elementType(), label + "[]");
    } else {
      items = null;
    }
    boolean object = spec.has("required") || spec.has("properties") || spec.has("required_when");
    if (object && !(type instanceof StructType)) {
      throw new IllegalArgumentException(label + ": field checks on " + type.simpleString());
    }
    StructType struct = object ? (StructType) type : null;
    List<Integer> requiredIndices = new ArrayList<>();
    spec.path("required").forEach(name -> requiredIndices.add(indexOf(struct, name.textValue(), label)));
    required = requiredIndices.stream().mapToInt(Integer::intValue).toArray();
    List<Integer> checked = new ArrayList<>();
    List<ValueChecks> checks = new ArrayList<>();
    for (Iterator<Map.Entry<String, JsonNode>> it = spec.path("properties").fields(); it.hasNext(); ) {
      Map.Entry<String, JsonNode> field = it.next();
      int index = indexOf(struct, field.getKey(), label);
      checked.add(index);
      checks.add(new ValueChecks(field.getValue(), struct.fields()[index].dataType(), label + "." + field.getKey()));
    }
    checkedFields = checked.stream().mapToInt(Integer::intValue).toArray();
    fieldChecks = checks.toArray(new ValueChecks[0]);
    JsonNode when = spec.path("required_when");
    requiredWhenField = new int[when.size()];
    requiredWhenOther = new int[when.size()];
    requiredWhenEquals = new String[when.size()];
    for (int i = 0; i < when.size(); i++) {
      requiredWhenField[i] = indexOf(struct, when.get(i).get("field").textValue(), label);
      requiredWhenOther[i] = indexOf(struct, when.get(i).get("when_field").textValue(), label);
      if (!(struct.fields()[requiredWhenOther[i]].dataType() instanceof StringType)) {
        throw new IllegalArgumentException(label + ": required_when reads a field that is not a string");
      }
      requiredWhenEquals[i] = when.get(i).get("equals").textValue();
    }
  }

  /** A bound as written in the description: an integer exactly, a fraction as its decimal value. */
  private static BigDecimal exact(JsonNode bound, String label) {
    if (!bound.isNumber()) {
      throw new IllegalArgumentException(label + ": bound " + bound + " is not a number");
    }
    return bound.isIntegralNumber() ? new BigDecimal(bound.bigIntegerValue()) : bound.decimalValue();
  }

  /** Bound {@code name} as the rules compare a double with it (the double nearest it), or {@code absent}. */
  private static double doubleBound(JsonNode spec, String name, double absent, String label) {
    return spec.has(name) ? exact(spec.get(name), label).doubleValue() : absent;
  }

  /** The checks {@code spec} describes for a value of Spark type {@code type}; throws on anything unknown. */
  static ValueChecks compile(JsonNode spec, DataType type, String label) {
    return new ValueChecks(spec, type, label);
  }

  private static int indexOf(StructType struct, String name, String label) {
    scala.Option<Object> index = struct.getFieldIndex(name);
    if (index.isEmpty()) {
      throw new IllegalArgumentException(label + ": no field " + name + " in " + struct.simpleString());
    }
    return (Integer) index.get();
  }

  /**
   * {@code pattern.matcher(text).find()}, remembered for texts that matched: patterned fields (groups, topics)
   * take few distinct values, and the regex cost more than the lookup. A set, never a verdict cache for texts
   * that did not match, bounded by clearing it when it fills.
   */
  private boolean matchesPattern(String text) {
    Set<String> seen = matched;
    if (seen.contains(text)) {
      return true;
    }
    if (!pattern.matcher(text).find()) {
      return false;
    }
    if (seen.size() >= MATCHED_LIMIT) {
      seen.clear();
    }
    seen.add(text);
    return true;
  }

  private static final int MATCHED_LIMIT = 4096;
  // Concurrent: one reader's checks may be shared by the tasks of an executor.
  private final Set<String> matched = ConcurrentHashMap.newKeySet();

  /** Whether the non-null {@code value} meets every check (see the class comment). */
  boolean accepts(Object value) {
    if (allowed != null || minLength >= 0 || maxLength >= 0 || pattern != null) {
      String text = sparkString(value);
      if (text == null) {
        return false;
      }
      if (allowed != null && !allowed.contains(text)) {
        return false;
      }
      if (minLength >= 0 || maxLength >= 0) {
        int length = text.codePointCount(0, text.length());
        if ((minLength >= 0 && length < minLength) || (maxLength >= 0 && length > maxLength)) {
          return false;
        }
      }
      if (pattern != null && !matchesPattern(text)) {
        return false;
      }
    }
    if (hasRange) {
      if (value instanceof Double) {
        double number = (Double) value;
        if (!(number >= doubleBounds[0] && number > doubleBounds[1] && number <= doubleBounds[2]
            && number < doubleBounds[3])) {
          return false;
        }
      } else if (!(value instanceof Long)) {
        return false;
      } else {
        long number = (Long) value;
        if (emptyRange || number < lowest || number > highest) {
          return false;
        }
      }
    }
    if (minItems >= 0 || maxItems >= 0 || items != null) {
      if (!(value instanceof List)) {
        return false;
      }
      List<?> list = (List<?>) value;
      if ((minItems >= 0 && list.size() < minItems) || (maxItems >= 0 && list.size() > maxItems)) {
        return false;
      }
      if (items != null) {
        for (Object item : list) {
          if (item == null || !items.accepts(item)) {
            return false;
          }
        }
      }
    }
    if (required.length > 0 || checkedFields.length > 0 || requiredWhenField.length > 0) {
      if (!(value instanceof Row)) {
        return false;
      }
      Row row = (Row) value;
      for (int index : required) {
        if (row.isNullAt(index)) {
          return false;
        }
      }
      for (int i = 0; i < checkedFields.length; i++) {
        Object field = row.get(checkedFields[i]);
        if (field != null && !fieldChecks[i].accepts(field)) {
          return false;
        }
      }
      for (int i = 0; i < requiredWhenField.length; i++) {
        if (requiredWhenEquals[i].equals(row.get(requiredWhenOther[i])) && row.isNullAt(requiredWhenField[i])) {
          return false;
        }
      }
    }
    return true;
  }

  /** Spark's {@code CAST(value AS STRING)} of a scalar, or null for a value that has none here. */
  private static String sparkString(Object value) {
    if (value instanceof String) {
      return (String) value;
    }
    if (value instanceof Long || value instanceof Boolean) {
      return value.toString();
    }
    return null;
  }
}
