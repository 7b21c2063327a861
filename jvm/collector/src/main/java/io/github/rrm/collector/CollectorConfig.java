package io.github.rrm.collector;

import java.io.IOException;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.regex.Pattern;

/**
 * The collector's settings, read from the properties file the Python side writes from the monitor's typed
 * configuration ({@code [collector]} and {@code [kafka]}); keys starting with {@code kafka.} go to the producer.
 */
final class CollectorConfig {
  final String namesrvAddr;
  final String accessKey;
  final String secretKey;
  final String collectorId;
  /** Empty: the broker cluster name of cluster info ({@link ClusterName}). */
  final String cluster;
  final long pollIntervalMs;
  final long staleAfterMs;
  final long runningInfoIntervalMs;
  final long runningInfoAfterChangeMs;
  final int runningInfoAfterChangeGroups;
  final long routeRepublishIntervalMs;
  final long adminTimeoutMs;
  final int concurrency;
  final int inFlightPerBroker;
  final int runningInfoPerCycle;
  final List<Pattern> includeGroups;
  final List<Pattern> excludeGroups;
  final int shardIndex;
  final int shardCount;
  final String connectionsTopic;
  final String reportedAssignmentTopic;
  final String topicRouteTopic;
  final String consumeProgressTopic;
  final long progressIntervalMs;
  final int progressInFlightPerBroker;
  final int progressMinOffsetEvery;
  final int maxEventBytes;
  final String metricsHost;
  final int metricsPort;
  final long summaryIntervalMs;
  final long maxCycles;
  final Properties producer = new Properties();

  CollectorConfig(Properties p) {
    namesrvAddr = required(p, "namesrv.addr");
    accessKey = p.getProperty("access.key", "");
    secretKey = p.getProperty("secret.key", "");
    collectorId = p.getProperty("collector.id", "");
    cluster = p.getProperty("cluster", "").trim();
    pollIntervalMs = Long.parseLong(p.getProperty("poll.interval.ms", "10000"));
    staleAfterMs = Long.parseLong(p.getProperty("stale.after.ms", String.valueOf(3 * pollIntervalMs)));
    runningInfoIntervalMs = Long.parseLong(p.getProperty("running.info.interval.ms", "60000"));
    runningInfoAfterChangeMs = Long.parseLong(p.getProperty("running.info.after.change.ms", "22000"));
    runningInfoAfterChangeGroups = Integer.parseInt(p.getProperty("running.info.after.change.groups", "50"));
    routeRepublishIntervalMs = Long.parseLong(p.getProperty("route.republish.interval.ms", "300000"));
    adminTimeoutMs = Long.parseLong(p.getProperty("admin.timeout.ms", "3000"));
    concurrency = Integer.parseInt(p.getProperty("concurrency", "8"));
    inFlightPerBroker = Integer.parseInt(p.getProperty("in.flight.per.broker", "8"));
    runningInfoPerCycle = Integer.parseInt(p.getProperty("running.info.per.cycle", "2000"));
    includeGroups = globs(p.getProperty("groups.include", "*"));
    excludeGroups = globs(p.getProperty("groups.exclude", ""));
    shardIndex = Integer.parseInt(p.getProperty("shard.index", "0"));
    shardCount = Integer.parseInt(p.getProperty("shard.count", "1"));
    if (shardCount < 1 || shardIndex < 0 || shardIndex >= shardCount) {
      throw new IllegalArgumentException("collector shard " + shardIndex + " of " + shardCount + " does not exist");
    }
    connectionsTopic = p.getProperty("topic.consumer_connections", "rocketmq.consumer-channels");
    reportedAssignmentTopic = p.getProperty("topic.reported_assignment", "rocketmq.reported-assignments");
    topicRouteTopic = p.getProperty("topic.topic_route", "rocketmq.topic-routes");
    consumeProgressTopic = p.getProperty("topic.consume_progress", "rocketmq.consume-progress");
    progressIntervalMs = Long.parseLong(p.getProperty("progress.interval.ms", "30000"));
    progressInFlightPerBroker = Integer.parseInt(p.getProperty("progress.in.flight.per.broker", "8"));
    progressMinOffsetEvery = Integer.parseInt(p.getProperty("progress.min.offset.every", "10"));
    maxEventBytes = Integer.parseInt(p.getProperty("max.event.bytes", "65536"));
    metricsHost = p.getProperty("metrics.host", "127.0.0.1");
    metricsPort = Integer.parseInt(p.getProperty("metrics.port", "0"));
    summaryIntervalMs = Long.parseLong(p.getProperty("summary.interval.ms", "60000"));
    maxCycles = Long.parseLong(p.getProperty("max.cycles", "0"));
    for (String key : p.stringPropertyNames()) {
      if (key.startsWith("kafka.")) {
        producer.setProperty(key.substring("kafka.".length()), p.getProperty(key));
      }
    }
  }

  static CollectorConfig load(Path file) throws IOException {
    Properties properties = new Properties();
    try (Reader reader = Files.newBufferedReader(file, StandardCharsets.UTF_8)) {
      properties.load(reader);
    }
    return new CollectorConfig(properties);
  }

  boolean watches(String group) {
    return includeGroups.stream().anyMatch(p -> p.matcher(group).matches())
        && excludeGroups.stream().noneMatch(p -> p.matcher(group).matches())
        && Shards.shardOf(group, shardCount) == shardIndex;
  }

  private static String required(Properties p, String key) {
    String value = p.getProperty(key, "").trim();
    if (value.isEmpty()) {
      throw new IllegalArgumentException("collector setting " + key + " is required");
    }
    return value;
  }

  /** Comma-separated globs ({@code *} any text, {@code ?} one character) as anchored patterns. */
  static List<Pattern> globs(String text) {
    List<Pattern> patterns = new ArrayList<>();
    for (String glob : text.split(",")) {
      if (glob.isBlank()) {
        continue;
      }
      StringBuilder regex = new StringBuilder();
      for (char c : glob.trim().toCharArray()) {
        switch (c) {
          case '*' -> regex.append(".*");
          case '?' -> regex.append('.');
          default -> regex.append(Pattern.quote(String.valueOf(c)));
        }
      }
      patterns.add(Pattern.compile(regex.toString()));
    }
    return patterns;
  }
}
