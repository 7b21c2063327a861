"""``rebalance-monitor health``: a running job's own health from its metrics page, as its job-health alerts
judge it (``connectors.job_health``); exit 1 when anything is found."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from connectors.job_health import Health, check


def metrics_url(args: argparse.Namespace) -> str:
    """``--url``, or the ``[metrics]`` endpoint of ``--config`` (a wildcard host read on this machine)."""
    if args.url:
        return str(args.url)
    from streaming.config import load_config

    metrics = load_config(args.config).metrics
    host = "127.0.0.1" if metrics.host in ("0.0.0.0", "::", "") else metrics.host  # noqa: S104 - a bind address
    return f"http://{host}:{metrics.port}/metrics"


def _age(seconds: float | None) -> str:
    return "never" if seconds is None else f"{seconds:.0f} s ago"


def render(url: str, health: Health) -> list[str]:
    counted = "since start" if health.window_s is None else f"in {health.window_s:.0f} s"
    state = "up" if health.up else "DOWN"
    lines = [f"{url}: {state}" + (f", version {health.version}" if health.version else "")]
    if health.queries:
        lines.append(
            f"{'query':<12}  {'last trigger':>12}  {'last batch':>12}  {'read ' + counted:>16}  {'behind':>8}  "
            f"{'restarts':>8}  dead letters"
        )
        for q in health.queries:
            letters = ", ".join(f"{r} {n:.0f}" for r, n in q.dead_letters.items()) or "0"
            behind = "" if q.offsets_behind is None else f"{q.offsets_behind:.0f}"
            lines.append(
                f"{q.query:<12}  {_age(q.last_trigger_age_s):>12}  {_age(q.last_batch_age_s):>12}  "
                f"{q.rows_read:>16,.0f}  {behind:>8}  {q.restarts:>8.0f}  {letters}"
            )
    if health.stale_views:
        lines.append("stale broker views: " + ", ".join(f"{b} {n:.0f}" for b, n in health.stale_views.items()))
    lines += [f"{f.alert}  {f.subject + ': ' if f.subject else ''}{f.detail}" for f in health.findings]
    lines.append("healthy" if health.healthy else f"{len(health.findings)} finding(s)")
    return lines


def health(args: argparse.Namespace) -> int:
    url = metrics_url(args)
    found = check(url, args.over)
    if args.json:
        print(json.dumps({"url": url, **asdict(found), "healthy": found.healthy}, indent=2))
    else:
        print("\n".join(render(url, found)))
    return 0 if found.healthy else 1
