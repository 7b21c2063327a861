package io.github.rrm.agent;

import java.util.Collections;
import java.util.Map;
import java.util.WeakHashMap;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.producer.DefaultMQProducer;

/**
 * The one {@link RebalanceAgent} of a JVM the agent was attached to ({@link AgentMain}), made when the first
 * client starts; every started producer and push consumer is registered with it once. At JVM exit it gives
 * Kafka a few seconds for buffered events and prints its counters on stderr (its own logging is relocated
 * with its slf4j, so it does not reach the application's log).
 */
public final class AutoRegistration {
    private static final long CLOSE_TIMEOUT_MS = 5000;
    private static volatile AgentConfig config;
    private static RebalanceAgent agent;
    private static final Map<Object, Boolean> REGISTERED = Collections.synchronizedMap(new WeakHashMap<Object, Boolean>());

    private AutoRegistration() {
    }

    static void configure(AgentConfig value) {
        config = value;
    }

    public static void producerStarted(Object producer) {
        try {
            RebalanceAgent a = agent();
            if (a != null && REGISTERED.put(producer, Boolean.TRUE) == null) {
                a.register((DefaultMQProducer) producer);
            }
        } catch (Throwable t) {
            failed(t);
        }
    }

    public static void pushConsumerStarted(Object consumer) {
        try {
            RebalanceAgent a = agent();
            if (a != null && REGISTERED.put(consumer, Boolean.TRUE) == null) {
                a.register((DefaultMQPushConsumer) consumer);
            }
        } catch (Throwable t) {
            failed(t);
        }
    }

    private static synchronized RebalanceAgent agent() {
        if (agent == null && config != null) {
            final RebalanceAgent made = new RebalanceAgent(config);
            Runtime.getRuntime().addShutdownHook(new Thread(new Runnable() {
                @Override
                public void run() {
                    made.close(CLOSE_TIMEOUT_MS);
                    System.err.println("rocketmq-rebalance-agent closed: " + made.counters().toJson());
                }
            }, "rrm-agent-shutdown"));
            agent = made;
        }
        return agent;
    }

    private static void failed(Throwable t) {
        RebalanceAgent a = agent;
        if (a != null) {
            a.counters().agentErrors.incrementAndGet();
        }
        System.err.println("rocketmq-rebalance-agent: a client was not registered: " + t);
    }
}
