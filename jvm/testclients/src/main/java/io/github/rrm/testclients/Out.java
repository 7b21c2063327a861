package io.github.rrm.testclients;

/** JSON lines on stdout, one object per line, written whole (the Python side reads them line by line). */
final class Out {
    private Out() {
    }

    static String quote(String value) {
        if (value == null) {
            return "null";
        }
        StringBuilder out = new StringBuilder(value.length() + 2).append('"');
        for (int i = 0; i < value.length(); i++) {
            char c = value.charAt(i);
            if (c == '"' || c == '\\') {
                out.append('\\').append(c);
            } else if (c < 0x20) {
                out.append(String.format("\\u%04x", (int) c));
            } else {
                out.append(c);
            }
        }
        return out.append('"').toString();
    }

    static synchronized void line(String json) {
        System.out.println(json);
        System.out.flush();
    }
}
