package io.github.rrm.agent;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

/**
 * What the agent did since it started: events accepted, published and dropped, send attempts seen, and
 * failures of its own. Read by the application with {@link RebalanceAgent#counters()}, and logged
 * periodically; every value only grows.
 */
public final class AgentCounters {
    final AtomicLong sendAttempts = new AtomicLong();
    final AtomicLong retryAttempts = new AtomicLong();
    final AtomicLong asyncDispatches = new AtomicLong();
    final AtomicLong assignmentReports = new AtomicLong();
    final AtomicLong enqueued = new AtomicLong();
    final AtomicLong published = new AtomicLong();
    final AtomicLong droppedBufferFull = new AtomicLong();
    final AtomicLong droppedKafkaError = new AtomicLong();
    final AtomicLong agentErrors = new AtomicLong();
    final AtomicLong kafkaAuthRefused = new AtomicLong();
    volatile String kafkaRefusal;

    /** Send attempts whose result the hook turned into an event (ASYNC sends once, at completion). */
    public long sendAttempts() {
        return sendAttempts.get();
    }

    /** Attempts after a message's first: the client's retries (numbered by the message's UNIQ_KEY). */
    public long retryAttempts() {
        return retryAttempts.get();
    }

    /** ASYNC sends' dispatch calls of the after-hook, which carry no result and are not events. */
    public long asyncDispatches() {
        return asyncDispatches.get();
    }

    /** reported_assignment events made by consumer reporters. */
    public long assignmentReports() {
        return assignmentReports.get();
    }

    /** Events accepted into the buffer. */
    public long enqueued() {
        return enqueued.get();
    }

    /** Events Kafka acknowledged. */
    public long published() {
        return published.get();
    }

    /** Events dropped because the buffer was full (Kafka slow or down). */
    public long droppedBufferFull() {
        return droppedBufferFull.get();
    }

    /** Events Kafka did not take in time (delivery timeout, unreachable cluster, ...). */
    public long droppedKafkaError() {
        return droppedKafkaError.get();
    }

    /** Every event lost: buffer full plus Kafka errors. */
    public long dropped() {
        return droppedBufferFull.get() + droppedKafkaError.get();
    }

    /** Events Kafka refused because it refused the agent's authentication (counted in dropped_kafka_error too). */
    public long kafkaAuthRefused() {
        return kafkaAuthRefused.get();
    }

    /** The last line logged for Kafka refusing the agent's authentication, or null: it never did. */
    public String kafkaRefusal() {
        return kafkaRefusal;
    }

    /** The agent's own failures, caught so they never reach the application. */
    public long agentErrors() {
        return agentErrors.get();
    }

    /** Every counter by name, in a fixed order. */
    public Map<String, Long> asMap() {
        Map<String, Long> values = new LinkedHashMap<String, Long>();
        values.put("send_attempts", sendAttempts());
        values.put("retry_attempts", retryAttempts());
        values.put("async_dispatches", asyncDispatches());
        values.put("assignment_reports", assignmentReports());
        values.put("enqueued", enqueued());
        values.put("published", published());
        values.put("dropped", dropped());
        values.put("dropped_buffer_full", droppedBufferFull());
        values.put("dropped_kafka_error", droppedKafkaError());
        values.put("kafka_auth_refused", kafkaAuthRefused());
        values.put("agent_errors", agentErrors());
        return values;
    }

    /** The counters as one JSON object. */
    public String toJson() {
        StringBuilder out = new StringBuilder("{");
        for (Map.Entry<String, Long> e : asMap().entrySet()) {
            Json.field(out, e.getKey(), e.getValue().longValue());
        }
        return out.append('}').toString();
    }

    @Override
    public String toString() {
        return "rocketmq-rebalance-agent " + toJson();
    }
}
