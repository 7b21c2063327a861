package io.github.rrm.testclients;

import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicLong;

import io.github.rrm.agent.RebalanceAgent;
import org.apache.rocketmq.client.hook.SendMessageContext;
import org.apache.rocketmq.client.hook.SendMessageHook;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;

/**
 * A producer that sends SYNC messages at a steady rate and prints its own latency-fault items: the entries of
 * its {@code MQFaultStrategy}'s {@code LatencyFaultToleranceImpl.faultItemTable}, read by reflection, with the
 * tolerance's own {@code isAvailable} answer at the sampling time. A {@code faults} line is printed whenever an
 * item changes and every second; it also carries the send counts and, with the agent, its counters. Options:
 * namesrv, group, topic (several comma-separated: sent to in turn), instance-name, fault-enable, rate (sends/s), send-timeout-ms, count (stop after this
 * many successful sends and print a {@code sent} line; 0: never), print-sends (true: a {@code send} line per
 * successful send, with the queue the client sent to, and a {@code failed_attempt} line per attempt the client's own
 * send hook saw fail, retried or not), agent (true: register the agent's hook, configured by
 * -Drrm.agent.*), latency-max and not-available-duration (comma-separated ms: the fault table,
 * {@code setLatencyMax}/{@code setNotAvailableDuration}; the client line's own when absent). The {@code stopped}
 * line carries the agent's Kafka refusal line, if it logged one.
 */
final class ProducerMain {
    private ProducerMain() {
    }

    private static long[] longs(String commaSeparated) {
        String[] parts = commaSeparated.split(",");
        long[] values = new long[parts.length];
        for (int i = 0; i < parts.length; i++) {
            values[i] = Long.parseLong(parts[i].trim());
        }
        return values;
    }

    static void run(Options o) throws Exception {
        final DefaultMQProducer producer = new DefaultMQProducer(o.require("group"));
        producer.setNamesrvAddr(o.require("namesrv"));
        producer.setInstanceName(o.get("instance-name", "test-producer"));
        producer.setSendLatencyFaultEnable(o.getBoolean("fault-enable", false));
        producer.setSendMsgTimeout((int) o.getLong("send-timeout-ms", 3000));
        String latencyMax = o.get("latency-max", null);
        if (latencyMax != null) {
            producer.setLatencyMax(longs(latencyMax));
            producer.setNotAvailableDuration(longs(o.require("not-available-duration")));
        }
        final RebalanceAgent agent = o.getBoolean("agent", false) ? RebalanceAgent.fromSystemProperties() : null;
        if (agent != null) {
            agent.register(producer);
        }
        final boolean printSends = o.getBoolean("print-sends", false);
        if (printSends) {
            producer.getDefaultMQProducerImpl().registerSendMessageHook(new FailedAttemptWitness());
        }
        producer.start();
        final String clientId = producer.getDefaultMQProducerImpl().getMqClientFactory().getClientId();
        Out.line("{\"kind\":\"started\",\"client_id\":" + Out.quote(clientId) + ",\"pid\":" + ConsumerMain.pid()
            + ",\"fault_enable\":" + producer.isSendLatencyFaultEnable() + "}");
        final String[] topics = o.require("topic").split(",");
        final long intervalNanos = 1000000000L / Math.max(1, o.getLong("rate", 20));
        final long count = o.getLong("count", 0);
        final AtomicLong ok = new AtomicLong();
        final AtomicLong failed = new AtomicLong();
        final AtomicLong unexpected = new AtomicLong();
        final java.util.concurrent.atomic.AtomicBoolean sending = new java.util.concurrent.atomic.AtomicBoolean(true);
        Thread sender = new Thread(new Runnable() {
            @Override
            public void run() {
                long next = System.nanoTime();
                long turn = 0;
                while (sending.get()) {
                    if (count > 0 && ok.get() >= count) {
                        Out.line("{\"kind\":\"sent\",\"sends_ok\":" + ok.get() + ",\"sends_failed\":" + failed.get()
                            + "}");
                        return;
                    }
                    try {
                        SendResult result = producer.send(
                            new Message(topics[(int) (turn++ % topics.length)], "probe".getBytes("UTF-8")));
                        if (result != null) {
                            ok.incrementAndGet();
                            if (printSends) {
                                Out.line("{\"kind\":\"send\",\"broker\":"
                                    + Out.quote(result.getMessageQueue().getBrokerName()) + ",\"queue_id\":"
                                    + result.getMessageQueue().getQueueId() + ",\"status\":"
                                    + Out.quote(result.getSendStatus().name()) + "}");
                            }
                        }
                    } catch (InterruptedException e) {
                        return;
                    } catch (Throwable t) {
                        if (fromAgent(t)) {
                            unexpected.incrementAndGet();  // the agent must never throw into the application
                            Out.line("{\"kind\":\"unexpected\",\"error\":" + Out.quote(t.toString()) + "}");
                        } else {
                            failed.incrementAndGet();  // RocketMQ's own failure (after its retries, or a slow name server)
                        }
                    }
                    next += intervalNanos;
                    long wait = next - System.nanoTime();
                    if (wait > 0) {
                        try {
                            Thread.sleep(wait / 1000000L, (int) (wait % 1000000L));
                        } catch (InterruptedException e) {
                            return;
                        }
                    } else {
                        next = System.nanoTime();
                    }
                }
            }
        }, "steady-sender");
        sender.setDaemon(true);
        sender.start();
        final Object tolerance = Reflect.field(Reflect.field(producer.getDefaultMQProducerImpl(), "mqFaultStrategy"),
            "latencyFaultTolerance");
        Thread watcher = new Thread(new Runnable() {
            @Override
            public void run() {
                String last = null;
                long lastPrinted = 0;
                while (true) {
                    long now = System.currentTimeMillis();
                    String items = items(tolerance, now);
                    if (!items.equals(last) || now - lastPrinted >= 1000) {
                        Out.line("{\"kind\":\"faults\",\"time\":" + now + ",\"client_id\":" + Out.quote(clientId)
                            + ",\"items\":" + items + ",\"sends_ok\":" + ok.get() + ",\"sends_failed\":" + failed.get()
                            + ",\"unexpected\":" + unexpected.get()
                            + (agent == null ? "" : ",\"agent\":" + agent.counters().toJson()) + "}");
                        last = items;
                        lastPrinted = now;
                    }
                    try {
                        Thread.sleep(20);
                    } catch (InterruptedException e) {
                        return;
                    }
                }
            }
        }, "fault-items-watcher");
        watcher.setDaemon(true);
        watcher.start();
        final Thread senderThread = sender;
        TestClient.awaitTermination(new java.util.concurrent.Callable<java.util.List<String>>() {
            @Override
            public java.util.List<String> call() throws Exception {
                sending.set(false);  // the current send finishes; no interrupt reaches the client
                senderThread.join(10000);
                producer.shutdown();
                if (agent != null) {
                    agent.close(8000);
                }
                String refusal = agent == null ? null : agent.counters().kafkaRefusal();
                return java.util.Collections.singletonList("{\"kind\":\"stopped\",\"sends_ok\":" + ok.get()
                    + ",\"sends_failed\":" + failed.get() + ",\"unexpected\":" + unexpected.get()
                    + (agent == null ? "" : ",\"agent\":" + agent.counters().toJson())
                    + (refusal == null ? "" : ",\"agent_refusal\":" + Out.quote(refusal)) + "}");
            }
        });
    }

