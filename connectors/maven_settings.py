"""The Maven settings the project's resolutions run with: the user's own, plus one mirror only when they need it.

Spark's parent POM declares an extra repository (``gcs-maven-central-mirror``) on a host many networks cannot
reach, and Maven fails on it instead of falling back. Where the user's or the installation's settings already
mirror it (a corporate mirror of ``*`` or ``external:*``), they are used as they are, credentials and proxies
included. Otherwise the user's settings gain one mirror sending that repository where their Maven Central goes
(their own mirror of ``central`` if they have one, else Maven Central itself).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

EXTRA_REPOSITORY = "gcs-maven-central-mirror"
NAMESPACE = "http://maven.apache.org/SETTINGS/1.2.0"
EMPTY_SETTINGS = f'<settings xmlns="{NAMESPACE}"/>'


def _children(element: ET.Element, name: str) -> list[ET.Element]:
    return [child for child in element if child.tag.rsplit("}", 1)[-1] == name]


def _mirrors(settings_xml: str) -> list[tuple[str, str]]:
    """(mirrorOf, url) of each mirror in a settings document, in order."""
    root = ET.fromstring(settings_xml)
    found = []
    for mirrors in _children(root, "mirrors"):
        for mirror in _children(mirrors, "mirror"):
            of = next((c.text or "" for c in _children(mirror, "mirrorOf")), "")
            url = next((c.text or "" for c in _children(mirror, "url")), "")
            found.append((of.strip(), url.strip()))
    return found


def mirrors_repository(mirror_of: str, repository: str) -> bool:
    """Whether a ``mirrorOf`` value covers a remote https repository with this id (Maven's rules: ``*``,
    ``external:*``, the id itself, comma lists, ``!id`` excludes)."""
    tokens = [t.strip() for t in mirror_of.split(",") if t.strip()]
    if f"!{repository}" in tokens:
        return False
    return any(t in ("*", "external:*", repository) for t in tokens)


def settings_for_resolution(user_xml: str | None, global_xml: str | None, central_url: str) -> str | None:
    """The user settings document a resolution should pass to Maven (``-s``), or None: Maven's own settings
    already reach ``EXTRA_REPOSITORY`` and are used unchanged. ``central_url``: Maven Central as the installed
    Maven knows it."""
    existing = [xml for xml in (user_xml, global_xml) if xml]
    mirrors = [m for xml in existing for m in _mirrors(xml)]
    if any(mirrors_repository(of, EXTRA_REPOSITORY) for of, _ in mirrors):
        return None
    central = next((url for of, url in mirrors if mirrors_repository(of, "central") and url), central_url)
    root = ET.fromstring(user_xml or EMPTY_SETTINGS)
    namespace = root.tag[1:].split("}", 1)[0] if root.tag.startswith("{") else ""

    def tag(name: str) -> str:
        return f"{{{namespace}}}{name}" if namespace else name

    block = next(iter(_children(root, "mirrors")), None)
    if block is None:
        block = ET.SubElement(root, tag("mirrors"))
    mirror = ET.Element(tag("mirror"))
    for name, text in (("id", "rrm-spark-extra-repository"), ("mirrorOf", EXTRA_REPOSITORY), ("url", central)):
        ET.SubElement(mirror, tag(name)).text = text
    block.insert(0, mirror)
    if namespace:
        ET.register_namespace("", namespace)
    return ET.tostring(root, encoding="unicode")
