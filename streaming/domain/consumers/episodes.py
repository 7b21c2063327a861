"""Anomaly episodes and rebalance storms: turning per-generation findings into open/close history.

An analysis says, at one event time, which anomalies hold for a group (and topic). Operators want
*episodes*: when an anomaly started, what it looked like while it lasted, and when it ended. This module
keeps the open episodes of one group as a value and, given the findings of a new analysis, returns the
new value plus the transitions (OPENED, UPDATED when the details changed, CLOSED).

Episode ids are derived from (group, topic, anomaly, opening time) so that a replayed micro-batch produces
the same ids: nothing here reads a clock or a random source.

``StormDetector`` judges a group's membership and route changes in a sliding event-time window: changes that
did not converge (beyond what members joining, leaving or restarting once need) above the threshold are a
REBALANCE_STORM finding, members replaced one by one a ROLLING_DEPLOY (info).
``FlappingDetector`` counts each member's joins and leaves the same way (FLAPPING_MEMBERS), and
``hold_in_grace`` keeps expected-vs-reported mismatches from opening while clients are still converging.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from streaming.domain.anomaly_catalogue import severity_of
from streaming.domain.vocabulary import AnomalyKind, EpisodeStatus, MemberDirection, Severity


@dataclass(frozen=True)
class Finding:
    """One anomaly that holds now. ``fingerprint`` is what must change for the episode to be UPDATED; the
    severity is the kind's (``anomaly_catalogue``), never the finder's."""

    group: str
    topic: str  # "" for group-level anomalies (duplicate client ids, diverging views, storms)
    anomaly: AnomalyKind
    summary: str
    details: Mapping[str, object] = field(default_factory=dict)

    @property
    def severity(self) -> Severity:
        return severity_of(self.anomaly)

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


StormChanges = list[list[Any]]
"""The group's rebalance-causing changes ``[time_ms, subject, direction]`` in time order (JSON-ready): a member's
JOIN or LEAVE (subject: its client id), or a topic's ROUTE change (subject: the topic)."""
ROUTE = "ROUTE"
BORN = "BORN"  # the entry (subject "") of a group the shard had not known: its first members are not changes


