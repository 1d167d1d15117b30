"""Who listens on the replica's API port: the gate passes a release only while every socket
listening there belongs to a process of the replica's container. An unprivileged local user who
took the port while the replica restarted would otherwise be gated (and then served the router's
traffic); the router agent drains such a port too (boxtools/routeragent.py)."""

from __future__ import annotations

import os
import subprocess

from ..sockets import TABLES, listening
from .failure import GateFailure


def listening_inodes(port: int, tables=TABLES) -> set[str]:
    return {s["inode"] for s in listening(port, tables)}


def holders(inodes: set[str], proc: str = "/proc") -> dict[int, str]:
    """{pid: the socket inode it holds} for the processes holding any of `inodes`."""
    wanted = {f"socket:[{i}]" for i in inodes}
    out: dict[int, str] = {}
    for pid in filter(str.isdigit, os.listdir(proc)):
        fds = f"{proc}/{pid}/fd"
        try:
            for fd in os.listdir(fds):
                link = os.readlink(f"{fds}/{fd}")
                if link in wanted:
                    out[int(pid)] = link
        except OSError:
            continue  # gone, or a kernel thread
    return out


def cgroup_of(pid: int, proc: str = "/proc") -> str:
    try:
        with open(f"{proc}/{pid}/cgroup") as fh:
            return fh.read().strip()
    except OSError:
        return ""


def container_pid(container: str) -> int:
    out = subprocess.run(
        ["docker", "inspect", "--format", "{{.State.Pid}}", container],
        capture_output=True,
        text=True,
    )
    text = out.stdout.strip()
    if out.returncode != 0 or not text.isdigit() or text == "0":
        raise GateFailure(f"the container {container} is not running (docker inspect)")
    return int(text)


def listener_check(port: int, container: str, proc: str = "/proc") -> None:
    """Refuse unless every listener on `port` is a process of `container` (the same cgroup as
    its main process)."""
    own = cgroup_of(container_pid(container), proc)
    inodes = listening_inodes(port, (f"{proc}/net/tcp", f"{proc}/net/tcp6"))
    if not inodes:
        raise GateFailure(f"nothing listens on port {port}")
    found = holders(inodes, proc)
    strangers = [pid for pid in sorted(found) if cgroup_of(pid, proc) != own]
    if strangers or not own:
        pid = strangers[0] if strangers else 0
        raise GateFailure(
            f"port {port} is held by a process outside the container {container} (pid {pid}: "
            f"{command_of(pid, proc)}): not serving through it; stop that process, then deploy "
            "again"
        )


def command_of(pid: int, proc: str = "/proc") -> str:
    try:
        with open(f"{proc}/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace").strip()[:120]
    except OSError:
        return "?"
