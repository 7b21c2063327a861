package io.github.rrm.agent;

/** The few JSON pieces the events need, written by hand so the agent brings no JSON library. */
final class Json {
    private Json() {
    }

    static StringBuilder string(StringBuilder out, String value) {
        if (value == null) {
            return out.append("null");
        }
        out.append('"');
        for (int i = 0; i < value.length(); i++) {
            char c = value.charAt(i);
            switch (c) {
                case '"':
                    out.append("\\\"");
                    break;
                case '\\':
                    out.append("\\\\");
                    break;
                case '\n':
                    out.append("\\n");
                    break;
                case '\r':
                    out.append("\\r");
                    break;
                case '\t':
                    out.append("\\t");
                    break;
                default:
                    if (c < 0x20 || c == 0x2028 || c == 0x2029) {
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
            }
        }
        return out.append('"');
    }

    static StringBuilder field(StringBuilder out, String name, String value) {
        return string(out.append(out.length() > 1 ? "," : "").append('"').append(name).append("\":"), value);
    }

    static StringBuilder field(StringBuilder out, String name, long value) {
        return out.append(out.length() > 1 ? "," : "").append('"').append(name).append("\":").append(value);
    }

    static StringBuilder field(StringBuilder out, String name, boolean value) {
        return out.append(out.length() > 1 ? "," : "").append('"').append(name).append("\":").append(value);
    }
}
