package io.github.rrm.agent;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.producer.DefaultMQProducer;

/**
 * The agent an application creates once and registers its RocketMQ producers and consumers with:
 *
 * <pre>
 * RebalanceAgent agent = RebalanceAgent.fromSystemProperties();   // -Drrm.agent.bootstrap.servers=...
 * agent.register(producer);                                     // or agent.register(pushConsumer)
 * </pre>
 *
 * A producer gets a {@link SendResultHook}; a push consumer gets a reporter of its held queues. Both publish
 * through one bounded, never-blocking buffer to Kafka ({@link AgentCounters} say what was published and
 * dropped). {@link #close()} stops the reporters and flushes what it can.
 */
public final class RebalanceAgent implements AutoCloseable {
    private final AgentConfig config;
    private final AgentCounters counters = new AgentCounters();
    private final EventPublisher publisher;
    private final ScheduledExecutorService scheduler;
    private final List<ConsumerAssignmentReporter> reporters = new ArrayList<ConsumerAssignmentReporter>();

    public RebalanceAgent(AgentConfig config) {
        this.config = config;
        this.publisher = new EventPublisher(config, counters);
        this.scheduler = Executors.newSingleThreadScheduledExecutor(new ThreadFactory() {
            @Override
            public Thread newThread(Runnable r) {
                Thread thread = new Thread(r, "rrm-agent-reporter");
                thread.setDaemon(true);
                return thread;
            }
        });
    }

    /** An agent configured by {@code -Drrm.agent.*} system properties. */
    public static RebalanceAgent fromSystemProperties() {
        return new RebalanceAgent(AgentConfig.fromSystemProperties());
    }

    /** Publish every send attempt of {@code producer} (before or after it starts). Returns the hook. */
    public SendResultHook register(DefaultMQProducer producer) {
        SendResultHook hook = new SendResultHook(publisher, counters, config);
        producer.getDefaultMQProducerImpl().registerSendMessageHook(hook);
        return hook;
    }

    /** Publish {@code consumer}'s held queues on every change and periodically (before or after it starts). */
    public void register(DefaultMQPushConsumer consumer) {
        ConsumerAssignmentReporter reporter = new ConsumerAssignmentReporter(consumer, publisher, counters, config);
        synchronized (reporters) {
            reporters.add(reporter);
        }
        long every = config.reportCheckIntervalMs();
        scheduler.scheduleWithFixedDelay(reporter, every, every, TimeUnit.MILLISECONDS);
    }

    /** The counters (live: every read shows the current values). */
    public AgentCounters counters() {
        return counters;
    }

    public AgentConfig config() {
        return config;
    }

    /** Stop reporting, then give Kafka up to {@code timeoutMs} for buffered events. */
    public void close(long timeoutMs) {
        scheduler.shutdownNow();
        publisher.close(timeoutMs);
    }

    @Override
    public void close() {
        close(5000);
    }
}
