package io.github.rrm.ingest;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.api.java.UDF2;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * The ingest fast path: one strict JSON parse per Kafka record into the contract's typed fields, and the
 * contract's value checks on them.
 *
 * <p>{@code call(value, topicDefaultType)} returns {@code (event_type, e_<type1>, e_<type2>, ...)} with only
 * the event's own typed struct set, or NULL when the record is not plainly valid. NULL is not a verdict: the
 * job then walks its SQL rules (streaming/job/ingest/validation.py), which name the dead-letter reason. So this class
 * only has to be <em>stricter</em> than those rules, never more lenient, and its typed values must equal what
 * {@code try_variant_get(parse_json(value), '$', struct)} gives for the records it accepts:
 *
 * <ul>
 *   <li>the value must be valid UTF-8 and parse with Jackson, duplicate keys rejected (Spark's parse_json rejects
 *       them too);
 *   <li>it must be an object whose {@code type} is a string naming a contract type, or, without {@code type},
 *       whose topic names one;
 *   <li>every field present must be declared by the type's struct, at every depth (unknown fields fall back);
 *   <li>a STRING field must be a JSON string without unpaired surrogates (Spark would store {@code ?} for
 *       one, which the checks below would not see), a BIGINT field a JSON integer that fits a long (no
 *       {@code 1.0}, no exponent: Spark reads those differently), a DOUBLE field a JSON integer within 2^53 or a
 *       plain decimal of at most 15 digits (not a negative zero), a BOOLEAN field true or false; arrays must not
 *       hold null;
 *   <li>JSON null is a NULL field, as in Spark;
 *   <li>the typed event must meet its type's value checks ({@link ValueChecks}: required fields, enums,
 *       ranges, lengths, patterns, cross-field rules), compiled once from the description the job passes.
 * </ul>
 *
 * <p>Text after the top-level object is ignored, as Spark's parse_json ignores it.
 */
public final class StrictEvents implements UDF2<byte[], String, Row> {
  private static final long serialVersionUID = 1L;

  /** Marks a value that is not plainly of its declared type (NULL is a legitimate field value). */
  private static final Object INVALID = new Object();

  /**
   * Reads bytes as UTF-8 (see {@link #call}). Duplicate keys are found by the reader itself: a record with an
   * undeclared field is not taken anyway, and a declared field seen twice in one object is refused (Spark's
   * parse_json refuses duplicate keys), which costs a flag per field instead of Jackson's set of names.
   */
  private static final JsonFactory FACTORY = JsonFactory.builder().build();

  private final String[] types;
  private final Shape[] shapes;
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
    shapes = new Shape[fields.length - 1];
    StructType[] structs = new StructType[fields.length - 1];
    for (int i = 1; i < fields.length; i++) {
      if (!fields[i].name().startsWith("e_") || !(fields[i].dataType() instanceof StructType)) {
        throw new IllegalArgumentException("field " + fields[i].name() + " is not e_<type> STRUCT<...>");
      }
      types[i - 1] = fields[i].name().substring(2);
      structs[i - 1] = (StructType) fields[i].dataType();
      shapes[i - 1] = new Shape(structs[i - 1]);
    }
    JsonNode described;
    try {
      described = new ObjectMapper().readTree(checksJson);
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
    if (spark.catalog().functionExists(name)) {
      return;  // the name carries a hash of what it is built from: the same function, already there
    }
    StructType returnType = StructType.fromDDL(returnDdl);
    spark.udf().register(name, new StrictEvents(returnType, checksJson), returnType);
  }

  /**
   * {@code value}: the Kafka record's bytes, read as UTF-8 by Jackson's byte parser (no string decoded first). Only
   * valid UTF-8 is read (Spark reads invalid sequences as U+FFFD: the rules decide those), and only bytes that
   * start as JSON text in UTF-8 does (no byte order mark, no NUL among the first four bytes, from which Jackson
   * would guess another encoding).
   */
  @Override
  public Row call(byte[] value, String topicDefaultType) {
    if (value == null || !plainUtf8(value)) {
      return null;
    }
    // Read as the topic's default type until a "type" field says otherwise: events carry their type first, or
    // none, so one pass almost always suffices.
    return read(value, topicDefaultType, indexOf(topicDefaultType), false);
  }

