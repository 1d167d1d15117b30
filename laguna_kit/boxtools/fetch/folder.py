"""The checkpoint folder itself: a file goes into place only after its hash matched, a bad one
into the quarantine; shards of no revision of this manifest are moved aside; files another kept
revision has with the same hash are hard-linked instead of downloaded."""

from __future__ import annotations

import os
import shutil
import time

from ..layout import PARTIAL, QUARANTINE
from . import records
from .errors import FetchError, HashMismatch
from .records import wanted_hash
from .verify import content_ok


def part_path(dest: str, entry: dict) -> str:
    """Where a download of `entry` in progress lives (never taken for the file)."""
    return os.path.join(dest, PARTIAL, entry["path"] + ".part")


def place(dest: str, part: str, entry: dict, counter: dict) -> None:
    """Move a complete file into place only after its hash matched: a bad one is quarantined."""
    place_hashed(dest, part, entry, content_ok(part, entry, counter)[1])


def place_hashed(dest: str, part: str, entry: dict, found: str) -> None:
    """As place(), for a file hashed while it arrived."""
    if found != wanted_hash(entry):
        quarantine(dest, part, entry["path"] + ".download")
        raise HashMismatch(entry["path"], found, wanted_hash(entry))
    move_into_place(dest, part, entry)


def move_into_place(dest: str, part: str, entry: dict) -> None:
    final = os.path.join(dest, entry["path"])
    os.makedirs(os.path.dirname(final), exist_ok=True)
    os.chmod(part, 0o644)
    os.replace(part, final)


def quarantine(dest: str, path: str, name: str) -> str:
    qdir = os.path.join(dest, QUARANTINE)
    os.makedirs(qdir, exist_ok=True)
    target = os.path.join(qdir, f"{name.replace('/', '__')}.{int(time.time())}")
    os.replace(path, target)
    return target


def sweep_strays(dest: str, wanted: set[str]) -> list[str]:
    """Shards that are not in this revision (another revision's, a renamed copy) would confuse
    the loader: moved into the quarantine; what was moved, said for the summary."""
    moved = []
    for name in sorted(os.listdir(dest)):
        if (
            name.endswith(".safetensors")
            and name not in wanted
            and os.path.isfile(os.path.join(dest, name))
        ):
            quarantine(dest, os.path.join(dest, name), name)
            moved.append(f"{name} (not in this revision: quarantined)")
    return moved


def disk_full(dest: str, entry: dict) -> FetchError:
    """ENOSPC mid-transfer, with the numbers: the part file stays where it never looks complete."""
    part = part_path(dest, entry)
    got = os.path.getsize(part) if os.path.exists(part) else 0
    free = shutil.disk_usage(dest).free
    return FetchError(
        f"{entry['path']}: disk full at {dest} ({free >> 20} MiB free) after {got} of "
        f"{entry['size']} "
        f"bytes; the part stays in {PARTIAL}/ and is never taken for the file: free at least "
        f"{(entry['size'] - got + (1 << 20) - 1) >> 20} MiB more and re-run to resume"
    )


def link_unchanged_files(
    dest: str, sources: list[str], manifest: list[dict], files_state: dict
) -> int:
    """Hard-link files whose hash is unchanged from another revision's folder (the live one, the
    kept ones): a new revision downloads only what really changed. Files are only ever replaced by
    rename, never written in place, so sharing an inode is safe; a changed stat means a re-hash."""
    linked = 0
    for old in sources:
        old_state = records.load(old)
        by_hash = {rec.get("hash"): name for name, rec in old_state.get("files", {}).items()}
        for entry in manifest:
            want = wanted_hash(entry)
            path = os.path.join(dest, entry["path"])
            name = by_hash.get(want)
            if name is None or entry["path"] in files_state or os.path.exists(path):
                continue
            src = os.path.join(old, name)
            if not records.recorded_ok(
                old_state, old_state.get("revision"), old, dict(entry, path=name)
            ):
                continue
            os.makedirs(os.path.dirname(path), exist_ok=True)
            os.link(src, path)
            files_state[entry["path"]] = records.entry_record(path, entry)
            linked += 1
    return linked
