"""A simulated RocketMQ fleet: scenarios whose right answer is known, and the command that publishes them.

``fleet`` generates the events (seeded, virtual time); ``publish`` is ``rebalance-monitor simulate``, which sends
them to a monitor's Kafka topics or writes them as JSON lines. The demo and the tests use both.
"""
