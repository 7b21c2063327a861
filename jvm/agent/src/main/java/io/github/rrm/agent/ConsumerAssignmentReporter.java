package io.github.rrm.agent;

import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.impl.consumer.DefaultMQPushConsumerImpl;
import org.apache.rocketmq.client.impl.consumer.ProcessQueue;
import org.apache.rocketmq.client.impl.consumer.RebalanceImpl;
import org.apache.rocketmq.client.impl.factory.MQClientInstance;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * Publishes a push consumer's own held queues as {@code reported_assignment} events (docs/events.md): the
 * non-dropped entries of its rebalance's process-queue table, one event per subscribed topic, whenever they
 * change and at least every {@code reportIntervalMs}. This is what the client itself consumes, so every holder
 * reports, including clients that share a client id (which the admin API cannot tell apart).
 *
 * <p>The table is compared with the last report every {@code reportCheckIntervalMs} on the agent's scheduler
 * thread: RocketMQ has no listener for a push consumer's queue changes.
 */
final class ConsumerAssignmentReporter implements Runnable {
    private static final Comparator<MessageQueue> QUEUE_ORDER = new Comparator<MessageQueue>() {
        @Override
        public int compare(MessageQueue a, MessageQueue b) {
            int byBroker = a.getBrokerName().compareTo(b.getBrokerName());
            return byBroker != 0 ? byBroker : Integer.compare(a.getQueueId(), b.getQueueId());
        }
    };

    private final DefaultMQPushConsumer consumer;
    private final EventPublisher publisher;
    private final AgentCounters counters;
    private final String topic;
    private final long reportIntervalMs;
    private final String cluster;
    private Map<String, List<MessageQueue>> lastReported = Collections.emptyMap();
    private long lastReportMs;

    ConsumerAssignmentReporter(DefaultMQPushConsumer consumer, EventPublisher publisher, AgentCounters counters,
                               AgentConfig config) {
        this.consumer = consumer;
        this.publisher = publisher;
        this.counters = counters;
        this.topic = config.reportedAssignmentsTopic();
        this.reportIntervalMs = config.reportIntervalMs();
        this.cluster = config.cluster();
    }

    @Override
    public void run() {
        try {
            check();
        } catch (Throwable t) {
            counters.agentErrors.incrementAndGet();
        }
    }

    /** Report when the held queues differ from the last report, or the last report is old. */
    synchronized void check() {
        DefaultMQPushConsumerImpl impl = consumer.getDefaultMQPushConsumerImpl();
        MQClientInstance client = impl.getmQClientFactory();
        if (client == null) {
            return;  // not started yet: no client id
        }
        Map<String, List<MessageQueue>> held = heldQueues(impl.getRebalanceImpl());
        long now = System.currentTimeMillis();
        if (held.equals(lastReported) && now - lastReportMs < reportIntervalMs) {
            return;
        }
        String group = consumer.getConsumerGroup();
        String clientId = client.getClientId();
        for (Map.Entry<String, List<MessageQueue>> e : held.entrySet()) {
            publisher.offerFromThisInstance(topic, group, now,
                event(cluster, now, group, clientId, e.getKey(), e.getValue()));
            counters.assignmentReports.incrementAndGet();
        }
        lastReported = held;
        lastReportMs = now;
    }

    /** Topic -> its held (non-dropped) queues, sorted; every subscribed topic is present, maybe empty. */
    static Map<String, List<MessageQueue>> heldQueues(RebalanceImpl rebalance) {
        Map<String, TreeSet<MessageQueue>> byTopic = new TreeMap<String, TreeSet<MessageQueue>>();
        for (Object subscribed : rebalance.getSubscriptionInner().keySet()) {
            byTopic.put((String) subscribed, new TreeSet<MessageQueue>(QUEUE_ORDER));
        }
        for (Map.Entry<MessageQueue, ProcessQueue> e : rebalance.getProcessQueueTable().entrySet()) {
            if (e.getValue().isDropped()) {
                continue;
            }
            MessageQueue mq = e.getKey();
            TreeSet<MessageQueue> queues = byTopic.get(mq.getTopic());
            if (queues == null) {
                queues = new TreeSet<MessageQueue>(QUEUE_ORDER);
                byTopic.put(mq.getTopic(), queues);
            }
            queues.add(mq);
        }
        Map<String, List<MessageQueue>> result = new HashMap<String, List<MessageQueue>>();
        for (Map.Entry<String, TreeSet<MessageQueue>> e : byTopic.entrySet()) {
            result.put(e.getKey(), new ArrayList<MessageQueue>(e.getValue()));
        }
        return result;
    }

    /** The event; {@code cluster} null: version 1 without it, else version 2 naming it. */
    static String event(String cluster, long eventTime, String group, String clientId, String topic,
                        List<MessageQueue> queues) {
        StringBuilder out = new StringBuilder(160 + 40 * queues.size()).append('{');
        Json.field(out, "type", "reported_assignment");
        Json.field(out, "schema_version", cluster == null ? 1 : 2);
        if (cluster != null) {
            Json.field(out, "cluster", cluster);
        }
        Json.field(out, "event_time", eventTime);
        Json.field(out, "group", group);
        Json.field(out, "client_id", clientId);
        Json.field(out, "topic", topic);
        out.append(",\"queues\":[");
        for (int i = 0; i < queues.size(); i++) {
            MessageQueue mq = queues.get(i);
            Json.string(out.append(i == 0 ? "{\"broker\":" : ",{\"broker\":"), mq.getBrokerName());
            out.append(",\"queue_id\":").append(mq.getQueueId()).append('}');
        }
        return out.append("]}").toString();
    }
}
