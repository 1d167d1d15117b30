"""laguna-lock: one deploy at a time on this box.

    laguna_lock.py acquire --holder TEXT [--wait S]

Takes /run/laguna-kit/deploy.lock (flock) in a small daemon that holds it for as long as the SSH
connection that asked for it lives (its nearest sshd ancestor), so a deploy killed mid-run, or a
dropped connection, frees it by itself. A second deploy waits up to S seconds, then is told who
holds it (who, pid, since). Prints "held" or "busy: ..." (the deploy's fact reads it).
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import sys
import time

from .layout import DEPLOY_LOCK, DEPLOY_LOCK_INFO

LOCK, INFO = DEPLOY_LOCK, DEPLOY_LOCK_INFO


def ancestor_sshd(pid: int) -> int | None:
    """The nearest sshd process above `pid` (the connection's session process)."""
    while pid > 1:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                stat = fh.read()
        except OSError:
            return None
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        if comm in ("sshd", "sshd-session") and pid != os.getpid():
            return pid
        pid = int(stat[stat.rindex(")") + 2 :].split()[1])
    return None


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def write_info(info: dict) -> None:
    tmp = f"{INFO}.{os.getpid()}.tmp"  # each writer its own: two never interleave in one file
    with open(tmp, "w") as fh:
        json.dump(info, fh)
    os.replace(tmp, INFO)


class info_locked:
    """INFO's readers-then-writers (a join, the holder's first record) one at a time."""

    def __enter__(self):
        self.fd = os.open(f"{INFO}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def __exit__(self, *exc):
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


def holder_info() -> dict:
    try:
        with open(INFO) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return {}


def joined(holder: str, tie: int) -> bool:
    """This run holds the lock already, maybe over another connection (pyinfra's disconnect does
    not close it): `tie` joins the connections the holding daemon waits for."""
    with info_locked():
        mine = holder_info()
        if mine.get("holder") != holder or not alive(mine.get("pid", 0)):
            return False
        if tie not in mine.get("ties", []):
            write_info(dict(mine, ties=[*mine.get("ties", []), tie]))
    return True


def acquire(holder: str, wait: float) -> int:
    os.makedirs(os.path.dirname(LOCK), mode=0o755, exist_ok=True)
    tie = ancestor_sshd(os.getppid()) or os.getppid()
    if joined(holder, tie):
        print("held")
        return 0
    read_end, write_end = os.pipe()
    if os.fork():  # the caller: wait for the daemon's word
        os.close(write_end)
        with os.fdopen(read_end) as fh:
            word = fh.read()
        if word.startswith("ok"):
            print("held")
            return 0
        info = holder_info()
        print(
            f"busy: {info.get('holder', 'unknown')} (lock pid {info.get('pid', '?')}) since "
            f"{info.get('since', '?')}; waited {wait:.0f} s"
        )
        return 1
    os.close(read_end)
    os.setsid()
    if os.fork():
        os._exit(0)
    for stream in (0, 1, 2):  # detached from the SSH channel, so the asking command returns
        os.dup2(os.open(os.devnull, os.O_RDWR), stream)
    fd = os.open(LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            # The same run asked twice at once (two connections): the other ask took it.
            if joined(holder, tie):
                os.write(write_end, b"ok")
                os._exit(0)
            if time.monotonic() >= deadline:
                os.write(write_end, b"busy")
                os._exit(1)
            time.sleep(1)
    with info_locked():
        write_info(
            {
                "holder": holder,
                "pid": os.getpid(),
                "ties": [tie],
                "since": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            }
        )
    os.write(write_end, b"ok")
    os.close(write_end)
    while any(alive(t) for t in holder_info().get("ties", [tie])):
        time.sleep(2)
    os._exit(0)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("acquire")
    a.add_argument("--holder", required=True)
    a.add_argument("--wait", type=float, default=600)
    args = p.parse_args(argv)
    return acquire(args.holder, args.wait)


if __name__ == "__main__":
    sys.exit(main())
