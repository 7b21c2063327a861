"""The examples and notes each subcommand's ``--help`` ends with."""

EPILOG_KAFKA = """examples:
  rebalance-monitor kafka start            # start (or reuse) the local broker, print bootstrap servers
  rebalance-monitor kafka status
  rebalance-monitor kafka stop
  rebalance-monitor kafka start --secure --home .run/kafka-secure   # SASL_SSL only; prints its client.toml
  rebalance-monitor kafka stop --home .run/kafka-secure
"""
EPILOG_ROCKETMQ = """examples:
  rebalance-monitor rocketmq start              # name server + broker-a + broker-b (5.3.3), print addresses
  rebalance-monitor rocketmq start --line 4.9   # the same on RocketMQ 4.9.7 (.run/rocketmq/4.9)
  rebalance-monitor rocketmq status
  rebalance-monitor rocketmq stop
"""
EPILOG_SPARK_CLUSTER = """examples:
  rebalance-monitor spark-cluster start    # master + two 1-core workers on 127.0.0.1, print the master URL
  rebalance-monitor spark-cluster status
  rebalance-monitor spark-cluster stop
then run the job on it by configuration alone:
  RRM__SPARK__MASTER=spark://127.0.0.1:PORT rebalance-monitor run --config conf/monitor.toml
"""
EPILOG_COLLECT = """examples:
  rebalance-monitor collect --config my-monitor.toml       # [collector] and [kafka] of the file; Ctrl-C stops
  RRM__COLLECTOR__NAMESRV_ADDR="10.0.0.1:9876;10.0.0.2:9876" rebalance-monitor collect --config my-monitor.toml
  rebalance-monitor collect --config my-monitor.toml --cycles 1   # one poll cycle, then exit
  rebalance-monitor collect --config my-monitor.toml --shard 1/3  # the second of three collectors' groups
"""
EPILOG_SMOKE = """examples:
  rebalance-monitor smoke                  # 20 JSON events through Kafka and Spark into Delta
  rebalance-monitor smoke --count 100 --keep-broker
"""
EPILOG_RUN = """examples:
  rebalance-monitor run --config conf/monitor.toml
  RRM__KAFKA__BOOTSTRAP_SERVERS=kafka:9092 rebalance-monitor run --config my.toml
  rebalance-monitor run --config my.toml --available-now     # process what is in Kafka now, then exit
SIGTERM or Ctrl-C stops the job cleanly once the running micro-batches end ([spark] stop_grace_seconds; a second
signal stops at once); a restart resumes from the checkpoints.
"""
EPILOG_MAINTAIN = """examples:
  rebalance-monitor maintain --config conf/monitor.toml            # safe while the job runs
  rebalance-monitor maintain --config conf/monitor.toml --dry-run  # what VACUUM would delete; nothing changes
  rebalance-monitor maintain --config conf/monitor.toml --job-stopped
VACUUMs every table, keeping the table's delta.deletedFileRetentionDuration ([delta]
deleted_file_retention_hours when the job created it), and compacts the append-only tables the job does
not compact itself ([delta] auto_compact = false). --job-stopped compacts every table: while the job runs,
a second compaction of the files it compacts or MERGEs would fail its write. Run it daily.
"""
EPILOG_DEMO = """examples:
  rebalance-monitor demo                          # mixed scenario until Ctrl-C
  rebalance-monitor demo --duration 90 --scenario duplicate-ids
  rebalance-monitor demo --speed 60 --no-live     # plain log lines instead of the live view
  rebalance-monitor demo --duration 600 --restarts 2   # the job stopped and started again twice on its checkpoints
  rebalance-monitor demo --simulated 600 --speed 60    # until the monitor has processed 10 min of fleet time
  rebalance-monitor demo --rocketmq               # a real local RocketMQ cluster, real consumers, the collector
  rebalance-monitor demo --rocketmq --line 4.9 --duration 120
With --rocketmq the fleet options (--scenario, --speed, --seed, --groups, ...) do not apply: the consumers are real
processes and the script is fixed (a duplicate client ID, an inconsistent subscription, a crash, a scale-out);
--duration counts from the script's start, once the monitor shows the initial groups (the script takes about 45 s).
"""
EPILOG_SIMULATE = """examples:
  rebalance-monitor simulate --config conf/monitor.toml --scenario crash          # into the config's Kafka topics
  rebalance-monitor simulate --bootstrap-servers 127.0.0.1:9092 --speed 20 --start 2026-11-21T00:00 --duration 600
  rebalance-monitor simulate --scenario duplicate-ids --fleet-seconds 300 --output events.jsonl
  rebalance-monitor simulate --bootstrap-servers 127.0.0.1:9092 --create-topics --groups 200  # a local test broker
  rebalance-monitor simulate --scenario consume-progress --fleet-seconds 600 --assignment-reports --output p.jsonl
  rebalance-monitor simulate --config conf/monitor.toml --producer-option security_protocol=SSL \\
      --producer-option ssl_cafile=/etc/kafka/ca.pem
Without the job: a monitor running elsewhere reads the topics. The config's [kafka.options] (Java client
names) are carried over to the producer where kafka-python can follow them: security.protocol, SASL PLAIN or
SCRAM credentials in sasl.jaas.config, PEM trust and key stores, host-name checking, timeouts; JKS or PKCS12
stores and Kerberos or OAuth logins are refused with the --producer-option to give instead (kafka-python
names; they override the config's). Into Kafka, fleet time never runs further ahead of the wall clock than the config's
[ingest] max_future_skew_ms allows (the monitor would dead-letter those events): with --speed above 1, start
in the past. What the monitor should report for the scenario is printed first; what its consume progress
should show (lags, confirmed orphans, stuck holders, offline groups) at the end, from the simulator's offsets.
"""
EPILOG_QUERY = """examples:
  rebalance-monitor query assignment --delta-root .run/delta --group orders-consumers --at 2026-11-21T14:03:00
  rebalance-monitor query assignment --delta-root .run/delta --group orders-consumers --table-version 12
  rebalance-monitor query anomalies --delta-root .run/delta --since 2026-11-21T00:00 --until 2026-11-21T06:00
  rebalance-monitor query anomalies --delta-root .run/delta --group ledger-containers --json
  rebalance-monitor query anomalies --delta-root .run/delta --table-time 2026-11-21T06:00  # as the tables were
  rebalance-monitor query faults --delta-root .run/delta --broker broker-b
  rebalance-monitor query progress --delta-root .run/delta --group fulfil-stuck --state STUCK_HOLDER
  rebalance-monitor query progress --delta-root .run/delta --group archive-offline --at 2026-11-21T14:03:00 --json
  rebalance-monitor query sql "SELECT anomaly, count(*) AS episodes FROM anomaly_episodes
      WHERE status = 'OPENED' GROUP BY anomaly ORDER BY episodes DESC" --csv
  rebalance-monitor query sql "SELECT count(*) FROM current_assignment" --table-version 3
times are epoch milliseconds or ISO-8601 (UTC unless a zone is given); they are event times, except
--table-time, which is a Delta commit time (time travel: each table as it was then). query sql runs DuckDB
SQL (UTC session time zone) over the tables it names (see docs/tables.md); nothing here starts a JVM.
"""
EPILOG_ALLOCATE = """examples:
  rebalance-monitor allocate --strategy AVG --queues 8 --clients 10.0.0.1@1,172.17.0.1@1,172.17.0.1@1
  rebalance-monitor allocate --strategy CONSISTENT_HASH --virtual-nodes 10 --brokers broker-a,broker-b \\
      --queues 4 --clients c1,c2,c3 --json
  rebalance-monitor allocate --delta-root .run/delta --group ledger-containers --strategy AVG_BY_CIRCLE
      (the group's members and queues as the monitor last saw them, or --at a time; what if it used AVG_BY_CIRCLE)
  rebalance-monitor allocate --strategy MACHINE_ROOM_NEARBY-AVG --machine-room-regex '^([A-Z0-9]+)-' \\
      --brokers IDC1-broker,IDC2-broker --queues 3 --clients IDC1-c0,IDC1-c1,IDC2-c0
  rebalance-monitor allocate --strategy CONFIG --config-queues broker-a:0,broker-b:1 --queues 2 --clients c1,c2
every client in cidAll is assumed to subscribe the topic; duplicates in --clients are channels sharing an id.
CONFIG and MACHINE_ROOM read --config-queues and --consumer-idcs as a real client reads its configuration:
without them it takes no queue (said on stderr). At most 65536 queues per topic.
"""
