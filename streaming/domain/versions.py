"""Client lines whose load-balancing semantics differ.

RocketMQ changed several rules between 4.9.x and 5.x (consistent-hash key charset, the producer fault
table and its extend-only semantics, the ``ThreadLocalIndex`` start value). The monitor selects the
semantics per client from the ``client_version`` it reports; anything unparseable falls back to the
configured default.
"""

from __future__ import annotations

import enum
import re


class ClientLine(enum.Enum):
    """A RocketMQ client line with one set of semantics."""

    V4_9 = "4.9"
    V5 = "5"

    @classmethod
    def parse(cls, text: str | None, default: ClientLine | None = None) -> ClientLine:
        """Map a reported version (``"V4_9_8"``, ``"4.9.8"``, ``"5.3.3"``, ``"5"``, an MQVersion ordinal
        such as ``"409"``) to its line; ``default`` (else ``V5``) when it cannot be read."""
        fallback = default or cls.V5
        if not text:
            return fallback
        value = text.strip().upper().lstrip("V").replace("_", ".")
        if value.isdigit() and len(value) >= 3:
            # MQVersion.Version ordinal: V5_0_0 is 413 (section 7.1 of the semantics reference).
            return cls.V5 if int(value) >= 413 else cls.V4_9
        match = re.match(r"(\d+)(?:\.(\d+))?", value)
        if not match:
            return fallback
        major = int(match.group(1))
        if major >= 5:
            return cls.V5
        if major == 4:
            return cls.V4_9
        return fallback
