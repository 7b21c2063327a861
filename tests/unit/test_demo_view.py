"""The demos' live view (``streaming.app.demo.view_lines``, shared by ``demo`` and ``demo --rocketmq``): each group's
consume lag and its queues in alerting progress states, read from the job's metric gauges."""

from __future__ import annotations

import threading
from types import SimpleNamespace

from streaming.app.demo import view_lines


def fake_job(gauges: dict[str, dict[tuple[str, ...], float]]) -> SimpleNamespace:
    metrics = SimpleNamespace(lock=threading.Lock(), gauges=gauges)
    return SimpleNamespace(metrics=metrics, board=SimpleNamespace(snapshot=dict))


def row(lines: list[str], group: str) -> list[str]:
    (found,) = [line for line in lines if line.split()[:1] == [group]]
    return found.split()


def test_lag_per_group_summed_over_topics_with_its_alerting_states():
    job = fake_job(
        {
            "rmqmon_group_members": {
                ("DefaultCluster", "stuck"): 2,
                ("DefaultCluster", "idle"): 2,
                ("DefaultCluster", "new"): 1,
                ("east", "stuck"): 5,  # another cluster's group of the same name: its own row
            },
            "rmqmon_group_generation": {
                ("DefaultCluster", "stuck"): 3,
                ("DefaultCluster", "idle"): 1,
                ("DefaultCluster", "new"): 1,
            },
            "rmqmon_group_progress_lag": {
                ("DefaultCluster", "stuck", "orders"): 700,
                ("DefaultCluster", "stuck", "%RETRY%stuck"): 12,
                ("DefaultCluster", "idle", "a"): 0,
            },
            "rmqmon_group_progress_queues": {
                ("DefaultCluster", "stuck", "orders", "STUCK_HOLDER"): 4,
                ("DefaultCluster", "stuck", "orders", "OK"): 4,
                ("DefaultCluster", "stuck", "%RETRY%stuck", "SLOW"): 1,
                ("DefaultCluster", "idle", "a", "IDLE"): 8,
                ("DefaultCluster", "idle", "a", "STUCK_HOLDER"): 0,
            },
            # a group whose members are gone: listed by its lag, with its episode
            "rmqmon_group_open_anomalies": {("DefaultCluster", "gone", "OFFLINE_GROUP_BACKLOG"): 1},
        }
    )
    lines = view_lines(job)
    assert lines[0].split()[:6] == ["consumer", "group", "members", "gen", "orphaned", "double"]
    assert "lag" in lines[0].split()
    assert row(lines, "stuck")[:6] == ["stuck", "2", "3", "0", "0", "712"]
    assert " ".join(row(lines, "stuck")[6:]) == "-; SLOW 1, STUCK_HOLDER 4"
    assert row(lines, "idle")[5:] == ["0", "-"]  # lag 0, nothing alerting: IDLE and OK are never named
    assert row(lines, "new")[5] == "-"  # no progress sample yet: unknown, not 0
    assert row(lines, "east:stuck")[:2] == ["east:stuck", "5"]
    assert not [line for line in lines if line.startswith("gone")]  # no lag gauge: nothing of it is watched


def test_a_group_without_members_is_listed_by_its_backlog():
    job = fake_job(
        {
            "rmqmon_group_progress_lag": {
                ("DefaultCluster", "archive", "orders"): 900,
                ("DefaultCluster", "archive", "payments"): 100,
            },
            "rmqmon_group_progress_queues": {("DefaultCluster", "archive", "orders", "ORPHAN_CONFIRMED"): 8},
            "rmqmon_group_open_anomalies": {("DefaultCluster", "archive", "OFFLINE_GROUP_BACKLOG"): 1},
        }
    )
    assert " ".join(row(view_lines(job), "archive")) == (
        "archive 0 0 0 0 1000 OFFLINE_GROUP_BACKLOG; ORPHAN_CONFIRMED 8"
    )
