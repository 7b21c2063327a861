package io.github.rrm.testclients;

import java.util.HashMap;
import java.util.Map;

/**
 * {@code --name value} command-line options, with typed getters and defaults. {@link #of(String)} gives one hosted
 * client's view: {@code --<client>.name value} for that client, else the shared {@code --name value}.
 */
final class Options {
    private final Map<String, String> values;
    private final String prefix;

    Options(String[] args, int from) {
        values = new HashMap<String, String>();
        prefix = "";
        for (int i = from; i < args.length; i++) {
            if (!args[i].startsWith("--") || i + 1 >= args.length) {
                throw new IllegalArgumentException("expected --name value pairs, got " + args[i]);
            }
            values.put(args[i].substring(2), args[++i]);
        }
    }

    private Options(Map<String, String> values, String prefix) {
        this.values = values;
        this.prefix = prefix;
    }

    /** The options of the hosted client {@code client}: its own where given, the shared ones otherwise. */
    Options of(String client) {
        return new Options(values, client + ".");
    }

    private String value(String name) {
        String own = prefix.isEmpty() ? null : values.get(prefix + name);
        return own != null ? own : values.get(name);
    }

    String get(String name, String fallback) {
        String value = value(name);
        return value == null ? fallback : value;
    }

    String require(String name) {
        String value = value(name);
        if (value == null) {
            throw new IllegalArgumentException("--" + prefix + name + " is required");
        }
        return value;
    }

    long getLong(String name, long fallback) {
        String value = value(name);
        return value == null ? fallback : Long.parseLong(value);
    }

    boolean getBoolean(String name, boolean fallback) {
        String value = value(name);
        return value == null ? fallback : Boolean.parseBoolean(value);
    }
}
