"""Consume progress: a queue's samples judged into one state (``verdict``), and what a generation change cost
the queues it moved (``rebalance_cost``)."""
