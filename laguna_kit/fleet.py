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
import os
import re

from pyinfra import logger
from pyinfra.api import OperationError

from .facts.network import TailscaleStatus


def roles(host) -> list[str]:
    return list(host.data.get("laguna_roles") or ["gpu"])


def router_of(inventory):
    """The host with the router role, or None (one at most: hostsfile.load checks)."""
    return next((h for h in inventory if "router" in roles(h)), None)


def gpu_hosts(inventory) -> list:
    return [h for h in inventory if "gpu" in roles(h)]


def tailnet_ips(other) -> list[str] | None:
    """`other`'s tailnet addresses now (IPv4 first), or None when this run cannot tell."""
    try:
        st = other.get_fact(TailscaleStatus)
    except Exception as exc:  # noqa: BLE001 - an unreachable peer is reported, not fatal
        logger.warning(f"{other.name}: cannot read its tailnet addresses ({exc})")
        return None
    if st.get("BackendState") != "Running":
        return None
    ips = list((st.get("Self") or {}).get("TailscaleIPs") or [])
    return sorted(ips, key=lambda a: (":" in a, a)) or None


def server_name(host_name: str) -> str:
    """A host's name as an HAProxy server name (letters, digits, '-', '_', '.', ':')."""
    return re.sub(r"[^A-Za-z0-9_.:-]", "_", host_name)


def max_seqs(data) -> int:
    """The box's max_num_seqs: the router sends it no more at once (the rest wait in its queue);
    vLLM's default (256) when its profile leaves the flag out."""
    profile = data.get("serving_profiles")[data.get("serving_mode")]
    return int(profile.get("max_num_seqs") or 256)


def api_keys(env_name: str, file_path: str, environ=os.environ) -> list[str]:
    """The fleet's API keys from the control machine: the env var (comma or space separated) and
    the file (one per line, # comments); refused when there are none."""
    keys = re.split(r"[\s,]+", environ.get(env_name, "").strip()) if env_name else []
    if file_path:
        path = os.path.expanduser(file_path)
        try:
            with open(path) as fh:
                for line in fh:
                    line = line.split("#", 1)[0].strip()
                    if line:
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
    bad = [i for i, k in enumerate(keys) if len(k) < 16 or not re.fullmatch(r"[\x21-\x7e]+", k)]
    if bad:
        raise OperationError(
            f"{len(bad)} API key(s) from {env_name or file_path} are shorter than 16 characters "
            "or hold spaces or control characters: use long random keys (openssl rand -hex 24)"
        )
    return keys


def key_hashes(keys: list[str]) -> str:
    """What the router stores: sha256 of each "Bearer <key>" header value, one per line."""
    return "".join(hashlib.sha256(f"Bearer {k}".encode()).hexdigest() + "\n" for k in sorted(keys))
