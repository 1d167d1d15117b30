"""A box-side download's progress as one line for people: the deploy prints it while it waits,
tasks/status.py while it runs. The record is written by boxtools/fetch/progress.py (Progress)."""

from __future__ import annotations

import time

PRINT_EVERY_S = 30  # the longest a waiting deploy stays silent
POLL_S = 5
SILENT_S = 4  # no byte for longer than this is said (the record is fresh every 2 s regardless)


def _duration(s: float | None) -> str:
    if s is None:
        return "unknown"
    s = int(s)
    return f"{s // 3600}h{s // 60 % 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def _size(n: float) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


def line(rec: dict, now: float | None = None) -> str:
    """'<repo>: 12.34 of 80.00 GiB (15 %), 112.3 MiB/s, ETA 10m12s, 3/15 files'."""
    done, total = rec.get("done_bytes", 0), rec.get("total_bytes", 0)
    pct = f" ({100 * done // total} %)" if total else ""
    out = f"{rec.get('repo', '?')}: {_size(done)} of {_size(total)}{pct}, "
    if rec.get("state") == "running":
        out += f"{rec.get('rate_bps', 0) / 2**20:.1f} MiB/s, ETA {_duration(rec.get('eta_s'))}, "
    out += f"{rec.get('files_done', 0)}/{rec.get('files', 0)} files"
    if rec.get("retries"):
        out += f", {rec['retries']} retried (last: {rec.get('last_error', '')})"
    now = now or time.time()
    age = now - rec.get("updated", now)
    silent = now - rec.get("last_byte", now)
    if rec.get("state") == "running" and age > 3 * POLL_S:
        out += f"; no news for {int(age)} s (is the download still running? tasks/status.py)"
    elif rec.get("state") == "running" and silent > SILENT_S:
        out += (
            f"; no byte for {int(silent)} s (a silent transfer: it is resumed after "
            "download_read_timeout_s)"
        )
    return out