    /** Whether the agent's code is anywhere in the throwable's stack traces (its own or a cause's). */
    static boolean fromAgent(Throwable t) {
        for (Throwable e = t; e != null; e = e.getCause() == e ? null : e.getCause()) {
            for (StackTraceElement frame : e.getStackTrace()) {
                if (frame.getClassName().startsWith("io.github.rrm.agent.")) {
                    return true;
                }
            }
        }
        return false;
    }

    /**
     * The fault items, sorted by broker: name, currentLatency, startTimestamp (the time the broker is available
     * again), and the tolerance's isAvailable at {@code now}; 5.x items also have reachableFlag.
     */
    static String items(Object tolerance, long now) {
        Map<?, ?> table = (Map<?, ?>) Reflect.field(tolerance, "faultItemTable");
        TreeMap<String, String> byBroker = new TreeMap<String, String>();
        for (Object item : table.values()) {
            String name = (String) Reflect.field(item, "name");
            StringBuilder out = new StringBuilder("{\"broker\":").append(Out.quote(name))
                .append(",\"current_latency\":").append(Reflect.field(item, "currentLatency"))
                .append(",\"start_timestamp\":").append(Reflect.field(item, "startTimestamp"))
                .append(",\"available\":").append(Reflect.call(tolerance, "isAvailable", name));
            if (Reflect.hasField(item, "reachableFlag")) {
                out.append(",\"reachable\":").append(Reflect.field(item, "reachableFlag"));
            }
            byBroker.put(name, out.append('}').toString());
        }
        StringBuilder out = new StringBuilder("[");
        for (String item : byBroker.values()) {
            out.append(out.length() > 1 ? "," : "").append(item);
        }
        return out.append(']').toString();
    }

    /** Prints every attempt the client reports failed to its send hooks: what the client did, with no agent code. */
    private static final class FailedAttemptWitness implements SendMessageHook {
        @Override
        public String hookName() {
            return "failed-attempt-witness";
        }

        @Override
        public void sendMessageBefore(SendMessageContext context) {
        }

        @Override
        public void sendMessageAfter(SendMessageContext context) {
            if (context.getException() != null && context.getMq() != null) {
                Out.line("{\"kind\":\"failed_attempt\",\"broker\":" + Out.quote(context.getMq().getBrokerName())
                    + ",\"queue_id\":" + context.getMq().getQueueId() + ",\"error\":"
                    + Out.quote(context.getException().getClass().getName()) + "}");
            }
        }
    }
}
