"""What a fetch refuses or fails with: one line naming the file, for the operator."""

from __future__ import annotations


class FetchError(Exception):
    pass


class HashMismatch(FetchError):
    """A complete file whose hash is not the hub's (it was quarantined)."""

    def __init__(self, path: str, found: str, want: str):
        self.path, self.found, self.want = path, found, want
        super().__init__(f"{path}: hash {found} does not match the hub's {want}")
