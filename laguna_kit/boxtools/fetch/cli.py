"""laguna_fetch.py's command line: one checkpoint, one JSON summary line on stdout; errors on
stderr with exit code 2 (a full disk said with the free space)."""

from __future__ import annotations

import argparse
import errno
import json
import os
import shutil
import sys

from .errors import FetchError
from .run import sync

DESCRIPTION = (
    "laguna-fetch: put one pinned checkpoint into a folder, every file checked against the "
    "hub's hashes."
)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=DESCRIPTION)
    p.add_argument("--repo", required=True)
    p.add_argument(
        "--manifest", required=True, help="JSON from the control machine: revision + files"
    )
    p.add_argument("--dest", required=True)
    p.add_argument("--endpoint", help="the hub (or a mirror of its HTTP API)")
    p.add_argument(
        "--uploaded",
        help="offline: verify the files pushed into this folder instead of downloading",
    )
    p.add_argument("--token-file")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--margin-mib", type=int, default=1024)
    p.add_argument("--progress", help="write bytes done / total, rate and ETA here as JSON")
    p.add_argument(
        "--retries", type=int, default=5, help="attempts per file without progress before failing"
    )
    p.add_argument("--backoff-max-s", type=float, default=60, help="longest wait between attempts")
    p.add_argument(
        "--read-timeout-s", type=float, default=60, help="a stall longer than this is retried"
    )
    p.add_argument(
        "--sources",
        help="JSON from the control machine: fleet peers to fetch verified files from first",
    )
    p.add_argument(
        "--rehash", action="store_true", help="ignore the verification record: hash every file"
    )
    args = p.parse_args(argv)
    try:
        summary = sync(args)
    except FetchError as exc:
        print(f"laguna-fetch: {args.repo}: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        where = exc.filename or args.dest
        if exc.errno == errno.ENOSPC:
            free = shutil.disk_usage(args.dest).free >> 20 if os.path.isdir(args.dest) else "?"
            print(
                f"laguna-fetch: {args.repo}: disk full at {args.dest} ({free} MiB free) writing "
                f"{where}: free "
                "space and re-run (verified files are kept)",
                file=sys.stderr,
            )
        else:
            print(f"laguna-fetch: {args.repo}: {exc.strerror or exc} ({where})", file=sys.stderr)
        return 2
    print(json.dumps(dict(summary, repo=args.repo)))
    return 0
