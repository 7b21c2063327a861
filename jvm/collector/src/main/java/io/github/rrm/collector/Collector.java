package io.github.rrm.collector;

import java.net.InetAddress;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.RPCHook;
import org.apache.rocketmq.remoting.exception.RemotingConnectException;
import org.apache.rocketmq.remoting.exception.RemotingSendRequestException;
import org.apache.rocketmq.remoting.exception.RemotingTimeoutException;
import org.apache.rocketmq.remoting.protocol.ResponseCode;
import org.apache.rocketmq.remoting.protocol.body.Connection;
import org.apache.rocketmq.remoting.protocol.body.ConsumerConnection;
import org.apache.rocketmq.remoting.protocol.body.ConsumerRunningInfo;
import org.apache.rocketmq.remoting.protocol.body.ProcessQueueInfo;
import org.apache.rocketmq.remoting.protocol.heartbeat.SubscriptionData;
import org.apache.rocketmq.remoting.protocol.route.BrokerData;
import org.apache.rocketmq.remoting.protocol.route.QueueData;
import org.apache.rocketmq.remoting.protocol.route.TopicRouteData;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * {@code rebalance-monitor collect}: polls a RocketMQ cluster through RocketMQ's own admin client and publishes
 * the monitor's contract events to Kafka.
 *
 * <p>Each cycle: the master brokers from cluster info; the groups from every master's subscription groups
 * (system groups left out, include/exclude globs applied); per group and per master broker that broker's
 * connection list, published as one {@code consumer_connections} event (an empty list when the broker has no
 * client of the group); the route of every subscribed topic (in a broker's table or a client's own subscription
 * set), published when it changed and periodically; per (group, client id), throttled, the client's running
 * info, asked of a broker the client is connected to: its held queues as {@code reported_assignment} events, its
 * strategy, consume type and own subscriptions carried on its connections, and each held queue's process-queue
 * fields. Beside it, on its own cadence, the consume-progress cycle ({@link ProgressCycle}). Bad input (a broker
 * unreachable, no route, a client that does not answer, ACL denied, Kafka down) is logged and counted; the cycle
 * goes on.
 */
public final class Collector {
  private static final int TOPIC_NOT_EXIST = ResponseCode.TOPIC_NOT_EXIST;

  private final CollectorConfig config;
  private final String collectorId;
  private final Counters counters = new Counters();
  private final Log log = new Log();
  private final DefaultMQAdminExt admin;
  private final EventPublisher publisher;
  private final ExecutorService pool;
  private final ExecutorService runningInfoPool;
  private final Set<String> knownBrokers = new TreeSet<>();
  private final Map<String, String> routeByTopic = new ConcurrentHashMap<>();
  private final Map<String, Long> routePublishedAt = new ConcurrentHashMap<>();
  private final Map<String, ClientView> clients = new ConcurrentHashMap<>();
  /** Per broker, the watched groups of its last subscription group table read: a failed read keeps them. */
  private final Map<String, Set<String>> groupsByBroker = new ConcurrentHashMap<>();
  private final ProgressCycle progress;
  /** Per group, its members (client ids) as the last cycle's polls listed them. */
  private final Map<String, Set<String>> membersByGroup = new HashMap<>();
  /** Topics whose route changed in this cycle (published because their shape differs from the last one read). */
  private final Set<String> changedRoutes = ConcurrentHashMap.newKeySet();
  /** Per group, a re-read of its members' running info after a change: [due time, reads left]. */
  private final Map<String, long[]> rereads = new TreeMap<>();
  private Thread progressThread;
  private volatile boolean running = true;

  /** What a client's running info said, and when it was last asked. */
  private static final class ClientView {
    volatile String strategy;
    volatile String consumeType;
    volatile List<Map<String, Object>> subscriptions;
    volatile long askedAt;
    volatile long seenAt;
    volatile Future<?> inFlight;
  }

  /** One broker's answer for one group. */
  private record Poll(String group, String broker, long time, ConsumerConnection connection) {}

