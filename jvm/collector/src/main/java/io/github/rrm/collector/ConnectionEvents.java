package io.github.rrm.collector;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.rocketmq.remoting.protocol.body.Connection;
import org.apache.rocketmq.remoting.protocol.heartbeat.SubscriptionData;

/**
 * Publishes one broker's poll of one group as a {@code consumer_connections} event: the broker's subscription
 * table, message model and consume type, and per connection (sorted) the client's channel, id, language and
 * version, with what its running info said (strategy, consume type, own subscriptions) once known. An empty
 * connection list when the broker has no client of the group.
 */
final class ConnectionEvents {
  private final CollectorConfig config;
  private final EventPublisher publisher;
  private final RunningInfo runningInfo;
  private final String collectorId;
  private final ClusterName cluster;

  ConnectionEvents(CollectorConfig config, EventPublisher publisher, RunningInfo runningInfo, String collectorId,
      ClusterName cluster) {
    this.cluster = cluster;
    this.config = config;
    this.publisher = publisher;
    this.runningInfo = runningInfo;
    this.collectorId = collectorId;
  }

  void publish(BrokerPolls.Poll answer) {
    Map<String, Object> event = cluster.event("consumer_connections");
    event.put("event_time", answer.time());
    event.put("broker", answer.broker());
    event.put("group", answer.group());
    event.put("stale_after_ms", config.staleAfterMs);
    event.put("collector", collectorId);
    List<Map<String, Object>> subscriptions = new ArrayList<>();
    List<Map<String, Object>> connections = new ArrayList<>();
    if (answer.connection() != null) {
      event.put("message_model", name(answer.connection().getMessageModel()));
      event.put("consume_type", name(answer.connection().getConsumeType()));
      for (SubscriptionData data : new TreeMap<>(answer.connection().getSubscriptionTable()).values()) {
        subscriptions.add(subscription(data));
      }
      List<Connection> sorted = new ArrayList<>(answer.connection().getConnectionSet());
      sorted.sort((a, b) -> (a.getClientId() + a.getClientAddr()).compareTo(b.getClientId() + b.getClientAddr()));
      for (Connection connection : sorted) {
        Map<String, Object> item = new LinkedHashMap<>();
        item.put("channel", connection.getClientAddr());
        item.put("client_id", connection.getClientId());
        item.put("language", name(connection.getLanguage()));
        item.put("client_version", String.valueOf(connection.getVersion()));
        RunningInfo.ClientView view = runningInfo.view(answer.group(), connection.getClientId());
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
    publisher.publish(config.connectionsTopic, "consumer_connections", answer.group(), answer.time(),
        Json.object(event));
  }

  /** A subscription as the contract writes it (topic, expression, version). */
  static Map<String, Object> subscription(SubscriptionData data) {
    Map<String, Object> item = new LinkedHashMap<>();
    item.put("topic", data.getTopic());
    item.put("expression", data.getSubString());
    item.put("sub_version", data.getSubVersion());
    return item;
  }

  private static String name(Enum<?> value) {
    return value == null ? null : value.name();
  }
}
