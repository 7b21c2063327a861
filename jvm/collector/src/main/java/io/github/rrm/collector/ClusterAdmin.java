package io.github.rrm.collector;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.common.message.MessageRequestMode;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.remoting.protocol.ResponseCode;
import org.apache.rocketmq.remoting.protocol.admin.ConsumeStats;
import org.apache.rocketmq.remoting.protocol.admin.OffsetWrapper;
import org.apache.rocketmq.remoting.protocol.admin.TopicOffset;
import org.apache.rocketmq.remoting.protocol.admin.TopicStatsTable;
import org.apache.rocketmq.remoting.protocol.body.ClusterInfo;
import org.apache.rocketmq.remoting.protocol.body.Connection;
import org.apache.rocketmq.remoting.protocol.subscription.SubscriptionGroupConfig;
import org.apache.rocketmq.remoting.protocol.route.BrokerData;
import org.apache.rocketmq.remoting.protocol.route.QueueData;
import org.apache.rocketmq.remoting.protocol.route.TopicRouteData;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * Small administration commands for a cluster the project runs itself, through RocketMQ's own admin client.
 *
 * <p>{@code wait-brokers NAMESRV BROKERS TIMEOUT_MS}: until every named broker (comma-separated) has a master in
 * cluster info. {@code create-topic NAMESRV TOPIC QUEUES BROKERS TIMEOUT_MS}: the topic with QUEUES read and write
 * queues on each named broker's master, then until its route lists every one of them. {@code cluster NAMESRV}:
 * the brokers of cluster info (name to master address). {@code create-group NAMESRV GROUP BROKERS}: a subscription
 * group on each named broker. {@code pop-mode NAMESRV TOPIC GROUP BROKERS POP_SHARE_QUEUE_NUM}: on each named
 * broker, the group's message request mode for the topic set to POP (what a 5.x push consumer without client
 * rebalance is told by {@code QUERY_ASSIGNMENT}). {@code connections NAMESRV GROUP BROKER_ADDR}: that broker's
 * connections of the group. {@code route NAMESRV TOPIC}: the topic's queues per broker. {@code progress NAMESRV
 * GROUPS}: for every line read from standard input, a line with, per group (comma-separated) and master broker, that
 * broker's consume stats of the group (the per-broker call) with each queue's min offset. {@code commit-offsets
 * NAMESRV GROUP TOPIC BROKER:QUEUE_ID...}: the group's consumer offset of each named queue set, on its master, to
 * the queue's max offset (what a consumer that held the queue and took every message would have committed); the
 * offsets set, per broker and queue. Each prints one JSON line
 * on success and exits 0; on failure it prints the reason to stderr and exits 1. With system properties
 * {@code rrm.admin.access.key} and {@code rrm.admin.secret.key} every call is signed (a cluster with access
 * control).
 */
public final class ClusterAdmin {
  private ClusterAdmin() {}

