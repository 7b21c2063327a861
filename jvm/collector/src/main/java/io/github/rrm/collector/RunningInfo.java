package io.github.rrm.collector;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.exception.RemotingTimeoutException;
import org.apache.rocketmq.remoting.protocol.body.ConsumerRunningInfo;
import org.apache.rocketmq.remoting.protocol.body.ProcessQueueInfo;
import org.apache.rocketmq.remoting.protocol.heartbeat.SubscriptionData;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * Running-info reads: per (group, client id), asked of a broker the client is connected to, on
 * {@code concurrency} threads of its own, when its interval is due or its group is re-read after a change, at most
 * {@code running_info_per_cycle} calls a cycle (first-time clients first, then the longest unread; the others wait,
 * counted). What a client said (strategy, consume type, own subscriptions) is kept for its connections' events;
 * its held queues are published as {@code reported_assignment} events.
 */
final class RunningInfo {
  private final CollectorConfig config;
  private final DefaultMQAdminExt admin;
  private final Counters counters;
  private final Log log;
  private final EventPublisher publisher;
  private final ClusterName cluster;
  private final ExecutorService pool;
  private final Map<String, ClientView> clients = new ConcurrentHashMap<>();
  /** Per group, its members (client ids) as the last cycle's polls listed them. */
  private final Map<String, Set<String>> membersByGroup = new HashMap<>();
  /** Per group, a re-read of its members' running info after a change: [due time, reads left]. */
  private final Map<String, long[]> rereads = new TreeMap<>();

  /** What a client's running info said, and when it was last asked. */
  static final class ClientView {
    volatile String strategy;
    volatile String consumeType;
    volatile List<Map<String, Object>> subscriptions;
    volatile long askedAt;
    volatile long seenAt;
    volatile Future<?> inFlight;
  }

  /** A running-info request of this cycle; {@code first}: the client had never been asked. */
  record Asked(Future<?> future, boolean first) {}

  RunningInfo(CollectorConfig config, DefaultMQAdminExt admin, Counters counters, Log log, EventPublisher publisher,
      ClusterName cluster) {
    this.cluster = cluster;
    this.config = config;
    this.admin = admin;
    this.counters = counters;
    this.log = log;
    this.publisher = publisher;
    pool = Executors.newFixedThreadPool(config.concurrency, Collector.daemon("rrm-running-info"));
  }

  /** What the client's running info said when last read; null before the first answer. */
  ClientView view(String group, String clientId) {
    return clients.get(key(group, clientId));
  }

  static String key(String group, String clientId) {
    return group + "\u0000" + clientId;
  }

