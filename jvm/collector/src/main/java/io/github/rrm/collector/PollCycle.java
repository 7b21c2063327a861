package io.github.rrm.collector;

import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.remoting.protocol.body.Connection;

/**
 * One poll cycle, in order: the master brokers; the watched groups (every master's subscription groups, system
 * groups left out, include/exclude globs and this instance's shard applied); every (group, master)'s connection
 * list; the routes of every subscribed topic (in a broker's table or a client's own subscription set); the running
 * info that is due; then one {@code consumer_connections} event per answer. The consume-progress cycle is handed
 * the masters and groups. Its admin calls: cluster info (a retry at most), one subscription-group call per master,
 * at most groups x masters connection calls, one route call per subscribed topic and at most
 * {@code running_info_per_cycle} running-info calls.
 */
final class PollCycle {
  private final CollectorConfig config;
  private final Counters counters;
  private final BrokerPolls brokers;
  private final Routes routes;
  private final RunningInfo runningInfo;
  private final ConnectionEvents events;
  private final ProgressCycle progress;
  private final EventPublisher publisher;
  /** Per broker, the watched groups of its last subscription group table read: a failed read keeps them. */
  private final Map<String, Set<String>> groupsByBroker = new ConcurrentHashMap<>();

  PollCycle(CollectorConfig config, Counters counters, BrokerPolls brokers, Routes routes, RunningInfo runningInfo,
      ConnectionEvents events, ProgressCycle progress, EventPublisher publisher) {
    this.config = config;
    this.counters = counters;
    this.brokers = brokers;
    this.routes = routes;
    this.runningInfo = runningInfo;
    this.events = events;
    this.progress = progress;
    this.publisher = publisher;
  }

  void run() throws InterruptedException {
    routes.newCycle();
    Map<String, String> masters = brokers.masters();
    if (masters == null) {
      return;
    }
    counters.gauge("rmqcol_brokers", masters.size());

    Set<String> down = ConcurrentHashMap.newKeySet();
    Set<String> groups = new TreeSet<>();
    for (Map.Entry<String, Collection<String>> list : brokers.subscriptionGroups(masters, down).entrySet()) {
      Set<String> watched = new TreeSet<>(list.getValue());
      watched.removeIf(g -> !watched(g));
      groups.addAll(watched);
      groupsByBroker.put(list.getKey(), watched);
    }
    counters.gauge("rmqcol_groups", groups.size());
    // The progress cycle samples every group a master's table had when last read (offline groups stay there).
    groupsByBroker.keySet().retainAll(masters.keySet());
    Set<String> progressGroups = new TreeSet<>(groups);
    groupsByBroker.values().forEach(progressGroups::addAll);
    progress.update(masters, progressGroups);

    // The routes of the topics the answers name are read while the other polls run.
    List<BrokerPolls.Poll> answers = brokers.connections(groups, masters, down, answer -> {
      if (answer.connection() != null) {
        routes.start(answer.connection().getSubscriptionTable().keySet());
      }
    });

    Set<String> topics = new TreeSet<>();
    long now = System.currentTimeMillis();
    Map<String, String> brokerOfClient = new TreeMap<>();
    int channels = 0;
    for (BrokerPolls.Poll answer : answers) {
      if (answer.connection() == null) {
        continue;
      }
      topics.addAll(answer.connection().getSubscriptionTable().keySet());
      for (Connection connection : answer.connection().getConnectionSet()) {
        channels++;
        brokerOfClient.putIfAbsent(RunningInfo.key(answer.group(), connection.getClientId()),
            masters.get(answer.broker()));
      }
    }
    counters.gauge("rmqcol_channels", channels);
    // A topic only some members subscribe comes and goes in the broker's one table per group (each heartbeat
    // overwrites it): the clients' own subscription sets keep its route published.
    for (String client : brokerOfClient.keySet()) {
      String[] parts = client.split("\u0000", 2);
      RunningInfo.ClientView view = runningInfo.view(parts[0], parts[1]);
      List<Map<String, Object>> own = view == null ? null : view.subscriptions;
      if (own != null) {
        own.forEach(item -> topics.add((String) item.get("topic")));
      }
    }
    routes.start(topics);
    routes.awaitAll();
    Set<String> reread = runningInfo.dueRereads(answers, brokerOfClient, routes.takeChanged(), now);
    runningInfo.await(runningInfo.ask(brokerOfClient, now, reread));
    for (BrokerPolls.Poll answer : answers) {
      events.publish(answer);
    }
    runningInfo.forget(now);
    publisher.flush();
  }

  private boolean watched(String group) {
    return !MixAll.isSysConsumerGroup(group) && !MixAll.isPredefinedGroup(group) && config.watches(group);
  }
}
