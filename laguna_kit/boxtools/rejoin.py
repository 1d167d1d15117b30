"""A fleet host the last deploy could not reach, let back in by the firewall watch.

A deploy that cannot read the router's (or the monitor's) tailnet addresses empties that host's
set: an address it cannot confirm must not keep reaching the box. The host stays out until the next
deploy, so a router rebooted during a roll found its boxes closed to it. The deploy leaves a line
naming the host in the set's file:

    # rejoin fleet_router name=<tailnet host name> key=<its node key, or ->

and the watch (firewall.py) looks for it in this box's own `tailscale status --json` (Tailscale's
ipnstate.Status: "Peer" maps node keys to PeerStatus with PublicKey, HostName, TailscaleIPs,
Online): by its node key when an earlier deploy saw it (a peer cannot take another's key), else
by its host name when exactly one online peer has it. Its addresses are parsed and must be in the
tailnet's ranges; anything else is ignored.

Standard library only (the distribution's python3).
"""

from __future__ import annotations

import ipaddress
import re

REJOIN = re.compile(
    r"^# rejoin (fleet_[a-z]+) name=([A-Za-z0-9][A-Za-z0-9-]{0,62}) key=(nodekey:[0-9a-f]{64}|-)$"
)
TAILNET_RANGES = (
    ipaddress.ip_network("100.64.0.0/10"),
    ipaddress.ip_network("fd7a:115c:a1e0::/48"),
)
UNKNOWN = "# its address is unknown to this run: no element, no peer"


def rejoin_line(set_name: str, name: str, key: str) -> str | None:
    """The line a deploy writes, or None when the name or key has no place in it (parsed)."""
    line = f"# rejoin {set_name} name={name} key={key or '-'}"
    return line if REJOIN.match(line) else None


def wanted(paths: list[str]) -> dict[str, tuple[str, str, str, list[str]]]:
    """path -> (set, name, key, the file's lines) of each set file that names a host and has no
    element."""
    out = {}
    for path in paths:
        try:
            with open(path) as fh:
                lines = fh.read().splitlines()
        except OSError:
            continue
        if any(line.startswith("add element") for line in lines):
            continue
        for line in lines:
            m = REJOIN.match(line)
            if m:
                set_name, name, key = m.groups()
                out[path] = (set_name, name, key, lines)
    return out


def addresses(peer: dict) -> list[str]:
    out = []
    for value in peer.get("TailscaleIPs") or []:
        try:
            address = ipaddress.ip_address(value) if isinstance(value, str) else None
        except ValueError:
            return []  # a peer that gives anything but addresses is not trusted with any
        if address is None or not any(address in net for net in TAILNET_RANGES):
            return []
        out.append(str(address))
    return sorted(set(out), key=lambda a: (":" in a, a))


def found(status: dict, name: str, key: str) -> list[str]:
    """The addresses of the host named so in a tailnet status ([] when not there, offline, or
    not told apart)."""
    peers = status.get("Peer") if isinstance(status, dict) else None
    if not isinstance(peers, dict):
        return []
    peers = [p for p in peers.values() if isinstance(p, dict) and p.get("Online") is True]
    if key != "-":
        match = [p for p in peers if p.get("PublicKey") == key]
    else:
        match = [p for p in peers if str(p.get("HostName", "")).lower() == name.lower()]
    return addresses(match[0]) if len(match) == 1 else []


def written(waiting: dict, status: dict) -> dict[str, str]:
    """path -> the set file's new text, for each waiting host the status shows."""
    out = {}
    for path, (set_name, name, key, lines) in waiting.items():
        ips = found(status, name, key)
        if not ips:
            continue
        v4 = [a for a in ips if ":" not in a]
        v6 = [a for a in ips if ":" in a]
        kept = [line for line in lines if line != UNKNOWN and not REJOIN.match(line)]
        body = kept[:1] + [
            f"add element inet laguna_kit {set_name}_{v} {{ {', '.join(a)} }}"
            for v, a in (("v4", v4), ("v6", v6))
            if a
        ]
        body += kept[1:] + [rejoin_line(set_name, name, key)]
        out[path] = "\n".join(body) + "\n"
    return out
