package io.github.rrm.agent;

import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;

/**
 * Encodes a {@link SendEvent} as its {@code send_result} JSON (docs/events.md), in UTF-8, on the publisher's
 * thread. Of an event's bytes only the event time, the latency and the attempt change from send to send: the
 * rest (a producer's id and group, the queue; the outcome and the client's settings) is encoded once and
 * copied, so an event costs a cache lookup and a copy of about 300 bytes, not a JSON build and a UTF-8
 * conversion. The fields and their order are those the hook wrote before. Not thread-safe: one publisher.
 */
final class SendEventEncoder {
    /** Distinct (producer, queue) segments kept; past it the cache starts over (a producer with ever new ids). */
    static final int CACHE_LIMIT = 4096;
    private final byte[] head;
    private static final byte[] ATTEMPT = ",\"attempt\":".getBytes(StandardCharsets.UTF_8);

    private final boolean attemptField;
    private final Map<SendEvent, Segment> queues = new HashMap<SendEvent, Segment>();
    private final Map<String, byte[][]> tails = new HashMap<String, byte[][]>();
    private final byte[] digits = new byte[20];

    /** A producer's and queue's part of the event, and the Kafka key (the producer id). */
    static final class Segment {
        final byte[] middle;
        final byte[] key;

        Segment(byte[] middle, byte[] key) {
            this.middle = middle;
            this.key = key;
        }
    }

    /** {@code cluster} null: version 1 events, else version 2 naming it. */
    SendEventEncoder(boolean attemptField, String cluster) {
        this.attemptField = attemptField;
        StringBuilder out = new StringBuilder(80).append('{');
        Json.field(out, "type", "send_result");
        Json.field(out, "schema_version", cluster == null ? 1 : 2);
        if (cluster != null) {
            Json.field(out, "cluster", cluster);
        }
        this.head = out.append(",\"event_time\":").toString().getBytes(StandardCharsets.UTF_8);
    }

    /** The segment of {@code event}'s producer and queue: the record's key and the middle of its value. */
    Segment segment(SendEvent event) {
        Segment segment = queues.get(event);
        if (segment == null) {
            if (queues.size() >= CACHE_LIMIT) {
                queues.clear();
            }
            StringBuilder out = new StringBuilder(200).append('{');
            Json.field(out, "producer_id", event.producerId);
            Json.field(out, "producer_group", event.producerGroup);
            Json.field(out, "topic", event.topic);
            Json.field(out, "broker", event.broker);
            Json.field(out, "queue_id", event.queueId);
            out.append(",\"latency_ms\":");
            byte[] middle = ("," + out.substring(1)).getBytes(StandardCharsets.UTF_8);
            byte[] key = event.producerId == null ? null : event.producerId.getBytes(StandardCharsets.UTF_8);
            segment = new Segment(middle, key);
            queues.put(event, segment);
        }
        return segment;
    }

    /** The event's JSON in UTF-8. */
    byte[] encode(SendEvent event, Segment segment) {
        byte[] tail = tail(event.outcome, event.sendLatencyFaultEnable);
        int timeDigits = digits(event.eventTime);
        int size = head.length + timeDigits + segment.middle.length + digitCount(event.latencyMs) + tail.length + 1;
        boolean attempt = attemptField && event.attempt > 0;
        if (attempt) {
            size += ATTEMPT.length + digitCount(event.attempt);
        }
        byte[] out = new byte[size];
        int at = copy(head, out, 0);
        System.arraycopy(digits, digits.length - timeDigits, out, at, timeDigits);
        at += timeDigits;
        at = copy(segment.middle, out, at);
        at = copyDigits(event.latencyMs, out, at);
        at = copy(tail, out, at);
        if (attempt) {
            at = copy(ATTEMPT, out, at);
            at = copyDigits(event.attempt, out, at);
        }
        out[at] = '}';
        return out;
    }

    private byte[] tail(String outcome, boolean faultEnable) {
        byte[][] pair = tails.get(outcome);
        if (pair == null) {
            pair = new byte[2][];
            tails.put(outcome, pair);
        }
        int index = faultEnable ? 1 : 0;
        if (pair[index] == null) {
            StringBuilder out = new StringBuilder(120).append('{');
            Json.field(out, "outcome", outcome);
            Json.field(out, "client_version", ClientVersion.current());
            Json.field(out, "send_latency_fault_enable", faultEnable);
            pair[index] = ("," + out.substring(1)).getBytes(StandardCharsets.UTF_8);
        }
        return pair[index];
    }

    private static int copy(byte[] from, byte[] to, int at) {
        System.arraycopy(from, 0, to, at, from.length);
        return at + from.length;
    }

    private int copyDigits(long value, byte[] to, int at) {
        int count = digits(value);
        System.arraycopy(digits, digits.length - count, to, at, count);
        return at + count;
    }

    private static int digitCount(long value) {
        if (value < 0) {
            return Long.toString(value).length();
        }
        int count = 1;
        for (long v = value; v >= 10; v /= 10) {
            count++;
        }
        return count;
    }

    /** {@code value}'s decimal digits at the end of {@link #digits}; their count. */
    private int digits(long value) {
        if (value < 0) {
            byte[] text = Long.toString(value).getBytes(StandardCharsets.US_ASCII);
            System.arraycopy(text, 0, digits, digits.length - text.length, text.length);
            return text.length;
        }
        int at = digits.length;
        long v = value;
        do {
            digits[--at] = (byte) ('0' + v % 10);
            v /= 10;
        } while (v != 0);
        return digits.length - at;
    }
}
