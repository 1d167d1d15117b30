"""Hashing files as the hub does (LFS sha256, else the git blob id), and the checkpoint's index
checked against the shards present."""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import os

from .. import names
from . import tally
from .errors import FetchError
from .records import wanted_hash

HASH_CHUNK = 8 << 20  # reads of a file on disk: large enough that Python's overhead vanishes
INDEX = "model.safetensors.index.json"


def hasher_for(entry: dict):
    """The hub's kind of hash for this file, ready to be fed its bytes in order."""
    if entry.get("sha256"):
        return hashlib.sha256()
    return hashlib.sha1(b"blob %d\0" % entry["size"])


def feed_from_file(path: str, start: int, h, counter: dict, upto: int | None = None) -> int:
    """Feed h the file's bytes from `start` (to `upto`); returns the position reached."""
    pos = start
    with open(path, "rb") as fh:
        fh.seek(start)
        while upto is None or pos < upto:
            block = fh.read(HASH_CHUNK if upto is None else min(HASH_CHUNK, upto - pos))
            if not block:
                break
            h.update(block)
            pos += len(block)
            tally.add(counter, hashed_bytes=len(block))
    return pos


def content_ok(path: str, entry: dict, counter: dict) -> tuple[bool, str]:
    """(matches, the hash found) for the hub's kind of hash: LFS sha256, else git blob sha1."""
    if os.path.getsize(path) != entry["size"]:
        return False, f"size {os.path.getsize(path)}"
    h = hasher_for(entry)
    feed_from_file(path, 0, h, counter)
    return h.hexdigest() == wanted_hash(entry), h.hexdigest()


def hashed_in_parallel(dest: str, entries: list[dict], counter: dict) -> list[tuple[bool, str]]:
    """content_ok for files on disk, a file per core: hashlib (OpenSSL, SHA-NI where the CPU has
    it) lets go of the GIL while it hashes."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        return list(
            pool.map(lambda e: content_ok(os.path.join(dest, e["path"]), e, counter), entries)
        )


def check_index(dest: str, manifest: list[dict]) -> None:
    """model.safetensors.index.json names exactly the shards present (no missing, no extra)."""
    listed = {e["path"] for e in manifest}
    shards = {n for n in listed if n.endswith(".safetensors")}
    if INDEX not in listed:
        return
    with open(os.path.join(dest, INDEX)) as fh:
        referenced = set(json.load(fh).get("weight_map", {}).values())
    for name in referenced:
        try:
            names.inside(dest, name)
        except names.UnsafeName as exc:
            raise FetchError(f"{INDEX}: {exc}") from None
    missing = sorted(referenced - {n for n in shards if os.path.isfile(os.path.join(dest, n))})
    if missing:
        raise FetchError(f"{INDEX} names shards that are not present: {', '.join(missing)}")
    unreferenced = sorted(shards - referenced)
    if unreferenced:
        raise FetchError(f"{INDEX} does not name these shards: {', '.join(unreferenced)}")
