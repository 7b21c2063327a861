"""What the project runs on 127.0.0.1 for demos, tests and benchmarks: a Kafka broker, a RocketMQ cluster and
its clients, a Spark standalone cluster, Prometheus, the toolchain smoke pipeline and the agent's build.
Each is started from the package registries' artifacts and stopped by the PID it recorded."""