  Collector(CollectorConfig config) throws Exception {
    this.config = config;
    this.collectorId = config.collectorId.isEmpty()
        ? InetAddress.getLocalHost().getHostName() + ":" + ProcessHandle.current().pid() : config.collectorId;
    RPCHook hook = config.accessKey.isEmpty() ? null
        : new AclClientRPCHook(new SessionCredentials(config.accessKey, config.secretKey));
    admin = new DefaultMQAdminExt(hook, config.adminTimeoutMs);
    admin.setNamesrvAddr(config.namesrvAddr);
    admin.setInstanceName("rrm-collector-" + ProcessHandle.current().pid());
    publisher = new EventPublisher(config.producer, counters, log, config.pollIntervalMs);
    pool = Executors.newFixedThreadPool(config.concurrency, daemon("rrm-poll"));
    runningInfoPool = Executors.newFixedThreadPool(config.concurrency, daemon("rrm-running-info"));
    progress = new ProgressCycle(config, admin, counters, log, publisher, collectorId);
  }

  public static void main(String[] args) throws Exception {
    if (args.length != 1) {
      System.err.println("usage: Collector CONFIG.properties");
      System.exit(2);
    }
    Collector collector = new Collector(CollectorConfig.load(Path.of(args[0])));
    CountDownLatch stopped = new CountDownLatch(1);
    Thread main = Thread.currentThread();
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      collector.running = false;
      main.interrupt();
      try {
        stopped.await(15, TimeUnit.SECONDS);
      } catch (InterruptedException ignored) {
        Thread.currentThread().interrupt();
      }
    }));
    try {
      collector.run();
    } finally {
      collector.close();
      stopped.countDown();
    }
  }

  void run() throws Exception {
    admin.start();
    if (config.metricsPort > 0) {
      int port = counters.serve(config.metricsHost, config.metricsPort);
      log.info("metrics on http://" + config.metricsHost + ":" + port + "/metrics");
    }
    log.info("collector " + collectorId + " watching name server " + config.namesrvAddr
        + (config.shardCount > 1 ? " (groups of shard " + config.shardIndex + " of " + config.shardCount + ")" : "")
        + " every " + config.pollIntervalMs + " ms" + (config.progressIntervalMs > 0 ? ", consume progress every "
        + config.progressIntervalMs + " ms" : ""));
    if (config.progressIntervalMs > 0) {
      progressThread = daemon("rrm-progress").newThread(progress::loop);
      progressThread.start();
    }
    long cycles = 0;
    long lastSummary = System.currentTimeMillis();
    while (running) {
      long start = System.currentTimeMillis();
      try {
        cycle();
      } catch (InterruptedException e) {
        break;
      } catch (RuntimeException e) {
        counters.problem("cycle_failed");
        log.warn("poll cycle failed: " + e);
      }
      long end = System.currentTimeMillis();
      counters.inc("rmqcol_cycles_total");
      counters.gauge("rmqcol_cycle_seconds", end - start);
      if (end - start > config.pollIntervalMs) {
        // the next cycle starts at once, late: every view is polled less often than stale_after_ms assumes
        counters.add("rmqcol_cycles_overrun_total", "cycle", "poll");
        log.warn("poll cycle took " + (end - start) + " ms, more than poll_interval_ms " + config.pollIntervalMs
            + ": polls are late (fewer groups per collector, see shard_count, or a longer interval)");
      }
      counters.gauge("rmqcol_last_cycle_timestamp_seconds", end);
      cycles++;
      if (config.maxCycles > 0) {
        log.info("cycle " + cycles + " took " + (end - start) + " ms; " + counters.snapshot());
      }
      if (end - lastSummary >= config.summaryIntervalMs) {
        lastSummary = end;
        log.info("summary: " + counters.snapshot());
      }
      if (config.maxCycles > 0 && cycles >= config.maxCycles) {
        break;
      }
      long sleep = start + config.pollIntervalMs - System.currentTimeMillis();
      if (sleep > 0) {
        try {
          Thread.sleep(sleep);
        } catch (InterruptedException e) {
          break;
        }
      }
    }
  }

  void close() {
    running = false;
    if (progressThread != null) {
      progressThread.interrupt();
    }
    progress.close();
    pool.shutdownNow();
    runningInfoPool.shutdownNow();
    try {
      publisher.close();
    } catch (RuntimeException e) {
      log.warn("closing the Kafka producer: " + e);
    }
    admin.shutdown();
    log.info("stopped; " + counters.snapshot());
    counters.close();
  }

  // -- one cycle ------------------------------------------------------------------------------------------

  void cycle() throws InterruptedException {
    Map<String, String> masters = null;
    for (int attempt = 1; masters == null; attempt++) {
      try {
        counters.rpc("cluster_info");
        masters = ClusterAdmin.masters(admin.examineBrokerClusterInfo());
        log.end("namesrv", "name server " + config.namesrvAddr + " answers again");
      } catch (InterruptedException e) {
        throw e;
      } catch (Exception e) {
        // A first call also opens the connection, whose set-up time comes off the call's timeout: ask again once.
        if (attempt < 2 && !isAclDenied(e)) {
          continue;
        }
        counters.problem(isAclDenied(e) ? "acl_denied" : "nameserver_unreachable");
        log.begin("namesrv", "cluster info from name server " + config.namesrvAddr + failed(e) + " (nothing polled)");
        return;
      }
    }
    trackBrokers(masters);
    counters.gauge("rmqcol_brokers", masters.size());

    Set<String> down = ConcurrentHashMap.newKeySet();
    Set<String> groups = new TreeSet<>();
    Map<String, Future<Collection<String>>> groupLists = new TreeMap<>();
    for (Map.Entry<String, String> master : masters.entrySet()) {
      groupLists.put(master.getKey(), pool.submit(() -> subscriptionGroups(master.getKey(), master.getValue(), down)));
    }
    for (Map.Entry<String, Future<Collection<String>>> list : groupLists.entrySet()) {
      Collection<String> names = await(list.getValue(), null);
      if (names != null) {
        Set<String> watched = new TreeSet<>(names);
        watched.removeIf(g -> !watched(g));
        groups.addAll(watched);
        groupsByBroker.put(list.getKey(), watched);
      }
    }
    counters.gauge("rmqcol_groups", groups.size());
    // The progress cycle samples every group a master's table had when last read (offline groups stay there).
    groupsByBroker.keySet().retainAll(masters.keySet());
    Set<String> progressGroups = new TreeSet<>(groups);
    groupsByBroker.values().forEach(progressGroups::addAll);
    progress.update(masters, progressGroups);

    List<Future<Poll>> polls = new ArrayList<>();
    for (String group : groups) {
      for (Map.Entry<String, String> master : masters.entrySet()) {
        polls.add(pool.submit(() -> poll(group, master.getKey(), master.getValue(), down)));
      }
    }
    List<Poll> answers = new ArrayList<>();
    for (Future<Poll> poll : polls) {
      Poll answer = await(poll, null);
      if (answer != null) {
        answers.add(answer);
      }
    }

    Set<String> topics = new TreeSet<>();
    long now = System.currentTimeMillis();
    Map<String, String> brokerOfClient = new TreeMap<>();
    int channels = 0;
    for (Poll answer : answers) {
      if (answer.connection == null) {
        continue;
      }
      topics.addAll(answer.connection.getSubscriptionTable().keySet());
      for (Connection connection : answer.connection.getConnectionSet()) {
        channels++;
        brokerOfClient.putIfAbsent(answer.group + "\u0000" + connection.getClientId(), masters.get(answer.broker));
      }
    }
    counters.gauge("rmqcol_channels", channels);
    // A topic only some members subscribe comes and goes in the broker's one table per group (each heartbeat
    // overwrites it): the clients' own subscription sets keep its route published.
    for (String client : brokerOfClient.keySet()) {
      ClientView view = clients.get(client);
      List<Map<String, Object>> own = view == null ? null : view.subscriptions;
      if (own != null) {
        own.forEach(item -> topics.add((String) item.get("topic")));
      }
    }
    List<Future<?>> routes = new ArrayList<>();
    for (String topic : topics) {
      routes.add(pool.submit(() -> route(topic)));
    }
    for (Future<?> route : routes) {
      await(route, null);
    }
    List<Asked> asked = askRunningInfo(brokerOfClient, now, dueRereads(answers, brokerOfClient, now));
    // A client asked for the first time gets the whole admin timeout: its first poll then carries its own strategy,
    // consume type and subscriptions, where without them the monitor would take the group's defaults for the new
    // member (a POP consumer as client-side, its own strategy as the default). Later asks refresh what is known and
    // get at most half a poll interval, so a slow client never delays the cycle's polls.
    long started = System.currentTimeMillis();
    long refreshBudget = started + Math.min(config.adminTimeoutMs, config.pollIntervalMs / 2);
    long firstBudget = started + config.adminTimeoutMs;
    for (Asked ask : asked) {
      long left = (ask.first() ? firstBudget : refreshBudget) - System.currentTimeMillis();
      if (left <= 0) {
        continue;
      }
      try {
        ask.future().get(left, TimeUnit.MILLISECONDS);
      } catch (java.util.concurrent.TimeoutException | java.util.concurrent.ExecutionException e) {
        // still running (reported when it ends) or failed (already counted)
      }
    }
    for (Poll answer : answers) {
      publishConnections(answer);
    }
    clients.entrySet().removeIf(e -> now - e.getValue().seenAt > 10 * config.pollIntervalMs
        + config.runningInfoIntervalMs);
    publisher.flush();
  }

  private void trackBrokers(Map<String, String> masters) {
    for (String name : masters.keySet()) {
      if (knownBrokers.add(name)) {
        log.info("broker " + name + " at " + masters.get(name) + " is in cluster info: polling it");
      }
    }
    for (String name : new ArrayList<>(knownBrokers)) {
      if (!masters.containsKey(name)) {
        knownBrokers.remove(name);
        counters.problem("broker_left");
        log.warn("broker " + name + " left cluster info (no master): no polls published for it until it returns");
      }
    }
  }

  private Collection<String> subscriptionGroups(String broker, String addr, Set<String> down) {
    try {
      counters.rpc("subscription_groups");
      Collection<String> names = new ArrayList<>(
          admin.getAllSubscriptionGroup(addr, config.adminTimeoutMs).getSubscriptionGroupTable().keySet());
      log.end("groups:" + broker, "subscription groups of " + broker + " readable again");
      return names;
    } catch (Exception e) {
      if (isUnreachable(e)) {
        brokerUnreachable(broker, addr, down, e);
      } else {
        counters.problem(isAclDenied(e) ? "acl_denied" : "admin_error");
        log.begin("groups:" + broker, "subscription groups of " + broker + " at " + addr + failed(e));
      }
      return null;
    }
  }

  private boolean watched(String group) {
    return !MixAll.isSysConsumerGroup(group) && !MixAll.isPredefinedGroup(group) && config.watches(group);
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
      counters.problem(isAclDenied(e) ? "acl_denied" : "admin_error");
      log.begin(key, "connections of group " + group + " on " + broker + failed(e));
      return null;
    } catch (Exception e) {
      if (isUnreachable(e)) {
        brokerUnreachable(broker, addr, down, e);
      } else {
        counters.problem(isAclDenied(e) ? "acl_denied" : "admin_error");
        log.begin(key, "connections of group " + group + " on " + broker + failed(e));
      }
      return null;
    }
  }

  private void brokerUnreachable(String broker, String addr, Set<String> down, Exception e) {
    if (down.add(broker)) {
      counters.problem("broker_unreachable");
      log.warn("broker " + broker + " at " + addr + " unreachable, no polls published for it this cycle: "
          + brief(e));
    }
  }

  private void route(String topic) {
    Map<String, Object> event = new LinkedHashMap<>();
    event.put("type", "topic_route");
    event.put("schema_version", 1);
    event.put("event_time", System.currentTimeMillis());
    event.put("topic", topic);
    List<Map<String, Object>> brokers = new ArrayList<>();
    try {
      counters.rpc("topic_route");
      TopicRouteData route = admin.examineTopicRouteInfo(topic);
      Set<String> withMaster = new HashSet<>();
      for (BrokerData data : route.getBrokerDatas()) {
        if (data.getBrokerAddrs() != null && data.getBrokerAddrs().containsKey(MixAll.MASTER_ID)) {
          withMaster.add(data.getBrokerName());
        }
      }
      List<QueueData> queues = new ArrayList<>(route.getQueueDatas());
      queues.sort((a, b) -> a.getBrokerName().compareTo(b.getBrokerName()));
      for (QueueData queue : queues) {
        Map<String, Object> broker = new LinkedHashMap<>();
        broker.put("broker", queue.getBrokerName());
        broker.put("read_queue_nums", queue.getReadQueueNums());
        broker.put("write_queue_nums", queue.getWriteQueueNums());
        broker.put("perm", queue.getPerm());
        broker.put("has_master", withMaster.contains(queue.getBrokerName()));
        brokers.add(broker);
      }
      event.put("order_topic_conf", route.getOrderTopicConf());
      log.end("route:" + topic, "topic " + topic + " has a route again");
    } catch (MQClientException e) {
      if (e.getResponseCode() != TOPIC_NOT_EXIST) {
        counters.problem(isAclDenied(e) ? "acl_denied" : "admin_error");
        log.begin("route:" + topic, "route of topic " + topic + failed(e));
        return;
      }
      counters.problem("topic_without_route");
      log.begin("route:" + topic, "topic " + topic + " has no route: publishing an empty route");
    } catch (Exception e) {
      counters.problem(isAclDenied(e) ? "acl_denied" : "nameserver_unreachable");
      log.begin("route:" + topic, "route of topic " + topic + failed(e));
      return;
    }
    event.put("brokers", brokers);
    String shape = Json.object(Map.of("b", brokers, "o", String.valueOf(event.get("order_topic_conf"))));
    long now = System.currentTimeMillis();
    String previous = routeByTopic.put(topic, shape);
    Long publishedAt = routePublishedAt.get(topic);
    if (previous != null && !shape.equals(previous)) {
      changedRoutes.add(topic);
    }
    if (!shape.equals(previous) || publishedAt == null || now - publishedAt >= config.routeRepublishIntervalMs) {
      routePublishedAt.put(topic, now);
      publisher.publish(config.topicRouteTopic, "topic_route", topic, Json.object(event));
    }
  }

  /** A running-info request of this cycle; {@code first}: the client had never been asked. */
  private record Asked(Future<?> future, boolean first) {}

  /**
   * The groups whose members' running info is asked again in this cycle, whatever its interval: a group whose
   * members changed, or one of whose topics' route changed, is re-read {@code running_info_after_change_ms} after
   * this cycle saw the change (the clients have rebalanced by then), and once more the next cycle, so that what
   * each holds is seen twice. Throttled: a further change before the re-read puts it off (a group that keeps
   * changing is re-read once it has been quiet that long), and at most {@code running_info_after_change_groups}
   * groups are re-read per cycle, the others in the next.
   */
  private Set<String> dueRereads(List<Poll> answers, Map<String, String> brokerOfClient, long now) {
    Map<String, Set<String>> members = new HashMap<>();
    Map<String, Set<String>> topics = new HashMap<>();
    for (Poll answer : answers) {
      if (answer.connection != null) {
        topics.computeIfAbsent(answer.group, g -> new TreeSet<>())
            .addAll(answer.connection.getSubscriptionTable().keySet());
      }
    }
    for (String client : brokerOfClient.keySet()) {
      String[] parts = client.split("\u0000", 2);
      members.computeIfAbsent(parts[0], g -> new TreeSet<>()).add(parts[1]);
    }
    Set<String> routes = new HashSet<>(changedRoutes);
    changedRoutes.removeAll(routes);
    if (config.runningInfoIntervalMs == 0 || config.runningInfoAfterChangeMs == 0) {
      return Set.of();
    }
    for (Map.Entry<String, Set<String>> group : members.entrySet()) {
      Set<String> before = membersByGroup.get(group.getKey());
      boolean changed = before != null && !before.equals(group.getValue());
      for (String topic : topics.getOrDefault(group.getKey(), Set.of())) {
        changed |= routes.contains(topic);
      }
      if (changed) {
        rereads.put(group.getKey(), new long[] {now + config.runningInfoAfterChangeMs, 2});
      }
    }
    membersByGroup.clear();
    membersByGroup.putAll(members);
    rereads.keySet().retainAll(members.keySet());
    Set<String> due = new TreeSet<>();
    for (Map.Entry<String, long[]> reread : rereads.entrySet()) {
      if (reread.getValue()[0] > now) {
        continue;
      }
      if (due.size() >= config.runningInfoAfterChangeGroups) {
        counters.inc("rmqcol_running_info_rereads_deferred_total");
        continue;
      }
      due.add(reread.getKey());
      reread.getValue()[0] = now + config.pollIntervalMs;
      reread.getValue()[1]--;
    }
    rereads.values().removeIf(reread -> reread[1] <= 0);
    return due;
  }

  private List<Asked> askRunningInfo(Map<String, String> brokerOfClient, long now, Set<String> reread) {
    List<Asked> asked = new ArrayList<>();
    for (Map.Entry<String, String> entry : brokerOfClient.entrySet()) {
      ClientView view = clients.computeIfAbsent(entry.getKey(), k -> new ClientView());
      view.seenAt = now;
      if (config.runningInfoIntervalMs == 0) {
        continue;
      }
      boolean due = view.askedAt == 0 || now - view.askedAt >= config.runningInfoIntervalMs;
      boolean again = !due && reread.contains(entry.getKey().substring(0, entry.getKey().indexOf('\u0000')));
      if (!(due || again) || (view.inFlight != null && !view.inFlight.isDone())) {
        continue;
      }
      if (again) {
        counters.inc("rmqcol_running_info_rereads_total");
      }
      boolean first = view.askedAt == 0;
      view.askedAt = now;
      String[] parts = entry.getKey().split("\u0000", 2);
      view.inFlight = runningInfoPool.submit(() -> runningInfo(parts[0], parts[1], entry.getValue(), view));
      asked.add(new Asked(view.inFlight, first));
    }
    return asked;
  }

  private void runningInfo(String group, String clientId, String brokerAddr, ClientView view) {
    String key = "running:" + group + "/" + clientId;
    ConsumerRunningInfo info;
    try {
      counters.rpc("running_info");
      info = admin.getDefaultMQAdminExtImpl().getMqClientInstance().getMQClientAPIImpl()
          .getConsumerRunningInfo(brokerAddr, group, clientId, false, config.adminTimeoutMs);
    } catch (Exception e) {
      boolean timeout = e instanceof RemotingTimeoutException || String.valueOf(e.getMessage()).contains("timeout");
      counters.problem(isAclDenied(e) ? "acl_denied" : timeout ? "running_info_timeout" : "running_info_failed");
      log.begin(key, "running info of client " + clientId + " (group " + group + ") via " + brokerAddr + failed(e));
      return;
    }
    if (info == null) {
      counters.problem("running_info_failed");
      log.begin(key, "running info of client " + clientId + " (group " + group + ") was empty");
      return;
    }
    log.end(key, "running info of client " + clientId + " (group " + group + ") readable again");
    long time = System.currentTimeMillis();
    view.strategy = Strategies.nameOf(info.getProperties().getProperty("allocateMessageQueueStrategy"));
    view.consumeType = consumeType(info);
    List<Map<String, Object>> own = new ArrayList<>();
    Set<String> topics = new TreeSet<>();
    for (SubscriptionData data : info.getSubscriptionSet()) {
      own.add(subscription(data));
      topics.add(data.getTopic());
    }
    view.subscriptions = own;
    Map<String, List<Map<String, Object>>> queuesByTopic = new TreeMap<>();
    for (Map.Entry<MessageQueue, ProcessQueueInfo> held : info.getMqTable().entrySet()) {
      MessageQueue queue = held.getKey();
      topics.add(queue.getTopic());
      if (held.getValue().isDroped()) {
        continue;
      }
      Map<String, Object> item = new LinkedHashMap<>();
      item.put("broker", queue.getBrokerName());
      item.put("queue_id", queue.getQueueId());
      item.putAll(processQueueFields(held.getValue()));
      queuesByTopic.computeIfAbsent(queue.getTopic(), t -> new ArrayList<>()).add(item);
    }
    boolean orderly = "true".equals(info.getProperties().getProperty(ConsumerRunningInfo.PROP_CONSUME_ORDERLY));
    for (String topic : topics) {
      Map<String, Object> event = new LinkedHashMap<>();
      event.put("type", "reported_assignment");
      event.put("schema_version", 1);
      event.put("event_time", time);
      event.put("group", group);
      event.put("client_id", clientId);
      event.put("topic", topic);
      event.put("consume_orderly", orderly);
      List<Map<String, Object>> queues = queuesByTopic.getOrDefault(topic, List.of());
      event.put("queues", queues);
      String json = Json.object(event);
      if (json.getBytes(java.nio.charset.StandardCharsets.UTF_8).length >= config.maxEventBytes) {
        // An assignment is one event (it replaces the client's last): too large with the process-queue fields,
        // it goes without them rather than not at all.
        counters.problem("process_queue_fields_dropped");
        log.warnEvery("pq-fields", "reported assignment of client " + clientId + " (group " + group + ", topic "
            + topic + ", " + queues.size() + " queues) too large with its process-queue fields: sent without them");
        List<Map<String, Object>> bare = new ArrayList<>();
        for (Map<String, Object> queue : queues) {
          bare.add(Map.of("broker", queue.get("broker"), "queue_id", queue.get("queue_id")));
        }
        event.put("queues", bare);
        json = Json.object(event);
      }
      publisher.publish(config.reportedAssignmentTopic, "reported_assignment", group, json);
    }
  }

  private void publishConnections(Poll answer) {
    Map<String, Object> event = new LinkedHashMap<>();
    event.put("type", "consumer_connections");
    event.put("schema_version", 1);
    event.put("event_time", answer.time);
    event.put("broker", answer.broker);
    event.put("group", answer.group);
    event.put("stale_after_ms", config.staleAfterMs);
    event.put("collector", collectorId);
    List<Map<String, Object>> subscriptions = new ArrayList<>();
    List<Map<String, Object>> connections = new ArrayList<>();
    if (answer.connection != null) {
      event.put("message_model", name(answer.connection.getMessageModel()));
      event.put("consume_type", name(answer.connection.getConsumeType()));
      for (SubscriptionData data : new TreeMap<>(answer.connection.getSubscriptionTable()).values()) {
        subscriptions.add(subscription(data));
      }
      List<Connection> sorted = new ArrayList<>(answer.connection.getConnectionSet());
      sorted.sort((a, b) -> (a.getClientId() + a.getClientAddr()).compareTo(b.getClientId() + b.getClientAddr()));
      for (Connection connection : sorted) {
        Map<String, Object> item = new LinkedHashMap<>();
        item.put("channel", connection.getClientAddr());
        item.put("client_id", connection.getClientId());
        item.put("language", name(connection.getLanguage()));
        item.put("client_version", String.valueOf(connection.getVersion()));
        ClientView view = clients.get(answer.group + "\u0000" + connection.getClientId());
        if (view != null) {
          item.put("allocate_strategy", view.strategy);
          item.put("consume_type", view.consumeType);
          item.put("subscriptions", view.subscriptions);
        }
        connections.add(item);
      }
    }
    event.put("subscriptions", subscriptions);
    event.put("connections", connections);
    publisher.publish(config.connectionsTopic, "consumer_connections", answer.group, Json.object(event));
  }

  // -- helpers --------------------------------------------------------------------------------------------

  /**
   * The client's own consume type: {@code CONSUME_POP} when the broker assigns its queues, that is when it pops
   * (its {@code mqPopTable} has queues) or when it asks the broker for them ({@code clientRebalance=false} on a
   * concurrently consuming CLUSTERING push consumer, 5.x: {@code QUERY_ASSIGNMENT}, answered by POP or PULL as
   * the broker has the group's mode). Otherwise null: the broker's consume type for the group stands.
   */
  static String consumeType(ConsumerRunningInfo info) {
    if (info.getMqPopTable() != null && !info.getMqPopTable().isEmpty()) {
      return "CONSUME_POP";
    }
    java.util.Properties properties = info.getProperties();
    boolean askBroker = "false".equals(properties.getProperty("clientRebalance"))
        && !"true".equals(properties.getProperty(ConsumerRunningInfo.PROP_CONSUME_ORDERLY))
        && !"BROADCASTING".equals(properties.getProperty("messageModel"));
    return askBroker ? "CONSUME_POP" : null;
  }

  /** A held queue's {@code ProcessQueueInfo} as the contract's optional fields (a value outside it left out). */
  static Map<String, Object> processQueueFields(ProcessQueueInfo info) {
    Map<String, Object> item = new LinkedHashMap<>();
    item.put("commit_offset", Math.max(-1, info.getCommitOffset()));
    item.put("cached_msg_count", Math.max(0, info.getCachedMsgCount()));
    item.put("cached_msg_size_mib", Math.max(0, info.getCachedMsgSizeInMiB()));
    item.put("cached_msg_min_offset", info.getCachedMsgMinOffset() >= 0 ? info.getCachedMsgMinOffset() : null);
    item.put("cached_msg_max_offset", info.getCachedMsgMaxOffset() >= 0 ? info.getCachedMsgMaxOffset() : null);
    item.put("locked", info.isLocked());
    item.put("last_lock_timestamp", info.getLastLockTimestamp() >= 0 ? info.getLastLockTimestamp() : null);
    item.put("last_pull_timestamp", info.getLastPullTimestamp() >= 0 ? info.getLastPullTimestamp() : null);
    item.put("last_consume_timestamp", info.getLastConsumeTimestamp() >= 0 ? info.getLastConsumeTimestamp() : null);
    return item;
  }

  private static Map<String, Object> subscription(SubscriptionData data) {
    Map<String, Object> item = new LinkedHashMap<>();
    item.put("topic", data.getTopic());
    item.put("expression", data.getSubString());
    item.put("sub_version", data.getSubVersion());
    return item;
  }

  private static String name(Enum<?> value) {
    return value == null ? null : value.name();
  }

  private static boolean isUnreachable(Throwable e) {
    for (Throwable t = e; t != null; t = t.getCause()) {
      if (t instanceof RemotingConnectException || t instanceof RemotingTimeoutException
          || t instanceof RemotingSendRequestException) {
        return true;
      }
    }
    return false;
  }

  static boolean isAclDenied(Throwable e) {
    int code = e instanceof MQBrokerException b ? b.getResponseCode()
        : e instanceof MQClientException c ? c.getResponseCode() : -1;
    String text = String.valueOf(e.getMessage()).toLowerCase();
    // 5.x answers NO_PERMISSION; a 4.9.x broker (ACL 1) answers SYSTEM_ERROR with its AclException's text.
    return code == ResponseCode.NO_PERMISSION || text.contains("no permission") || text.contains("access denied")
        || text.contains("aclexception");
  }

  /** The end of a log line for a failed call: a refusal by access control says so, and what to check. */
  static String failed(Throwable e) {
    return isAclDenied(e)
        ? " refused by access control (check the collector's access_key and secret_key and the account's "
            + "permissions): " + brief(e)
        : " failed: " + brief(e);
  }

  static String brief(Throwable e) {
    String message = e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
    message = message.split("\n")[0];
    return e.getClass().getSimpleName() + ": " + (message.length() > 300 ? message.substring(0, 300) : message);
  }

  private <T> T await(Future<T> future, T fallback) throws InterruptedException {
    try {
      return future.get();
    } catch (java.util.concurrent.ExecutionException e) {
      counters.problem("cycle_failed");
      log.warnEvery("task", "a poll task failed: " + e.getCause());
      return fallback;
    }
  }

  static java.util.concurrent.ThreadFactory daemon(String name) {
    return runnable -> {
      Thread thread = new Thread(runnable, name);
      thread.setDaemon(true);
      return thread;
    };
  }
}
