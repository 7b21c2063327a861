package io.github.rrm.testclients;

import java.util.Arrays;

import io.github.rrm.agent.RebalanceAgent;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.message.Message;

/**
 * The agent's cost per send: two producers in one JVM, one with the agent's hook and one without, sending SYNC
 * messages to the same topic in alternating rounds. Prints one {@code round} line per round and side (sends/s,
 * p50/p99 latency in microseconds, the process's CPU milliseconds during the round, which include the agent's
 * publishing thread) and a {@code summary} line. Options: namesrv, topic, messages (per round),
 * rounds, warmup (messages per side before measuring).
 */
final class BenchMain {
    private BenchMain() {
    }

    static void run(Options o) throws Exception {
        String topic = o.require("topic");
        int messages = (int) o.getLong("messages", 2000);
        int rounds = (int) o.getLong("rounds", 6);
        int warmup = (int) o.getLong("warmup", 500);
        RebalanceAgent agent = RebalanceAgent.fromSystemProperties();
        DefaultMQProducer plain = producer(o, "bench_plain");
        DefaultMQProducer hooked = producer(o, "bench_hooked");
        agent.register(hooked);
        plain.start();
        hooked.start();
        byte[] body = new byte[128];
        round(plain, topic, body, warmup);
        round(hooked, topic, body, warmup);
        double[] rate = new double[2];
        long[] cpuNanos = new long[2];
        long[][] all = new long[2][];
        for (int r = 0; r < rounds; r++) {
            for (int side = 0; side < 2; side++) {
                int s = (r % 2 == 0) ? side : 1 - side;  // alternate which side goes first
                DefaultMQProducer p = s == 0 ? plain : hooked;
                long cpuStart = processCpuNanos();
                long start = System.nanoTime();
                long[] latencies = round(p, topic, body, messages);
                double seconds = (System.nanoTime() - start) / 1e9;
                long cpu = processCpuNanos() - cpuStart;
                cpuNanos[s] += cpu;
                rate[s] += messages / seconds;
                all[s] = all[s] == null ? latencies : concat(all[s], latencies);
                Out.line("{\"kind\":\"round\",\"round\":" + r + ",\"hook\":" + (s == 1) + ",\"sends_per_s\":"
                    + String.format("%.1f", messages / seconds) + ",\"p50_us\":" + percentile(latencies, 50)
                    + ",\"p99_us\":" + percentile(latencies, 99) + ",\"cpu_ms\":" + cpu / 1000000L + "}");
            }
        }
        plain.shutdown();
        hooked.shutdown();
        agent.close(5000);
        Out.line("{\"kind\":\"summary\",\"messages_per_round\":" + messages + ",\"rounds\":" + rounds
            + ",\"without_hook\":{\"sends_per_s\":" + String.format("%.1f", rate[0] / rounds) + ",\"p50_us\":"
            + percentile(all[0], 50) + ",\"p99_us\":" + percentile(all[0], 99) + ",\"cpu_ms\":" + cpuNanos[0] / 1000000L + "}"
            + ",\"with_hook\":{\"sends_per_s\":" + String.format("%.1f", rate[1] / rounds) + ",\"p50_us\":"
            + percentile(all[1], 50) + ",\"p99_us\":" + percentile(all[1], 99) + ",\"cpu_ms\":" + cpuNanos[1] / 1000000L + "}"
            + ",\"agent\":" + agent.counters().toJson() + "}");
        System.exit(0);  // the 5.x client leaves non-daemon scheduler threads behind after shutdown()
    }

    private static long processCpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) java.lang.management.ManagementFactory
            .getOperatingSystemMXBean()).getProcessCpuTime();
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

    private static long[] concat(long[] a, long[] b) {
        long[] out = Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, out, a.length, b.length);
        return out;
    }

    private static long percentile(long[] values, int p) {
        long[] sorted = values.clone();
        Arrays.sort(sorted);
        return sorted[Math.min(sorted.length - 1, (int) Math.ceil(p / 100.0 * sorted.length) - 1)];
    }
}
