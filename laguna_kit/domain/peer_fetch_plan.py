"""Checkpoints from the hub once per fleet: which box fetches which file from the hub, and the
peers each box may ask first (laguna_kit/boxtools/fetch/peers.py reads what this builds).

Every GPU box of the run owns a share of the files, balanced by size (largest first to the box
with the least so far, by name on ties: the same answer on every host); it fetches those from the
hub (or a peer that already has them) and waits for the rest to appear on their owners. Addresses
come from each peer's `tailscale status`, parsed (fleet.tailnet_ips); a peer whose address this
run cannot read is no source.
"""

from __future__ import annotations

import re

from . import fleet


def owners(files: list[dict], hosts: list[str]) -> dict[str, str]:
    """{file path: host name} for `hosts`, balanced by bytes; {} for fewer than two hosts."""
    names = sorted(set(hosts))
    if len(names) < 2:
        return {}
    load = {n: 0 for n in names}
    out = {}
    for entry in sorted(files, key=lambda e: (-int(e["size"]), e["path"])):
        who = min(names, key=lambda n: (load[n], n))
        out[entry["path"]] = who
        load[who] += int(entry["size"])
    return out


def sources_doc(host, ckpt, files: list[dict], progress_name: str) -> dict | None:
    """What a box's fetch reads with --sources; None when it fetches from the hub alone (peer
    fetch off, offline, or no other GPU box in the hosts file)."""
    d = host.data
    if not peer_files_on(host):
        return None
    others = [h for h in fleet.gpu_hosts(host.state.inventory) if h.name != host.name]
    if not others:
        return None
    peers = []
    for other in others:
        ips = fleet.tailnet_ips(other)
        if ips:
            url = f"http://{fleet.host_port(ips[0], int(d.peer_files_port))}"
            peers.append({"name": other.name, "url": url})
    if not peers:
        return None
    # Owners are the GPU boxes this run deploys (a box outside --limit fetches nothing now): a
    # box waits only for one that is fetching.
    running = {h.name for h in host.state.active_hosts if "gpu" in fleet.roles(h)}
    in_run = sorted(running & ({p["name"] for p in peers} | {host.name}))
    return {
        "folder": ckpt.folder,
        "progress": progress_name,
        "peers": peers,
        "owners": owners(files, in_run),
        "self": host.name,
        "wait_s": float(d.peer_wait_s),
        "stall_s": float(d.peer_stall_s),
    }


def peer_files_on(host) -> bool:
    """This GPU box serves its verified checkpoints to the fleet's other GPU boxes (and asks
    them): peer fetch on, online, and another GPU box in the hosts file."""
    d = host.data
    return (
        "gpu" in fleet.roles(host)
        and bool(d.peer_fetch)
        and not d.checkpoint_mirror
        and len(fleet.gpu_hosts(host.state.inventory)) > 1
    )


# "<path> (from <peer>, <peer>)": how a box's fetch notes a file whose peer bytes failed their hash
# (boxtools/fetch/transfer.py), in its progress record's refused_from_peers
REFUSAL = re.compile(r"^(?P<path>[^()]+) \(from (?P<names>[^()]+)\)$")


def refusals(records: dict[str, list[dict]], files: dict[str, set[str]]) -> list[dict]:
    """Each file a box of the fleet refused from a peer, from each box's fetch progress records
    (`records`: host name -> records): {"by", "from", "repo", "path", "id"}. A path that is not a
    file of that checkpoint (`files`: repo -> paths) is ignored: what a box writes reaches a
    command only as a name the control machine already knows."""
    out = []
    for by, recs in sorted(records.items()):
        for rec in recs if isinstance(recs, list) else []:
            repo = str(rec.get("repo")) if isinstance(rec, dict) else ""
            noted = rec.get("refused_from_peers") if repo in files else None
            for text in noted if isinstance(noted, list) else []:
                m = REFUSAL.match(text) if isinstance(text, str) else None
                if m is None or m["path"] not in files[repo]:
                    continue
                for peer in m["names"].split(", "):
                    out.append(
                        {
                            "by": by,
                            "from": peer,
                            "repo": repo,
                            "path": m["path"],
                            "id": f"{by} {rec.get('started')} {repo} {m['path']}",
                        }
                    )
    return out
