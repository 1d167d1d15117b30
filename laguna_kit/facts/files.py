"""Files on the box, judged by content hash and mode: many in one command."""

from __future__ import annotations

import shlex
from typing import TypedDict

from pyinfra.api import FactBase


class FileHash(TypedDict):
    sha256: str
    mode: str  # octal, as stat prints it ("644")


class FileHashes(FactBase[dict[str, FileHash]]):
    """``{path: {"sha256": hex, "mode": "644"}}`` for those of `paths` that are regular files."""

    @staticmethod
    def default():
        return {}

    def command(self, paths):
        q = shlex.join(paths)
        return (
            f'for f in {q}; do [ -f "$f" ] && '
            'echo "$(stat -c %a "$f") $(sha256sum < "$f" | cut -d" " -f1) $f"; done; true'
        )

    def process(self, output) -> dict[str, FileHash]:
        out: dict[str, FileHash] = {}
        for line in output:
            mode, digest, path = line.split(" ", 2)
            out[path] = {"sha256": digest, "mode": mode}
        return out
