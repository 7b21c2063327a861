"""The consumer-group series the job exports for a scripted operation, as promtool input series.

A ``streaming.app.simulation.operations`` script runs through the pure engine (``ShardEngine.apply``, 15 s micro-
batches, snapshotted between them) and the job's own metric mapping (``streaming.job.delta.metric_rows``); after each
batch every consumer-group gauge and counter is read, as a 15 s scrape would. So the promtool cases of
``dashboards/alerts.py`` feed the alert rules what a rolling restart or a crash loop really produces, not
hand-written values.
"""

from __future__ import annotations

import json

from connectors.metrics import BY_NAME, MetricsState
from streaming.app.simulation.operations import Script, batches
from streaming.domain.consumers.engine_settings import EngineSettings
from streaming.domain.consumers.outcomes import GroupGone, GroupSummary, ProgressSummary
from streaming.domain.consumers.shard_engine import ShardEngine
from streaming.domain.vocabulary import DEFAULT_CLUSTER
from streaming.job.consumer.events import parsed_event
from streaming.job.delta.metric_rows import apply_consumer_metrics

SCRAPE_MS = 15_000


def _compressed(values: list[float]) -> str:
    """promtool's expanding notation for ``values``: runs of one value as ``vxN`` (N + 1 samples)."""
    parts: list[str] = []
    index = 0
    while index < len(values):
        end = index
        while end + 1 < len(values) and values[end + 1] == values[index]:
            end += 1
        value = f"{values[index]:g}"
        parts.append(value if end == index else f"{value}x{end - index}")
        index = end + 1
    return " ".join(parts)


def series_of(
    script: Script, selector: str, settings: EngineSettings | None = None, cluster: str = DEFAULT_CLUSTER
) -> dict[str, str]:
    """Every ``rmqmon_group_*`` series of the script's group (of ``cluster``), one sample per 15 s batch from the
    first batch on (``selector``: the labels every series carries besides its own, e.g. job and instance). A series
    that appears later is absent (``_``) before."""
    snapshot = None
    metrics = MetricsState()
    samples: dict[str, list[float | None]] = {}
    steps = 0
    for events, watermark in batches(script.events(), script.until_ms, SCRAPE_MS):
        engine = ShardEngine.restore(snapshot, settings or EngineSettings())
        outcomes = engine.apply([parsed_event(e["type"], e) for e in events], watermark)
        snapshot = json.loads(json.dumps(engine.snapshot()))
        apply_consumer_metrics(
            metrics, [(cluster, o) for o in outcomes if isinstance(o, GroupSummary | GroupGone | ProgressSummary)]
        )
        for kind in (metrics.gauges, metrics.counters):
            for name, table in kind.items():
                if not name.startswith("rmqmon_group_"):
                    continue
                names = BY_NAME[name].labels
                for labels, value in table.items():
                    pairs = ",".join(f'{n}="{v}"' for n, v in zip(names, labels, strict=True))
                    key = f"{name}{{{selector},{pairs}}}"
                    samples.setdefault(key, [None] * steps).append(value)
        steps += 1
        for values in samples.values():
            values.extend([values[-1]] * (steps - len(values)))
    return {key: _with_gaps(values) for key, values in sorted(samples.items())}


def _with_gaps(values: list[float | None]) -> str:
    absent = 0
    while absent < len(values) and values[absent] is None:
        absent += 1
    known = [float(v) for v in values[absent:] if v is not None]
    head = "_" if absent == 1 else (f"_x{absent}" if absent else "")  # promtool: ``_xN`` is N missing samples
    return " ".join(p for p in (head, _compressed(known)) if p)


def restarted(series: dict[str, str], at_step: int, down_steps: int) -> dict[str, str]:
    """``series`` as Prometheus stores them when the job stops at sample ``at_step`` and is scraped again
    ``down_steps`` samples later: the failed scrape's staleness marker, nothing while the driver is down, then
    the restarted job's values (what its tables restore, the same the running job would have exported)."""
    out = {}
    for key, text in series.items():
        values = expand(text)
        before, after = values[:at_step], values[at_step + down_steps :]
        assert before and after and None not in after, f"{key}: no restart at sample {at_step}"
        down = "stale" + (f" _x{down_steps - 1}" if down_steps > 1 else "")
        out[key] = " ".join((_with_gaps(before), down, _compressed([float(v) for v in after])))  # type: ignore[arg-type]
    return out


def first_sustained(series: str, value: float, for_steps: int) -> int | None:
    """The first sample index at which ``series`` (promtool notation, as written here) has equalled ``value``
    for ``for_steps`` samples, or None."""
    samples = expand(series)
    run = 0
    for index, sample in enumerate(samples):
        run = run + 1 if sample == value else 0
        if run > for_steps:
            return index
    return None


def expand(series: str) -> list[float | None]:
    """The samples of a series written by ``series_of`` (``_xN`` N absent, ``vxN`` N + 1 times ``v``)."""
    out: list[float | None] = []
    for part in series.split():
        head, _, times = part.partition("x")
        if head == "_":
            out += [None] * (int(times) if times else 1)
        else:
            out += [float(head)] * (int(times) + 1 if times else 1)
    return out