  public static void main(String[] args) throws Exception {
    if (args.length < 2) {
      System.err.println("usage: ClusterAdmin wait-brokers|create-topic|cluster NAMESRV ...");
      System.exit(2);
    }
    String accessKey = System.getProperty("rrm.admin.access.key", "");
    DefaultMQAdminExt admin = accessKey.isEmpty() ? new DefaultMQAdminExt(5000)
        : new DefaultMQAdminExt(new AclClientRPCHook(new SessionCredentials(accessKey,
            System.getProperty("rrm.admin.secret.key", ""))), 5000);
    admin.setNamesrvAddr(args[1]);
    admin.setInstanceName("rrm-cluster-admin-" + ProcessHandle.current().pid());
    admin.start();
    int code = 0;
    try {
      switch (args[0]) {
        case "wait-brokers" -> {
          Map<String, String> masters = waitForMasters(admin, List.of(args[2].split(",")), Long.parseLong(args[3]));
          System.out.println(Json.object(new TreeMap<>(masters)));
        }
        case "create-topic" -> {
          List<String> brokers = List.of(args[4].split(","));
          long deadline = System.currentTimeMillis() + Long.parseLong(args[5]);
          Map<String, String> masters = waitForMasters(admin, brokers, Long.parseLong(args[5]));
          int queues = Integer.parseInt(args[3]);
          for (String broker : brokers) {
            TopicConfig config = new TopicConfig(args[2], queues, queues, 6);
            admin.createAndUpdateTopicConfig(masters.get(broker), config);
          }
          waitForRoute(admin, args[2], brokers, queues, deadline);
          System.out.println(Json.object(Map.of("topic", args[2], "queues", queues, "brokers", brokers)));
        }
        case "cluster" -> System.out.println(Json.object(new TreeMap<>(masters(admin.examineBrokerClusterInfo()))));
        case "create-group" -> {
          Map<String, String> masters = waitForMasters(admin, List.of(args[3].split(",")), 30_000);
          for (String broker : args[3].split(",")) {
            SubscriptionGroupConfig group = new SubscriptionGroupConfig();
            group.setGroupName(args[2]);
            admin.createAndUpdateSubscriptionGroupConfig(masters.get(broker), group);
          }
          System.out.println(Json.object(Map.of("group", args[2])));
        }
        case "pop-mode" -> {
          Map<String, String> masters = waitForMasters(admin, List.of(args[4].split(",")), 30_000);
          int share = Integer.parseInt(args[5]);
          for (String broker : args[4].split(",")) {
            admin.setMessageRequestMode(masters.get(broker), args[2], args[3], MessageRequestMode.POP, share, 5000);
          }
          System.out.println(Json.object(Map.of("topic", args[2], "group", args[3], "mode", "POP")));
        }
        case "connections" -> {
          List<Map<String, Object>> items = new ArrayList<>();
          try {
            for (Connection c : admin.examineConsumerConnectionInfo(args[2], args[3]).getConnectionSet()) {
              items.add(Map.of("client_id", c.getClientId(), "channel", c.getClientAddr(), "version", c.getVersion()));
            }
          } catch (MQBrokerException e) {
            if (e.getResponseCode() != ResponseCode.CONSUMER_NOT_ONLINE) {
              throw e;
            }
          }
          System.out.println(Json.object(Map.of("connections", items)));
        }
        case "progress" -> {
          // One answer per line read from standard input, until it ends: a caller reads again without a new JVM.
          java.io.BufferedReader in = new java.io.BufferedReader(new java.io.InputStreamReader(System.in));
          while (in.readLine() != null) {
            Map<String, String> masters = masters(admin.examineBrokerClusterInfo());
            Map<String, Object> groups = new TreeMap<>();
            for (String group : args[2].split(",")) {
              Map<String, Object> brokers = new TreeMap<>();
              for (Map.Entry<String, String> master : masters.entrySet()) {
                brokers.put(master.getKey(), progress(admin, master.getValue(), group));
              }
              groups.put(group, brokers);
            }
            System.out.println(Json.object(groups));
            System.out.flush();
          }
        }
        case "commit-offsets" -> {
          Map<String, String> masters = masters(admin.examineBrokerClusterInfo());
          Map<String, Object> committed = new TreeMap<>();
          for (int i = 4; i < args.length; i++) {
            String[] named = args[i].split(":");
            MessageQueue queue = new MessageQueue(args[3], named[0], Integer.parseInt(named[1]));
            long offset = admin.maxOffset(queue);
            admin.updateConsumeOffset(masters.get(named[0]), args[2], queue, offset);
            committed.put(args[i], offset);
          }
          System.out.println(Json.object(committed));
        }
        case "route" -> {
          Map<String, Object> brokers = new TreeMap<>();
          for (QueueData queue : admin.examineTopicRouteInfo(args[2]).getQueueDatas()) {
            brokers.put(queue.getBrokerName(), Map.of("read_queue_nums", queue.getReadQueueNums(),
                "write_queue_nums", queue.getWriteQueueNums(), "perm", queue.getPerm()));
          }
          System.out.println(Json.object(brokers));
        }
        default -> {
          System.err.println("unknown command " + args[0]);
          code = 2;
        }
      }
    } catch (Exception e) {
      System.err.println(e.getMessage() == null ? e.toString() : e.getMessage().split("\n")[0]);
      code = 1;
    } finally {
      admin.shutdown();
    }
    System.exit(code);
  }

