package io.github.rrm.collector;

import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;

/**
 * The cluster every event names ({@code schema_version} 2, field {@code cluster}): {@code [collector] cluster} when
 * set, else the broker cluster name of the name server's cluster info, taken from its first answer that names one
 * and kept for the process's life. A name server holding several broker clusters gives no default: a group's and a
 * topic's queues may span them (the clients rebalance over every broker of a route), so none of their names is the
 * cluster the collector watches, and a name joined from them would change, and split every row, when one is added.
 * The collector then stops with a one-line error naming the option ({@link Unresolved}).
 */
final class ClusterName {
  static final int SCHEMA_VERSION = 2;
  private volatile String name;
  private boolean defaulted;

  /** No default can be taken: the process stops (exit code {@link #EXIT_CODE}). */
  static final class Unresolved extends RuntimeException {
    Unresolved(String message) {
      super(message);
    }
  }

  /** The collector's exit code when its cluster cannot be named (a configuration error, not restarted). */
  static final int EXIT_CODE = 78;

  ClusterName(String configured) {
    name = configured == null || configured.isBlank() ? null : configured.trim();
  }

  /** The name, or null until the first cluster info that names a broker cluster. */
  String get() {
    return name;
  }

  /**
   * Takes the default from cluster info's broker cluster names, unless named already; true once named. None (no
   * broker registered yet): not named yet. Several: {@link Unresolved}.
   */
  boolean resolve(Collection<String> brokerClusters, String namesrv, Log log) {
    if (name != null) {
      if (defaulted && brokerClusters != null && brokerClusters.size() > 1) {
        log.warnEvery("clusters", "name server " + namesrv + " now holds broker clusters "
            + String.join(", ", new TreeSet<>(brokerClusters)) + ": events still name cluster " + name
            + ", a restart will refuse to start until [collector] cluster is set");
      }
      return true;
    }
    String found = defaultOf(brokerClusters, namesrv);
    if (found != null) {
      name = found;
      defaulted = true;
      log.info("cluster " + found + " (the broker cluster name in cluster info; [collector] cluster sets another)");
    }
    return found != null;
  }

  /** The default of cluster info naming {@code brokerClusters}: its one name, null for none; several throw. */
  static String defaultOf(Collection<String> brokerClusters, String namesrv) {
    TreeSet<String> names = new TreeSet<>(brokerClusters == null ? List.of() : brokerClusters);
    if (names.size() > 1) {
      throw new Unresolved("name server " + namesrv + " holds broker clusters " + String.join(", ", names)
          + ": set [collector] cluster to the name this collector's events should carry");
    }
    return names.isEmpty() ? null : names.first();
  }

  /** A new event of {@code type}: its type, schema version and cluster, in that order. */
  Map<String, Object> event(String type) {
    Map<String, Object> event = new LinkedHashMap<>();
    event.put("type", type);
    event.put("schema_version", SCHEMA_VERSION);
    event.put("cluster", name);
    return event;
  }

  /**
   * {@code ClusterName NAMESRV [BROKER_CLUSTER...]}: prints the default the collector takes from cluster info
   * naming those broker clusters ({@code null} for none), or the error it stops with (exit code 1).
   */
  public static void main(String[] args) {
    try {
      String found = defaultOf(List.of(args).subList(1, args.length), args[0]);
      System.out.println(found == null ? "null" : Json.object(Map.of("cluster", found)));
    } catch (Unresolved e) {
      System.out.println(e.getMessage());
      System.exit(1);
    }
  }
}
