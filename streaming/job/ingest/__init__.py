"""Ingest: Kafka records classified in the JVM against the contract; dead letters and poison isolation."""
