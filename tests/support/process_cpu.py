"""CPU seconds from Linux's ``/proc``: of one process, of a process tree, of the whole machine. The suite's summary
counts them per test file (its time follows its CPU seconds once both cores are busy) and the benchmarks report
them beside wall time."""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat_fields(pid: int | str) -> list[str] | None:
    """``/proc/PID/stat`` from the state on (index 0 = state), or None once the process is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()  # the command name may hold spaces and brackets


def _ticks(fields: list[str]) -> int:
    return sum(int(v) for v in fields[11:15])  # utime, stime and the reaped children's cutime, cstime


def process_cpu_seconds(pid: int) -> float | None:
    """User and system CPU seconds of a process and of the children it has reaped; None once it is gone."""
    fields = _stat_fields(pid)
    return None if fields is None else _ticks(fields) / _TICKS


def processes_cpu_seconds(pids: Iterable[int]) -> float:
    """``process_cpu_seconds`` summed over the processes of ``pids`` still there."""
    return sum(process_cpu_seconds(pid) or 0.0 for pid in pids)


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
        ticks[pid] = _ticks(fields)
    total, pending = 0, [root]
    while pending:
        pid = pending.pop()
        total += ticks.get(pid, 0)
        pending.extend(children.get(pid, ()))
    return total / _TICKS


def machine_busy_seconds() -> float | None:
    """CPU seconds every core of the machine has spent busy since boot (``/proc/stat``: every state but idle and
    iowait), else None."""
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:8]]
    except (OSError, ValueError):
        return None
    user, nice, system, _idle, _iowait, irq, softirq = fields
    return (user + nice + system + irq + softirq) / _TICKS
