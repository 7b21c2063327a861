"""The heartbeat path: consumer events into the shard engine, in a stateful operator keyed by shard."""
