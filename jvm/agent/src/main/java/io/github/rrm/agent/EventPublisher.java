package io.github.rrm.agent;

import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;

import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Hands events to Kafka without ever making the caller wait: {@link #offer} puts an event into a bounded
 * buffer or, when the buffer is full, drops and counts it. One daemon thread wakes every publish interval,
 * drains the buffer into a Kafka producer, counts what Kafka acknowledges or loses, and logs the counters
 * periodically. Whatever Kafka does (slow, down, misconfigured), only this thread waits. The buffer is a
 * lock-free queue that nobody waits on, so an offer never wakes a thread: the cost per event is a few
 * compare-and-sets, and the publisher's wake-ups are one per interval (and one more when the buffer reaches a
 * quarter of its capacity), not one per event. Send attempts are encoded here, not in the sending thread.
 */
final class EventPublisher implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(EventPublisher.class);
    static final String INSTANCE_HEADER = "rrm-agent-instance";
    /** The event's {@code event_time} as an 8-byte big-endian long: the job plans its batches by it. */
    static final String EVENT_TIME_HEADER = "rrm-event-time";
    private static final byte[] INSTANCE = java.lang.management.ManagementFactory.getRuntimeMXBean().getName()
        .getBytes(java.nio.charset.StandardCharsets.UTF_8);

    private final AgentConfig config;
    private final AgentCounters counters;
    /** Send attempts ({@link SendEvent}, encoded when drained) and ready records (reports). */
    private final ConcurrentLinkedQueue<Object> buffer = new ConcurrentLinkedQueue<Object>();
    private final SendEventEncoder encoder;
    private final String sendResultsTopic;
    private final AtomicInteger buffered = new AtomicInteger();
    private final int capacity;
    /** Buffered events at which an offer wakes the publisher early (so a fast producer does not fill it). */
    private final int wakeAt;
    private final long intervalNanos;
    private final Producer<byte[], byte[]> kafka;
    private final Thread sender;
    private volatile boolean running = true;
    private volatile long nextRefusalLog;
    private final Callback acknowledged = new Callback() {
        @Override
        public void onCompletion(RecordMetadata metadata, Exception error) {
            if (error == null) {
                counters.published.incrementAndGet();
            } else {
                counters.droppedKafkaError.incrementAndGet();
                refused(error);
            }
        }
    };

    EventPublisher(AgentConfig config, AgentCounters counters) {
        this.config = config;
        this.counters = counters;
        this.capacity = config.bufferCapacity();
        this.wakeAt = Math.max(1, capacity / 4);
        this.encoder = new SendEventEncoder(config.attemptField(), config.cluster());
        this.sendResultsTopic = config.sendResultsTopic();
        this.intervalNanos = TimeUnit.MILLISECONDS.toNanos(config.publishIntervalMs());
        this.kafka = newKafkaProducer(config);
        this.sender = new Thread(new Runnable() {
            @Override
            public void run() {
                drainUntilClosed();
            }
        }, "rrm-agent-publisher");
        this.sender.setDaemon(true);
        this.sender.start();
    }

    /**
     * Kafka loads classes through the thread's context class loader, which in an application server or a
     * plugin host may not see the agent's jars: the producer is built with the agent's own loader.
     */
    private static Producer<byte[], byte[]> newKafkaProducer(AgentConfig config) {
        Thread thread = Thread.currentThread();
        ClassLoader previous = thread.getContextClassLoader();
        thread.setContextClassLoader(EventPublisher.class.getClassLoader());
        try {
            return new KafkaProducer<byte[], byte[]>(kafkaProperties(config), new ByteArraySerializer(),
                new ByteArraySerializer());
        } finally {
            thread.setContextClassLoader(previous);
        }
    }

    /** The agent's Kafka producer settings: small, bounded waits; any {@code rrm.agent.kafka.*} overrides. */
    static Properties kafkaProperties(AgentConfig config) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, config.bootstrapServers());
        p.put(ProducerConfig.CLIENT_ID_CONFIG, "rocketmq-rebalance-agent");
        p.put(ProducerConfig.ACKS_CONFIG, "1");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "false");
        // The publisher hands Kafka a publish interval's events at once: a short linger keeps them in one request.
        p.put(ProducerConfig.LINGER_MS_CONFIG, "10");
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, "none");
        // One produce request per publish interval at a few thousand events/s, not one per 16 KiB: its fixed
        // cost (the network thread's wake-ups, metrics, the response) is most of the per-event cost.
        p.put(ProducerConfig.BATCH_SIZE_CONFIG, String.valueOf(256 * 1024));
        p.put(ProducerConfig.BUFFER_MEMORY_CONFIG, String.valueOf(8L * 1024 * 1024));
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "5000");
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "5000");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "15000");
        p.put(ProducerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "2000");
        for (Map.Entry<String, String> e : config.kafkaProperties().entrySet()) {
            p.put(e.getKey(), e.getValue());
        }
        return p;
    }

    /** Queue one send attempt for Kafka; never blocks. False (and counted) when the buffer is full or closed. */
    boolean offer(SendEvent event) {
        return enqueue(event);
    }

    /**
     * Queue one event with a {@value #INSTANCE_HEADER} record header naming this JVM ({@code pid@host}): clients
     * that share a client id report under the same id, and the header tells their reports apart. It is not part
     * of the event, so the monitor's ingest is unaffected. Like every record, it carries {@value #EVENT_TIME_HEADER}.
     */
    boolean offerFromThisInstance(String topic, String key, long eventTime, String json) {
        ProducerRecord<byte[], byte[]> record = new ProducerRecord<byte[], byte[]>(topic,
            key == null ? null : key.getBytes(StandardCharsets.UTF_8), json.getBytes(StandardCharsets.UTF_8));
        record.headers().add(INSTANCE_HEADER, INSTANCE);
        record.headers().add(EVENT_TIME_HEADER, eventTimeHeader(eventTime));
        return enqueue(record);
    }

    private boolean enqueue(Object item) {
        if (running) {
            int held = buffered.incrementAndGet();
            if (held <= capacity) {
                buffer.offer(item);
                counters.enqueued.incrementAndGet();
                if (held == wakeAt) {
                    LockSupport.unpark(sender);
                }
                return true;
            }
            buffered.decrementAndGet();
        }
        counters.droppedBufferFull.incrementAndGet();
        return false;
    }

    private void drainUntilClosed() {
        long nextLog = System.currentTimeMillis() + config.logIntervalMs();
        while (running) {
            LockSupport.parkNanos(this, intervalNanos);
            drain();
            long now = System.currentTimeMillis();
            if (now >= nextLog) {
                LOG.info("{}", counters);
                nextLog = now + config.logIntervalMs();
            }
        }
        drain();
    }

    /** Hand everything buffered to Kafka (which batches it by partition for {@code linger.ms}). */
    @SuppressWarnings("unchecked")
    private void drain() {
        try {
            Object item;
            while (!Thread.currentThread().isInterrupted() && (item = buffer.poll()) != null) {
                buffered.decrementAndGet();
                send(item instanceof SendEvent ? record((SendEvent) item) : (ProducerRecord<byte[], byte[]>) item);
            }
        } catch (Throwable t) {
            counters.agentErrors.incrementAndGet();
        }
    }

    private ProducerRecord<byte[], byte[]> record(SendEvent event) {
        SendEventEncoder.Segment segment = encoder.segment(event);
        ProducerRecord<byte[], byte[]> record =
            new ProducerRecord<byte[], byte[]>(sendResultsTopic, segment.key, encoder.encode(event, segment));
        record.headers().add(EVENT_TIME_HEADER, eventTimeHeader(event.eventTime));
        return record;
    }

    static byte[] eventTimeHeader(long eventTime) {
        return java.nio.ByteBuffer.allocate(8).putLong(eventTime).array();
    }

    private void send(ProducerRecord<byte[], byte[]> record) {
        try {
            kafka.send(record, acknowledged);
        } catch (Throwable t) {  // e.g. the buffer memory stayed full for max.block.ms
            counters.droppedKafkaError.incrementAndGet();
            refused(t);
        }
    }

    /**
     * Kafka refusing the agent's authentication (SASL credentials, TLS trust) is counted and logged as one line
     * (WARN, at most once a minute), never thrown: the application's sends go on.
     */
    private void refused(Throwable error) {
        if (!(error instanceof org.apache.kafka.common.errors.AuthenticationException)) {
            return;
        }
        counters.kafkaAuthRefused.incrementAndGet();
        long now = System.currentTimeMillis();
        if (now < nextRefusalLog) {
            return;
        }
        nextRefusalLog = now + 60000;
        String message = String.valueOf(error.getMessage()).split("\n")[0];
        String line = "rocketmq-rebalance-agent: Kafka at " + config.bootstrapServers() + " refused the agent's "
            + "authentication (check rrm.agent.kafka.*: the SASL credentials and the trust store): "
            + error.getClass().getSimpleName() + ": " + (message.length() > 300 ? message.substring(0, 300) : message);
        counters.kafkaRefusal = line;
        LOG.warn(line);
    }

    /**
     * Stop accepting, then within {@code timeoutMs}: let the sender hand every buffered event to Kafka and let
     * Kafka deliver them. What is left after that is dropped and counted.
     */
    void close(long timeoutMs) {
        long deadline = System.currentTimeMillis() + Math.max(1, timeoutMs);
        running = false;
        LockSupport.unpark(sender);
        try {
            sender.join(Math.max(1, deadline - System.currentTimeMillis()));
            if (sender.isAlive()) {
                sender.interrupt();
                sender.join(1000);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        int left = 0;
        while (buffer.poll() != null) {
            left++;
        }
        if (left > 0) {
            counters.droppedBufferFull.addAndGet(left);
        }
        try {
            kafka.close(java.time.Duration.ofMillis(Math.max(1, deadline - System.currentTimeMillis())));
        } catch (Throwable t) {
            counters.agentErrors.incrementAndGet();
        }
        LOG.info("closed: {}", counters);
    }

    @Override
    public void close() {
        close(5000);
    }
}
