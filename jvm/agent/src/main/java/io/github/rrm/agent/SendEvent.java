package io.github.rrm.agent;

/**
 * One send attempt as the hook saw it, before it is a {@code send_result} event: the hook only copies these
 * values (references and numbers) and the publisher's thread encodes them ({@link SendEventEncoder}), so the
 * application's sending thread never builds JSON. Equal when the fields that stay the same over a producer's
 * sends to one queue are equal: the encoder's cache key for their bytes.
 */
final class SendEvent {
    final long eventTime;
    final long latencyMs;
    final int attempt;
    final String producerId;
    final String producerGroup;
    final String topic;
    final String broker;
    final int queueId;
    final String outcome;
    final boolean sendLatencyFaultEnable;

    SendEvent(long eventTime, long latencyMs, int attempt, String producerId, String producerGroup, String topic,
        String broker, int queueId, String outcome, boolean sendLatencyFaultEnable) {
        this.eventTime = eventTime;
        this.latencyMs = latencyMs;
        this.attempt = attempt;
        this.producerId = producerId;
        this.producerGroup = producerGroup;
        this.topic = topic;
        this.broker = broker;
        this.queueId = queueId;
        this.outcome = outcome;
        this.sendLatencyFaultEnable = sendLatencyFaultEnable;
    }

    @Override
    public boolean equals(Object other) {
        if (this == other) {
            return true;
        }
        if (!(other instanceof SendEvent)) {
            return false;
        }
        SendEvent o = (SendEvent) other;
        return queueId == o.queueId && same(producerId, o.producerId) && same(producerGroup, o.producerGroup)
            && same(topic, o.topic) && same(broker, o.broker);
    }

    @Override
    public int hashCode() {
        int h = queueId;
        h = 31 * h + hash(producerId);
        h = 31 * h + hash(producerGroup);
        h = 31 * h + hash(topic);
        return 31 * h + hash(broker);
    }

    private static boolean same(String a, String b) {
        return a == null ? b == null : a.equals(b);
    }

    private static int hash(String value) {
        return value == null ? 0 : value.hashCode();
    }
}
