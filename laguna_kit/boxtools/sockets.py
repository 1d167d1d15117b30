"""The sockets listening on a TCP port, from the kernel's tables (/proc/net/tcp and tcp6): who
owns each (uid) and which inode it is, for the router agent and the gate (standard library
only)."""

from __future__ import annotations

LISTEN = "0A"  # TCP_LISTEN in the tables' st column
TABLES = ("/proc/net/tcp", "/proc/net/tcp6")


def listening(port: int, tables=TABLES) -> list[dict]:
    """{"uid", "inode"} of each socket listening on `port` (any address, IPv4 and IPv6)."""
    out = []
    for table in tables:
        try:
            with open(table) as fh:
                next(fh, None)
                for line in fh:
                    cols = line.split()
                    if len(cols) > 9 and cols[3] == LISTEN:
                        if int(cols[1].rsplit(":", 1)[1], 16) == port:
                            out.append({"uid": int(cols[7]), "inode": cols[9]})
        except OSError:
            continue
    return out
