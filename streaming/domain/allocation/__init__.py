"""RocketMQ's consumer allocation: each strategy one client's share at a time (``strategies``), and a whole
group in one pass (``group``)."""
