package io.github.rrm.collector;

import java.util.Collection;
import java.util.Map;

/**
 * A minimal JSON writer for the events the collector publishes: maps (in their iteration order), collections,
 * strings, numbers, booleans and null. Null map values are left out, so an optional field is simply absent.
 */
final class Json {
  private Json() {}

  static String object(Map<String, ?> fields) {
    StringBuilder out = new StringBuilder(256);
    write(out, fields);
    return out.toString();
  }

  static void write(StringBuilder out, Object value) {
    if (value == null) {
      out.append("null");
    } else if (value instanceof String text) {
      string(out, text);
    } else if (value instanceof Number || value instanceof Boolean) {
      out.append(value);
    } else if (value instanceof Map<?, ?> map) {
      out.append('{');
      boolean first = true;
      for (Map.Entry<?, ?> entry : map.entrySet()) {
        if (entry.getValue() == null) {
          continue;
        }
        if (!first) {
          out.append(',');
        }
        first = false;
        string(out, String.valueOf(entry.getKey()));
        out.append(':');
        write(out, entry.getValue());
      }
      out.append('}');
    } else if (value instanceof Collection<?> items) {
      out.append('[');
      boolean first = true;
      for (Object item : items) {
        if (!first) {
          out.append(',');
        }
        first = false;
        write(out, item);
      }
      out.append(']');
    } else {
      string(out, value.toString());
    }
  }

  static void string(StringBuilder out, String text) {
    out.append('"');
    for (int i = 0; i < text.length(); i++) {
      char c = text.charAt(i);
      switch (c) {
        case '"' -> out.append("\\\"");
        case '\\' -> out.append("\\\\");
        case '\n' -> out.append("\\n");
        case '\r' -> out.append("\\r");
        case '\t' -> out.append("\\t");
        default -> {
          if (c < 0x20 || c == 0x2028 || c == 0x2029) {
            out.append(String.format("\\u%04x", (int) c));
          } else {
            out.append(c);
          }
        }
      }
    }
    out.append('"');
  }
}
