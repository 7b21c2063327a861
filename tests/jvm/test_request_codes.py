"""The RocketMQ request each collector call is, as ``docs/deploy.md`` names it for the access-control settings:
the names and codes read from both client lines' ``RequestCode`` classes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.rocketmq_jvm import RocketMQClasses

PAGE = (Path(__file__).parents[2] / "docs" / "deploy.md").read_text()
REQUEST_CODE = {
    "4.9": "org.apache.rocketmq.common.protocol.RequestCode",
    "5": "org.apache.rocketmq.remoting.protocol.RequestCode",
}


@pytest.mark.parametrize("line", list(REQUEST_CODE))
def test_every_request_the_page_names_has_its_code_in_the_client(line):
    stated = dict(re.findall(r"^\| `[a-z_]+` \| `(GET_[A-Z_]+)` \((\d+)\) \|", PAGE, re.MULTILINE))
    assert len(stated) == 8
    codes = RocketMQClasses(line).cls(REQUEST_CODE[line])
    assert {name: int(getattr(codes, name)) for name in stated} == {n: int(c) for n, c in stated.items()}
