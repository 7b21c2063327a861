package io.github.rrm.testclients;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

import io.github.rrm.agent.RebalanceAgent;
import org.apache.rocketmq.client.hook.SendMessageContext;
import org.apache.rocketmq.client.hook.SendMessageHook;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.message.Message;

/**
 * The agent's cost per send: two producers in one JVM, one with the agent's hook and one without, sending SYNC
 * messages to the same topic in alternating rounds (which side goes first alternates too). Per round and side
 * it prints a {@code round} line: sends/s, p50/p99 latency (microseconds), and CPU nanoseconds of the process,
 * of the sending thread, of the agent's own threads (its publisher and Kafka's network thread), and the sending
 * thread's time inside the agent's hook: wall time around every call, CPU time around the calls of one send in
 * {@value #CPU_SAMPLE} (scaled up). Then a {@code summary} line with the
 * agent's counters. Options: namesrv, topic, messages (per round), rounds, warmup (messages per side first).
 */
final class BenchMain {
    private static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();
    static final int CPU_SAMPLE = 16;

    private BenchMain() {
    }

    static void run(Options o) throws Exception {
        String topic = o.require("topic");
        int messages = (int) o.getLong("messages", 100000);
        int rounds = (int) o.getLong("rounds", 5);
        int warmup = (int) o.getLong("warmup", 10000);
        RebalanceAgent agent = RebalanceAgent.fromSystemProperties();
        DefaultMQProducer plain = producer(o, "bench_plain");
        DefaultMQProducer hooked = producer(o, "bench_hooked");
        AtomicLong[] hookNanos = timeTheHook(hooked, agent);
        plain.start();
        hooked.start();
        byte[] body = new byte[128];
        round(plain, topic, body, warmup);
        round(hooked, topic, body, warmup);
        for (int r = 0; r < rounds; r++) {
            for (int side = 0; side < 2; side++) {
                int s = (r % 2 == 0) ? side : 1 - side;
                DefaultMQProducer p = s == 0 ? plain : hooked;
                long processStart = processCpuNanos();
                long threadStart = THREADS.getCurrentThreadCpuTime();
                long agentStart = agentThreadsCpuNanos();
                long hookWallStart = hookNanos[0].get();
                long hookCpuStart = hookNanos[1].get();
                long start = System.nanoTime();
                long[] latencies = round(p, topic, body, messages);
                double seconds = (System.nanoTime() - start) / 1e9;
                long hookWall = hookNanos[0].get() - hookWallStart;
                long hookCpu = (hookNanos[1].get() - hookCpuStart) * CPU_SAMPLE;
                long agentCpu = agentThreadsCpuNanos() - agentStart;
                long thread = THREADS.getCurrentThreadCpuTime() - threadStart;
                long process = processCpuNanos() - processStart;
                Arrays.sort(latencies);
                Out.line("{\"kind\":\"round\",\"round\":" + r + ",\"hook\":" + (s == 1) + ",\"messages\":" + messages
                    + ",\"sends_per_s\":" + String.format("%.1f", messages / seconds)
                    + ",\"p50_us\":" + percentile(latencies, 50) + ",\"p99_us\":" + percentile(latencies, 99)
                    + ",\"process_cpu_ns\":" + process + ",\"sending_thread_cpu_ns\":" + thread
                    + ",\"agent_threads_cpu_ns\":" + agentCpu + ",\"hook_wall_ns\":" + hookWall
                    + ",\"hook_cpu_ns\":" + hookCpu
                    + ",\"agent\":" + agent.counters().toJson() + "}");
            }
        }
        plain.shutdown();
        hooked.shutdown();
        agent.close(5000);
        Out.line("{\"kind\":\"summary\",\"messages_per_round\":" + messages + ",\"rounds\":" + rounds
            + ",\"agent\":" + agent.counters().toJson() + "}");
        System.exit(0);  // the 5.x client leaves non-daemon scheduler threads behind after shutdown()
    }

    /**
     * Registers the agent on {@code producer} with each of the hook's calls timed: {@code [0]} the wall time of
     * every call, {@code [1]} the sending thread's CPU in the calls of every {@value #CPU_SAMPLE}th send (a
     * thread-CPU read is a system call, too dear for every send), live.
     */
    @SuppressWarnings("unchecked")
    private static AtomicLong[] timeTheHook(DefaultMQProducer producer, RebalanceAgent agent) {
        final SendMessageHook hook = agent.register(producer);
        final AtomicLong wall = new AtomicLong();
        final AtomicLong sampledCpu = new AtomicLong();
        final AtomicLong calls = new AtomicLong();
        final ThreadLocal<Boolean> sampled = new ThreadLocal<Boolean>();
        List<SendMessageHook> hooks = (List<SendMessageHook>) Reflect.field(producer.getDefaultMQProducerImpl(),
            "sendMessageHookList");
        hooks.set(hooks.indexOf(hook), new SendMessageHook() {
            @Override
            public String hookName() {
                return hook.hookName();
            }

            @Override
            public void sendMessageBefore(SendMessageContext context) {
                boolean sample = calls.incrementAndGet() % CPU_SAMPLE == 0;
                sampled.set(sample);
                long cpu = sample ? THREADS.getCurrentThreadCpuTime() : 0;
                long begin = System.nanoTime();
                hook.sendMessageBefore(context);
                wall.addAndGet(System.nanoTime() - begin);
                if (sample) {
                    sampledCpu.addAndGet(THREADS.getCurrentThreadCpuTime() - cpu);
                }
            }

            @Override
            public void sendMessageAfter(SendMessageContext context) {
                boolean sample = Boolean.TRUE.equals(sampled.get());  // SYNC: the same thread as the before-call
                long cpu = sample ? THREADS.getCurrentThreadCpuTime() : 0;
                long begin = System.nanoTime();
                hook.sendMessageAfter(context);
                wall.addAndGet(System.nanoTime() - begin);
                if (sample) {
                    sampledCpu.addAndGet(THREADS.getCurrentThreadCpuTime() - cpu);
                }
            }
        });
        return new AtomicLong[] {wall, sampledCpu};
    }

    /** CPU of the agent's threads: its own ({@code rrm-agent-*}) and its Kafka producer's network thread. */
    private static long agentThreadsCpuNanos() {
        long total = 0;
        for (Thread t : Thread.getAllStackTraces().keySet()) {
            String name = t.getName();
            if (name.startsWith("rrm-agent-") || name.startsWith("kafka-producer-network-thread")) {
                total += Math.max(0, THREADS.getThreadCpuTime(t.getId()));
            }
        }
        return total;
    }

    private static long processCpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
            .getProcessCpuTime();
    }

    private static DefaultMQProducer producer(Options o, String group) {
        DefaultMQProducer p = new DefaultMQProducer(group);
        p.setNamesrvAddr(o.require("namesrv"));
        p.setInstanceName(group);
        return p;
    }

    /** Send {@code count} messages; each one's latency in microseconds. */
    private static long[] round(DefaultMQProducer p, String topic, byte[] body, int count) throws Exception {
        long[] latencies = new long[count];
        for (int i = 0; i < count; i++) {
            long begin = System.nanoTime();
            p.send(new Message(topic, body));
            latencies[i] = (System.nanoTime() - begin) / 1000L;
        }
        return latencies;
    }

    private static long percentile(long[] sorted, int p) {
        return sorted[Math.min(sorted.length - 1, (int) Math.ceil(p / 100.0 * sorted.length) - 1)];
    }
}
