package io.github.rrm.agent;

import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;

/**
 * What the agent publishes where, and how much it may hold back. Built with {@link #builder()} or read from
 * system properties ({@link #fromSystemProperties()}, names in {@code docs/client-agent.md}); every setting
 * has a default except the Kafka bootstrap servers.
 */
public final class AgentConfig {
    /** System property prefix of every setting; {@code rrm.agent.kafka.<name>} passes a Kafka producer property. */
    public static final String PREFIX = "rrm.agent.";
    static final String KAFKA_PREFIX = PREFIX + "kafka.";
    /** A properties file of {@code rrm.agent.*} settings (credentials stay out of the command line); system
     * properties win over it. */
    public static final String CONFIG_FILE = PREFIX + "config.file";

    private final String bootstrapServers;
    private final String sendResultsTopic;
    private final String reportedAssignmentsTopic;
    private final int bufferCapacity;
    private final int attemptKeys;
    private final long reportIntervalMs;
    private final long reportCheckIntervalMs;
    private final long logIntervalMs;
    private final long publishIntervalMs;
    private final boolean attemptField;
    private final String cluster;
    private final Map<String, String> kafkaProperties;

    private AgentConfig(Builder b) {
        if (b.bootstrapServers == null || b.bootstrapServers.trim().isEmpty()) {
            throw new IllegalArgumentException("the agent needs Kafka bootstrap servers (" + PREFIX + "bootstrap.servers)");
        }
        if (b.bufferCapacity < 1 || b.attemptKeys < 1) {
            throw new IllegalArgumentException("buffer capacity and attempt keys must be at least 1");
        }
        if (b.reportIntervalMs < 1 || b.reportCheckIntervalMs < 1 || b.logIntervalMs < 1 || b.publishIntervalMs < 1) {
            throw new IllegalArgumentException("intervals must be at least 1 ms");
        }
        this.bootstrapServers = b.bootstrapServers;
        this.sendResultsTopic = b.sendResultsTopic;
        this.reportedAssignmentsTopic = b.reportedAssignmentsTopic;
        this.bufferCapacity = b.bufferCapacity;
        this.attemptKeys = b.attemptKeys;
        this.reportIntervalMs = b.reportIntervalMs;
        this.reportCheckIntervalMs = b.reportCheckIntervalMs;
        this.logIntervalMs = b.logIntervalMs;
        this.publishIntervalMs = b.publishIntervalMs;
        this.attemptField = b.attemptField;
        this.cluster = b.cluster == null || b.cluster.trim().isEmpty() ? null : b.cluster.trim();
        this.kafkaProperties = Collections.unmodifiableMap(new LinkedHashMap<String, String>(b.kafkaProperties));
    }

    public static Builder builder() {
        return new Builder();
    }

    /** The settings given as {@code -Drrm.agent.*} system properties. */
    public static AgentConfig fromSystemProperties() {
        Properties merged = new Properties();
        String file = System.getProperty(CONFIG_FILE, "").trim();
        if (!file.isEmpty()) {
            try (java.io.Reader in = java.nio.file.Files.newBufferedReader(java.nio.file.Paths.get(file),
                    java.nio.charset.StandardCharsets.UTF_8)) {
                merged.load(in);
            } catch (java.io.IOException | RuntimeException e) {
                throw new IllegalArgumentException("cannot read " + CONFIG_FILE + " " + file + ": " + e.getMessage());
            }
        }
        for (String name : System.getProperties().stringPropertyNames()) {
            merged.setProperty(name, System.getProperty(name));
        }
        return fromProperties(merged);
    }

    /** The settings among {@code properties} whose names start with {@code rrm.agent.}. */
    public static AgentConfig fromProperties(Properties properties) {
        Builder b = builder();
        for (String name : properties.stringPropertyNames()) {
            if (!name.startsWith(PREFIX) || name.equals(CONFIG_FILE)) {
                continue;
            }
            String value = properties.getProperty(name).trim();
            String key = name.substring(PREFIX.length());
            if (name.startsWith(KAFKA_PREFIX)) {
                b.kafkaProperty(name.substring(KAFKA_PREFIX.length()), value);
            } else if (key.equals("bootstrap.servers")) {
                b.bootstrapServers(value);
            } else if (key.equals("topic.send.results")) {
                b.sendResultsTopic(value);
            } else if (key.equals("topic.reported.assignments")) {
                b.reportedAssignmentsTopic(value);
            } else if (key.equals("buffer.capacity")) {
                b.bufferCapacity(Integer.parseInt(value));
            } else if (key.equals("attempt.keys")) {
                b.attemptKeys(Integer.parseInt(value));
            } else if (key.equals("report.interval.ms")) {
                b.reportIntervalMs(Long.parseLong(value));
            } else if (key.equals("report.check.interval.ms")) {
                b.reportCheckIntervalMs(Long.parseLong(value));
            } else if (key.equals("log.interval.ms")) {
                b.logIntervalMs(Long.parseLong(value));
            } else if (key.equals("publish.interval.ms")) {
                b.publishIntervalMs(Long.parseLong(value));
            } else if (key.equals("attempt.field")) {
                b.attemptField(Boolean.parseBoolean(value));
            } else if (key.equals("cluster")) {
                b.cluster(value);
            } else {
                throw new IllegalArgumentException("unknown agent setting " + name);
            }
        }
        return b.build();
    }

