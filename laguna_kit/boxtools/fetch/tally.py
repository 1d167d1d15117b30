"""The run's byte counts (hashed, downloaded, from the hub, from peers), shared by the fetch's
threads: every change under one lock."""

from __future__ import annotations

import threading

LOCK = threading.Lock()


def new() -> dict:
    return {"downloaded_bytes": 0, "hashed_bytes": 0, "hub_bytes": 0, "peer_bytes": 0}


def add(counter: dict, **amounts: int) -> None:
    with LOCK:
        for key, n in amounts.items():
            counter[key] = counter.get(key, 0) + n


def note(counter: dict, key: str, item: str) -> None:
    """Append `item` to the list `key` (files refused from peers, peers left)."""
    with LOCK:
        counter.setdefault(key, []).append(item)
