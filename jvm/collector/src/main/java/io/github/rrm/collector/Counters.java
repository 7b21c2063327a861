package io.github.rrm.collector;

import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;

/**
 * The collector's counters and gauges, served in Prometheus' text format on {@code /metrics} and summarised in the
 * log. A series is a metric name and one label pair at most (kind, type, call): few enough to stay bounded. The
 * cluster the events name is one info series ({@code rmqcol_cluster_info}), not a label on every series: a
 * collector watches one cluster.
 */
final class Counters {
  private static final Map<String, String> HELP = Map.ofEntries(
      Map.entry("rmqcol_problems_total", "Bad input from the cluster or Kafka, by kind; each also gives a log line"),
      Map.entry("rmqcol_events_published_total", "Events handed to Kafka and acknowledged, by type"),
      Map.entry("rmqcol_events_unpublished_total", "Events Kafka did not take (unreachable, buffer full), by type"),
      Map.entry("rmqcol_rpc_total", "Admin calls made, by call"),
      Map.entry("rmqcol_cycles_total", "Poll cycles completed"),
      Map.entry("rmqcol_running_info_rereads_total",
          "Running-info requests made because the client's group or a route it reads changed, not on the interval"),
      Map.entry("rmqcol_running_info_rereads_deferred_total",
          "Group re-reads due but put off to a later cycle (running_info_after_change_groups reached)"),
      Map.entry("rmqcol_running_info_deferred_total",
          "Running-info requests due but put off to a later cycle (running_info_per_cycle reached)"),
      Map.entry("rmqcol_cycle_seconds", "Duration of the last poll cycle"),
      Map.entry("rmqcol_cycles_overrun_total", "Cycles that took longer than their interval (the next one started late)"),
      Map.entry("rmqcol_last_cycle_timestamp_seconds", "When the last poll cycle ended (epoch seconds)"),
      Map.entry("rmqcol_brokers", "Master brokers in the last cluster info"),
      Map.entry("rmqcol_cluster_info", "1, labelled with the cluster this collector's events name"),
      Map.entry("rmqcol_groups", "Groups polled in the last cycle"),
      Map.entry("rmqcol_channels", "Connections seen in the last cycle, over all brokers"),
      Map.entry("rmqcol_progress_cycles_total", "Consume-progress cycles completed"),
      Map.entry("rmqcol_progress_cycle_seconds", "Duration of the last consume-progress cycle"),
      Map.entry("rmqcol_progress_last_cycle_timestamp_seconds",
          "When the last consume-progress cycle ended (epoch seconds)"),
      Map.entry("rmqcol_progress_queues", "Queue rows published by the last consume-progress cycle"));

  private final ConcurrentSkipListMap<String, ConcurrentHashMap<String, LongAdder>> counters =
      new ConcurrentSkipListMap<>();
  private final ConcurrentSkipListMap<String, AtomicLong> gauges = new ConcurrentSkipListMap<>();
  /** Info series: metric to its one label pair, valued 1. */
  private final ConcurrentSkipListMap<String, String> infos = new ConcurrentSkipListMap<>();
  private HttpServer server;

  void add(String metric, String label, String value) {
    counters.computeIfAbsent(metric, m -> new ConcurrentHashMap<>())
        .computeIfAbsent(label == null ? "" : label + "=\"" + value + "\"", k -> new LongAdder())
        .increment();
  }

  void inc(String metric) {
    add(metric, null, null);
  }

  void problem(String kind) {
    add("rmqcol_problems_total", "kind", kind);
  }

  void rpc(String call) {
    add("rmqcol_rpc_total", "call", call);
  }

  /** Gauges hold longs; seconds are kept in milliseconds and printed as seconds when the name ends so. */
  void gauge(String metric, long value) {
    gauges.computeIfAbsent(metric, m -> new AtomicLong()).set(value);
  }

  /** An info series: {@code metric{label="value"} 1}, its label replaced by a later call. */
  void info(String metric, String label, String value) {
    infos.put(metric, label + "=\"" + value.replace("\\", "\\\\").replace("\"", "\\\"") + "\"");
  }

  long total(String metric) {
    Map<String, LongAdder> series = counters.get(metric);
    return series == null ? 0 : series.values().stream().mapToLong(LongAdder::sum).sum();
  }

  /** Every counter series, e.g. {@code rmqcol_problems_total{kind="broker_unreachable"}} to its value. */
  Map<String, Long> snapshot() {
    Map<String, Long> result = new TreeMap<>();
    counters.forEach((metric, series) -> series.forEach((labels, adder) ->
        result.put(labels.isEmpty() ? metric : metric + "{" + labels + "}", adder.sum())));
    return result;
  }

  String prometheusText() {
    StringBuilder out = new StringBuilder();
    counters.forEach((metric, series) -> {
      out.append("# HELP ").append(metric).append(' ').append(HELP.getOrDefault(metric, metric)).append('\n');
      out.append("# TYPE ").append(metric).append(" counter\n");
      new TreeMap<>(series).forEach((labels, adder) -> out.append(metric)
          .append(labels.isEmpty() ? "" : "{" + labels + "}").append(' ').append(adder.sum()).append('\n'));
    });
    gauges.forEach((metric, value) -> {
      out.append("# HELP ").append(metric).append(' ').append(HELP.getOrDefault(metric, metric)).append('\n');
      out.append("# TYPE ").append(metric).append(" gauge\n");
      out.append(metric).append(' ');
      out.append(metric.endsWith("_seconds") ? String.valueOf(value.get() / 1000.0) : String.valueOf(value.get()));
      out.append('\n');
    });
    infos.forEach((metric, labels) -> {
      out.append("# HELP ").append(metric).append(' ').append(HELP.getOrDefault(metric, metric)).append('\n');
      out.append("# TYPE ").append(metric).append(" gauge\n");
      out.append(metric).append('{').append(labels).append("} 1\n");
    });
    return out.toString();
  }

  /** Serve {@code /metrics} on host:port (port 0: a free one); returns the port bound. */
  int serve(String host, int port) throws IOException {
    server = HttpServer.create(new InetSocketAddress(host, port), 16);
    server.createContext("/metrics", exchange -> {
      byte[] body = prometheusText().getBytes(StandardCharsets.UTF_8);
      exchange.getResponseHeaders().set("Content-Type", "text/plain; version=0.0.4; charset=utf-8");
      exchange.sendResponseHeaders(200, body.length);
      try (OutputStream stream = exchange.getResponseBody()) {
        stream.write(body);
      }
    });
    server.start();
    return server.getAddress().getPort();
  }

  void close() {
    if (server != null) {
      server.stop(0);
    }
  }
}
