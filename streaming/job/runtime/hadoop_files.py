"""Small whole files beside a checkpoint, through Hadoop's FileSystem (any checkpoint URI): read at once, and
written under a temporary name then renamed, so a reader sees the whole file or none."""

from __future__ import annotations

from typing import Any


def read_whole(fs: Any, path: Any) -> bytes:
    stream = fs.open(path)
    try:
        return bytes(stream.readAllBytes())
    finally:
        stream.close()


def write_whole(fs: Any, path: Any, data: bytes) -> None:
    """Write ``data`` to ``path`` (a Hadoop ``Path``) through ``.<name>.tmp`` beside it and a rename."""
    temporary = path.getParent().suffix(f"/.{path.getName()}.tmp")  # Path(parent, ".<name>.tmp")
    out = fs.create(temporary, True)
    try:
        out.write(bytearray(data))
    finally:
        out.close()
    if not fs.rename(temporary, path):
        raise OSError(f"could not rename {temporary} to {path}")
