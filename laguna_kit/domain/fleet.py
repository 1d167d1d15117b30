"""The fleet of the hosts file: which host is the router, which serve, and their tailnet addresses.

The router and the boxes each need the other's tailnet address (the router's backends; the boxes'
firewall lets only the router in), and on a first deploy neither exists when the run is planned.
So the operations that use them read them as they run (`tailnet_ips`), from the other host's
`tailscale status`: in a normal run every host joins the tailnet (tasks/tailscale.py) before those
operations come. A host this run cannot reach (outside `--limit` and unreachable, or not on the
tailnet yet) gives None, and its user keeps what it has.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
import re
from typing import Any

from gevent.lock import Semaphore  # pyinfra's own concurrency: its hosts run as greenlets
from pyinfra import logger
from pyinfra.api import OperationError

from ..boxtools import rejoin
from ..facts.network import TailscaleStatus


def roles(host) -> list[str]:
    return list(host.data.get("laguna_roles") or ["gpu"])


def router_of(inventory):
    """The host with the router role, or None (one at most: hostsfile.load checks)."""
    return next((h for h in inventory if "router" in roles(h)), None)


def monitor_of(inventory):
    """The host with the monitor role, or None (one at most: hostsfile.load checks)."""
    return next((h for h in inventory if "monitor" in roles(h)), None)


def cache_of(inventory):
    """The host with the cache role (the fleet's pull-through image cache), or None."""
    return next((h for h in inventory if "cache" in roles(h)), None)


def gpu_hosts(inventory) -> list:
    return [h for h in inventory if "gpu" in roles(h)]


# Tailscale's address ranges (its CGNAT range and its IPv6 ULA prefix): a tailnet address is in
# one of them, whatever a box's `tailscale status` says.
TAILNET_RANGES = rejoin.TAILNET_RANGES  # one definition, the box tools' (standard library only)


def tailnet_addresses(status: dict, who: str) -> list[str]:
    """The TailscaleIPs of a `tailscale status --json`, each parsed as an address in the tailnet's
    ranges (IPv4 first), as their canonical text; anything else is refused, naming `who`: a box
    whose root is compromised could answer with text that would become rules or configuration."""
    raw = (status.get("Self") or {}).get("TailscaleIPs") or []
    if not isinstance(raw, list):
        raise OperationError(f"{who}: tailscale status gave TailscaleIPs {raw!r}: not a list")
    out = []
    for value in raw:
        try:
            address = ipaddress.ip_address(value) if isinstance(value, str) else None
        except ValueError:
            address = None
        if address is None or not any(address in net for net in TAILNET_RANGES):
            raise OperationError(
                f"{who}: its tailscale status gave {value!r} as a tailnet address: not an address "
                f"in {' or '.join(map(str, TAILNET_RANGES))}; refusing it (is this host what it "
                "claims to be?)"
            )
        out.append(address)
    return [str(a) for a in sorted(set(out), key=lambda a: (a.version, a))]


def tagged_addresses(status: dict, tag: str, who: str) -> list[str]:
    """The tailnet addresses of the peers a `tailscale status --json` lists with `tag` (its Peer
    map: tailscale's ipn/ipnstate PeerStatus, Tags and TailscaleIPs), each parsed as
    tailnet_addresses parses a host's own; IPv4 first."""
    peers = status.get("Peer") or {}
    if not isinstance(peers, dict):
        raise OperationError(f"{who}: tailscale status gave Peer {type(peers).__name__}: not a map")
    out: list[str] = []
    for peer in peers.values():
        tags = (peer or {}).get("Tags") or []
        if isinstance(tags, list) and tag in tags:
            out += tailnet_addresses({"Self": peer}, f"{who} (a peer tagged {tag})")
    return sorted(set(out), key=lambda a: (":" in a, a))


def operators(h) -> list[tuple[str, list[str] | None]]:
    """monitor_operators of host `h` (the monitor) as (name, addresses): an address as given, a
    tag as the addresses of the peers the monitor's tailnet status lists with it now (None: no
    peer has it, or the status cannot be read)."""
    wanted = list(h.data.get("monitor_operators") or [])
    out: list[tuple[str, list[str] | None]] = [
        (a, [str(ipaddress.ip_address(a))]) for a in wanted if not a.startswith("tag:")
    ]
    tags = sorted({a for a in wanted if a.startswith("tag:")})
    if tags:
        status = fact_of(h, TailscaleStatus) or {}
        for tag in tags:
            out.append((tag, tagged_addresses(status, tag, h.name) or None))
    return out


def host_port(address: str, port: int) -> str:
    """address:port, an IPv6 address in brackets (URLs, scrape targets, listen addresses)."""
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


_ONE_AT_A_TIME: dict[str, Any] = {}


def fact_of(other, fact, **kwargs):
    """`other.get_fact(...)` from an operation of another host, one at a time per host: a host
    outside `--limit` is connected on first use, and two boxes connecting it at once in the run's
    greenlets broke its SSH session (paramiko "unhandled type 3"; the run then hung, seen in the
    harness's cut-run drill)."""
    lock = _ONE_AT_A_TIME.setdefault(other.name, Semaphore())
    with lock:
        return other.get_fact(fact, **kwargs)


def tailnet_status(other) -> dict | None:
    """`other`'s `tailscale status` now ({} when tailscaled is not up), None when this run cannot
    read it."""
    try:
        return fact_of(other, TailscaleStatus) or {}
    except Exception as exc:  # noqa: BLE001 - an unreachable peer is reported, not fatal
        logger.warning(f"{other.name}: cannot read its tailnet addresses ({exc})")
        return None


def tailnet_ips(other, status: dict | None = None) -> list[str] | None:
    """`other`'s tailnet addresses now (IPv4 first), or None when this run cannot tell
    (`status`: its tailnet status when the caller read it already)."""
    st = tailnet_status(other) if status is None else status
    if not st or st.get("BackendState") != "Running":
        return None
    return tailnet_addresses(st, other.name) or None


def server_name(host_name: str, replica: int = 1) -> str:
    """A host's replica as an HAProxy server name (letters, digits, '-', '_', '.', ':'); replica
    1 keeps the box's name (a one-replica box's server as before), replica n is `<box>-rn`."""
    return re.sub(r"[^A-Za-z0-9_.:-]", "_", host_name) + ("" if replica == 1 else f"-r{replica}")


def max_seqs(data) -> int:
    """The box's max_num_seqs: the router sends it no more at once (the rest wait in its queue);
    vLLM's default (256) when its profile leaves the flag out."""
    from .profiles import profile_of

    return int(profile_of(data).get("max_num_seqs") or 256)


def key_problem(key: str) -> str | None:
    """Why `key` is too weak to guard the fleet (None: strong enough). A key needs 128 bits: 32 hex
    characters, or 22 of the base64url alphabet, or 22 printable ones; and a key that repeats a
    word, or has few distinct characters, is refused whatever its length. The distinct-character
    floor is one a random key clears: 6 of 16 for hex (`openssl rand -hex 16` has fewer than 12
    in 1.7 % of keys, fewer than 8 in 3.5e-8 of them: one drawn in the suite was refused at a
    floor of 8; fewer than 6 in 3e-13, counted exactly from the Stirling numbers), 8 for the
    rest (22 base64url characters with fewer than 10 in 2.3e-9 of keys, fewer than 8 in 3.5e-13)."""
    if not re.fullmatch(r"[\x21-\x7e]+", key):
        return "holds spaces or control characters"
    if len(key) > 1 and key[0] == key[-1] and key[0] in "\"'":
        return (
            "is wrapped in quotes: they would be part of the key and every client would get 401; "
            "write the key without them"
        )
    hexadecimal = bool(re.fullmatch(r"[0-9a-fA-F]+", key))
    need = 32 if hexadecimal else 22
    if len(key) < need:
        return f"has {len(key)} characters, fewer than {need} (128 bits)"
    if re.fullmatch(r"(.{1,16}?)\1+", key):
        return "repeats a word"
    floor = 6 if hexadecimal else 8
    if len(set(key)) < floor:
        return f"has only {len(set(key))} distinct characters (a word repeated?)"
    return None


def api_keys(env_name: str, file_path: str, environ=os.environ) -> list[str]:
    """The fleet's API keys from the control machine: the env var (comma or space separated) and
    the file (one per line; a line starting with # is a comment, a # inside a key is part of it);
    refused when there are none or one is weak."""
    keys = re.split(r"[\s,]+", environ.get(env_name, "").strip()) if env_name else []
    if file_path:
        path = os.path.expanduser(file_path)
        try:
            with open(path) as fh:
                for line in fh:
                    line = line.strip()
                    if line and not line.startswith("#"):
                        keys.append(line)
        except OSError as exc:
            raise OperationError(f"router_api_keys_file {path}: {exc.strerror}") from None
    keys = sorted({k for k in keys if k})
    if not keys:
        raise OperationError(
            f"the router needs at least one API key: set {env_name}=<key>[,<key>...] on this "
            "machine (or router_api_keys_file); without one the fleet would answer anyone on "
            "the tailnet"
        )
    bad = [why for why in map(key_problem, keys) if why]
    if bad:
        spaced = env_name and re.search(r"\S\s+\S", environ.get(env_name, "").strip())
        raise OperationError(
            f"{len(bad)} API key(s) from {' and '.join(x for x in (env_name, file_path) if x)} "
            f"are refused (one {bad[0]}): use long random keys (openssl rand -hex 24)"
            + (f"; spaces and commas in {env_name} separate keys" if spaced else "")
        )
    return keys


METRICS_KEY_PREFIX = "lgm-"


def metrics_keys(keys: list[str]) -> list[str]:
    """The metrics-only key of each of the fleet's keys (an HMAC: it reveals no client key), which
    the router's metrics page accepts and its API never does. Prometheus holds the first's
    (metrics_key): adding a key changes nothing it holds; taking its key out ends its access."""
    return [
        METRICS_KEY_PREFIX
        + hmac.new(k.encode(), b"laguna-kit router metrics", hashlib.sha256).hexdigest()
        for k in sorted(keys)
    ]


def metrics_key(keys: list[str]) -> str:
    """The key the monitor's Prometheus sends to the router's metrics page (a monitor host
    holds this, never a client key)."""
    return metrics_keys(keys)[0]


def key_hashes(keys: list[str]) -> str:
    """What the router stores: sha256 of each "Bearer <key>" header value, one per line."""
    return "".join(hashlib.sha256(f"Bearer {k}".encode()).hexdigest() + "\n" for k in sorted(keys))
