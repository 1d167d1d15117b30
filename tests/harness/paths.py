"""Where the harness keeps its caches and per-box state (outside the checkout, survives clones),
and which slot of a parallel run this process is.

The harness tier runs in parallel (pytest-xdist, scripts/test.sh): each worker process is a slot
with its own servers (ports), box numbers, box names, tailnet namespace and run folder, so two
workers never touch each other's boxes. The caches are shared and built under one lock.
"""

import contextlib
import fcntl
import os
from pathlib import Path

# Box numbers (10.77.N.0/24, veth lgkN/tsN) per slot: a worker's boxes never collide with
# another's, nor with those of a run that is not parallel (which takes them from 1 up).
SLOT_BOXES = 40


def worker() -> str:
    """pytest-xdist's worker id ("gw0", "gw1", ...), or "" in a run that is not parallel."""
    return os.environ.get("PYTEST_XDIST_WORKER", "")


def slot() -> int:
    """This worker's number (0 when not parallel)."""
    w = worker()
    return int(w[2:]) if w.startswith("gw") and w[2:].isdigit() else 0


def tag(name: str) -> str:
    """`name` made this worker's own (unchanged when not parallel)."""
    return f"{name}-{worker()}" if worker() else name


def box_numbers() -> range:
    if not worker():
        return range(1, 201)
    first = 1 + (slot() + 1) * SLOT_BOXES
    return range(first, min(first + SLOT_BOXES, 201))


def cache_dir() -> Path:
    path = Path(os.environ.get("LAGUNA_HARNESS_CACHE", "/var/cache/laguna-kit-harness"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def run_dir() -> Path:
    """Live state (box overlays, sockets, pid files); cleared by teardown. One per worker."""
    path = Path(os.environ.get("LAGUNA_HARNESS_RUN", "/run/laguna-kit-harness"))
    if worker():
        path = path / worker()
    path.mkdir(parents=True, exist_ok=True)
    return path


_held = 0


@contextlib.contextmanager
def build_lock():
    """The cache's builders (root filesystems, repositories, the stand-in image) one at a time
    across workers: the first builds, the others then find it built. Reentrant in a process."""
    global _held
    if _held:
        _held += 1
        try:
            yield
        finally:
            _held -= 1
        return
    with open(cache_dir() / ".build.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        _held = 1
        try:
            yield
        finally:
            _held = 0
            fcntl.flock(fh, fcntl.LOCK_UN)
