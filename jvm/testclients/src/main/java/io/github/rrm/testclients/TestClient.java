package io.github.rrm.testclients;

/**
 * A real RocketMQ client process for the project's tests and benchmarks, compiled once per client line:
 * {@code consumer} (push consumers, one or several independent ones per process, each printing its own held
 * queues), {@code producer} (a producer that prints its own latency-fault items) and {@code bench} (send overhead
 * of the agent's hook). Each prints JSON lines on stdout; {@code localenv/rocketmq_clients.py} starts and reads
 * them.
 */
public final class TestClient {
    private TestClient() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 0) {
            throw new IllegalArgumentException("usage: consumer|producer|bench --option value ...");
        }
        Options options = new Options(args, 1);
        if (args[0].equals("consumer")) {
            ConsumerMain.run(options);
        } else if (args[0].equals("producer")) {
            ProducerMain.run(options);
        } else if (args[0].equals("bench")) {
            BenchMain.run(options);
        } else {
            throw new IllegalArgumentException("unknown mode " + args[0]);
        }
    }

    /** Block until SIGTERM; the shutdown hook then stops the clients and prints the {@code stopped} lines it returns. */
    static void awaitTermination(final java.util.concurrent.Callable<java.util.List<String>> stop)
        throws InterruptedException {
        final Object done = new Object();
        Runtime.getRuntime().addShutdownHook(new Thread(new Runnable() {
            @Override
            public void run() {
                try {
                    for (String line : stop.call()) {
                        Out.line(line);
                    }
                } catch (Exception e) {
                    Out.line("{\"kind\":\"stopped\",\"error\":" + Out.quote(e.toString()) + "}");
                }
            }
        }));
        synchronized (done) {
            while (true) {
                done.wait();
            }
        }
    }
}
