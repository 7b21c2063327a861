package io.github.rrm.collector;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.function.Consumer;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.remoting.protocol.ResponseCode;
import org.apache.rocketmq.remoting.protocol.body.ClusterInfo;
import org.apache.rocketmq.remoting.protocol.body.ConsumerConnection;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * The per-broker reads of a poll cycle: the master brokers from cluster info (brokers that appear or leave are
 * logged), each master's subscription groups, and each (group, master)'s connection list. Calls to one broker run
 * on that broker's own pool of {@code in_flight_per_broker} threads, so a slow broker holds up only its own calls
 * and no broker gets more than that many at once; a broker that fails with a connect, send or timeout error is
 * marked down for the rest of the cycle, so its remaining groups cost nothing.
 */
final class BrokerPolls {
  private final CollectorConfig config;
  private final DefaultMQAdminExt admin;
  private final Counters counters;
  private final Log log;
  private final ClusterName cluster;
  private final Set<String> knownBrokers = new TreeSet<>();
  private final Map<String, ExecutorService> pools = new ConcurrentHashMap<>();

  /** One broker's answer for one group; {@code connection} null: the broker has no client of the group. */
  record Poll(String group, String broker, long time, ConsumerConnection connection) {}

  BrokerPolls(CollectorConfig config, DefaultMQAdminExt admin, Counters counters, Log log, ClusterName cluster) {
    this.config = config;
    this.cluster = cluster;
    this.admin = admin;
    this.counters = counters;
    this.log = log;
  }

  /**
   * Master address by broker name, from cluster info; null (counted and logged) when the name server fails, empty
   * while the cluster has no name yet (no broker cluster in cluster info and none configured). A name server of
   * several broker clusters without a configured name throws {@link ClusterName.Unresolved}.
   */
  Map<String, String> masters() throws InterruptedException {
    for (int attempt = 1; ; attempt++) {
      ClusterInfo info;
      try {
        counters.rpc("cluster_info");
        info = admin.examineBrokerClusterInfo();
      } catch (InterruptedException e) {
        throw e;
      } catch (Exception e) {
        // A first call also opens the connection, whose set-up time comes off the call's timeout: ask again once.
        if (attempt < 2 && !AdminErrors.isAclDenied(e)) {
          continue;
        }
        counters.problem(AdminErrors.isAclDenied(e) ? "acl_denied" : "nameserver_unreachable");
        log.begin("namesrv", "cluster info from name server " + config.namesrvAddr + AdminErrors.failed(e)
            + " (nothing polled)");
        return null;
      }
      log.end("namesrv", "name server " + config.namesrvAddr + " answers again");
      Map<String, ?> clusters = info.getClusterAddrTable();
      if (!cluster.resolve(clusters == null ? Set.of() : clusters.keySet(), config.namesrvAddr, log)) {
        log.begin("unnamed", "name server " + config.namesrvAddr + " lists no broker cluster yet: nothing polled"
            + " until one registers (or [collector] cluster is set)");
        return Map.of();
      }
      log.end("unnamed", "cluster " + cluster.get() + " named");
      Map<String, String> masters = ClusterAdmin.masters(info);
      track(masters);
      return masters;
    }
  }

  private void track(Map<String, String> masters) {
    for (String name : masters.keySet()) {
      if (knownBrokers.add(name)) {
        log.info("broker " + name + " at " + masters.get(name) + " is in cluster info: polling it");
      }
    }
    for (String name : new ArrayList<>(knownBrokers)) {
      if (!masters.containsKey(name)) {
        knownBrokers.remove(name);
        ExecutorService pool = pools.remove(name);
        if (pool != null) {
          pool.shutdown();
        }
        counters.problem("broker_left");
        log.warn("broker " + name + " left cluster info (no master): no polls published for it until it returns");
      }
    }
  }

  /** Per master that answered, the names in its subscription group table; {@code down} gets the unreachable. */
  Map<String, Collection<String>> subscriptionGroups(Map<String, String> masters, Set<String> down)
      throws InterruptedException {
    Map<String, Future<Collection<String>>> lists = new TreeMap<>();
    for (Map.Entry<String, String> master : masters.entrySet()) {
      lists.put(master.getKey(), pool(master.getKey()).submit(() ->
          subscriptionGroups(master.getKey(), master.getValue(), down)));
    }
    Map<String, Collection<String>> result = new TreeMap<>();
    for (Map.Entry<String, Future<Collection<String>>> list : lists.entrySet()) {
      Collection<String> names = await(list.getValue());
      if (names != null) {
        result.put(list.getKey(), names);
      }
    }
    return result;
  }

