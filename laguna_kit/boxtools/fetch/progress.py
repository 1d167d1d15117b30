"""The fetch's progress record for people (bytes done / total, rate, ETA), written as JSON every
2 s whether or not bytes arrive: read by the deploy while it waits (laguna_kit/run/
download_progress.py) and by tasks/status.py."""

from __future__ import annotations

import json
import os
import threading
import time


class Progress:
    """Bytes done / total for the whole checkpoint, written atomically (a reader never sees half a
    record). A fresh record with an old `last_byte` is a silent transfer; a stale record is a fetch
    that no longer runs."""

    def __init__(self, path: str | None, repo: str, total: int, done: int, files: int):
        self.path, self.repo = path, repo
        self.total, self.done, self.files, self.files_done = total, done, files, 0
        self.retries, self.last_error = 0, ""
        # "<path> (from <peer>, ...)" of each file a peer gave bad bytes of: the deploy has that
        # peer re-verify its copy in the same run (operations/checkpoints.py)
        self.refused: list[str] = []
        self.started = time.time()
        self.window = [(time.monotonic(), done)]  # (time, done) samples for the rate
        self.written = 0.0
        self.last_byte = time.time()
        self.state = "running"
        self._lock = threading.Lock()
        self._beating = threading.Event()

    def beat(self, every: float = 2.0) -> None:
        """Write the record every `every` seconds until stop(): while every transfer is silent
        (a stalled CDN, a slow hub) the record stays fresh and says how long no byte came."""
        if not self.path:
            return

        def loop():
            while not self._beating.wait(every):
                self.maybe_write(force=True)

        threading.Thread(target=loop, daemon=True, name="progress").start()

    def stop(self) -> None:
        self._beating.set()

    def add(self, n: int) -> None:
        with self._lock:
            self.done += n
            self.last_byte = time.time()
        self.maybe_write()

    def again(self, n: int) -> None:
        """`n` more bytes to come: a file whose bytes were refused is fetched again, and the
        record must not say 106 % (its first bytes stay counted as done)."""
        with self._lock:
            self.total += n
        self.maybe_write(force=True)

    def note(self, *, file_done: bool = False, error: str = "") -> None:
        with self._lock:
            self.files_done += file_done
            if error:
                self.retries += 1
                self.last_error = error
        self.maybe_write(force=True)

    def rate(self) -> float:
        now = time.monotonic()
        with self._lock:
            self.window.append((now, self.done))
            while len(self.window) > 2 and now - self.window[0][0] > 20:
                self.window.pop(0)
            (t0, d0), (t1, d1) = self.window[0], self.window[-1]
        return (d1 - d0) / (t1 - t0) if t1 > t0 else 0.0

    def record(self, state: str = "running") -> dict:
        rate = self.rate()
        left = max(self.total - self.done, 0)
        return {
            "repo": self.repo,
            "state": state,
            "done_bytes": self.done,
            "total_bytes": self.total,
            "rate_bps": round(rate),
            "eta_s": round(left / rate) if rate > 0 else None,
            "files_done": self.files_done,
            "files": self.files,
            "retries": self.retries,
            "last_error": self.last_error,
            "refused_from_peers": list(self.refused),
            "started": round(self.started, 3),
            "updated": round(time.time(), 3),
            "last_byte": round(self.last_byte, 3),
            "pid": os.getpid(),
        }

    def maybe_write(self, force: bool = False, state: str | None = None) -> None:
        if state:  # the heartbeat writes whatever the fetch last said (never "running" again)
            self.state = state
        if not self.path or (not force and time.monotonic() - self.written < 2):
            return
        self.written = time.monotonic()
        tmp = f"{self.path}.{threading.get_ident()}.tmp"
        try:
            with open(tmp, "w") as fh:
                json.dump(self.record(self.state), fh)
            os.replace(tmp, self.path)
        except OSError:
            pass  # progress is for people; a full /run never fails the download
