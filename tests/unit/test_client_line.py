"""How a reported ``client_version`` picks a client line (``ClientLine.parse``): the forms RocketMQ clients
report, and what the monitor does with text no client sends (the default line)."""

from __future__ import annotations

import pytest

from streaming.domain.versions import ClientLine

V4, V5 = ClientLine.V4_9, ClientLine.V5


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("V4_9_8", V4),  # MQVersion.Version name, as 4.x clients report it
        ("4.9.8", V4),
        ("4", V4),
        ("5.3.3", V5),
        ("V5_1_4", V5),
        ("5", V5),
        ("12", V5),  # a future major version keeps 5.x semantics
        ("409", V4),  # MQVersion ordinals: V5_0_0 is 413
        ("412", V4),
        ("413", V5),
        ("0409", V4),
        ("100.1", V4),  # 100 and up is always an ordinal
        ("99999999999999999999999", V5),
        (" v4_9_8 ", V4),
        ("VV4", V4),
        ("\t5.0", V5),
    ],
)
def test_a_readable_version_gives_its_line_whatever_the_default(text: str, line: ClientLine) -> None:
    assert ClientLine.parse(text, V4) is line
    assert ClientLine.parse(text, V5) is line


@pytest.mark.parametrize(
    "text", [None, "", "unknown", "V", "3.0", "0", "1.2.3", "\u0664.9"]
)  # the last: Arabic-Indic 4
def test_an_unreadable_version_gives_the_default_line(text: str | None) -> None:
    assert ClientLine.parse(text, V4) is V4
    assert ClientLine.parse(text, V5) is V5
    assert ClientLine.parse(text) is V5
