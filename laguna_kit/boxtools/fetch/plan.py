"""What a fetch run has to do, decided from the manifest and what is on disk before it does any
of it: which files the record proves, which to hash, which to fetch, how many bytes that takes.
`survey` reads the disk; the rest are pure functions of what it read."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from . import records
from .folder import part_path


@dataclass
class Plan:
    verified: list[dict] = field(default_factory=list)  # the record proves them: nothing to do
    to_hash: list[dict] = field(default_factory=list)  # on disk, unproven: hash them
    to_fetch: list[dict] = field(default_factory=list)  # not on disk: fetch them


def survey(dest: str, manifest: list[dict]) -> dict[str, dict | None]:
    """Each manifest file's stat in `dest` (None: not a regular file there)."""
    out: dict[str, dict | None] = {}
    for entry in manifest:
        path = os.path.join(dest, entry["path"])
        out[entry["path"]] = records.stat_record(path) if os.path.isfile(path) else None
    return out


def classify(
    manifest: list[dict], record: dict, revision: str, disk: dict, rehash: bool = False
) -> Plan:
    """Sort the manifest by what the record (of `revision`) proves of the files on `disk`;
    `rehash` trusts no record."""
    plan = Plan()
    files = record.get("files", {}) if record.get("revision") == revision else {}
    for entry in manifest:
        stat = disk.get(entry["path"])
        proven = records.why_unproven(files.get(entry["path"]), stat, records.wanted_hash(entry))
        if not rehash and proven is None:
            plan.verified.append(entry)
        elif stat is not None:
            plan.to_hash.append(entry)
        else:
            plan.to_fetch.append(entry)
    return plan


def part_sizes(dest: str, entries: list[dict]) -> dict[str, int]:
    """The bytes each file's download in progress holds already (0: none)."""
    out = {}
    for entry in entries:
        part = part_path(dest, entry)
        out[entry["path"]] = os.path.getsize(part) if os.path.exists(part) else 0
    return out


def bytes_needed(entries: list[dict], parts: dict[str, int]) -> int:
    """What is still to download for `entries`, the bytes already in their parts counted."""
    return sum(e["size"] - min(parts.get(e["path"], 0), e["size"]) for e in entries)


def fetch_order(entries: list[dict], owners: dict[str, str], me: str) -> list[dict]:
    """The files this box fetches from the hub first: a file another box of the run owns is
    waited for, and by then it is usually on that box."""
    mine = {p for p, owner in owners.items() if owner in ("", me)}
    return sorted(entries, key=lambda e: e["path"] not in mine and e["path"] in owners)
