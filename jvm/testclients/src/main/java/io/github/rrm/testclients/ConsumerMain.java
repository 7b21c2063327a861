package io.github.rrm.testclients;

import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.Callable;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicLong;

import io.github.rrm.agent.RebalanceAgent;
import org.apache.rocketmq.client.consumer.AllocateMessageQueueStrategy;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyContext;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMachineRoomNearby;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragelyByCircle;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueConsistentHash;
import org.apache.rocketmq.client.impl.consumer.ProcessQueue;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * Push consumers that each print their own held queues (their rebalance's process-queue table, non-dropped) as a
 * {@code held} JSON line whenever they change, with the queues they pop ({@code pop_queues}: the 5.x pop
 * process-queue table, non-dropped) and the messages they consumed per topic ({@code consumed}). Options:
 * namesrv, group, topics (comma-separated), strategy (AVG, AVG_BY_CIRCLE, CONSISTENT_HASH, MACHINE_ROOM_NEARBY: nearby
 * with AVG inside, rooms from machine-room-regex), model (CLUSTERING,
 * BROADCASTING), instance-name, client-ip, heartbeat-ms, client-rebalance (false: 5.x only, the broker assigns
 * the queues, and serves them by POP when the group is in POP mode there), agent (true: register every consumer
 * with one agent, configured by -Drrm.agent.*), block-on-message (N: the listener blocks for good on the Nth
 * message this consumer receives, after printing a {@code blocked} line with its topic, broker, queue and offset;
 * its queue's offset then stays there while the other messages are consumed; 0: never), consume-sleep-ms (N: the
 * listener sleeps N ms on every message before it counts it consumed: a slow listener; 0: none), consume-threads
 * (the listener's thread count, consumeThreadMin and consumeThreadMax; the client's default 20 when unset).
 *
 * <p>{@code --hosted a,b,c} runs several consumers in this process, each a client of its own: {@code --a.group g}
 * sets one consumer's option, an option without a prefix is every consumer's. Their instance names must make
 * distinct client ids, so that each has its own client instance (the process refuses to run otherwise: a
 * duplicate client id needs processes of its own). Every line of a hosted consumer names it ({@code consumer}).
 */
final class ConsumerMain {
    /** How many times a consumer whose start failed is made and started again ({@code Hosted.start}). */
    private static final int START_ATTEMPTS = 3;

    private ConsumerMain() {
    }

    /** One push consumer of the process, with what it consumed; {@code name} null when it is the only one. */
    private static final class Hosted {
        final String name;
        final Options options;
        DefaultMQPushConsumer consumer;
        final Map<String, AtomicLong> consumed = new ConcurrentHashMap<String, AtomicLong>();
        String clientId;
        String lastHeld;

        Hosted(String name, Options o) throws Exception {
            this.name = name;
            this.options = o;
            consumer = create(o, consumed, name);
        }

        /**
         * Start the consumer. Its start asks the name server for each topic's route within the client's API timeout
         * (3 s): on a busy machine that call can time out, and the start throws with the consumer half started, so
         * the consumer is shut down and made again, up to {@code START_ATTEMPTS} times.
         */
        void start() throws Exception {
            for (int attempt = 1; ; attempt++) {
                try {
                    consumer.start();
                    return;
                } catch (Exception e) {
                    if (attempt >= START_ATTEMPTS) {
                        throw e;
                    }
                    consumer.shutdown();
                    consumer = create(options, consumed, name);
                }
            }
        }

        /** {@code {"kind":<kind>,"consumer":<name>} } with {@code rest} appended inside the braces. */
        String line(String kind, String rest) {
            return "{\"kind\":" + Out.quote(kind) + (name == null ? "" : ",\"consumer\":" + Out.quote(name)) + rest
                + "}";
        }
    }

    static void run(Options o) throws Exception {
        String hostedNames = o.get("hosted", null);
        final List<Hosted> hosted = new ArrayList<Hosted>();
        for (String name : hostedNames == null ? new String[] {null} : hostedNames.split(",")) {
            hosted.add(new Hosted(name, name == null ? o : o.of(name)));
        }
        final RebalanceAgent agent = o.getBoolean("agent", false) ? RebalanceAgent.fromSystemProperties() : null;
        startAll(hosted);
        if (agent != null) {
            // Once started: a consumer whose start failed is made again (Hosted.start), and the agent must report
            // the one that runs, not the one shut down (whose empty table it would report under the same client id).
            for (Hosted h : hosted) {
                agent.register(h.consumer);
            }
        }
        for (Hosted h : hosted) {
            Out.line(h.line("started", ",\"client_id\":" + Out.quote(h.clientId) + ",\"pid\":" + pid()));
        }
        Thread watcher = new Thread(new Runnable() {
            @Override
            public void run() {
                long previousScan = System.currentTimeMillis();
                while (true) {
                    // A change a line shows happened after the previous scan began ("after") and before this one
                    // ended ("time"): the judge's bounds on when the client's table changed.
                    long scan = System.currentTimeMillis();
                    for (Hosted h : hosted) {
                        String held = held(h.consumer) + ",\"pop_queues\":" + popHeld(h.consumer) + ",\"consumed\":"
                            + counts(h.consumed);
                        if (!held.equals(h.lastHeld)) {
                            Out.line(h.line("held", ",\"time\":" + System.currentTimeMillis() + ",\"after\":"
                                + previousScan + ",\"client_id\":" + Out.quote(h.clientId) + ",\"queues\":" + held
                                + (agent == null ? "" : ",\"agent\":" + agent.counters().toJson())));
                            h.lastHeld = held;
                        }
                    }
                    previousScan = scan;
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
        TestClient.awaitTermination(new Callable<List<String>>() {
            @Override
            public List<String> call() throws Exception {
                inParallel(hosted, new Each() {
                    @Override
                    public void run(Hosted h) {
                        h.consumer.shutdown();
                    }
                });
                if (agent != null) {
                    agent.close(8000);
                }
                List<String> lines = new ArrayList<String>();
                for (Hosted h : hosted) {
                    lines.add(h.line("stopped", agent == null ? "" : ",\"agent\":" + agent.counters().toJson()));
                }
                return lines;
            }
        });
    }

    private static DefaultMQPushConsumer create(Options o, final Map<String, AtomicLong> consumed, final String name)
        throws Exception {
        final long blockOn = o.getLong("block-on-message", 0);
        final long sleepMs = o.getLong("consume-sleep-ms", 0);
        final AtomicLong received = new AtomicLong();
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(o.require("group"));
        consumer.setNamesrvAddr(o.require("namesrv"));
        consumer.setInstanceName(o.get("instance-name", "test-consumer"));
        String clientIp = o.get("client-ip", null);
        if (clientIp != null) {
            consumer.setClientIP(clientIp);
        }
        consumer.setHeartbeatBrokerInterval((int) o.getLong("heartbeat-ms", 30000));
        consumer.setPollNameServerInterval((int) o.getLong("poll-name-server-ms", 30000));
        consumer.setAllocateMessageQueueStrategy(strategy(o.get("strategy", "AVG"), o.get("machine-room-regex", null)));
        int threads = (int) o.getLong("consume-threads", 0);
        if (threads > 0) {
            consumer.setConsumeThreadMin(threads);
            consumer.setConsumeThreadMax(threads);
        }
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
        consumer.registerMessageListener(new MessageListenerConcurrently() {
            @Override
            public ConsumeConcurrentlyStatus consumeMessage(List<MessageExt> msgs, ConsumeConcurrentlyContext c) {
                for (MessageExt msg : msgs) {
                    if (received.incrementAndGet() == blockOn) {
                        Out.line("{\"kind\":\"blocked\"" + (name == null ? "" : ",\"consumer\":" + Out.quote(name))
                            + ",\"topic\":" + Out.quote(msg.getTopic()) + ",\"broker\":" + Out.quote(c.getMessageQueue().getBrokerName())
                            + ",\"queue_id\":" + msg.getQueueId() + ",\"queue_offset\":" + msg.getQueueOffset() + "}");
                        try {
                            Thread.sleep(Long.MAX_VALUE);  // never returns: the message is never acknowledged
                        } catch (InterruptedException e) {
                            Thread.currentThread().interrupt();
                            return ConsumeConcurrentlyStatus.RECONSUME_LATER;
                        }
                    }
                    if (sleepMs > 0) {
                        try {
                            Thread.sleep(sleepMs);
                        } catch (InterruptedException e) {
                            Thread.currentThread().interrupt();
                            return ConsumeConcurrentlyStatus.RECONSUME_LATER;
                        }
                    }
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
        return consumer;
    }

    /**
     * Start every hosted consumer (at once: each start waits on the name server and the brokers), then check that
     * each has a client instance of its own. A consumer that cannot start, or two sharing an instance, end the
     * process with exit code 1 and the reason on stderr.
     */
    private static void startAll(List<Hosted> hosted) {
        try {
            inParallel(hosted, new Each() {
                @Override
                public void run(Hosted h) throws Exception {
                    h.start();
                    h.clientId = h.consumer.getDefaultMQPushConsumerImpl().getmQClientFactory().getClientId();
                }
            });
        } catch (Exception e) {
            e.printStackTrace();
            System.exit(1);  // the consumers already started keep non-daemon threads
        }
        Map<Object, Hosted> byInstance = new IdentityHashMap<Object, Hosted>();
        for (Hosted h : hosted) {
            Hosted other = byInstance.put(h.consumer.getDefaultMQPushConsumerImpl().getmQClientFactory(), h);
            if (other != null) {
                System.err.println("consumers " + other.name + " and " + h.name + " share client id " + h.clientId
                    + " and its client instance: a duplicate client id needs a process of its own");
                System.exit(1);
            }
        }
    }

    private interface Each {
        void run(Hosted h) throws Exception;
    }

    /** {@code each} for every hosted consumer, one thread each; the first failure is rethrown. */
    private static void inParallel(List<Hosted> hosted, final Each each) throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(hosted.size());
        try {
            List<Future<Object>> futures = new ArrayList<Future<Object>>();
            for (final Hosted h : hosted) {
                futures.add(pool.submit(new Callable<Object>() {
                    @Override
                    public Object call() throws Exception {
                        each.run(h);
                        return null;
                    }
                }));
            }
            for (Future<Object> future : futures) {
                try {
                    future.get();
                } catch (ExecutionException e) {
                    throw e.getCause() instanceof Exception ? (Exception) e.getCause() : e;
                }
            }
        } finally {
            pool.shutdown();
        }
    }

    static AllocateMessageQueueStrategy strategy(String name, String machineRoomRegex) {
        if (name.equals("MACHINE_ROOM_NEARBY")) {
            return new AllocateMachineRoomNearby(new AllocateMessageQueueAveragely(), roomsByRegex(machineRoomRegex));
        }
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

    /** Rooms of brokers and clients: the first group of the first match of {@code regex} in the broker name or
     * client id, null (no room) when nothing matches. */
    static AllocateMachineRoomNearby.MachineRoomResolver roomsByRegex(String regex) {
        if (regex == null) {
            throw new IllegalArgumentException("MACHINE_ROOM_NEARBY needs --machine-room-regex");
        }
        final java.util.regex.Pattern pattern = java.util.regex.Pattern.compile(regex);
        return new AllocateMachineRoomNearby.MachineRoomResolver() {
            private String room(String text) {
                java.util.regex.Matcher m = pattern.matcher(text);
                return m.find() ? m.group(1) : null;
            }

            @Override
            public String brokerDeployIn(MessageQueue messageQueue) {
                return room(messageQueue.getBrokerName());
            }

            @Override
            public String consumerDeployIn(String clientID) {
                return room(clientID);
            }
        };
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