    public String bootstrapServers() {
        return bootstrapServers;
    }

    public String sendResultsTopic() {
        return sendResultsTopic;
    }

    public String reportedAssignmentsTopic() {
        return reportedAssignmentsTopic;
    }

    public int bufferCapacity() {
        return bufferCapacity;
    }

    public int attemptKeys() {
        return attemptKeys;
    }

    public long reportIntervalMs() {
        return reportIntervalMs;
    }

    public long reportCheckIntervalMs() {
        return reportCheckIntervalMs;
    }

    public long logIntervalMs() {
        return logIntervalMs;
    }

    public long publishIntervalMs() {
        return publishIntervalMs;
    }

    public boolean attemptField() {
        return attemptField;
    }

    /** The RocketMQ cluster the events name (schema version 2), or null: version 1, the job's default cluster. */
    public String cluster() {
        return cluster;
    }

    public Map<String, String> kafkaProperties() {
        return kafkaProperties;
    }

    /** Settings with the defaults of {@code docs/client-agent.md}. */
    public static final class Builder {
        private String bootstrapServers;
        private String sendResultsTopic = "rocketmq.send-results";
        private String reportedAssignmentsTopic = "rocketmq.reported-assignments";
        private int bufferCapacity = 10000;
        private int attemptKeys = 4096;
        private long reportIntervalMs = 30000;
        private long reportCheckIntervalMs = 500;
        private long logIntervalMs = 60000;
        private long publishIntervalMs = 200;
        private boolean attemptField = false;
        private String cluster;
        private final Map<String, String> kafkaProperties = new LinkedHashMap<String, String>();

        private Builder() {
        }

        public Builder bootstrapServers(String value) {
            this.bootstrapServers = value;
            return this;
        }

        public Builder sendResultsTopic(String value) {
            this.sendResultsTopic = value;
            return this;
        }

        public Builder reportedAssignmentsTopic(String value) {
            this.reportedAssignmentsTopic = value;
            return this;
        }

        /** Events held for Kafka at most; one more is dropped and counted. */
        public Builder bufferCapacity(int value) {
            this.bufferCapacity = value;
            return this;
        }

        /** Messages whose attempts are numbered at once (least recently sent forgotten first). */
        public Builder attemptKeys(int value) {
            this.attemptKeys = value;
            return this;
        }

        /** A consumer's held queues are published at least this often, and on every change. */
        public Builder reportIntervalMs(long value) {
            this.reportIntervalMs = value;
            return this;
        }

        /** How often a consumer's held queues are compared with what was last published. */
        public Builder reportCheckIntervalMs(long value) {
            this.reportCheckIntervalMs = value;
            return this;
        }

        /** How often the counters are logged. */
        public Builder logIntervalMs(long value) {
            this.logIntervalMs = value;
            return this;
        }

        /** How often the publisher hands the buffered events to Kafka (it sleeps in between). */
        public Builder publishIntervalMs(long value) {
            this.publishIntervalMs = value;
            return this;
        }

        /** Adds the attempt number to each send_result (a field the contract does not declare). */
        public Builder attemptField(boolean value) {
            this.attemptField = value;
            return this;
        }

        /** The RocketMQ cluster the application's clients use, named in every event (schema version 2); unset
         * (null or blank): version 1 events, which the monitor takes as its default cluster's. */
        public Builder cluster(String value) {
            this.cluster = value;
            return this;
        }

        /** A Kafka producer property, overriding the agent's own choice. */
        public Builder kafkaProperty(String name, String value) {
            this.kafkaProperties.put(name, value);
            return this;
        }

        public AgentConfig build() {
            return new AgentConfig(this);
        }
    }
}
