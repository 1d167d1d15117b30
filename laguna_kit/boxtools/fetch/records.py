"""A checkpoint folder's verification record (.laguna-verified.json): each file's hash and the
stat it had when it was hashed. The one rule of what a record proves lives here (`why_unproven`):
the box's fetch and the control side's plan (laguna_kit/domain/hub.py) both ask it."""

from __future__ import annotations

import json
import os

from ..layout import VERIFIED_RECORD

STAT_KEYS = ("size", "mtime_ns", "inode")


def wanted_hash(entry: dict) -> str:
    """The hub's hash of this manifest file: its LFS sha256, else its git blob id."""
    return entry.get("sha256") or entry["blob_id"]


def stat_record(path: str) -> dict:
    st = os.stat(path)
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "inode": st.st_ino}


def why_unproven(rec: dict | None, stat: dict | None, want: str) -> str | None:
    """None when the record `rec` proves a file whose stat is `stat` has hash `want`: it was hashed
    to that value and has not changed since; else why not ("missing", "not verified",
    "changed since it was verified")."""
    if stat is None:
        return "missing"
    if not rec or rec.get("hash") != want:
        return "not verified"
    if any(rec.get(k) != stat.get(k) for k in STAT_KEYS):
        return "changed since it was verified"
    return None


def load(dest: str) -> dict:
    """The folder's record ({} when there is none or it is unreadable)."""
    try:
        with open(os.path.join(dest, VERIFIED_RECORD)) as fh:
            doc = json.load(fh)
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def save(dest: str, state: dict) -> None:
    """Replace the record atomically, flushed to disk first (a power cut keeps the old or new)."""
    tmp = os.path.join(dest, VERIFIED_RECORD + ".tmp")
    with open(tmp, "w") as fh:
        json.dump(state, fh, indent=1, sort_keys=True)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, os.path.join(dest, VERIFIED_RECORD))


def recorded_ok(state: dict, revision: str | None, dest: str, entry: dict) -> bool:
    """The record `state` of folder `dest` proves `entry` of `revision`."""
    path = os.path.join(dest, entry["path"])
    if state.get("revision") != revision or not os.path.isfile(path):
        return False
    rec = state.get("files", {}).get(entry["path"])
    return why_unproven(rec, stat_record(path), wanted_hash(entry)) is None


def entry_record(path: str, entry: dict) -> dict:
    """What the record keeps of a file just proven: its stat now and the hub's hash."""
    return dict(stat_record(path), hash=wanted_hash(entry))
