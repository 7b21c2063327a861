package io.github.rrm.collector.bench;

import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.LongAdder;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.RPCHook;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;
import org.apache.rocketmq.remoting.protocol.admin.ConsumeStats;
import org.apache.rocketmq.remoting.protocol.admin.TopicOffset;
import org.apache.rocketmq.remoting.protocol.admin.TopicStatsTable;
import org.apache.rocketmq.remoting.protocol.route.BrokerData;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * The consume-progress benchmark's JVM side (bench/bench_collector_progress.py), not part of the collector.
 *
 * <p>{@code seed NAMESRV TOPIC GROUPS_FILE MESSAGES_PER_QUEUE}: sends that many messages to every queue of TOPIC,
 * then commits an offset for every group (one name a line) on every master: each queue of TOPIC, and queue 0 of the
 * group's {@code %RETRY%} topic. {@code exporter NAMESRV GROUPS_FILE CYCLES}: rocketmq-exporter's (and {@code mqadmin
 * consumerProgress}'s) way, the one-argument {@code examineConsumeStats(group)} for every group, one after the
 * other, CYCLES times; per cycle one JSON line with its start and end, wall and process CPU milliseconds, rows, failures and the
 * requests the admin client sent by request code (counted by an RPC hook).
 */
public final class ProgressBench {
  private ProgressBench() {}

  public static void main(String[] args) throws Exception {
    switch (args[0]) {
      case "seed" -> seed(args[1], args[2], Files.readAllLines(Path.of(args[3])), Integer.parseInt(args[4]));
      case "exporter" -> exporter(args[1], Files.readAllLines(Path.of(args[2])), Integer.parseInt(args[3]));
      default -> throw new IllegalArgumentException("usage: seed|exporter NAMESRV ...");
    }
    System.exit(0);  // the 5.x client leaves non-daemon threads behind after shutdown()
  }

  private static void seed(String namesrv, String topic, List<String> groups, int messagesPerQueue) throws Exception {
    DefaultMQProducer producer = new DefaultMQProducer("bench_progress_seed");
    producer.setNamesrvAddr(namesrv);
    producer.setInstanceName("bench-progress-seed-" + ProcessHandle.current().pid());
    producer.start();
    for (MessageQueue queue : producer.fetchPublishMessageQueues(topic)) {
      for (int i = 0; i < messagesPerQueue; i++) {
        producer.send(new Message(topic, ("seed " + i).getBytes()), queue);
      }
    }
    producer.shutdown();
    DefaultMQAdminExt admin = new DefaultMQAdminExt(10_000);
    admin.setNamesrvAddr(namesrv);
    admin.setInstanceName("bench-progress-seed-" + ProcessHandle.current().pid());
    admin.start();
    Map<String, String> masters = new TreeMap<>();
    for (BrokerData broker : admin.examineBrokerClusterInfo().getBrokerAddrTable().values()) {
      masters.put(broker.getBrokerName(), broker.getBrokerAddrs().get(MixAll.MASTER_ID));
    }
    TopicStatsTable stats = admin.examineTopicStats(topic);
    ExecutorService pool = Executors.newFixedThreadPool(8);
    List<Future<?>> pending = new ArrayList<>();
    for (int g = 0; g < groups.size(); g++) {
      String group = groups.get(g);
      int index = g;
      pending.add(pool.submit(() -> {
        for (Map.Entry<MessageQueue, TopicOffset> row : stats.getOffsetTable().entrySet()) {
          MessageQueue queue = row.getKey();
          long max = row.getValue().getMaxOffset();
          // Offsets spread over the queue: some groups caught up, others behind by up to the whole queue.
          commit(admin, masters.get(queue.getBrokerName()), group, queue, (index + queue.getQueueId()) % (max + 1));
        }
        for (Map.Entry<String, String> master : masters.entrySet()) {
          commit(admin, master.getValue(), group, new MessageQueue(MixAll.RETRY_GROUP_TOPIC_PREFIX + group,
              master.getKey(), 0), 0);
        }
        return null;
      }));
    }
    for (Future<?> future : pending) {
      future.get();
    }
    pool.shutdownNow();
    admin.shutdown();
    System.out.println("{\"kind\":\"seeded\",\"groups\":" + groups.size() + ",\"queues\":"
        + stats.getOffsetTable().size() + "}");
  }

  private static void commit(DefaultMQAdminExt admin, String addr, String group, MessageQueue queue, long offset)
      throws Exception {
    for (int attempt = 1; ; attempt++) {
      try {
        admin.updateConsumeOffset(addr, group, queue, offset);
        return;
      } catch (Exception e) {
        if (attempt == 5) {
          throw e;
        }
        Thread.sleep(500L * attempt);
      }
    }
  }

  private static void exporter(String namesrv, List<String> groups, int cycles) throws Exception {
    Map<Integer, LongAdder> requests = new ConcurrentHashMap<>();
    RPCHook hook = new RPCHook() {
      @Override
      public void doBeforeRequest(String addr, RemotingCommand request) {
        requests.computeIfAbsent(request.getCode(), c -> new LongAdder()).increment();
      }

      @Override
      public void doAfterResponse(String addr, RemotingCommand request, RemotingCommand response) {}
    };
    DefaultMQAdminExt admin = new DefaultMQAdminExt(hook, 5000);  // the admin client's default timeout
    admin.setNamesrvAddr(namesrv);
    admin.setInstanceName("bench-exporter-" + ProcessHandle.current().pid());
    admin.start();
    com.sun.management.OperatingSystemMXBean os =
        (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
    for (int cycle = 1; cycle <= cycles; cycle++) {
      requests.clear();
      long rows = 0;
      int failures = 0;
      String firstError = null;
      long cpu = os.getProcessCpuTime();
      long startMs = System.currentTimeMillis();
      long start = System.nanoTime();
      for (String group : groups) {
        try {
          ConsumeStats stats = admin.examineConsumeStats(group);
          rows += stats.getOffsetTable().size();
        } catch (Exception e) {
          failures++;
          if (firstError == null) {
            firstError = e.toString();
          }
        }
      }
      long wallMs = (System.nanoTime() - start) / 1_000_000;
      long cpuMs = (os.getProcessCpuTime() - cpu) / 1_000_000;
      StringBuilder codes = new StringBuilder();
      for (Map.Entry<Integer, LongAdder> entry : new TreeMap<>(requests).entrySet()) {
        codes.append(codes.length() == 0 ? "" : ",").append('"').append(entry.getKey()).append("\":")
            .append(entry.getValue().sum());
      }
      System.out.println("{\"kind\":\"cycle\",\"cycle\":" + cycle + ",\"start_ms\":" + startMs
          + ",\"end_ms\":" + System.currentTimeMillis() + ",\"wall_ms\":" + wallMs + ",\"cpu_ms\":" + cpuMs
          + ",\"rows\":" + rows + ",\"failures\":" + failures + ",\"requests_by_code\":{" + codes + "}"
          + ",\"first_error\":" + (firstError == null ? "null" : quote(firstError)) + "}");
      System.out.flush();
    }
    admin.shutdown();
  }

  private static String quote(String text) {
    StringBuilder out = new StringBuilder("\"");
    for (char c : text.toCharArray()) {
      if (c == '"' || c == '\\') {
        out.append('\\').append(c);
      } else if (c < 0x20) {
        out.append(String.format("\\u%04x", (int) c));
      } else {
        out.append(c);
      }
    }
    return out.append('"').toString();
  }
}
