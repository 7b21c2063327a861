"""The commands ``docs/runbook.md`` gives to confirm an alert: each section's ``Confirm:`` sentences, their
backticked ``mqadmin …`` (RocketMQ's admin tool), ``query …`` and ``health …`` (``rebalance-monitor``'s) commands."""

from __future__ import annotations

import re
from pathlib import Path

RUNBOOK = Path(__file__).parents[2] / "docs" / "runbook.md"
# Where a section's confirmation ends: its fix, or its causes.
_CONFIRM = re.compile(r"Confirm(?: with)?:?(.*?)(?:\bFix\b|\bCauses\b|\n\n|$)", re.S)
_COMMAND = re.compile(r"`((?:mqadmin|query|health)\s[^`]+)`")


def sections(text: str | None = None) -> dict[str, str]:
    """Each ``## `` section's text by its heading."""
    text = RUNBOOK.read_text() if text is None else text
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return {heading.strip(): body for heading, body in zip(parts[1::2], parts[2::2], strict=True)}


def confirm_commands(heading: str, text: str | None = None) -> list[str]:
    """The commands of the section's ``Confirm:`` sentences, whitespace made single spaces, in order."""
    body = sections(text)[heading]
    found = []
    for sentence in _CONFIRM.findall(body):
        found += [" ".join(c.split()) for c in _COMMAND.findall(sentence)]
    return found
