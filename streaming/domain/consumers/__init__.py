"""Consumer groups: the broker's membership rules and polled views, each group's analysis, episodes and consume
progress, and the shard engine that keeps them between batches and reports typed outcomes."""
