"""Offline boxes: the files the control machine pushed from its mirror (scripts/
mirror_checkpoints.py), verified exactly like downloads instead of fetched."""

from __future__ import annotations

import os

from .errors import FetchError, HashMismatch
from .folder import place


class Uploaded:
    """A source of files like transfer.Downloader, reading a folder on this box."""

    def __init__(self, upload_dir: str, dest: str, counter: dict):
        self.upload_dir, self.dest, self.counter = upload_dir, dest, counter

    def fetch(self, entry: dict) -> None:
        src = os.path.join(self.upload_dir, entry["path"])
        if not os.path.isfile(src):
            raise FetchError(f"{entry['path']}: not among the files pushed from the mirror")
        if os.path.getsize(src) != entry["size"]:
            raise FetchError(
                f"{entry['path']}: the mirror's copy is {os.path.getsize(src)} bytes, the hub "
                f"recorded "
                f"{entry['size']}: fix the mirror (scripts/mirror_checkpoints.py checks it)"
            )
        try:
            place(self.dest, src, entry, self.counter)
        except HashMismatch as exc:
            raise FetchError(
                f"{entry['path']}: the mirror's copy has hash {exc.found}, the hub recorded "
                f"{exc.want}: "
                "quarantined; fix the mirror (scripts/mirror_checkpoints.py checks it)"
            ) from None
