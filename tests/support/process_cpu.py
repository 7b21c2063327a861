"""CPU seconds a process and every process below it have spent, from Linux's ``/proc``: the suite's summary counts
them per test file, since the suite's time follows its CPU seconds once both cores are busy."""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat_fields(pid: str) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()  # the command name may hold spaces and brackets


def tree_cpu_seconds(root: int) -> float | None:
    """User and system CPU seconds of ``root``, its live descendants and the descendants they have reaped; None
    where ``/proc`` is not there. A process that outlives its parent leaves the tree with its seconds."""
    if not Path("/proc/self/stat").exists():
        return None
    children: defaultdict[int, list[int]] = defaultdict(list)
    ticks: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = _stat_fields(entry)
        if fields is None:
            continue
        pid = int(entry)
        children[int(fields[1])].append(pid)
        # utime, stime and the reaped children's cutime, cstime
        ticks[pid] = sum(int(v) for v in fields[11:15])
    total, pending = 0, [root]
    while pending:
        pid = pending.pop()
        total += ticks.get(pid, 0)
        pending.extend(children.get(pid, ()))
    return total / _TICKS
