package io.github.rrm.collector;

import java.net.InetAddress;
import java.nio.file.Path;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.remoting.RPCHook;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * {@code rebalance-monitor collect}: polls a RocketMQ cluster through RocketMQ's own admin client and publishes
 * the monitor's contract events to Kafka. This class wires the parts and schedules them: a poll cycle
 * ({@link PollCycle}) every {@code poll_interval_ms}, the consume-progress cycle ({@link ProgressCycle}) on a
 * thread of its own; a cycle longer than its interval is logged and counted, and the next starts at once. Bad
 * input (a broker unreachable, no route, a client that does not answer, ACL denied, Kafka down) is logged and
 * counted; the cycle goes on.
 */
public final class Collector {
  private final CollectorConfig config;
  private final String collectorId;
  private final ClusterName cluster;
  private final Counters counters = new Counters();
  private final Log log = new Log();
  private final DefaultMQAdminExt admin;
  private final EventPublisher publisher;
  private final BrokerPolls brokers;
  private final Routes routes;
  private final RunningInfo runningInfo;
  private final ProgressCycle progress;
  private final PollCycle cycle;
  private Thread progressThread;
  private volatile boolean running = true;
  private int exitCode;

  Collector(CollectorConfig config) throws Exception {
    this.config = config;
    this.collectorId = config.collectorId.isEmpty()
        ? InetAddress.getLocalHost().getHostName() + ":" + ProcessHandle.current().pid() : config.collectorId;
    RPCHook hook = config.accessKey.isEmpty() ? null
        : new AclClientRPCHook(new SessionCredentials(config.accessKey, config.secretKey));
    admin = new DefaultMQAdminExt(hook, config.adminTimeoutMs);
    admin.setNamesrvAddr(config.namesrvAddr);
    admin.setInstanceName("rrm-collector-" + ProcessHandle.current().pid());
    cluster = new ClusterName(config.cluster);
    publisher = new EventPublisher(config.producer, counters, log, config.pollIntervalMs);
    brokers = new BrokerPolls(config, admin, counters, log, cluster);
    routes = new Routes(config, admin, counters, log, publisher, cluster);
    runningInfo = new RunningInfo(config, admin, counters, log, publisher, cluster);
    progress = new ProgressCycle(config, admin, counters, log, publisher, collectorId, cluster);
    cycle = new PollCycle(config, counters, brokers, routes, runningInfo,
        new ConnectionEvents(config, publisher, runningInfo, collectorId, cluster), progress, publisher);
  }

  public static void main(String[] args) throws Exception {
    if (args.length != 1) {
      System.err.println("usage: Collector CONFIG.properties");
      System.exit(2);
    }
    Collector collector = new Collector(CollectorConfig.load(Path.of(args[0])));
    CountDownLatch stopped = new CountDownLatch(1);
    Thread main = Thread.currentThread();
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      collector.running = false;
      main.interrupt();
      try {
        stopped.await(15, TimeUnit.SECONDS);
      } catch (InterruptedException ignored) {
        Thread.currentThread().interrupt();
      }
    }));
    try {
      collector.run();
    } finally {
      collector.close();
      stopped.countDown();
    }
    if (collector.exitCode != 0) {
      System.exit(collector.exitCode);
    }
  }

  void run() throws Exception {
    admin.start();
    if (config.metricsPort > 0) {
      int port = counters.serve(config.metricsHost, config.metricsPort);
      log.info("metrics on http://" + config.metricsHost + ":" + port + "/metrics");
    }
    log.info("collector " + collectorId + " watching name server " + config.namesrvAddr
        + (config.cluster.isEmpty() ? "" : " as cluster " + config.cluster)
        + (config.shardCount > 1 ? " (groups of shard " + config.shardIndex + " of " + config.shardCount + ")" : "")
        + " every " + config.pollIntervalMs + " ms" + (config.progressIntervalMs > 0 ? ", consume progress every "
        + config.progressIntervalMs + " ms" : ""));
    if (config.progressIntervalMs > 0) {
      progressThread = daemon("rrm-progress").newThread(progress::loop);
      progressThread.start();
    }
    long cycles = 0;
    long lastSummary = System.currentTimeMillis();
    while (running) {
      long start = System.currentTimeMillis();
      try {
        cycle.run();
      } catch (InterruptedException e) {
        break;
      } catch (ClusterName.Unresolved e) {
        log.error(e.getMessage());
        exitCode = ClusterName.EXIT_CODE;
        break;
      } catch (RuntimeException e) {
        counters.problem("cycle_failed");
        log.warn("poll cycle failed: " + e);
      }
      long end = System.currentTimeMillis();
      counters.inc("rmqcol_cycles_total");
      if (cluster.get() != null) {
        counters.info("rmqcol_cluster_info", "cluster", cluster.get());
      }
      counters.gauge("rmqcol_cycle_seconds", end - start);
      if (end - start > config.pollIntervalMs) {
        // the next cycle starts at once, late: every view is polled less often than stale_after_ms assumes
        counters.add("rmqcol_cycles_overrun_total", "cycle", "poll");
        log.warn("poll cycle took " + (end - start) + " ms, more than poll_interval_ms " + config.pollIntervalMs
            + ": polls are late (fewer groups per collector, see shard_count, or a longer interval)");
      }
      counters.gauge("rmqcol_last_cycle_timestamp_seconds", end);
      cycles++;
      if (config.maxCycles > 0) {
        log.info("cycle " + cycles + " took " + (end - start) + " ms; " + counters.snapshot());
      }
      if (end - lastSummary >= config.summaryIntervalMs) {
        lastSummary = end;
        log.info("summary: " + counters.snapshot());
      }
      if (config.maxCycles > 0 && cycles >= config.maxCycles) {
        break;
      }
      long sleep = start + config.pollIntervalMs - System.currentTimeMillis();
      if (sleep > 0) {
        try {
          Thread.sleep(sleep);
        } catch (InterruptedException e) {
          break;
        }
      }
    }
  }

  void close() {
    running = false;
    if (progressThread != null) {
      progressThread.interrupt();
    }
    progress.close();
    brokers.close();
    routes.close();
    runningInfo.close();
    try {
      publisher.close();
    } catch (RuntimeException e) {
      log.warn("closing the Kafka producer: " + e);
    }
    admin.shutdown();
    log.info("stopped; " + counters.snapshot());
    counters.close();
  }

  /** The task's result; null (counted as {@code cycle_failed}, logged once a minute) when it threw. */
  static <T> T await(Future<T> future, Counters counters, Log log) throws InterruptedException {
    try {
      return future.get();
    } catch (ExecutionException e) {
      counters.problem("cycle_failed");
      log.warnEvery("task", "a poll task failed: " + e.getCause());
      return null;
    }
  }

  static ThreadFactory daemon(String name) {
    return runnable -> {
      Thread thread = new Thread(runnable, name);
      thread.setDaemon(true);
      return thread;
    };
  }
}