@dataclass(frozen=True)
class StormDetector:
    """Rebalance storm: a group that keeps rebalancing without converging on a membership.

    Every member of a group may change without that being a storm: a new member joins once and stays, a member
    leaves once (and may come back once: a restart under the same client id), a topic's route changes up to
    twice (a broker's queues removed and back, or expanded broker by broker). Those changes converge: after
    them the group holds a membership it keeps. What the window holds beyond that budget did not converge: a
    member that joined and left again (a short-lived process, a crash loop under new client ids), a member
    that left and came back more than once (a crash loop under one id), a route that keeps changing. More
    than ``threshold`` such changes within ``window_ms`` is a REBALANCE_STORM. The budget is per member that
    changed, so it grows with the group: a rolling restart of 50 members causes 100 changes and none of them
    counts, while one member crash-looping in a group of 3 does. An open storm holds while more than half the
    threshold remains (hysteresis).

    A group the shard did not know (a new group, or the monitor's first sight of it) starts with a BORN entry: the
    joins of its first heartbeat round (``birth_ms``) are its membership, not new members.

    Otherwise, ``deploy_min`` or more members replaced within the window (each old member gone or restarted,
    each new or restarted one there for ``stable_ms`` and still there) is a ROLLING_DEPLOY: recorded as an info
    episode, never alerted.

    A member's changes of one direction closer than ``coalesce_ms`` are one change (every broker sees the
    member join or leave at about the same instant); and consecutive changes of one direction count once
    when judged (a join seen by a second broker's later poll is still the same join). Subscription-table
    changes are not recorded here: an inconsistent subscription flips the broker's table with every member's
    heartbeat while no queue moves (``docs/design/rebalance-storms.md``).
    """

    window_ms: int = 300_000
    threshold: int = 10
    coalesce_ms: int = 1_000
    deploy_min: int = 2
    birth_ms: int = 30_000  # one heartbeat round: every running member of a group heartbeats within it
    stable_ms: int = 30_000  # a new (or restarted) member counts as a replacement once it stayed this long

    # -- the rebalance times (``GroupState.rebalances_ms``: the last rebalance, consume progress) -------------
    def record(self, rebalance_times_ms: tuple[int, ...], now_ms: int) -> tuple[int, ...]:
        """The rebalance times still inside the window after a rebalance-causing change at ``now_ms``."""
        if rebalance_times_ms and now_ms - rebalance_times_ms[-1] < self.coalesce_ms:
            return rebalance_times_ms  # part of the rebalance already counted
        horizon = now_ms - self.window_ms
        return tuple(t for t in (*rebalance_times_ms, now_ms) if t > horizon)

    def prune(self, rebalance_times_ms: tuple[int, ...], now_ms: int) -> tuple[int, ...]:
        horizon = now_ms - self.window_ms
        return tuple(t for t in rebalance_times_ms if t > horizon)

    # -- the changes the storm is judged from ------------------------------------------------------------------
    def record_change(self, changes: StormChanges, subject: str, direction: str, time_ms: int) -> StormChanges:
        """``changes`` after a change of ``subject`` (JOIN, LEAVE or ROUTE) at ``time_ms``, pruned to the window."""
        if any(s == subject and d == direction and abs(time_ms - t) < self.coalesce_ms for t, s, d in changes):
            return changes  # the same change seen through another broker
        if direction == MemberDirection.JOIN and changes and changes[0][2] == BORN:
            if time_ms - changes[0][0] <= self.birth_ms:
                return changes  # one of the group's first members
        entries = sorted([*changes, [time_ms, subject, direction]], key=lambda e: (e[0], e[1], e[2]))
        horizon = entries[-1][0] - self.window_ms
        return [e for e in entries if e[0] > horizon]

    def prune_changes(self, changes: StormChanges, now_ms: int) -> StormChanges:
        horizon = now_ms - self.window_ms
        return [e for e in changes if e[0] > horizon]

    def judge(self, changes: StormChanges, now_ms: int) -> dict[str, Any]:
        """What the window's changes say: every change, the unconverged ones per subject, the replaced members."""
        horizon = now_ms - self.window_ms
        runs: dict[tuple[str, bool], list[tuple[str, int]]] = {}  # per subject: (direction, time) of each run
        for time_ms, subject, direction in changes:
            if time_ms <= horizon or direction == BORN:
                continue
            seq = runs.setdefault((subject, direction == ROUTE), [])
            if direction == ROUTE or not seq or seq[-1][0] != direction:
                seq.append((direction, time_ms))
        settled = now_ms - self.stable_ms  # a member that joined by then and is still there is stable
        unconverged: dict[str, int] = {}
        joined = left = restarted = 0
        for (subject, route), seq in sorted(runs.items()):
            if route:
                extra = max(0, len(seq) - 2)
            elif seq[0][0] == MemberDirection.JOIN:
                extra = 0 if len(seq) == 1 else len(seq)  # a new member that did not stay: all of it wasted
                joined += len(seq) == 1 and seq[0][1] <= settled
            else:
                extra = max(0, len(seq) - 2)  # gone, or restarted once: converged
                left += len(seq) == 1
                restarted += len(seq) == 2 and seq[1][1] <= settled
            if extra:
                unconverged[subject] = extra
        return {
            "changes": sum(len(seq) for seq in runs.values()),
            "unconverged": unconverged,
            "replaced": min(joined, left) + restarted,
            "joined": joined,
            "left": left,
            "restarted": restarted,
            "first_ms": min((e[0] for e in changes if e[0] > horizon and e[2] != BORN), default=None),
            "last_ms": max((e[0] for e in changes if e[0] > horizon and e[2] != BORN), default=None),
        }

    def next_expiry_ms(self, changes: StormChanges) -> int | None:
        return changes[0][0] + self.window_ms + 1 if changes else None

    def findings(self, group: str, changes: StormChanges, now_ms: int, storm_open: bool = False) -> list[Finding]:
        """A REBALANCE_STORM, else a ROLLING_DEPLOY, else nothing, for the window ending at ``now_ms``. A storm
        opens above the threshold and, once open (``storm_open``), holds while the window keeps more than half of
        it: a window sliding over a member's alternating joins and leaves must not close and reopen it."""
        verdict = self.judge(changes, now_ms)
        unconverged = sum(verdict["unconverged"].values())
        window_s = self.window_ms // 1000
        if unconverged > (self.threshold // 2 if storm_open else self.threshold):
            details = {
                "rebalances_in_window": verdict["changes"],
                "unconverged_in_window": unconverged,
                "unconverged_by_subject": verdict["unconverged"],
                "window_ms": self.window_ms,
                "threshold": self.threshold,
                "first_ms": verdict["first_ms"],
                "last_ms": verdict["last_ms"],
            }
            summary = (
                f"{unconverged} of {verdict['changes']} membership or route changes of {group} within {window_s} s "
                f"did not converge (threshold {self.threshold})"
            )
            return [Finding(group, "", AnomalyKind.REBALANCE_STORM, summary, details)]
        if verdict["replaced"] >= self.deploy_min:
            details = {k: verdict[k] for k in ("replaced", "joined", "left", "restarted", "first_ms")}
            details["window_ms"] = self.window_ms
            summary = f"rolling deploy of {group}: {verdict['replaced']} member(s) replaced within {window_s} s"
            return [Finding(group, "", AnomalyKind.ROLLING_DEPLOY, summary, details)]
        return []


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
