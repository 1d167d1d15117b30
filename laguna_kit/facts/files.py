"""Files on the box, judged by content hash and mode: many in one command."""

from __future__ import annotations

import shlex
from typing import TypedDict

from pyinfra.api import FactBase


class FileHash(TypedDict):
    sha256: str
    mode: str  # octal, as stat prints it, and its group unless root ("644", "640:prometheus")


def access(mode: str, group: str) -> str:
    """A file's mode as the kit writes it: the group follows unless it is root's."""
    return mode if group == "root" else f"{mode}:{group}"


class FileHashes(FactBase[dict[str, FileHash]]):
    """``{path: {"sha256": hex, "mode": "644"}}`` for those of `paths` that are regular files
    (``"640:prometheus"``: a group other than root's)."""

    @staticmethod
    def default():
        return {}

    def command(self, paths):
        q = shlex.join(paths)
        return (
            f'for f in {q}; do [ -f "$f" ] && '
            'echo "$(stat -c \'%a %G\' "$f") $(sha256sum < "$f" | cut -d" " -f1) $f"; done; true'
        )

    def process(self, output) -> dict[str, FileHash]:
        out: dict[str, FileHash] = {}
        for line in output:
            mode, group, digest, path = line.split(" ", 3)
            out[path] = {"sha256": digest, "mode": access(mode, group)}
        return out