  /**
   * One broker's consume stats of {@code group} (the per-broker call), each queue with the broker's min offset
   * of its topic (the per-broker topic stats): {@code [{"topic", "queue_id", "broker_offset", ...}, ...]}.
   */
  private static List<Map<String, Object>> progress(DefaultMQAdminExt admin, String addr, String group)
      throws Exception {
    ConsumeStats stats = admin.examineConsumeStats(addr, group, null, 5000);
    Map<String, TopicStatsTable> topics = new TreeMap<>();
    List<Map<String, Object>> queues = new ArrayList<>();
    for (Map.Entry<MessageQueue, OffsetWrapper> row : new TreeMap<>(stats.getOffsetTable()).entrySet()) {
      MessageQueue queue = row.getKey();
      TopicStatsTable topic = topics.computeIfAbsent(queue.getTopic(), t -> {
        try {
          return admin.getDefaultMQAdminExtImpl().getMqClientInstance().getMQClientAPIImpl()
              .getTopicStatsInfo(addr, t, 5000);
        } catch (Exception e) {
          throw new IllegalStateException("topic stats of " + t + ": " + e, e);
        }
      });
      TopicOffset offsets = topic.getOffsetTable().get(queue);
      Map<String, Object> item = new TreeMap<>();
      item.put("topic", queue.getTopic());
      item.put("queue_id", queue.getQueueId());
      item.put("broker_offset", row.getValue().getBrokerOffset());
      item.put("consumer_offset", row.getValue().getConsumerOffset());
      item.put("pull_offset", row.getValue().getPullOffset());
      item.put("last_timestamp", row.getValue().getLastTimestamp());
      item.put("min_offset", offsets == null ? null : offsets.getMinOffset());
      queues.add(item);
    }
    return queues;
  }

  /** Broker name to master address, for every broker of every cluster that has a master. */
  static Map<String, String> masters(ClusterInfo info) {
    Map<String, String> result = new TreeMap<>();
    for (BrokerData data : info.getBrokerAddrTable().values()) {
      String master = data.getBrokerAddrs().get(MixAll.MASTER_ID);
      if (master != null) {
        result.put(data.getBrokerName(), master);
      }
    }
    return result;
  }

  private static Map<String, String> waitForMasters(DefaultMQAdminExt admin, List<String> brokers, long timeoutMs)
      throws InterruptedException {
    long deadline = System.currentTimeMillis() + timeoutMs;
    String last = "no answer yet";
    while (System.currentTimeMillis() < deadline) {
      try {
        Map<String, String> masters = masters(admin.examineBrokerClusterInfo());
        if (masters.keySet().containsAll(brokers)) {
          return masters;
        }
        last = "registered: " + masters.keySet();
      } catch (Exception e) {
        last = e.toString();
      }
      Thread.sleep(200);
    }
    throw new IllegalStateException("brokers " + brokers + " not in cluster info after " + timeoutMs + " ms (" + last + ")");
  }

  private static void waitForRoute(DefaultMQAdminExt admin, String topic, List<String> brokers, int queues, long deadline)
      throws InterruptedException {
    String last = "no route yet";
    while (System.currentTimeMillis() < deadline) {
      try {
        TopicRouteData route = admin.examineTopicRouteInfo(topic);
        TreeSet<String> ready = new TreeSet<>();
        for (QueueData queue : route.getQueueDatas()) {
          if (queue.getReadQueueNums() == queues && queue.getWriteQueueNums() == queues) {
            ready.add(queue.getBrokerName());
          }
        }
        if (ready.containsAll(brokers)) {
          return;
        }
        last = "routable on " + ready;
      } catch (Exception e) {
        last = e.toString();
      }
      Thread.sleep(100);
    }
    List<String> wanted = new ArrayList<>(brokers);
    throw new IllegalStateException("topic " + topic + " not routable on " + wanted + " in time (" + last + ")");
  }
}