  /**
   * Every (group, master) connection list, in group order then broker order; the failed ones left out. Each
   * answer is handed to {@code onAnswer} as it comes, on the polling thread.
   */
  List<Poll> connections(Collection<String> groups, Map<String, String> masters, Set<String> down,
      Consumer<Poll> onAnswer) throws InterruptedException {
    List<Future<Poll>> polls = new ArrayList<>(groups.size() * masters.size());
    for (String group : groups) {
      for (Map.Entry<String, String> master : masters.entrySet()) {
        polls.add(pool(master.getKey()).submit(() -> {
          Poll answer = poll(group, master.getKey(), master.getValue(), down);
          if (answer != null) {
            onAnswer.accept(answer);
          }
          return answer;
        }));
      }
    }
    List<Poll> answers = new ArrayList<>(polls.size());
    for (Future<Poll> poll : polls) {
      Poll answer = await(poll);
      if (answer != null) {
        answers.add(answer);
      }
    }
    return answers;
  }

  void close() {
    pools.values().forEach(ExecutorService::shutdownNow);
  }

  private ExecutorService pool(String broker) {
    return pools.computeIfAbsent(broker, b ->
        Executors.newFixedThreadPool(config.inFlightPerBroker, Collector.daemon("rrm-poll-" + b)));
  }

  private Collection<String> subscriptionGroups(String broker, String addr, Set<String> down) {
    try {
      counters.rpc("subscription_groups");
      Collection<String> names = new ArrayList<>(
          admin.getAllSubscriptionGroup(addr, config.adminTimeoutMs).getSubscriptionGroupTable().keySet());
      log.end("groups:" + broker, "subscription groups of " + broker + " readable again");
      return names;
    } catch (Exception e) {
      if (AdminErrors.isUnreachable(e)) {
        unreachable(broker, addr, down, e);
      } else {
        counters.problem(AdminErrors.isAclDenied(e) ? "acl_denied" : "admin_error");
        log.begin("groups:" + broker, "subscription groups of " + broker + " at " + addr + AdminErrors.failed(e));
      }
      return null;
    }
  }

  private Poll poll(String group, String broker, String addr, Set<String> down) {
    if (down.contains(broker)) {
      return null;
    }
    String key = "group:" + group + "@" + broker;
    try {
      counters.rpc("consumer_connections");
      ConsumerConnection connection = admin.examineConsumerConnectionInfo(group, addr);
      log.end(key, "group " + group + " on " + broker + ": readable again");
      return new Poll(group, broker, System.currentTimeMillis(), connection);
    } catch (MQBrokerException e) {
      if (e.getResponseCode() == ResponseCode.CONSUMER_NOT_ONLINE) {
        counters.problem("group_not_online");
        log.begin(key, "group " + group + " has no connection on " + broker + " (not online): publishing an empty "
            + "connection list");
        return new Poll(group, broker, System.currentTimeMillis(), null);
      }
      counters.problem(AdminErrors.isAclDenied(e) ? "acl_denied" : "admin_error");
      log.begin(key, "connections of group " + group + " on " + broker + AdminErrors.failed(e));
      return null;
    } catch (Exception e) {
      if (AdminErrors.isUnreachable(e)) {
        unreachable(broker, addr, down, e);
      } else {
        counters.problem(AdminErrors.isAclDenied(e) ? "acl_denied" : "admin_error");
        log.begin(key, "connections of group " + group + " on " + broker + AdminErrors.failed(e));
      }
      return null;
    }
  }

  private void unreachable(String broker, String addr, Set<String> down, Exception e) {
    if (down.add(broker)) {
      counters.problem("broker_unreachable");
      log.warn("broker " + broker + " at " + addr + " unreachable, no polls published for it this cycle: "
          + AdminErrors.brief(e));
    }
  }

  private <T> T await(Future<T> future) throws InterruptedException {
    return Collector.await(future, counters, log);
  }
}