  /**
   * The event of {@code value} read with the struct of {@code types[index]}, a guess unless {@code settled}: on a
   * {@code type} field naming another type, or a field the guess does not take, read again with the type the
   * event names. {@code index} -1: find that type first (a pass over the top-level fields).
   */
  private Row read(byte[] value, String topicDefaultType, int index, boolean settled) {
    if (index < 0) {
      String declared = declaredType(value);
      if (declared == null) {
        return null;
      }
      index = indexOf(declared.isEmpty() ? topicDefaultType : declared);
      if (index < 0) {
        return null;
      }
      settled = true;
    }
    Shape shape = shapes[index];
    Object[] values = new Object[shape.fields.length];
    boolean[] seen = new boolean[shape.fields.length];
    String declared = null;
    try (JsonParser parser = FACTORY.createParser(value)) {
      if (parser.nextToken() != JsonToken.START_OBJECT) {
        return null;
      }
      JsonToken token = parser.nextToken();
      for (; token == JsonToken.FIELD_NAME; token = parser.nextToken()) {
        String name = parser.currentName();
        JsonToken valueToken = parser.nextToken();
        if (name.equals("type") && valueToken == JsonToken.VALUE_STRING) {
          declared = parser.getText();
          int named = indexOf(declared);
          if (named != index) {
            return named < 0 || settled ? null : read(value, topicDefaultType, named, true);
          }
        }
        if (!readField(parser, name, valueToken, shape, values, seen)) {
          // Not of the guessed type; of the type its "type" field names, perhaps, which may come later.
          return settled ? null : read(value, topicDefaultType, -1, false);
        }
      }
      if (token != JsonToken.END_OBJECT) {
        return null;
      }
    } catch (IOException notPlainJson) {
      return null;
    }
    String type = declared != null ? declared : topicDefaultType;
    if (indexOf(type) != index) {
      return null;
    }
    Row typed = RowFactory.create(values);
    if (!checks[index].accepts(typed)) {
      return null;
    }
    Object[] out = new Object[types.length + 1];
    out[0] = type;
    out[index + 1] = typed;
    return RowFactory.create(out);
  }

