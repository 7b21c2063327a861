"""``rebalance-monitor simulate``: the simulated fleet's events, into Kafka or a file."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping

from streaming.app.commands import NotFound, UsageError
from streaming.app.commands.tables import time_option


def simulate(args: argparse.Namespace) -> int:
    import signal
    import threading

    from connectors.kafka_topics import TopicCreationFailed
    from streaming.app.simulation.publish import MissingTopics, SimulateSettings, run_to_file, run_to_kafka

    if args.progress_interval % 5:
        raise UsageError("--progress-interval must be a multiple of 5 s, the fleet's tick")
    if args.output is not None and args.fleet_seconds is None:
        raise UsageError("--output needs --fleet-seconds: how much fleet time to write")
    if args.replication_factor is not None and not args.create_topics:
        raise UsageError("--replication-factor is for the topics --create-topics creates")
    kafka_only = args.config or args.bootstrap_servers or args.producer_option or args.create_topics
    if args.output is not None and kafka_only:
        raise UsageError(
            "--output writes a file; --config, --bootstrap-servers, --producer-option and --create-topics are for Kafka"
        )
    config = None
    if args.output is None:
        from streaming.config import load_config

        config = load_config(args.config)  # a ConfigError is one line per problem and exit code 2 (main)
    settings = SimulateSettings(
        scenario=args.scenario,
        seed=args.seed,
        namespace=args.namespace,
        extra_groups=args.groups,
        clients_per_group=args.clients,
        queues_per_broker=args.queues,
        sends_per_second=args.send_rate,
        start_ms=time_option("--start", args.start),
        speed=args.speed,
        fleet_seconds=args.fleet_seconds,
        duration_s=args.duration,
        max_future_skew_ms=config.ingest.max_future_skew_ms if config else 0,
        progress_interval_ms=int(args.progress_interval * 1000),
        assignment_reports=args.assignment_reports,
        cluster=args.cluster,
    )

    def say(line: str) -> None:
        print(f"[simulate] {line}", file=sys.stderr if args.output == "-" else sys.stdout, flush=True)

    if args.output is not None:
        return run_to_file(settings, args.output, say)
    assert config is not None
    options = _publishing_options(config.kafka.options, args.producer_option, say)
    topics = config.kafka.topics.by_type()
    bootstrap = args.bootstrap_servers or config.kafka.bootstrap_servers
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    refusals = _KafkaRefusals()
    try:
        return run_to_kafka(
            settings,
            bootstrap,
            topics,
            options,
            say,
            stop,
            create_missing_topics=args.create_topics,
            replication_factor=args.replication_factor,
        )
    except MissingTopics as error:
        raise NotFound(str(error)) from None
    except TopicCreationFailed as error:
        print(f"rebalance-monitor simulate: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        stop.set()
        return 130
    except Exception as error:  # kafka-python: no broker reachable, bad security settings
        if type(error).__module__.startswith("kafka"):
            if refusals.seen:
                raise NotFound(
                    f"Kafka at {bootstrap} refused the producer's authentication ({refusals.seen[-1]}); "
                    "check [kafka.options]: the SASL credentials and the trust store"
                ) from None
            detail = type(error).__name__ + ("" if str(error) in ("", type(error).__name__) else f": {error}")
            raise NotFound(f"cannot publish to Kafka at {bootstrap} ({detail})") from None
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)
        refusals.close()


class _KafkaRefusals:
    """kafka-python logs a refused SASL login or TLS handshake and then fails with an unrelated error (no broker,
    no API version): this handler on its loggers keeps those refusals, one line each, for the command's error,
    and keeps its log records (tracebacks included) off the terminal."""

    def __init__(self) -> None:
        import logging

        self.seen: list[str] = []
        self._logger = logging.getLogger("kafka")
        self._handler = logging.Handler(logging.WARNING)
        self._handler.emit = self._emit  # type: ignore[method-assign]
        self._logger.addHandler(self._handler)

    def _emit(self, record: object) -> None:
        import logging

        assert isinstance(record, logging.LogRecord)
        text = record.getMessage()
        for marker in ("SaslAuthenticate error:", "SSLCertVerificationError", "CERTIFICATE_VERIFY_FAILED"):
            if marker in text:
                self.seen.append(text[text.index(marker) :].splitlines()[0][:300])

    def close(self) -> None:
        self._logger.removeHandler(self._handler)


def _publishing_options(
    kafka_options: Mapping[str, str], pairs: list[str], say: Callable[[str], None]
) -> dict[str, object]:
    """The producer's options: the config's ``[kafka.options]`` translated for kafka-python, then the
    ``--producer-option`` pairs, which win."""
    from connectors.kafka_options import UntranslatableOption, producer_options

    try:
        translated = producer_options(kafka_options)
    except UntranslatableOption as error:
        raise UsageError(str(error)) from None
    if translated.not_used:
        say(
            f"[kafka.options] not used for publishing (they tune the monitor's consumer): "
            f"{', '.join(sorted(translated.not_used))}"
        )
    return {**translated.options, **_producer_options(pairs)}


def _producer_options(pairs: list[str]) -> dict[str, object]:
    """``KEY=VALUE`` pairs for kafka-python's producer; numbers and true/false become ints and bools."""
    from kafka import KafkaProducer

    options: dict[str, object] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--producer-option {pair!r}: expected KEY=VALUE")
        if key not in KafkaProducer.DEFAULT_CONFIG:
            raise UsageError(
                f"--producer-option {key!r} is not a kafka-python producer option "
                "(they use underscores, e.g. security_protocol)"
            )
        lowered = value.lower()
        options[key] = int(value) if value.isdigit() else lowered == "true" if lowered in ("true", "false") else value
    return options
