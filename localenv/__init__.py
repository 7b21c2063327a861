"""Local environments the project runs itself for demos and tests (a RocketMQ cluster on 127.0.0.1)."""
