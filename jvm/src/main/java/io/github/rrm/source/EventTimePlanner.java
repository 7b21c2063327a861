package io.github.rrm.source;

import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Where a micro-batch ends when it may read at most {@code limit} records: every partition at one event time T,
 * the largest whose records across the partitions fit the limit, or all records of the earliest unread
 * millisecond should they alone exceed it (a batch never ends inside one millisecond). When the unread records
 * fit, the batch ends at the latest offsets and no record time is looked up.
 *
 * <p>Per partition {@code [start, latest)} and a lookup offset to event time in, end offsets out. A partition's
 * event times do not decrease with its offsets (the order the engine assumes), so the first offset after T is a
 * binary search; T itself is searched between the earliest head time and the earliest time no T past fits, and
 * each partition's bracket of offsets is kept across probes of T, so a plan costs about log2(records) plus the
 * probes of T lookups per partition. Plain Java: no Spark, no Kafka ({@code docs/design/batch-invariance.md}).
 */
public final class EventTimePlanner {
  private EventTimePlanner() {}

  /** The event time of the record at {@code offset} of partition {@code partition} (an index of the plan). */
  @FunctionalInterface
  public interface RecordTimes {
    long eventTime(int partition, long offset);
  }

  /** End offsets for partitions {@code [start[p], latest[p])}, at most {@code limit} records (0: no limit). */
  public static long[] plan(long[] start, long[] latest, long limit, RecordTimes lookup) {
    int n = start.length;
    long total = 0;
    for (int p = 0; p < n; p++) {
      total += Math.max(0, latest[p] - start[p]);
    }
    long[] ends = latest.clone();
    if (limit <= 0 || total <= limit) {
      return ends;
    }
    RecordTimes times = memo(lookup);
    long lo = Long.MAX_VALUE;
    long capHi = Long.MAX_VALUE;
    long lastHi = Long.MIN_VALUE;
    for (int p = 0; p < n; p++) {
      if (latest[p] <= start[p]) {
        continue;
      }
      lo = Math.min(lo, times.eventTime(p, start[p]));
      if (latest[p] - start[p] > limit) {
        capHi = Math.min(capHi, times.eventTime(p, start[p] + limit));
      } else {
        lastHi = Math.max(lastHi, times.eventTime(p, latest[p] - 1));
      }
    }
    if (lo == Long.MAX_VALUE) {
      return ends;  // no partition holds a record with a time (only offsets without records)
    }
    // Invariant: the records at or before tLo fit the limit, those at or before tHi do not.
    long tLo = lo - 1;
    long tHi = Math.max(lo, capHi != Long.MAX_VALUE ? capHi : lastHi);
    long[] loOff = new long[n];
    long[] hiOff = new long[n];
    for (int p = 0; p < n; p++) {
      loOff[p] = start[p];
      hiOff[p] = Math.max(start[p], latest[p]);  // a partition with nothing unread: [start, start)
    }
    long[] probe = new long[n];
    while (tHi - tLo > 1) {
      long t = tLo + (tHi - tLo) / 2;
      long count = 0;
      for (int p = 0; p < n; p++) {
        probe[p] = firstAfter(times, p, t, loOff[p], hiOff[p]);
        count += probe[p] - start[p];
      }
      if (count <= limit) {
        tLo = t;
        System.arraycopy(probe, 0, loOff, 0, n);
      } else {
        tHi = t;
        System.arraycopy(probe, 0, hiOff, 0, n);
      }
    }
    if (tLo < lo) {
      // The earliest millisecond alone exceeds the limit: all of it, never part of it.
      for (int p = 0; p < n; p++) {
        ends[p] = latest[p] <= start[p] ? latest[p] : firstAfter(times, p, lo, loOff[p], hiOff[p]);
      }
      return ends;
    }
    for (int p = 0; p < n; p++) {
      ends[p] = latest[p] <= start[p] ? latest[p] : loOff[p];
    }
    return ends;
  }

  /** The first offset in {@code [from, to)} whose record is after {@code t}, else {@code to}. */
  private static long firstAfter(RecordTimes times, int p, long t, long from, long to) {
    long a = from;
    long b = to;
    while (a < b) {
      long m = a + (b - a) / 2;
      if (times.eventTime(p, m) > t) {
        b = m;
      } else {
        a = m + 1;
      }
    }
    return a;
  }

  private static RecordTimes memo(RecordTimes lookup) {
    Map<Long, Map<Long, Long>> seen = new HashMap<>();
    return (p, offset) -> seen.computeIfAbsent((long) p, k -> new HashMap<>())
        .computeIfAbsent(offset, k -> lookup.eventTime(p, offset));
  }

  /**
   * {@link #plan} over times given as lists, partition {@code p}'s record at offset {@code start[p] + i} at
   * {@code times.get(p).get(i)}: what a caller holding the times already (a check of the planner) passes.
   */
  public static long[] planListed(
      List<? extends Number> start, List<? extends List<? extends Number>> times, long limit) {
    int n = start.size();
    long[] from = new long[n];
    long[] latest = new long[n];
    for (int p = 0; p < n; p++) {
      from[p] = start.get(p).longValue();
      latest[p] = from[p] + times.get(p).size();
    }
    return plan(from, latest, limit, (p, offset) -> times.get(p).get((int) (offset - from[p])).longValue());
  }
}
