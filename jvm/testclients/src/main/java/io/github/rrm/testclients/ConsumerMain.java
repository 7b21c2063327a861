package io.github.rrm.testclients;

import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;

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
 * {@code held} JSON line whenever they change. Options: namesrv, group, topics (comma-separated), strategy
 * (AVG, AVG_BY_CIRCLE, CONSISTENT_HASH), model (CLUSTERING, BROADCASTING), instance-name, client-ip,
 * heartbeat-ms, agent (true: register the agent's reporter, configured by -Drrm.agent.*).
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
        for (String topic : o.require("topics").split(",")) {
            consumer.subscribe(topic, "*");
        }
        consumer.registerMessageListener(new MessageListenerConcurrently() {
            @Override
            public ConsumeConcurrentlyStatus consumeMessage(List<MessageExt> msgs, ConsumeConcurrentlyContext c) {
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
                    String held = held(consumer);
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
        TreeMap<String, TreeSet<MessageQueue>> byTopic = new TreeMap<String, TreeSet<MessageQueue>>();
        Map<MessageQueue, ProcessQueue> table = consumer.getDefaultMQPushConsumerImpl().getRebalanceImpl().getProcessQueueTable();
        for (Map.Entry<MessageQueue, ProcessQueue> e : table.entrySet()) {
            if (!e.getValue().isDropped()) {
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
