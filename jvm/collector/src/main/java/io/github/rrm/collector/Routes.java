package io.github.rrm.collector;

import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.remoting.protocol.ResponseCode;
import org.apache.rocketmq.remoting.protocol.route.BrokerData;
import org.apache.rocketmq.remoting.protocol.route.QueueData;
import org.apache.rocketmq.remoting.protocol.route.TopicRouteData;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * Topic routes: each cycle, the route of every topic the watched groups read, from the name server on
 * {@code concurrency} threads, published as a {@code topic_route} event when its shape changed and every
 * {@code route_republish_interval_ms}; a topic without a route gives an empty broker list. The topics whose
 * route changed are kept for the running-info re-reads.
 */
final class Routes {
  private final CollectorConfig config;
  private final DefaultMQAdminExt admin;
  private final Counters counters;
  private final Log log;
  private final EventPublisher publisher;
  private final ExecutorService pool;
  private final ClusterName cluster;
  private final Map<String, String> shapeByTopic = new ConcurrentHashMap<>();
  private final Map<String, Long> publishedAt = new ConcurrentHashMap<>();
  /** Topics whose route changed since {@link #takeChanged} was last called. */
  private final Set<String> changed = ConcurrentHashMap.newKeySet();
  /** This cycle's route reads by topic. */
  private final Map<String, Future<?>> reads = new ConcurrentHashMap<>();

  Routes(CollectorConfig config, DefaultMQAdminExt admin, Counters counters, Log log, EventPublisher publisher,
      ClusterName cluster) {
    this.cluster = cluster;
    this.config = config;
    this.admin = admin;
    this.counters = counters;
    this.log = log;
    this.publisher = publisher;
    pool = Executors.newFixedThreadPool(config.concurrency, Collector.daemon("rrm-route"));
  }

  /**
   * Starts reading (and publishing as due) the routes of {@code topics} not started yet in this cycle: called as
   * the polls answer, so the name server's calls run beside the brokers'.
   */
  void start(Collection<String> topics) {
    for (String topic : topics) {
      if (!reads.containsKey(topic)) {
        reads.computeIfAbsent(topic, t -> pool.submit(() -> route(t)));
      }
    }
  }

  /** Waits for every read started in this cycle. */
  void awaitAll() throws InterruptedException {
    for (Future<?> read : reads.values()) {
      Collector.await(read, counters, log);
    }
  }

  /** A new cycle: every topic's route is read again. */
  void newCycle() {
    reads.clear();
  }

  /** The topics whose route changed since the last call. */
  Set<String> takeChanged() {
    Set<String> taken = new HashSet<>(changed);
    changed.removeAll(taken);
    return taken;
  }

  void close() {
    pool.shutdownNow();
  }

  private void route(String topic) {
    Map<String, Object> event = cluster.event("topic_route");
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
      if (e.getResponseCode() != ResponseCode.TOPIC_NOT_EXIST) {
        counters.problem(AdminErrors.isAclDenied(e) ? "acl_denied" : "admin_error");
        log.begin("route:" + topic, "route of topic " + topic + AdminErrors.failed(e));
        return;
      }
      counters.problem("topic_without_route");
      log.begin("route:" + topic, "topic " + topic + " has no route: publishing an empty route");
    } catch (Exception e) {
      counters.problem(AdminErrors.isAclDenied(e) ? "acl_denied" : "nameserver_unreachable");
      log.begin("route:" + topic, "route of topic " + topic + AdminErrors.failed(e));
      return;
    }
    event.put("brokers", brokers);
    String shape = Json.object(Map.of("b", brokers, "o", String.valueOf(event.get("order_topic_conf"))));
    long now = System.currentTimeMillis();
    String previous = shapeByTopic.put(topic, shape);
    Long published = publishedAt.get(topic);
    if (previous != null && !shape.equals(previous)) {
      changed.add(topic);
    }
    if (!shape.equals(previous) || published == null || now - published >= config.routeRepublishIntervalMs) {
      publishedAt.put(topic, now);
      publisher.publish(config.topicRouteTopic, "topic_route", topic, event.get("event_time"), Json.object(event));
    }
  }
}
