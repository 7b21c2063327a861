package io.github.rrm.testclients;

import java.util.HashMap;
import java.util.Map;

/** {@code --name value} command-line options, with typed getters and defaults. */
final class Options {
    private final Map<String, String> values = new HashMap<String, String>();

    Options(String[] args, int from) {
        for (int i = from; i < args.length; i++) {
            if (!args[i].startsWith("--") || i + 1 >= args.length) {
                throw new IllegalArgumentException("expected --name value pairs, got " + args[i]);
            }
            values.put(args[i].substring(2), args[++i]);
        }
    }

    String get(String name, String fallback) {
        String value = values.get(name);
        return value == null ? fallback : value;
    }

    String require(String name) {
        String value = values.get(name);
        if (value == null) {
            throw new IllegalArgumentException("--" + name + " is required");
        }
        return value;
    }

    long getLong(String name, long fallback) {
        String value = values.get(name);
        return value == null ? fallback : Long.parseLong(value);
    }

    boolean getBoolean(String name, boolean fallback) {
        String value = values.get(name);
        return value == null ? fallback : Boolean.parseBoolean(value);
    }
}
