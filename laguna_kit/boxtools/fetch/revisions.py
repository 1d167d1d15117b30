"""Checkpoint revisions on a box.

A checkpoint folder (model_dir/<repo name>) holds one verified revision; the others a release may
need are kept whole in model_dir/.laguna-revisions/<name>@<commit>, so switching is two renames on
one filesystem and the container's paths stay the recipe's.
"""

from __future__ import annotations

import json
import os
import time

from ..layout import STASH, VERIFIED_RECORD


def recorded_revision(dest: str) -> str | None:
    try:
        with open(os.path.join(dest, VERIFIED_RECORD)) as fh:
            return json.load(fh).get("revision")
    except (OSError, ValueError):
        return None


def stash_path(dest: str, revision: str) -> str:
    dest = os.path.normpath(dest)
    return os.path.join(os.path.dirname(dest), STASH, f"{os.path.basename(dest)}@{revision}")


def select_revision(dest: str, revision: str) -> str:
    """Make `dest` the folder of `revision`: "current" (it already is), "restored" (from the stash;
    the folder it replaced is stashed in turn) or "new" (nothing of it here: an empty folder)."""
    have = recorded_revision(dest)
    if have == revision:
        return "current"
    kept = stash_path(dest, revision)
    if have is not None:
        old = stash_path(dest, have)
        os.makedirs(os.path.dirname(old), exist_ok=True)
        if os.path.isdir(old):
            os.rename(
                old, old + f".replaced.{int(time.time())}"
            )  # an older copy of the same commit
        os.rename(dest, old)
    if os.path.isdir(kept):
        if os.path.isdir(dest) and not os.listdir(dest):
            os.rmdir(dest)
        if not os.path.exists(dest):
            os.rename(kept, dest)
            return "restored"
    os.makedirs(dest, exist_ok=True)
    return "new"


def available(dest: str, revision: str) -> bool:
    """`revision` is in `dest` or kept in the stash."""
    return recorded_revision(dest) == revision or os.path.isdir(stash_path(dest, revision))


def stashed(dest: str) -> list[str]:
    """Folders of other revisions of `dest`'s repo kept on this box."""
    root = os.path.dirname(stash_path(dest, "x"))
    prefix = os.path.basename(os.path.normpath(dest)) + "@"
    if not os.path.isdir(root):
        return []
    return sorted(os.path.join(root, n) for n in os.listdir(root) if n.startswith(prefix))
