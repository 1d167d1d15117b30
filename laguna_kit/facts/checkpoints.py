"""Checkpoint folders on the box, judged by stat and the verification record (never by hashing)."""

from __future__ import annotations

import json
import shlex
from typing import Any, TypedDict

from pyinfra.api import FactBase

from ..boxtools.layout import RUN_DIR, VERIFIED_RECORD
from ..domain.box_commands import running
from . import multipart


class FileStat(TypedDict):
    size: int
    mtime_ns: int
    inode: int


class FolderState(TypedDict):
    stats: dict[str, FileStat]  # relative path -> its stat
    state: dict[str, Any]  # the verification record ({} when there is none)


class FileSizes(FactBase[dict[str, dict[str, int]]]):
    """``{folder: {relative path: size}}`` of the regular files under each of `paths` (a missing
    folder has none)."""

    @staticmethod
    def default():
        return {}

    def command(self, paths):
        return (
            "for d in "
            + shlex.join(paths)
            + (
                '; do echo "__DIR__ $d"; [ -d "$d" ] && (cd "$d" && find . -type f -printf '
                "'%s %P\\n'); done; true"
            )
        )

    def process(self, output) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        files: dict[str, int] = {}
        for line in output:
            if line.startswith("__DIR__ "):
                files = out.setdefault(line[8:], {})
                continue
            size, _, rel = line.partition(" ")
            if rel:
                files[rel] = int(size)
        return out


class CheckpointState(FactBase[FolderState]):
    """``{"stats": {path: {size, mtime_ns, inode}}, "state": dict}`` for a checkpoint folder.

    Only stat and the small verification record are read: judging a converged box hashes nothing.
    """

    def command(self, path):
        q = shlex.quote(path)
        return (
            f"if [ -d {q} ]; then cd {q} && find . -type f -not -path './.laguna-*' "
            f"-printf '%s %T@ %i %P\\n'; fi; echo __STATE__; cat {q}/{VERIFIED_RECORD} "
            f"2>/dev/null; true"
        )

    @staticmethod
    def default() -> FolderState:
        return {"stats": {}, "state": {}}

    def process(self, output) -> FolderState:
        stats: dict[str, FileStat] = {}
        for line in output[: output.index("__STATE__")] if "__STATE__" in output else output:
            size, mtime, inode, rel = line.split(" ", 3)
            sec, _, frac = mtime.partition(".")
            stats[rel] = {
                "size": int(size),
                "mtime_ns": int(sec) * 10**9 + int((frac + "0" * 9)[:9]),
                "inode": int(inode),
            }
        return {
            "stats": stats,
            "state": multipart.load_json(multipart.split(output, ["__STATE__"])["__STATE__"]),
        }


class DownloadProgress(FactBase[list[dict[str, Any]]]):
    """``[{"unit": state, ...the fetch tool's progress record}]`` of every box-side checkpoint
    download this boot has seen (its record lives on /run), running or ended."""

    @staticmethod
    def default():
        return []

    def command(self, run_dir=RUN_DIR):
        return (
            f'for f in {shlex.quote(run_dir)}/laguna-fetch-*.progress.json; do [ -e "$f" ] || '
            'continue; u=$(basename "$f" .progress.json); s=inactive; '
            f'{running("$u")} && s=active; echo "$s $(cat "$f")"; done; true'
        )

    def process(self, output) -> list[dict[str, Any]]:
        out = []
        for line in output:
            unit_state, _, rec = line.partition(" ")
            try:
                out.append(dict(json.loads(rec), unit=unit_state))
            except ValueError:
                continue  # a record being replaced; the next look sees it whole
        return out
