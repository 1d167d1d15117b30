"""File names that come from outside (the hub's metadata, a mirror's manifest, a checkpoint's
index) are checked before anything is written or read with them: box side and control side."""

from __future__ import annotations

import os

# The kit's own records in a checkpoint folder start so (layout.py: the verification record,
# the partial downloads, the quarantine): a repository file of that name would overwrite or fake
# one.
RESERVED_PREFIX = ".laguna-"


class UnsafeName(ValueError):
    pass


def safe_name(name: str) -> str:
    """`name` when it is a plain relative path: not absolute, no `..`, `.` or empty components, no
    backslash, no control character, not one of the kit's own records; else UnsafeName."""
    bad = (
        not isinstance(name, str)
        or not name
        or name.startswith("/")
        or "\\" in name
        or any(ord(c) < 0x20 or ord(c) == 0x7F for c in name)
        or any(part in ("", ".", "..") for part in name.split("/"))
    )
    if bad:
        raise UnsafeName(f"refusing the file name {name!r}: not a plain relative path")
    if name.split("/", 1)[0].startswith(RESERVED_PREFIX):
        raise UnsafeName(
            f"refusing the file name {name!r}: it collides with the kit's own records "
            f"({RESERVED_PREFIX}*)"
        )
    return name


def inside(folder: str, name: str) -> str:
    """`folder`/`name`, checked to stay inside `folder` (symbolic links resolved)."""
    root = os.path.realpath(folder)
    path = os.path.realpath(os.path.join(root, safe_name(name)))
    if not path.startswith(root + os.sep):
        raise UnsafeName(f"refusing the file name {name!r}: it leads outside {folder}")
    return path
