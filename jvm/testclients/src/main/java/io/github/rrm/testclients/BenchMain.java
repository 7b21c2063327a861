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
 * messages to the same topic. A round is {@code messages} sends per side, made in alternating chunks (which
 * side goes first alternates from chunk to chunk and round to round), so both sides see the same machine load.
 * Per round and side it prints a {@code round} line: sends/s, p50/p99 latency (microseconds), and CPU
 * nanoseconds of the process, of the sending thread, of the agent's own threads (its publisher and Kafka's
 * network thread; all of it the hooked side's, also what they spend while the plain side sends) and the
 * sending thread's time inside the hook: wall time around every call, CPU time around the calls of one send in
 * {@value #CPU_SAMPLE}, scaled up (it holds about one thread-CPU read per call, whose cost the summary gives).
 * Then a {@code summary} line with the agent's counters. Options: namesrv, topic, messages (per round and
 * side), rounds, chunk, warmup (messages per side first).
 */
final class BenchMain {
    private static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();
    static final int CPU_SAMPLE = 16;
    /** What one thread-CPU read itself costs: each timed call's CPU holds about one (reported, not taken off). */
    private static final long CPU_READ_NANOS = cpuReadNanos();

    private BenchMain() {
    }

    static void run(Options o) throws Exception {
        String topic = o.require("topic");
        int messages = (int) o.getLong("messages", 100000);
        int rounds = (int) o.getLong("rounds", 5);
        int warmup = (int) o.getLong("warmup", 10000);
        int chunk = (int) o.getLong("chunk", 10000);
        RebalanceAgent agent = RebalanceAgent.fromSystemProperties();
        DefaultMQProducer plain = producer(o, "bench_plain");
        DefaultMQProducer hooked = producer(o, "bench_hooked");
        AtomicLong[] hookNanos = timeTheHook(hooked, agent);
        plain.start();
        hooked.start();
        byte[] body = new byte[128];
        send(plain, topic, body, new long[warmup], 0, warmup);
        send(hooked, topic, body, new long[warmup], 0, warmup);
        DefaultMQProducer[] producers = {plain, hooked};
        for (int r = 0; r < rounds; r++) {
            // Per side: wall, process CPU, sending thread CPU, agent threads CPU, hook wall, hook CPU.
            long[][] totals = new long[2][6];
            long[][] latencies = new long[2][messages];
            int sent = 0;
            for (int c = 0; sent < messages; c++) {
                int count = Math.min(chunk, messages - sent);
                for (int side = 0; side < 2; side++) {
                    int s = ((r + c) % 2 == 0) ? side : 1 - side;  // which side goes first alternates
                    long[] t = totals[s];
                    long processStart = processCpuNanos();
                    long threadStart = THREADS.getCurrentThreadCpuTime();
                    long agentStart = agentThreadsCpuNanos();
                    long hookWallStart = hookNanos[0].get();
                    long hookCpuStart = hookNanos[1].get();
                    long start = System.nanoTime();
                    send(producers[s], topic, body, latencies[s], sent, count);
                    t[0] += System.nanoTime() - start;
                    t[4] += hookNanos[0].get() - hookWallStart;
                    t[5] += (hookNanos[1].get() - hookCpuStart) * CPU_SAMPLE;
                    t[3] += agentThreadsCpuNanos() - agentStart;
                    t[2] += THREADS.getCurrentThreadCpuTime() - threadStart;
                    t[1] += processCpuNanos() - processStart;
                }
                sent += count;
            }
            // The agent's threads work for the hooked side only, also while the plain side sends (they drain
            // what the hooked side's last chunk left): their CPU in plain chunks is moved to the hooked side.
            long agentInPlain = totals[0][3];
            totals[0][1] -= agentInPlain;
            totals[1][1] += agentInPlain;
            totals[1][3] += agentInPlain;
            totals[0][3] = 0;
            for (int s = 0; s < 2; s++) {
                long[] t = totals[s];
                Arrays.sort(latencies[s]);
                Out.line("{\"kind\":\"round\",\"round\":" + r + ",\"hook\":" + (s == 1) + ",\"messages\":" + messages
                    + ",\"chunk\":" + chunk + ",\"sends_per_s\":" + String.format("%.1f", messages / (t[0] / 1e9))
                    + ",\"p50_us\":" + percentile(latencies[s], 50) + ",\"p99_us\":" + percentile(latencies[s], 99)
                    + ",\"process_cpu_ns\":" + t[1] + ",\"sending_thread_cpu_ns\":" + t[2]
                    + ",\"agent_threads_cpu_ns\":" + t[3] + ",\"hook_wall_ns\":" + t[4]
                    + ",\"hook_cpu_ns\":" + t[5]
                    + ",\"agent\":" + agent.counters().toJson() + "}");
            }
        }
        plain.shutdown();
        hooked.shutdown();
        agent.close(5000);
        Out.line("{\"kind\":\"summary\",\"messages_per_round\":" + messages + ",\"rounds\":" + rounds
            + ",\"cpu_read_ns\":" + CPU_READ_NANOS
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

    private static long cpuReadNanos() {
        int reads = 20000;
        THREADS.getCurrentThreadCpuTime();
        long first = THREADS.getCurrentThreadCpuTime();
        for (int i = 0; i < reads; i++) {
            THREADS.getCurrentThreadCpuTime();
        }
        return (THREADS.getCurrentThreadCpuTime() - first) / (reads + 1);
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

    /** Send {@code count} messages; each one's latency in microseconds into {@code latencies} from {@code at}. */
    private static void send(DefaultMQProducer p, String topic, byte[] body, long[] latencies, int at, int count)
        throws Exception {
        for (int i = at; i < at + count; i++) {
            long begin = System.nanoTime();
            p.send(new Message(topic, body));
            latencies[i] = (System.nanoTime() - begin) / 1000L;
        }
    }

    private static long percentile(long[] sorted, int p) {
        return sorted[Math.min(sorted.length - 1, (int) Math.ceil(p / 100.0 * sorted.length) - 1)];
    }
}
