package io.github.rrm.testclients;

import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

import io.github.rrm.agent.RebalanceAgent;
import org.apache.rocketmq.client.consumer.AllocateMessageQueueStrategy;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyContext;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragelyByCircle;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueConsistentHash;
import org.apache.rocketmq.client.impl.consumer.ProcessQueue;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * A push consumer that prints its own held queues (its rebalance's process-queue table, non-dropped) as a
 * {@code held} JSON line whenever they change, with the queues it pops ({@code pop_queues}: the 5.x pop
 * process-queue table, non-dropped) and the messages it consumed per topic ({@code consumed}). Options:
 * namesrv, group, topics (comma-separated), strategy (AVG, AVG_BY_CIRCLE, CONSISTENT_HASH), model (CLUSTERING,
 * BROADCASTING), instance-name, client-ip, heartbeat-ms, client-rebalance (false: 5.x only, the broker assigns
 * the queues, and serves them by POP when the group is in POP mode there), agent (true: register the agent's
 * reporter, configured by -Drrm.agent.*).
 */
final class ConsumerMain {
    private ConsumerMain() {
    }

    static void run(Options o) throws Exception {
        final DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(o.require("group"));
        consumer.setNamesrvAddr(o.require("namesrv"));
        consumer.setInstanceName(o.get("instance-name", "test-consumer"));
        String clientIp = o.get("client-ip", null);
        if (clientIp != null) {
            consumer.setClientIP(clientIp);
        }
        consumer.setHeartbeatBrokerInterval((int) o.getLong("heartbeat-ms", 30000));
        consumer.setAllocateMessageQueueStrategy(strategy(o.get("strategy", "AVG")));
        Object model = Reflect.enumConstant(new String[] {
            "org.apache.rocketmq.common.protocol.heartbeat.MessageModel",
            "org.apache.rocketmq.remoting.protocol.heartbeat.MessageModel"}, o.get("model", "CLUSTERING"));
        Reflect.call(consumer, "setMessageModel", model);
        if (!o.getBoolean("client-rebalance", true)) {
            Reflect.call(consumer, "setClientRebalance", Boolean.FALSE);  // 5.x only: 4.9.x has no such method
        }
        for (String topic : o.require("topics").split(",")) {
            consumer.subscribe(topic, "*");
        }
        final Map<String, AtomicLong> consumed = new ConcurrentHashMap<String, AtomicLong>();
        consumer.registerMessageListener(new MessageListenerConcurrently() {
            @Override
            public ConsumeConcurrentlyStatus consumeMessage(List<MessageExt> msgs, ConsumeConcurrentlyContext c) {
                for (MessageExt msg : msgs) {
                    AtomicLong count = consumed.get(msg.getTopic());
                    if (count == null) {
                        consumed.putIfAbsent(msg.getTopic(), new AtomicLong());
                        count = consumed.get(msg.getTopic());
                    }
                    count.incrementAndGet();
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            }
        });
        final RebalanceAgent agent = o.getBoolean("agent", false) ? RebalanceAgent.fromSystemProperties() : null;
        if (agent != null) {
            agent.register(consumer);
        }
        consumer.start();
        final String clientId = consumer.getDefaultMQPushConsumerImpl().getmQClientFactory().getClientId();
        Out.line("{\"kind\":\"started\",\"client_id\":" + Out.quote(clientId) + ",\"pid\":" + pid() + "}");
        Thread watcher = new Thread(new Runnable() {
            @Override
            public void run() {
                String last = null;
                while (true) {
                    String held = held(consumer) + ",\"pop_queues\":" + popHeld(consumer) + ",\"consumed\":"
                        + counts(consumed);
                    if (!held.equals(last)) {
                        Out.line("{\"kind\":\"held\",\"time\":" + System.currentTimeMillis() + ",\"client_id\":"
                            + Out.quote(clientId) + ",\"queues\":" + held
                            + (agent == null ? "" : ",\"agent\":" + agent.counters().toJson()) + "}");
                        last = held;
                    }
                    try {
                        Thread.sleep(100);
                    } catch (InterruptedException e) {
                        return;
                    }
                }
            }
        }, "held-queues-watcher");
        watcher.setDaemon(true);
        watcher.start();
        TestClient.awaitTermination(new java.util.concurrent.Callable<String>() {
            @Override
            public String call() {
                consumer.shutdown();
                if (agent != null) {
                    agent.close(8000);
                }
                return "{\"kind\":\"stopped\"" + (agent == null ? "" : ",\"agent\":" + agent.counters().toJson()) + "}";
            }
        });
    }

    static AllocateMessageQueueStrategy strategy(String name) {
        if (name.equals("AVG")) {
            return new AllocateMessageQueueAveragely();
        }
        if (name.equals("AVG_BY_CIRCLE")) {
            return new AllocateMessageQueueAveragelyByCircle();
        }
        if (name.equals("CONSISTENT_HASH")) {
            return new AllocateMessageQueueConsistentHash();
        }
        throw new IllegalArgumentException("unknown strategy " + name);
    }

    /** {"topic": [["broker", queueId], ...]} of the non-dropped process queues, sorted. */
    static String held(DefaultMQPushConsumer consumer) {
        Map<MessageQueue, ProcessQueue> table = consumer.getDefaultMQPushConsumerImpl().getRebalanceImpl().getProcessQueueTable();
        Map<MessageQueue, Boolean> dropped = new java.util.HashMap<MessageQueue, Boolean>();
        for (Map.Entry<MessageQueue, ProcessQueue> e : table.entrySet()) {
            dropped.put(e.getKey(), e.getValue().isDropped());
        }
        return byTopic(dropped);
    }

    /** The same for the queues the client pops (5.x: the pop process-queue table; 4.9.x has none: {}). */
    static String popHeld(DefaultMQPushConsumer consumer) {
        Object rebalance = consumer.getDefaultMQPushConsumerImpl().getRebalanceImpl();
        Map<MessageQueue, Boolean> dropped = new java.util.HashMap<MessageQueue, Boolean>();
        if (Reflect.hasField(rebalance, "popProcessQueueTable")) {
            Map<?, ?> table = (Map<?, ?>) Reflect.field(rebalance, "popProcessQueueTable");
            for (Map.Entry<?, ?> e : table.entrySet()) {
                dropped.put((MessageQueue) e.getKey(), (Boolean) Reflect.call(e.getValue(), "isDropped"));
            }
        }
        return byTopic(dropped);
    }

    /** {"topic": count, ...} of the messages consumed so far, sorted by topic. */
    static String counts(Map<String, AtomicLong> consumed) {
        StringBuilder out = new StringBuilder("{");
        for (Map.Entry<String, AtomicLong> e : new TreeMap<String, AtomicLong>(consumed).entrySet()) {
            out.append(out.length() > 1 ? "," : "").append(Out.quote(e.getKey())).append(':');
            out.append(e.getValue().get());
        }
        return out.append('}').toString();
    }

    private static String byTopic(Map<MessageQueue, Boolean> dropped) {
        TreeMap<String, TreeSet<MessageQueue>> byTopic = new TreeMap<String, TreeSet<MessageQueue>>();
        for (Map.Entry<MessageQueue, Boolean> e : dropped.entrySet()) {
            if (!e.getValue()) {
                MessageQueue mq = e.getKey();
                if (!byTopic.containsKey(mq.getTopic())) {
                    byTopic.put(mq.getTopic(), new TreeSet<MessageQueue>());
                }
                byTopic.get(mq.getTopic()).add(mq);  // MessageQueue orders by topic, broker, queue id
            }
        }
        StringBuilder out = new StringBuilder("{");
        for (Map.Entry<String, TreeSet<MessageQueue>> e : byTopic.entrySet()) {
            out.append(out.length() > 1 ? "," : "").append(Out.quote(e.getKey())).append(":[");
            boolean first = true;
            for (MessageQueue mq : e.getValue()) {
                out.append(first ? "[" : ",[").append(Out.quote(mq.getBrokerName())).append(',').append(mq.getQueueId()).append(']');
                first = false;
            }
            out.append(']');
        }
        return out.append('}').toString();
    }

    static String pid() {
        String name = java.lang.management.ManagementFactory.getRuntimeMXBean().getName();
        return name.substring(0, name.indexOf('@'));
    }
}
