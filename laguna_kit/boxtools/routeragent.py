"""laguna-router-agent: the fleet router's agent check on a GPU box, one answer per connection
(laguna-router-agent.socket, Accept=yes: the connection is this process's stdin and stdout).

The router names the replica it asks for (HAProxy's agent-send "<n>\\n"). The answer is "ready"
only when all of these hold, else "drain":
- the line names a replica of this box, and came within the wait (a late, empty or unknown one
  is no replica's: HAProxy sends it at once);
- that replica is not drained (its marker: a kit restart until its gate passes, a failed gate,
  an operator's `laguna_release.py drain`);
- every socket listening on its API port belongs to root: the replica's container runs as root,
  and an unprivileged local user who took the port while the replica restarted (to receive the
  router's traffic) is not it (/proc/net/tcp{,6}: each socket's owner).
A check from a remote address (the router; never this box itself) is counted per replica, so a
restart waits for the router's own checks, not for whoever connects (release/drain.py).

Standard library only (the distribution's python3); runs as nobody.
"""

from __future__ import annotations

import argparse
import fcntl
import ipaddress
import os
import select
import sys

from .sockets import TABLES, listening

WAIT_S = 0.3  # HAProxy sends agent-send as soon as it connects


def listener_owners(port: int, tables=TABLES) -> list[int]:
    """The uid of each socket listening on `port` (any address, IPv4 and IPv6)."""
    return [s["uid"] for s in listening(port, tables)]


def replica_asked(line: str, replicas: dict[int, tuple[int, str]]) -> int | None:
    text = line.strip()
    if not text.isdigit() or len(text) > 2:
        return None
    n = int(text)
    return n if n in replicas else None


def answer(n: int | None, replicas: dict[int, tuple[int, str]], tables=None) -> str:
    if n is None:
        return "drain"
    port, marker = replicas[n]
    if os.path.exists(marker):
        return "drain"
    owners = listener_owners(port, *([tables] if tables else []))
    return "ready" if owners and all(uid == 0 for uid in owners) else "drain"


def remote(addr: str | None) -> bool:
    try:
        return addr is not None and not ipaddress.ip_address(addr).is_loopback
    except ValueError:
        return False


def count_check(folder: str, n: int) -> None:
    """One more check of replica n by the router (a number in <folder>/<n>.checks)."""
    path = os.path.join(folder, f"{n}.checks")
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        fh.seek(0)
        text = fh.read().strip()
        fh.seek(0)
        fh.truncate()
        fh.write(str(int(text) + 1 if text.isdigit() else 1))


def read_line(fd: int, wait_s: float) -> str:
    """What the router sent within the wait (at most a short line; never blocks past it)."""
    ready, _, _ = select.select([fd], [], [], wait_s)
    return os.read(fd, 16).decode("ascii", "replace") if ready else ""


def replica_spec(text: str) -> tuple[int, tuple[int, str]]:
    """N=PORT:MARKER (a replica, its API port, its drain marker)."""
    n, _, rest = text.partition("=")
    port, _, marker = rest.partition(":")
    if not (n.isdigit() and port.isdigit() and marker.startswith("/")):
        raise argparse.ArgumentTypeError(f"{text!r} is not N=PORT:/path")
    return int(n), (int(port), marker)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replica", type=replica_spec, action="append", required=True)
    ap.add_argument("--checks-dir", required=True, help="where the router's checks are counted")
    args = ap.parse_args(argv)
    replicas = dict(args.replica)
    n = replica_asked(read_line(sys.stdin.fileno(), WAIT_S), replicas)
    print(answer(n, replicas), flush=True)
    if n is not None and remote(os.environ.get("REMOTE_ADDR")):
        try:
            count_check(args.checks_dir, n)
        except OSError:
            pass  # the answer was given; a drain then waits its timeout
    return 0
