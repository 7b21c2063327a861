"""Client lines whose load-balancing semantics differ.

RocketMQ changed several rules between 4.9.x and 5.x (consistent-hash key charset, the producer fault
table and its extend-only semantics, the ``ThreadLocalIndex`` start value). The monitor selects the
semantics per client from the ``client_version`` it reports; anything unparseable falls back to the
configured default.
"""

from __future__ import annotations

import enum
import re

# The leading number of a reported version, after blanks and any "V"s (Java's regex reads it alike).
VERSION_NUMBER_PATTERN = r"^\s*[Vv]*([0-9]+)"
_VERSION_NUMBER = re.compile(VERSION_NUMBER_PATTERN, re.ASCII)


class ClientLine(enum.Enum):
    """A RocketMQ client line with one set of semantics."""

    V4_9 = "4.9"
    V5 = "5"

    @classmethod
    def parse(cls, text: str | None, default: ClientLine | None = None) -> ClientLine:
        """Map a reported version (``"V4_9_8"``, ``"4.9.8"``, ``"5.3.3"``, ``"5"``, an MQVersion ordinal
        such as ``"409"``) to its line; ``default`` (else ``V5``) when it cannot be read.

        The reading is the leading number after any blanks and ``V``s: 100 and up is an ordinal (no
        release has such a major version; V5_0_0 is 413), 5 and up is 5.x, 4 is 4.9. The send path
        reads versions in Spark SQL the same way (``sends.query.client_line_column``), with the same
        ASCII-only pattern, so both always agree.
        """
        line = cls.read(text)
        return line if line is not None else default or cls.V5

    @classmethod
    def read(cls, text: str | None) -> ClientLine | None:
        """The line of a reported version as ``parse`` reads it; None when it cannot be read."""
        match = _VERSION_NUMBER.match(text or "")
        if not match:
            return None
        number = int(match.group(1))
        if number >= 100:
            return cls.V5 if number >= 413 else cls.V4_9
        if number >= 5:
            return cls.V5
        if number == 4:
            return cls.V4_9
        return None
