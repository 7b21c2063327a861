"""Anomaly episodes and rebalance storms: turning per-generation findings into open/close history.

An analysis says, at one event time, which anomalies hold for a group (and topic). Operators want
*episodes*: when an anomaly started, what it looked like while it lasted, and when it ended. This module
keeps the open episodes of one group as a value and, given the findings of a new analysis, returns the
new value plus the transitions (OPENED, UPDATED when the details changed, CLOSED).

Episode ids are derived from (group, topic, anomaly, opening time) so that a replayed micro-batch produces
the same ids: nothing here reads a clock or a random source.

``StormDetector`` counts rebalances (generations caused by membership or route changes) in a sliding
event-time window; more than the threshold within the window is a REBALANCE_STORM finding.
``FlappingDetector`` counts each member's joins and leaves the same way (FLAPPING_MEMBERS), and
``hold_in_grace`` keeps expected-vs-reported mismatches from opening while clients are still converging.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from .vocabulary import AnomalyKind, EpisodeStatus, MemberDirection, Severity


@dataclass(frozen=True)
class Finding:
    """One anomaly that holds now. ``fingerprint`` is what must change for the episode to be UPDATED."""

    group: str
    topic: str  # "" for group-level anomalies (duplicate client ids, diverging views, storms)
    anomaly: AnomalyKind
    severity: Severity
    summary: str
    details: Mapping[str, object] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.group, self.topic, self.anomaly)

    @property
    def fingerprint(self) -> str:
        return _stable_json(self.details)


@dataclass(frozen=True)
class Episode:
    episode_id: str
    group: str
    topic: str
    anomaly: AnomalyKind
    opened_at_ms: int
    severity: Severity
    summary: str
    details_json: str


@dataclass(frozen=True)
class Transition:
    """OPENED / UPDATED / CLOSED of one episode at ``event_time_ms``."""

    status: EpisodeStatus
    episode: Episode
    event_time_ms: int
    closed_at_ms: int | None = None


def _stable_json(value: object) -> str:
    import json

    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def episode_id(group: str, topic: str, anomaly: str, opened_at_ms: int) -> str:
    digest = hashlib.sha1(f"{group}\x00{topic}\x00{anomaly}\x00{opened_at_ms}".encode()).hexdigest()
    return digest[:20]


def reconcile(
    open_episodes: Mapping[tuple[str, str, str], Episode],
    findings: Iterable[Finding],
    now_ms: int,
    topics_in_scope: Iterable[str] | None = None,
) -> tuple[dict[tuple[str, str, str], Episode], list[Transition]]:
    """Compare the findings of one analysis with the open episodes of the same group.

    Episodes whose anomaly no longer holds are CLOSED at ``now_ms``; new anomalies are OPENED at
    ``now_ms``; an open episode whose details changed is UPDATED (same id, new details). When
    ``topics_in_scope`` is given, only episodes of those topics (and group-level ones, topic "") are
    judged, so an analysis of one topic never closes another topic's episode.
    """
    scope = None if topics_in_scope is None else {"", *topics_in_scope}
    current = {f.key: f for f in findings}
    result: dict[tuple[str, str, str], Episode] = {}
    transitions: list[Transition] = []
    for key, episode in sorted(open_episodes.items()):
        if scope is not None and key[1] not in scope:
            result[key] = episode
            continue
        finding = current.pop(key, None)
        if finding is None:
            transitions.append(Transition(EpisodeStatus.CLOSED, episode, now_ms, closed_at_ms=now_ms))
            continue
        details = finding.fingerprint
        if details != episode.details_json or finding.summary != episode.summary:
            episode = replace(episode, details_json=details, summary=finding.summary, severity=finding.severity)
            transitions.append(Transition(EpisodeStatus.UPDATED, episode, now_ms))
        result[key] = episode
    for key, finding in sorted(current.items()):
        episode = Episode(
            episode_id(finding.group, finding.topic, finding.anomaly, now_ms),
            finding.group,
            finding.topic,
            finding.anomaly,
            now_ms,
            finding.severity,
            finding.summary,
            finding.fingerprint,
        )
        result[key] = episode
        transitions.append(Transition(EpisodeStatus.OPENED, episode, now_ms))
    return result, transitions


def close_all(open_episodes: Mapping[tuple[str, str, str], Episode], now_ms: int) -> list[Transition]:
    """Close every open episode (the group disappeared)."""
    return [Transition(EpisodeStatus.CLOSED, e, now_ms, closed_at_ms=now_ms) for _, e in sorted(open_episodes.items())]


@dataclass(frozen=True)
class StormDetector:
    """Rebalance storm: more than ``threshold`` rebalances of one group within ``window_ms``.

    Changes closer than ``coalesce_ms`` to the last counted rebalance are the same rebalance: every broker
    that sees a client join notifies every member, and a client's RebalanceService folds the wake-ups that
    arrive while it runs into one more run -- so a client joining through two brokers, or a whole group
    starting at once, is one rebalance, not one per broker and channel.
    """

    window_ms: int = 300_000
    threshold: int = 10
    coalesce_ms: int = 1_000

    def record(self, rebalance_times_ms: tuple[int, ...], now_ms: int) -> tuple[int, ...]:
        """The rebalance times still inside the window after a rebalance-causing change at ``now_ms``."""
        if rebalance_times_ms and now_ms - rebalance_times_ms[-1] < self.coalesce_ms:
            return rebalance_times_ms  # part of the rebalance already counted
        horizon = now_ms - self.window_ms
        return tuple(t for t in (*rebalance_times_ms, now_ms) if t > horizon)

    def prune(self, rebalance_times_ms: tuple[int, ...], now_ms: int) -> tuple[int, ...]:
        horizon = now_ms - self.window_ms
        return tuple(t for t in rebalance_times_ms if t > horizon)

    def finding(self, group: str, rebalance_times_ms: tuple[int, ...]) -> Finding | None:
        count = len(rebalance_times_ms)
        if count <= self.threshold:
            return None
        return Finding(
            group,
            "",
            AnomalyKind.REBALANCE_STORM,
            Severity.WARNING,
            f"{count} rebalances of {group} within {self.window_ms // 1000} s (threshold {self.threshold})",
            {
                "rebalances_in_window": count,
                "window_ms": self.window_ms,
                "threshold": self.threshold,
                "first_ms": rebalance_times_ms[0],
                "last_ms": rebalance_times_ms[-1],
            },
        )


MemberChanges = dict[str, list[list[Any]]]
"""Per client id, its counted joins and leaves ``[time_ms, "JOIN" | "LEAVE"]`` in time order (JSON-ready)."""


@dataclass(frozen=True)
class FlappingDetector:
    """Flapping members: a member (client id) that joins or leaves more than ``threshold`` times within
    ``window_ms``, e.g. a crash-looping process, or a client whose connection to a broker keeps dropping.

    A join is a new channel of the client (JOIN), a leave a removed or expired one (LEAVE, EXPIRED).
    A client joins and leaves through every broker it heartbeats at about the same instant, so changes of
    the same direction closer than ``coalesce_ms`` to one already counted are the same join or leave (the
    storm detector's coalescing, for the same reason). One finding per group names every flapping member:
    client ids are details of the episode, never metric labels.
    """

    window_ms: int = 600_000
    threshold: int = 3
    coalesce_ms: int = 1_000

    def record(
        self, changes: Mapping[str, list[list[Any]]], client_id: str, direction: MemberDirection, time_ms: int
    ) -> MemberChanges:
        """``changes`` after a ``direction`` ("JOIN" or "LEAVE") of ``client_id`` at ``time_ms``."""
        entries = list(changes.get(client_id, ()))
        if any(d == direction and abs(time_ms - t) < self.coalesce_ms for t, d in entries):
            return dict(changes)  # the same join or leave seen through another broker
        entries = sorted([*entries, [time_ms, direction]], key=lambda e: (e[0], e[1]))
        horizon = entries[-1][0] - self.window_ms
        return {**changes, client_id: [e for e in entries if e[0] > horizon]}

    def prune(self, changes: Mapping[str, list[list[Any]]], now_ms: int) -> MemberChanges:
        """Forget changes that left the window at ``now_ms`` (and clients without any)."""
        horizon = now_ms - self.window_ms
        kept = {c: [e for e in entries if e[0] > horizon] for c, entries in changes.items()}
        return {c: entries for c, entries in kept.items() if entries}

    def next_expiry_ms(self, changes: Mapping[str, list[list[Any]]]) -> int | None:
        """When the oldest change leaves the window (``prune`` then has something to do)."""
        firsts = [entries[0][0] for entries in changes.values() if entries]
        return min(firsts) + self.window_ms if firsts else None

    def finding(self, group: str, changes: Mapping[str, list[list[Any]]], now_ms: int) -> Finding | None:
        horizon = now_ms - self.window_ms
        members = {}
        for client_id in sorted(changes):
            entries = [e for e in changes[client_id] if horizon < e[0]]
            if len(entries) > self.threshold:
                members[client_id] = {
                    "joins": sum(1 for _, d in entries if d == MemberDirection.JOIN),
                    "leaves": sum(1 for _, d in entries if d == MemberDirection.LEAVE),
                    "first_ms": entries[0][0],
                    "last_ms": entries[-1][0],
                }
        if not members:
            return None
        return Finding(
            group,
            "",
            AnomalyKind.FLAPPING_MEMBERS,
            Severity.WARNING,
            f"{len(members)} member(s) of {group} joined or left more than {self.threshold} times within "
            f"{self.window_ms // 1000} s",
            {"members": members, "window_ms": self.window_ms, "threshold": self.threshold},
        )


def hold_in_grace(
    findings: Iterable[Finding],
    open_episodes: Mapping[tuple[str, str, str], Episode],
    now_ms: int,
    converge_by_ms: int | None,
    kinds: Iterable[AnomalyKind],
) -> list[Finding]:
    """Findings of ``kinds`` that may not open an episode yet: before ``converge_by_ms`` clients are still
    converging after a change (RocketMQ rebalances within 20 s, and sees a route change only at its next
    route poll), so a difference between what they report and what they will compute is expected. An
    episode already open stays judged (updated, or closed when the difference is gone)."""
    if converge_by_ms is None or now_ms >= converge_by_ms:
        return list(findings)
    held = set(kinds)
    return [f for f in findings if f.anomaly not in held or f.key in open_episodes]
