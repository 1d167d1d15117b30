"""laguna-scrub: re-hash a checkpoint folder's verified files against its record, so a file that
rotted on disk after it was verified (a flipped bit; size and mtime kept) is found, not offered
to peers or loaded at the next start.

    laguna_scrub.py --dest FOLDER [--dest FOLDER...] [--file PATH...] [--metrics FILE]

A mismatching file is quarantined (.laguna-quarantine/) and its entry leaves the record: no peer
takes it from here, and the next fetch (a deploy) fetches it again. Run by laguna-scrub.timer on
the operator's schedule (checkpoint_scrub_schedule), and by a deploy for the files a peer refused
from this box. One JSON line per folder on stdout; with --metrics, the figures for node
exporter's textfile collector (a mismatch is an alert: LagunaCheckpointCorrupt).
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import sys
import time

from ..layout import QUARANTINE
from . import records, tally
from .folder import quarantine
from .verify import content_ok

LOCK = "scrub.lock"  # in the quarantine folder: never served, never swept


def entry_for(path: str, rec: dict) -> dict:
    """The manifest entry a record's hash stands for: an LFS sha256 (64 hex) or a git blob id."""
    want = str(rec.get("hash") or "")
    kind = "sha256" if len(want) == 64 else "blob_id"
    return {"path": path, kind: want, "size": int(rec.get("size") or 0)}


def scrub(dest: str, only: set[str] | None = None) -> dict:
    """Re-hash the recorded files of `dest` (or those named in `only`)."""
    started, counter = time.monotonic(), tally.new()
    os.makedirs(os.path.join(dest, QUARANTINE), exist_ok=True)
    with open(os.path.join(dest, QUARANTINE, LOCK), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        files = records.load(dest).get("files") or {}
        bad, checked = [], 0
        for path, rec in sorted(files.items()):
            full = os.path.join(dest, path)
            if (only is not None and path not in only) or not os.path.isfile(full):
                continue
            before = records.stat_record(full)
            ok, found = content_ok(full, entry_for(path, rec), counter)
            checked += 1
            if not ok and records.stat_record(full) == before:  # (not replaced meanwhile)
                quarantine(dest, full, path)
                bad.append({"file": path, "found": found})
        if bad:
            state = records.load(dest)  # as it is now: a fetch may have saved since
            for b in bad:
                (state.get("files") or {}).pop(b["file"], None)
            records.save(dest, state)
    return {
        "folder": dest,
        "checked": checked,
        "bytes": counter.get("hashed_bytes", 0),
        "seconds": round(time.monotonic() - started, 1),
        "mismatched": bad,
        "time": round(time.time()),
    }


def metrics_text(results: list[dict]) -> str:
    lines = [
        "# HELP laguna_checkpoint_scrub_mismatched_files files whose bytes no longer match "
        "their verified hash (quarantined; the next deploy fetches them again)",
        "# TYPE laguna_checkpoint_scrub_mismatched_files gauge",
        *(
            f'laguna_checkpoint_scrub_mismatched_files{{folder="{label(r["folder"])}"}} '
            f"{len(r['mismatched'])}"
            for r in results
        ),
        "# HELP laguna_checkpoint_scrub_last_run_seconds when the folder was last scrubbed",
        "# TYPE laguna_checkpoint_scrub_last_run_seconds gauge",
        *(
            f'laguna_checkpoint_scrub_last_run_seconds{{folder="{label(r["folder"])}"}} {r["time"]}'
            for r in results
        ),
    ]
    return "\n".join(lines) + "\n"


def label(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")


def write_metrics(path: str, results: list[dict]) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as fh:
        fh.write(metrics_text(results))
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dest", action="append", required=True, help="a checkpoint folder")
    ap.add_argument("--file", action="append", help="only these files (paths in the folder)")
    ap.add_argument("--metrics", help="node exporter textfile to write the figures to")
    args = ap.parse_args(argv)
    results = []
    for dest in args.dest:
        if not os.path.isdir(dest):
            continue
        result = scrub(dest, set(args.file) if args.file else None)
        results.append(result)
        print(json.dumps(result), flush=True)
    if args.metrics and os.path.isdir(os.path.dirname(args.metrics)):
        write_metrics(args.metrics, results)
    if any(r["mismatched"] for r in results):
        print("laguna-scrub: files no longer match their hash (quarantined)", file=sys.stderr)
        return 1
    return 0
