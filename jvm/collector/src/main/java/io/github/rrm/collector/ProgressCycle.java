package io.github.rrm.collector;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
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
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicReference;
import java.util.regex.Pattern;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.exception.RemotingConnectException;
import org.apache.rocketmq.remoting.exception.RemotingSendRequestException;
import org.apache.rocketmq.remoting.protocol.admin.ConsumeStats;
import org.apache.rocketmq.remoting.protocol.admin.OffsetWrapper;
import org.apache.rocketmq.remoting.protocol.admin.TopicOffset;
import org.apache.rocketmq.remoting.protocol.admin.TopicStatsTable;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * The consume-progress cycle, on its own cadence beside the membership cycle: per watched group (offline ones
 * included: they come from the brokers' subscription group tables) and per master broker, that broker's consume
 * stats ({@code GET_CONSUME_STATS} asked of that broker alone, no topic: every topic of the group on it), published
 * as {@code consume_progress} events. At most one call per (group, broker) per cycle, a bounded number in flight per
 * broker, the admin timeout per call; a broker that fails gives an event with {@code error} and no queues. Every
 * {@code minOffsetEvery}-th cycle the queues' min offsets are read too, one topic-stats call per (topic, broker).
 */
final class ProgressCycle {
  private static final Pattern NAME = Pattern.compile("^[%|a-zA-Z0-9_-]+$");
  private static final int MAX_QUEUES_PER_EVENT = 2000;
  /** A broker that left cluster info is reported (error events) for this many cycles, then forgotten. */
  private static final int REMEMBER_LEFT_BROKERS_CYCLES = 10;

  private final CollectorConfig config;
  private final DefaultMQAdminExt admin;
  private final Counters counters;
  private final Log log;
  private final EventPublisher publisher;
  private final String collectorId;
  private final ClusterName cluster;
  private final Map<String, ExecutorService> brokerPools = new ConcurrentHashMap<>();
  private final Map<String, Boolean> pullOffsetByAddr = new ConcurrentHashMap<>();
  private final Map<String, String> addrByBroker = new TreeMap<>();
  private final Map<String, Long> brokerSeenAtCycle = new HashMap<>();
  private volatile Target target;
  private long cycles;

  /** What the membership cycle last saw: master addresses by broker name, and the watched groups. */
  record Target(Map<String, String> masters, Set<String> groups) {}

  /** One (group, broker) sample: the broker's answer, or why there is none. */
  private record Sample(String group, String broker, long time, ConsumeStats stats, String error) {}

  /** A call submitted for (group, broker). */
  private record Asked(String group, String broker, Future<Sample> future) {}

  /** A broker's state within one cycle: why it is considered down (then no more calls to it), if it is. */
  private static final class BrokerRun {
    final String name;
    final String addr;
    final AtomicReference<String> down = new AtomicReference<>();
    volatile Boolean pullOffset;

    BrokerRun(String name, String addr) {
      this.name = name;
      this.addr = addr;
    }
  }

  ProgressCycle(CollectorConfig config, DefaultMQAdminExt admin, Counters counters, Log log, EventPublisher publisher,
      String collectorId, ClusterName cluster) {
    this.cluster = cluster;
    this.config = config;
    this.admin = admin;
    this.counters = counters;
    this.log = log;
    this.publisher = publisher;
    this.collectorId = collectorId;
  }

  void update(Map<String, String> masters, Set<String> groups) {
    target = new Target(Map.copyOf(masters), Set.copyOf(groups));
  }

  /** Runs cycles every {@code progressIntervalMs} until interrupted; waits for the membership cycle's first view. */
  void loop() {
    try {
      while (target == null) {
        Thread.sleep(200);
      }
      while (!Thread.currentThread().isInterrupted()) {
        long start = System.currentTimeMillis();
        try {
          cycle(start);
        } catch (InterruptedException e) {
          return;
        } catch (RuntimeException e) {
          counters.problem("cycle_failed");
          log.warn("progress cycle failed: " + e);
        }
        long sleep = start + config.progressIntervalMs - System.currentTimeMillis();
        if (sleep > 0) {
          Thread.sleep(sleep);
        }
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  void close() {
    brokerPools.values().forEach(ExecutorService::shutdownNow);
  }

  void cycle(long start) throws InterruptedException {
    Target now = target;
    cycles++;
    boolean minOffsets = config.progressMinOffsetEvery > 0 && (cycles - 1) % config.progressMinOffsetEvery == 0;
    // Calls not started by then are not made: their samples say so (unknown), and the next cycle is not delayed.
    long deadline = start + Math.max(config.progressIntervalMs, 2 * config.adminTimeoutMs);
    for (Map.Entry<String, String> master : now.masters().entrySet()) {
      addrByBroker.put(master.getKey(), master.getValue());
      brokerSeenAtCycle.put(master.getKey(), cycles);
    }
    brokerSeenAtCycle.entrySet().removeIf(e -> cycles - e.getValue() > REMEMBER_LEFT_BROKERS_CYCLES);
    addrByBroker.keySet().retainAll(brokerSeenAtCycle.keySet());
    for (String gone : new ArrayList<>(brokerPools.keySet())) {
      if (!brokerSeenAtCycle.containsKey(gone)) {
        brokerPools.remove(gone).shutdownNow();
      }
    }
    if (minOffsets) {
      pullOffsetByAddr.clear();  // asked again now and then: a broker may have been upgraded
    }

    List<Asked> pending = new ArrayList<>();
    List<Sample> samples = new ArrayList<>();
    Map<String, BrokerRun> runs = new TreeMap<>();
    for (Map.Entry<String, String> broker : addrByBroker.entrySet()) {
      String name = broker.getKey();
      long time = System.currentTimeMillis();
      if (!now.masters().containsKey(name)) {
        for (String group : now.groups()) {
          samples.add(new Sample(group, name, time, null, "broker " + name + " is not in cluster info (no master)"));
        }
        continue;
      }
      BrokerRun run = new BrokerRun(name, broker.getValue());
      runs.put(name, run);
      ExecutorService pool = brokerPools.computeIfAbsent(name, n ->
          Executors.newFixedThreadPool(config.progressInFlightPerBroker, Collector.daemon("rrm-progress-" + n)));
      for (String group : now.groups()) {
        pending.add(new Asked(group, name, pool.submit(() -> sample(group, run, deadline))));
      }
    }
    for (Asked asked : pending) {
      Sample sample = await(asked.future, deadline + 2 * config.adminTimeoutMs);
      samples.add(sample != null ? sample : new Sample(asked.group, asked.broker, System.currentTimeMillis(), null,
          "no answer within the progress cycle's time"));
    }
    Map<String, Map<MessageQueue, Long>> minOffsetsByBroker = minOffsets ? minOffsets(runs, samples, deadline)
        : Map.of();

    int failed = 0;
    int queues = 0;
    for (Sample sample : samples) {
      if (sample.error != null) {
        failed++;
      }
      queues += publish(sample, runs.get(sample.broker), minOffsetsByBroker.getOrDefault(sample.broker, Map.of()));
    }
    long end = System.currentTimeMillis();
    counters.inc("rmqcol_progress_cycles_total");
    counters.gauge("rmqcol_progress_cycle_seconds", end - start);
    counters.gauge("rmqcol_progress_last_cycle_timestamp_seconds", end);
    counters.gauge("rmqcol_progress_queues", queues);
    String line = "progress: " + now.groups().size() + " groups x " + addrByBroker.size() + " brokers in "
        + (end - start) + " ms, " + failed + " samples without an answer, " + queues + " queues"
        + (minOffsets ? ", min offsets read" : "");
    if (config.maxCycles > 0 || failed > 0) {
      log.info(line);
    }
  }

  // -- calls ----------------------------------------------------------------------------------------------

  private Sample sample(String group, BrokerRun run, long deadline) {
    String down = run.down.get();
    if (down != null) {
      counters.problem("progress_skipped");
      return new Sample(group, run.name, System.currentTimeMillis(), null, down);
    }
    if (System.currentTimeMillis() > deadline) {
      counters.problem("progress_skipped");
      return new Sample(group, run.name, System.currentTimeMillis(), null,
          "not asked: the progress cycle's time (" + config.progressIntervalMs + " ms) ran out first");
    }
    if (run.pullOffset == null) {
      run.pullOffset = pullOffsetSupported(run);
    }
    String key = "progress:" + group + "@" + run.name;
    try {
      counters.rpc("consume_stats");
      // The per-broker primitive (5.1.0+ admin; the same GET_CONSUME_STATS request as 4.9.x's
      // MQClientAPIImpl.getConsumeStats(addr, group, null, timeout)); never the one-argument form.
      ConsumeStats stats = admin.examineConsumeStats(run.addr, group, null, config.adminTimeoutMs);
      log.end(key, "consume stats of group " + group + " on " + run.name + " readable again");
      return new Sample(group, run.name, System.currentTimeMillis(), stats == null ? new ConsumeStats() : stats, null);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return new Sample(group, run.name, System.currentTimeMillis(), null, "not asked: the collector is stopping");
    } catch (Exception e) {
      boolean acl = AdminErrors.isAclDenied(e);
      boolean unreachable = !acl && isDown(e);
      counters.problem(acl ? "acl_denied" : unreachable ? "broker_unreachable" : "progress_failed");
      String why = "consume stats of group " + group + " on " + run.name + " at " + run.addr + AdminErrors.failed(e);
      if (unreachable && run.down.compareAndSet(null, "broker " + run.name + " unreachable in this progress cycle: "
          + AdminErrors.brief(e))) {
        log.warn("broker " + run.name + " at " + run.addr + " unreachable: its groups' progress unknown this cycle ("
            + AdminErrors.brief(e) + ")");
      } else if (!unreachable) {
        log.begin(key, why);
      }
      return new Sample(group, run.name, System.currentTimeMillis(), null, truncate(why, 1024));
    }
  }

  /** Whether the broker's consume stats carry {@code pullOffset} (5.1.0 and later); null: not known now. */
  private Boolean pullOffsetSupported(BrokerRun run) {
    return pullOffsetByAddr.computeIfAbsent(run.addr, addr -> {
      try {
        counters.rpc("broker_runtime_info");
        String version = admin.fetchBrokerRuntimeStats(addr).getTable().get("brokerVersionDesc");
        return atLeast51(version);
      } catch (Exception e) {
        counters.problem(AdminErrors.isAclDenied(e) ? "acl_denied" : "admin_error");
        log.begin("version:" + run.name, "version of broker " + run.name + AdminErrors.failed(e)
            + " (pull offsets left out)");
        return null;  // not cached: asked again next time
      }
    });
  }

  /** {@code V5_3_3} and the like: 5.1.0 or later. */
  static boolean atLeast51(String version) {
    if (version == null || !version.matches("V\\d+_\\d+_\\d+.*")) {
      return false;
    }
    String[] parts = version.substring(1).split("_");
    int major = Integer.parseInt(parts[0]);
    int minor = Integer.parseInt(parts[1]);
    return major > 5 || (major == 5 && minor >= 1);
  }

  /** Per broker, the min offset of each queue of the topics its answers of this cycle name. */
  private Map<String, Map<MessageQueue, Long>> minOffsets(Map<String, BrokerRun> runs, List<Sample> samples,
      long deadline) throws InterruptedException {
    Map<String, Set<String>> topicsByBroker = new TreeMap<>();
    for (Sample sample : samples) {
      if (sample.stats != null) {
        for (MessageQueue queue : sample.stats.getOffsetTable().keySet()) {
          topicsByBroker.computeIfAbsent(sample.broker, b -> new TreeSet<>()).add(queue.getTopic());
        }
      }
    }
    Map<String, List<Future<TopicStatsTable>>> pending = new TreeMap<>();
    for (Map.Entry<String, Set<String>> entry : topicsByBroker.entrySet()) {
      BrokerRun run = runs.get(entry.getKey());
      ExecutorService pool = brokerPools.get(entry.getKey());
      if (run == null || pool == null || run.down.get() != null) {
        continue;
      }
      for (String topic : entry.getValue()) {
        pending.computeIfAbsent(run.name, b -> new ArrayList<>()).add(pool.submit(() -> topicStats(run, topic)));
      }
    }
    Map<String, Map<MessageQueue, Long>> result = new TreeMap<>();
    for (Map.Entry<String, List<Future<TopicStatsTable>>> entry : pending.entrySet()) {
      Map<MessageQueue, Long> offsets = new HashMap<>();
      for (Future<TopicStatsTable> future : entry.getValue()) {
        TopicStatsTable table = await(future, deadline + 2 * config.adminTimeoutMs);
        if (table != null && table.getOffsetTable() != null) {
          for (Map.Entry<MessageQueue, TopicOffset> row : table.getOffsetTable().entrySet()) {
            offsets.put(row.getKey(), row.getValue().getMinOffset());
          }
        }
      }
      result.put(entry.getKey(), offsets);
    }
    return result;
  }

  private TopicStatsTable topicStats(BrokerRun run, String topic) throws InterruptedException {
    if (run.down.get() != null) {
      return null;
    }
    String key = "minoffset:" + topic + "@" + run.name;
    try {
      counters.rpc("topic_stats");
      TopicStatsTable table = admin.getDefaultMQAdminExtImpl().getMqClientInstance().getMQClientAPIImpl()
          .getTopicStatsInfo(run.addr, topic, config.adminTimeoutMs);
      log.end(key, "min offsets of topic " + topic + " on " + run.name + " readable again");
      return table;
    } catch (InterruptedException e) {
      throw e;
    } catch (Exception e) {
      counters.problem(AdminErrors.isAclDenied(e) ? "acl_denied" : "progress_failed");
      log.begin(key, "min offsets of topic " + topic + " on " + run.name + AdminErrors.failed(e) + " (left out)");
      return null;
    }
  }

  // -- events ---------------------------------------------------------------------------------------------

  /** Publishes one sample as one event, or several with the same event_time when it is large; its queue count. */
  private int publish(Sample sample, BrokerRun run, Map<MessageQueue, Long> minOffsets) {
    Map<String, Object> event = cluster.event("consume_progress");
    event.put("event_time", sample.time);
    event.put("group", sample.group);
    event.put("broker", sample.broker);
    event.put("collector", collectorId);
    if (sample.error != null) {
      event.put("error", sample.error);
      event.put("queues", List.of());
      publisher.publish(config.consumeProgressTopic, "consume_progress", sample.group, sample.time, Json.object(event));
      return 0;
    }
    double tps = sample.stats.getConsumeTps();
    if (tps >= 0 && !Double.isInfinite(tps)) {
      event.put("consume_tps", tps);
    }
    boolean withPull = run != null && Boolean.TRUE.equals(run.pullOffset);
    List<String> items = new ArrayList<>();
    Map<MessageQueue, OffsetWrapper> table = new TreeMap<>(sample.stats.getOffsetTable());
    for (Map.Entry<MessageQueue, OffsetWrapper> row : table.entrySet()) {
      MessageQueue queue = row.getKey();
      OffsetWrapper offsets = row.getValue();
      if (offsets == null || queue.getTopic() == null || !NAME.matcher(queue.getTopic()).matches()
          || queue.getTopic().length() > 255 || queue.getQueueId() < 0 || queue.getQueueId() > 65535) {
        counters.problem("progress_bad_row");
        log.warnEvery("progress_bad_row", "consume stats of group " + sample.group + " on " + sample.broker
            + " have a row outside the contract, left out: " + queue);
        continue;
      }
      Map<String, Object> item = new LinkedHashMap<>();
      item.put("topic", queue.getTopic());
      item.put("queue_id", queue.getQueueId());
      item.put("broker_offset", Math.max(0, offsets.getBrokerOffset()));
      item.put("consumer_offset", Math.max(0, offsets.getConsumerOffset()));  // -1 (none) is 0 as in the admin
      if (withPull) {
        item.put("pull_offset", Math.max(-1, offsets.getPullOffset()));
      }
      if (offsets.getLastTimestamp() >= 0) {
        item.put("last_timestamp", offsets.getLastTimestamp());
      }
      Long min = minOffsets.get(queue);
      if (min != null && min >= 0) {
        item.put("min_offset", min);
      }
      items.add(Json.object(item));
    }
    event.put("queues", List.of());
    int base = Json.object(event).getBytes(StandardCharsets.UTF_8).length;  // ends with "queues":[]}
    int limit = config.maxEventBytes - 1;
    List<String> chunk = new ArrayList<>();
    int size = base;
    for (String item : items) {
      int itemSize = item.getBytes(StandardCharsets.UTF_8).length + (chunk.isEmpty() ? 0 : 1);
      if (!chunk.isEmpty() && (size + itemSize > limit || chunk.size() >= MAX_QUEUES_PER_EVENT)) {
        publishChunk(event, chunk, sample.group);
        chunk = new ArrayList<>();
        size = base;
        itemSize -= 1;
      }
      chunk.add(item);
      size += itemSize;
    }
    if (!chunk.isEmpty() || items.isEmpty()) {
      publishChunk(event, chunk, sample.group);
    }
    return items.size();
  }

  private void publishChunk(Map<String, Object> event, List<String> items, String group) {
    String json = Json.object(event);  // ... ,"queues":[]}
    String body = json.substring(0, json.length() - 2) + String.join(",", items) + "]}";
    publisher.publish(config.consumeProgressTopic, "consume_progress", group, event.get("event_time"), body);
  }

  // -- helpers --------------------------------------------------------------------------------------------

  private static boolean isDown(Throwable e) {
    for (Throwable t = e; t != null; t = t.getCause()) {
      if (t instanceof RemotingConnectException || t instanceof RemotingSendRequestException) {
        return true;
      }
    }
    return false;
  }

  private <T> T await(Future<T> future, long until) throws InterruptedException {
    try {
      return future.get(Math.max(1, until - System.currentTimeMillis()), TimeUnit.MILLISECONDS);
    } catch (TimeoutException e) {
      future.cancel(true);
      counters.problem("progress_skipped");
      return null;
    } catch (ExecutionException e) {
      counters.problem("cycle_failed");
      log.warnEvery("progress-task", "a progress task failed: " + e.getCause());
      return null;
    }
  }

  private static String truncate(String text, int max) {
    return text.length() <= max ? text : text.substring(0, max);
  }

}
