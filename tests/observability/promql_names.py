"""Metric names used in PromQL text: every ``rmqmon_`` name, histogram series mapped to their family."""

from __future__ import annotations

import re

from connectors.metrics import BY_NAME

_NAME = re.compile(r"\b(rmqmon_[a-z0-9_]+)\b")
_HISTOGRAM_SUFFIXES = ("_bucket", "_count", "_sum")


def families(promql: str) -> set[str]:
    """The catalogue families a query reads (``x_bucket`` -> ``x`` for histograms); unknown names as written."""
    out = set()
    for name in _NAME.findall(promql):
        for suffix in _HISTOGRAM_SUFFIXES:
            base = name.removesuffix(suffix)
            if base != name and BY_NAME.get(base) is not None and BY_NAME[base].type == "histogram":
                name = base
                break
        out.add(name)
    return out
