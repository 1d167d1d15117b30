"""What the release manager asks of the box: commands (systemctl, docker) and its word to the
operator. Every other module calls these by module attribute, so a test replaces them once."""

from __future__ import annotations

import subprocess
import sys


class ReleaseError(Exception):
    pass


def say(msg: str) -> None:
    print(f"laguna: {msg}", file=sys.stderr, flush=True)


def capture(*cmd: str) -> str:
    return subprocess.run(cmd, capture_output=True, text=True).stdout


def run(*cmd: str, check: bool = True) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise ReleaseError(f"{' '.join(cmd)} failed: {proc.stderr.strip()}")


def succeeds(*cmd: str) -> bool:
    return subprocess.run(cmd, capture_output=True).returncode == 0
