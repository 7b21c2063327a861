package io.github.rrm.collector;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.zip.CRC32;

/**
 * Which collector instance of n watches a group: jump consistent hash (Lamping and Veach, 2014) of the CRC-32 of
 * the group name's UTF-8 bytes. The shard depends on the name and n alone, so instances configured as shards 0 to
 * n-1 of n watch every group exactly once whatever their start order or broker lists; going from n to n+1 moves
 * only the groups that now belong to the new shard n (about 1/(n+1) of them), all other groups stay where they were.
 *
 * <p>{@code Shards COUNT...}: for every group name read from standard input (one a line), prints a line with the
 * shard of each COUNT that watches it, then the name, tab-separated ({@code 1<TAB>orders}: the second of COUNT
 * instances polls {@code orders}).
 */
public final class Shards {
  private Shards() {}

  public static void main(String[] args) throws Exception {
    if (args.length == 0) {
      System.err.println("usage: Shards COUNT... < group names");
      System.exit(2);
    }
    int[] counts = new int[args.length];
    for (int i = 0; i < args.length; i++) {
      counts[i] = Integer.parseInt(args[i]);
    }
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    StringBuilder out = new StringBuilder();
    for (String line = in.readLine(); line != null; line = in.readLine()) {
      if (!line.isEmpty()) {
        for (int count : counts) {
          out.append(shardOf(line, count)).append('\t');
        }
        out.append(line).append('\n');
      }
    }
    System.out.write(out.toString().getBytes(StandardCharsets.UTF_8));
    System.out.flush();
  }

  /** The shard of {@code count} (0 to count-1) that watches {@code group}. */
  static int shardOf(String group, int count) {
    CRC32 crc = new CRC32();
    crc.update(group.getBytes(StandardCharsets.UTF_8));
    return jump(crc.getValue(), count);
  }

  /** Jump consistent hash: the bucket of {@code key} among {@code buckets}. */
  static int jump(long key, int buckets) {
    long b = -1;
    long j = 0;
    while (j < buckets) {
      b = j;
      key = key * 2862933555777941757L + 1;
      j = (long) ((b + 1) * ((double) (1L << 31) / (double) ((key >>> 33) + 1)));
    }
    return (int) b;
  }
}
