package io.github.rrm.collector;

import java.time.Instant;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The collector's log lines on standard error, one per line with time and level. A condition that repeats every
 * cycle (a group without consumers, a broker down) is logged when it starts and when it ends, not every cycle;
 * counters carry every occurrence.
 */
final class Log {
  private final ConcurrentHashMap<String, Long> lastByKey = new ConcurrentHashMap<>();
  private final ConcurrentHashMap<String, String> ongoing = new ConcurrentHashMap<>();

  void info(String message) {
    line("INFO", message);
  }

  void warn(String message) {
    line("WARN", message);
  }

  void error(String message) {
    line("ERROR", message);
  }

  /** At most one line a minute per key. */
  void warnEvery(String key, String message) {
    long now = System.currentTimeMillis();
    Long last = lastByKey.get(key);
    if (last == null || now - last >= 60_000) {
      lastByKey.put(key, now);
      warn(message);
    }
  }

  /** A condition of {@code key} holds now: logged when it starts or its text changes. */
  void begin(String key, String message) {
    String previous = ongoing.put(key, message);
    if (!message.equals(previous)) {
      warn(message);
    }
  }

  /** The condition of {@code key} no longer holds: logged once if it did. */
  void end(String key, String message) {
    if (ongoing.remove(key) != null) {
      info(message);
    }
  }

  private static synchronized void line(String level, String message) {
    System.err.println(Instant.now() + " " + level + " collector: " + message);
  }
}
