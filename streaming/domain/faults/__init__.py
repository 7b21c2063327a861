"""Producer fault tolerance: RocketMQ's fault table and fault items (``tolerance``), and the monitor's replay of
send results into fault windows (``windows``, ``tracker``, ``shard``, ``outcomes``)."""