  /**
   * The groups whose members' running info is asked again in this cycle, whatever its interval: a group whose
   * members changed, or one of whose topics' route changed, is re-read {@code running_info_after_change_ms} after
   * this cycle saw the change (the clients have rebalanced by then), and once more the next cycle, so that what
   * each holds is seen twice. Throttled: a further change before the re-read puts it off (a group that keeps
   * changing is re-read once it has been quiet that long), and at most {@code running_info_after_change_groups}
   * groups are re-read per cycle, the others in the next.
   */
  Set<String> dueRereads(List<BrokerPolls.Poll> answers, Map<String, String> brokerOfClient, Set<String> routes,
      long now) {
    Map<String, Set<String>> members = new HashMap<>();
    Map<String, Set<String>> topics = new HashMap<>();
    for (BrokerPolls.Poll answer : answers) {
      if (answer.connection() != null) {
        topics.computeIfAbsent(answer.group(), g -> new TreeSet<>())
            .addAll(answer.connection().getSubscriptionTable().keySet());
      }
    }
    for (String client : brokerOfClient.keySet()) {
      String[] parts = client.split("\u0000", 2);
      members.computeIfAbsent(parts[0], g -> new TreeSet<>()).add(parts[1]);
    }
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

  /**
   * Asks the running info of the clients that are due (by interval, or their group in {@code reread}), at most
   * {@code running_info_per_cycle} of them: those never asked first, then the longest unasked; the rest are
   * counted in {@code rmqcol_running_info_deferred_total} and stay due for the next cycle.
   */
  List<Asked> ask(Map<String, String> brokerOfClient, long now, Set<String> reread) {
    record Due(String client, String brokerAddr, ClientView view, boolean again) {}
    List<Due> due = new ArrayList<>();
    for (Map.Entry<String, String> entry : brokerOfClient.entrySet()) {
      ClientView view = clients.computeIfAbsent(entry.getKey(), k -> new ClientView());
      view.seenAt = now;
      if (config.runningInfoIntervalMs == 0) {
        continue;
      }
      boolean interval = view.askedAt == 0 || now - view.askedAt >= config.runningInfoIntervalMs;
      boolean again = !interval && reread.contains(entry.getKey().substring(0, entry.getKey().indexOf('\u0000')));
      if (!(interval || again) || (view.inFlight != null && !view.inFlight.isDone())) {
        continue;
      }
      due.add(new Due(entry.getKey(), entry.getValue(), view, again));
    }
    if (due.size() > config.runningInfoPerCycle) {
      due.sort(Comparator.comparingLong((Due d) -> d.view.askedAt));  // never asked (0) first, then the oldest
      for (int i = config.runningInfoPerCycle; i < due.size(); i++) {
        counters.inc("rmqcol_running_info_deferred_total");
      }
      due = due.subList(0, config.runningInfoPerCycle);
    }
    List<Asked> asked = new ArrayList<>();
    for (Due d : due) {
      if (d.again) {
        counters.inc("rmqcol_running_info_rereads_total");
      }
      boolean first = d.view.askedAt == 0;
      d.view.askedAt = now;
      String[] parts = d.client.split("\u0000", 2);
      ClientView view = d.view;
      view.inFlight = pool.submit(() -> read(parts[0], parts[1], d.brokerAddr, view));
      asked.add(new Asked(view.inFlight, first));
    }
    return asked;
  }

  /**
   * Waits for this cycle's requests: a client asked for the first time gets the whole admin timeout (its first
   * poll then carries its own strategy, consume type and subscriptions, where without them the monitor would take
   * the group's defaults for the new member: a POP consumer as client-side, its own strategy as the default);
   * later asks refresh what is known and get at most half a poll interval, so a slow client never delays the
   * cycle's polls.
   */
  void await(List<Asked> asked) throws InterruptedException {
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
      } catch (TimeoutException | ExecutionException e) {
        // still running (reported when it ends) or failed (already counted)
      }
    }
  }

  /** Forgets the clients no poll has listed for ten poll intervals and a running-info interval. */
  void forget(long now) {
    clients.entrySet().removeIf(e -> now - e.getValue().seenAt > 10 * config.pollIntervalMs
        + config.runningInfoIntervalMs);
  }

  void close() {
    pool.shutdownNow();
  }

  private void read(String group, String clientId, String brokerAddr, ClientView view) {
    String key = "running:" + group + "/" + clientId;
    ConsumerRunningInfo info;
    try {
      counters.rpc("running_info");
      info = admin.getDefaultMQAdminExtImpl().getMqClientInstance().getMQClientAPIImpl()
          .getConsumerRunningInfo(brokerAddr, group, clientId, false, config.adminTimeoutMs);
    } catch (Exception e) {
      boolean timeout = e instanceof RemotingTimeoutException || String.valueOf(e.getMessage()).contains("timeout");
      counters.problem(AdminErrors.isAclDenied(e) ? "acl_denied" : timeout ? "running_info_timeout"
          : "running_info_failed");
      log.begin(key, "running info of client " + clientId + " (group " + group + ") via " + brokerAddr
          + AdminErrors.failed(e));
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
      own.add(ConnectionEvents.subscription(data));
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
      publishAssignment(group, clientId, topic, time, orderly, queuesByTopic.getOrDefault(topic, List.of()));
    }
  }

  private void publishAssignment(String group, String clientId, String topic, long time, boolean orderly,
      List<Map<String, Object>> queues) {
    Map<String, Object> event = cluster.event("reported_assignment");
    event.put("event_time", time);
    event.put("group", group);
    event.put("client_id", clientId);
    event.put("topic", topic);
    event.put("consume_orderly", orderly);
    event.put("queues", queues);
    String json = Json.object(event);
    if (json.getBytes(StandardCharsets.UTF_8).length >= config.maxEventBytes) {
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
    publisher.publish(config.reportedAssignmentTopic, "reported_assignment", group, time, json);
  }

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
    Properties properties = info.getProperties();
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
}