  /**
   * The top-level {@code type} string of {@code value}, "" when it has none (absent or JSON null), or null when it
   * is not an object, not JSON, or its {@code type} is not a string.
   */
  private static String declaredType(byte[] value) {
    try (JsonParser parser = FACTORY.createParser(value)) {
      if (parser.nextToken() != JsonToken.START_OBJECT) {
        return null;
      }
      String declared = "";
      JsonToken token = parser.nextToken();
      for (; token == JsonToken.FIELD_NAME; token = parser.nextToken()) {
        String name = parser.currentName();
        JsonToken valueToken = parser.nextToken();
        if (name.equals("type")) {
          if (valueToken == JsonToken.VALUE_STRING) {
            declared = parser.getText();
          } else if (valueToken != JsonToken.VALUE_NULL) {
            return null;
          }
        }
        parser.skipChildren();
      }
      return token == JsonToken.END_OBJECT ? declared : null;
    } catch (IOException notPlainJson) {
      return null;
    }
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

  /** The value at {@code token} (the parser positioned on it) as {@code shape}'s Java value, or INVALID. */
  private static Object convert(JsonParser parser, JsonToken token, Shape shape) throws IOException {
    if (token == JsonToken.VALUE_NULL) {
      return null;
    }
    switch (shape.kind) {
      case STRING:
        if (token != JsonToken.VALUE_STRING) {
          return INVALID;
        }
        String text = parser.getText();
        return pairsAllSurrogates(text) ? text : INVALID;
      case LONG: {
        // INT or LONG only: BIG_INTEGER does not fit, floats (1.0, 1e3) fall back (Spark reads them differently).
        if (token != JsonToken.VALUE_NUMBER_INT) {
          return INVALID;
        }
        JsonParser.NumberType number = parser.getNumberType();
        return number == JsonParser.NumberType.INT || number == JsonParser.NumberType.LONG
            ? (Object) parser.getLongValue() : INVALID;
      }
      case DOUBLE:
        return doubleOf(parser, token);
      case BOOLEAN:
        return token == JsonToken.VALUE_TRUE ? Boolean.TRUE : token == JsonToken.VALUE_FALSE ? Boolean.FALSE : INVALID;
      case ARRAY: {
        if (token != JsonToken.START_ARRAY) {
          return INVALID;
        }
        List<Object> items = new ArrayList<>();
        for (JsonToken item = parser.nextToken(); item != JsonToken.END_ARRAY; item = parser.nextToken()) {
          Object converted = item == null || item == JsonToken.VALUE_NULL ? INVALID : convert(parser, item, shape.element);
          if (converted == INVALID) {
            return INVALID;
          }
          items.add(converted);
        }
        return items;
      }
      case STRUCT: {
        if (token != JsonToken.START_OBJECT) {
          return INVALID;
        }
        Object[] values = new Object[shape.fields.length];
        boolean[] seen = new boolean[shape.fields.length];
        JsonToken next = parser.nextToken();
        for (; next == JsonToken.FIELD_NAME; next = parser.nextToken()) {
          if (!readField(parser, parser.currentName(), parser.nextToken(), shape, values, seen)) {
            return INVALID;
          }
        }
        return next == JsonToken.END_OBJECT ? RowFactory.create(values) : INVALID;
      }
      default:
        return INVALID; // a type the fast path does not model: the rules decide
    }
  }

  /**
   * A plain decimal's significant digits and digits after the point for a DOUBLE field (see {@link #doubleOf}):
   * its digits then make a long below 2^53 and its power of ten is at most 10^22, both exact doubles.
   */
  private static final int DOUBLE_DIGITS = 15;
  private static final int DOUBLE_SCALE = 22;

  /**
   * A DOUBLE field's value as Spark's {@code parse_json} then {@code variant_get} give it, or INVALID where they
   * might give another. Spark keeps a JSON integer as a long and casts it to the nearest double, as Java does;
   * a plain decimal it keeps exactly and divides by its power of ten, which is the double nearest its text (what
   * Jackson reads) while its digits, as a long, and the power of ten are both exact doubles. Integers beyond
   * 2^53, exponents, longer decimals and a negative zero (Spark's decimal has none) fall back to the rules.
   */
  private static Object doubleOf(JsonParser parser, JsonToken token) throws IOException {
    if (token == JsonToken.VALUE_NUMBER_INT) {
      JsonParser.NumberType number = parser.getNumberType();
      if (number != JsonParser.NumberType.INT && number != JsonParser.NumberType.LONG) {
        return INVALID;
      }
      long value = parser.getLongValue();
      return value >= -(1L << 53) && value <= (1L << 53) ? (Object) (double) value : INVALID;
    }
    if (token != JsonToken.VALUE_NUMBER_FLOAT) {
      return INVALID;
    }
    String text = parser.getText();
    int significant = 0;
    int scale = -1; // digits after the point, counted once it is seen
    for (int i = 0; i < text.length(); i++) {
      char c = text.charAt(i);
      if (c >= '0' && c <= '9') {
        if (significant > 0 || c != '0') {
          significant++;
        }
        if (scale >= 0) {
          scale++;
        }
      } else if (c == '.') {
        scale = 0;
      } else if (!(c == '-' && i == 0)) {
        return INVALID; // an exponent
      }
    }
    if (significant > DOUBLE_DIGITS || scale > DOUBLE_SCALE) {
      return INVALID;
    }
    double value = parser.getDoubleValue();
    return value == 0.0 && text.charAt(0) == '-' ? INVALID : (Object) value;
  }

  /**
   * Reads the value of field {@code name} of a {@code shape} object (the parser on its {@code token}) into
   * {@code values}; false when the field is undeclared, seen before in the object (a duplicate key, which Spark's
   * parse_json refuses), or its value is not plainly of the declared type.
   */
  private static boolean readField(JsonParser parser, String name, JsonToken token, Shape shape, Object[] values,
      boolean[] seen) throws IOException {
    Integer field = shape.fieldIndex.get(name);
    if (field == null || seen[field]) {
      return false;
    }
    Object converted = convert(parser, token, shape.fields[field]);
    if (converted == INVALID) {
      return false;
    }
    values[field] = converted;
    seen[field] = true;
    return true;
  }

  /** Valid UTF-8 that Jackson reads as UTF-8: see {@link #call}. */
  private static boolean plainUtf8(byte[] value) {
    if (value.length == 0 || value[0] == (byte) 0xEF) { // 0xEF: a byte order mark (EF BB BF) or no JSON text
      return false;
    }
    for (int i = 0; i < Math.min(4, value.length); i++) {
      if (value[i] == 0) {
        return false;
      }
    }
    return ascii(value) || UTF8String.fromBytes(value).isValid();
  }

  /**
   * Whether every byte is below 0x80, eight at a time: ASCII is valid UTF-8, and almost every event is ASCII.
   * Spark's {@code isValid} walks the bytes one by one and took an eighth of the send path's pass.
   */
  private static boolean ascii(byte[] value) {
    int i = 0;
    for (; i + 8 <= value.length; i += 8) {
      if ((Platform.getLong(value, Platform.BYTE_ARRAY_OFFSET + i) & 0x8080808080808080L) != 0) {
        return false;
      }
    }
    for (; i < value.length; i++) {
      if (value[i] < 0) {
        return false;
      }
    }
    return true;
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

  /** A Spark type as the reader needs it: which JSON value it takes, and a struct's fields by name. */
  private static final class Shape implements Serializable {
    private static final long serialVersionUID = 1L;

    enum Kind { STRING, LONG, DOUBLE, BOOLEAN, ARRAY, STRUCT, OTHER }

    final Kind kind;
    final Shape element; // ARRAY
    final Shape[] fields; // STRUCT, in the struct's order
    final Map<String, Integer> fieldIndex; // STRUCT

    Shape(DataType type) {
      Shape elementShape = null;
      Shape[] fieldShapes = new Shape[0];
      Map<String, Integer> index = new HashMap<>();
      if (type instanceof StringType) {
        kind = Kind.STRING;
      } else if (type instanceof LongType) {
        kind = Kind.LONG;
      } else if (type instanceof DoubleType) {
        kind = Kind.DOUBLE;
      } else if (type instanceof BooleanType) {
        kind = Kind.BOOLEAN;
      } else if (type instanceof ArrayType) {
        kind = Kind.ARRAY;
        elementShape = new Shape(((ArrayType) type).elementType());
      } else if (type instanceof StructType) {
        kind = Kind.STRUCT;
        StructField[] structFields = ((StructType) type).fields();
        fieldShapes = new Shape[structFields.length];
        for (int i = 0; i < structFields.length; i++) {
          fieldShapes[i] = new Shape(structFields[i].dataType());
          index.put(structFields[i].name(), i);
        }
      } else {
        kind = Kind.OTHER;
      }
      element = elementShape;
      fields = fieldShapes;
      fieldIndex = index;
    }
  }
}
