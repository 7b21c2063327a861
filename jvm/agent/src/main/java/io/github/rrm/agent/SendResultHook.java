package io.github.rrm.agent;

import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;

import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.hook.SendMessageContext;
import org.apache.rocketmq.client.hook.SendMessageHook;
import org.apache.rocketmq.client.impl.CommunicationMode;
import org.apache.rocketmq.client.impl.producer.DefaultMQProducerImpl;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.exception.RemotingException;
import org.apache.rocketmq.remoting.exception.RemotingTimeoutException;

/**
 * Publishes one {@code send_result} event (docs/events.md) per send attempt a RocketMQ producer makes.
 *
 * <p>The producer calls {@link #sendMessageBefore} and {@link #sendMessageAfter} with the same context object
 * around each attempt; the latency is the time between the two calls, kept in the context's properties. An
 * ASYNC send calls the after-hook twice, at dispatch (no result, no exception) and at completion: only the
 * completion is an event. Attempts of one message are numbered by its {@code UNIQ_KEY} (the same on every
 * retry) in a bounded table. The hook copies the attempt's values into a {@link SendEvent}; the publisher's
 * thread encodes it. Nothing here throws into the producer and nothing waits for Kafka.
 */
public final class SendResultHook implements SendMessageHook {
    static final String BEGIN_PROPERTY = "rrm.agent.begin.nanos";
    static final String ATTEMPT_PROPERTY = "rrm.agent.attempt";
    private static final String UNIQ_KEY = "UNIQ_KEY";

    private final EventPublisher publisher;
    private final AgentCounters counters;
    private final Map<String, Integer> attempts;

    SendResultHook(EventPublisher publisher, AgentCounters counters, AgentConfig config) {
        this.publisher = publisher;
        this.counters = counters;
        final int capacity = config.attemptKeys();
        this.attempts = new LinkedHashMap<String, Integer>(Math.min(capacity, 1024), 0.75f, true) {
            private static final long serialVersionUID = 1L;

            @Override
            protected boolean removeEldestEntry(Map.Entry<String, Integer> eldest) {
                return size() > capacity;
            }
        };
    }

    @Override
    public String hookName() {
        return "rocketmq-rebalance-agent";
    }

    @Override
    public void sendMessageBefore(SendMessageContext context) {
        try {
            Map<String, String> props = context.getProps();
            if (props == null) {
                props = new HashMap<String, String>(4);
                context.setProps(props);
            }
            props.put(BEGIN_PROPERTY, Long.toString(System.nanoTime()));
            int attempt = numberAttempt(context.getMessage());
            if (attempt > 1) {  // the first attempt, nearly every one, is the absence of the property
                props.put(ATTEMPT_PROPERTY, Integer.toString(attempt));
            }
        } catch (Throwable t) {
            counters.agentErrors.incrementAndGet();
        }
    }

    @Override
    public void sendMessageAfter(SendMessageContext context) {
        try {
            long end = System.nanoTime();
            long eventTime = System.currentTimeMillis();
            Map<String, String> props = context.getProps();
            String begin = props == null ? null : props.get(BEGIN_PROPERTY);
            if (begin == null) {
                return;  // published already (an ASYNC send's later call) or never seen before
            }
            Exception error = context.getException();
            if (context.getSendResult() == null && error == null
                && context.getCommunicationMode() == CommunicationMode.ASYNC) {
                counters.asyncDispatches.incrementAndGet();
                return;  // ASYNC dispatch: the result comes with the second call
            }
            props.remove(BEGIN_PROPERTY);
            String attempt = props.remove(ATTEMPT_PROPERTY);
            long latencyMs = Math.max(0, (end - Long.parseLong(begin)) / 1000000L);
            DefaultMQProducerImpl producer = context.getProducer();
            MessageQueue mq = context.getMq();
            SendEvent event = new SendEvent(eventTime, Math.min(latencyMs, 3600000L),
                attempt == null ? 1 : Integer.parseInt(attempt), producer.getMqClientFactory().getClientId(),
                context.getProducerGroup(), mq.getTopic(), mq.getBrokerName(), mq.getQueueId(),
                outcome(error, context.getCommunicationMode()), producer.isSendLatencyFaultEnable());
            counters.sendAttempts.incrementAndGet();
            publisher.offer(event);
        } catch (Throwable t) {
            counters.agentErrors.incrementAndGet();
        }
    }

    private int numberAttempt(Message message) {
        String key = message == null ? null : message.getProperty(UNIQ_KEY);
        if (key == null) {
            return 1;
        }
        int attempt;
        synchronized (attempts) {
            Integer previous = attempts.get(key);
            attempt = previous == null ? 1 : previous.intValue() + 1;
            attempts.put(key, attempt);
        }
        if (attempt > 1) {
            counters.retryAttempts.incrementAndGet();
        }
        return attempt;
    }

    /**
     * The contract's outcome for an attempt's exception (null: a result, whatever its SendStatus, which the
     * producer treats as a success). An ASYNC completion reports a timeout or a failed request as an
     * MQClientException, after which the producer isolates the broker as for a remoting error.
     */
    static String outcome(Throwable error, CommunicationMode mode) {
        if (error == null) {
            return "OK";
        }
        if (error instanceof RemotingTimeoutException) {
            return "TIMEOUT";
        }
        if (error instanceof RemotingException) {
            return "REMOTING_ERROR";
        }
        if (error instanceof MQBrokerException) {
            return "BROKER_ERROR";
        }
        if (error instanceof InterruptedException) {
            return "INTERRUPTED";
        }
        if (mode == CommunicationMode.ASYNC) {
            return error.getCause() instanceof RemotingTimeoutException ? "TIMEOUT" : "REMOTING_ERROR";
        }
        return "CLIENT_ERROR";
    }
}
