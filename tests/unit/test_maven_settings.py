"""The Maven settings resolutions run with: the user's own, plus the one mirror Spark's extra repository needs."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from connectors.maven_settings import EXTRA_REPOSITORY, mirrors_repository, settings_for_resolution

CENTRAL = "https://repo.maven.apache.org/maven2"
NS = "{http://maven.apache.org/SETTINGS/1.2.0}"


def settings(*mirrors: tuple[str, str], extra: str = "") -> str:
    body = "".join(
        f"<mirror><id>m{i}</id><mirrorOf>{of}</mirrorOf><url>{url}</url></mirror>"
        for i, (of, url) in enumerate(mirrors)
    )
    return f'<settings xmlns="http://maven.apache.org/SETTINGS/1.2.0">{extra}<mirrors>{body}</mirrors></settings>'


def mirror_of_extra(document: str) -> str:
    """The URL the document sends the extra repository to (its mirror of exactly that id)."""
    root = ET.fromstring(document)
    (url,) = [
        m.find(f"{NS}url").text for m in root.iter(f"{NS}mirror") if m.find(f"{NS}mirrorOf").text == EXTRA_REPOSITORY
    ]
    return url


@pytest.mark.parametrize(
    ("mirror_of", "covers"),
    [
        ("*", True),
        ("external:*", True),
        (EXTRA_REPOSITORY, True),
        (f"central,{EXTRA_REPOSITORY}", True),
        (f"*,!{EXTRA_REPOSITORY}", False),
        ("central", False),
        ("", False),
    ],
)
def test_which_mirror_of_values_cover_the_extra_repository(mirror_of, covers):
    assert mirrors_repository(mirror_of, EXTRA_REPOSITORY) is covers


def test_without_settings_of_their_own_the_extra_repository_goes_to_maven_central():
    document = settings_for_resolution(None, None, CENTRAL)
    assert document is not None and mirror_of_extra(document) == CENTRAL


@pytest.mark.parametrize("where", ["user", "global"])
def test_a_catch_all_mirror_of_the_user_or_the_installation_is_used_as_it_is(where):
    corporate = settings(("*", "https://mirror.example/maven"))
    found = (corporate, None) if where == "user" else (None, corporate)
    assert settings_for_resolution(*found, CENTRAL) is None


def test_a_mirror_of_central_also_serves_the_extra_repository_and_the_rest_is_kept():
    proxy = "<proxies><proxy><id>p</id><host>proxy.example</host><port>3128</port></proxy></proxies>"
    user = settings(("central", "https://mirror.example/central"), extra=proxy)
    document = settings_for_resolution(user, None, CENTRAL)
    assert document is not None and mirror_of_extra(document) == "https://mirror.example/central"
    root = ET.fromstring(document)
    assert root.find(f"{NS}proxies/{NS}proxy/{NS}host").text == "proxy.example"
    assert [m.find(f"{NS}id").text for m in root.iter(f"{NS}mirror")] == ["rrm-spark-extra-repository", "m0"]
