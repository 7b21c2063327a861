"""The RocketMQ domain: what the real client and broker compute, reproduced exactly, and what the monitor
derives from it (membership, group analysis, episodes, fault windows). Plain Python with time passed in: no
Spark, Kafka or I/O (an import-linter contract enforces it). The client classes reproduced only for the
conformance and differential tests live in ``tests/reference``; the package map is
``docs/design/package-layers.md``.
"""
