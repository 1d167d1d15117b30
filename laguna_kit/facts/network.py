"""The box on the tailnet, and what else listens on its network."""

from __future__ import annotations

import re
import shlex
from typing import Any, Literal, TypedDict, cast

from pyinfra.api import FactBase

from ..domain.box_commands import tool_command
from . import multipart


class Listener(TypedDict):
    proto: str  # tcp, udp, tcp6 ...
    address: str
    port: int
    process: str
    pid: int | None
    kit: bool  # a process of the serving container


class Listening(TypedDict):
    listeners: list[Listener]
    policy: bool
    bridges: list[str]
    sshd: list[int]


class Table(TypedDict):
    table: Literal["loaded", "missing", "altered", "unrecorded"]


class TailscaleStatus(FactBase[dict[str, Any]]):
    """``tailscale status --json`` (BackendState, Self.TailscaleIPs), or {} when tailscaled is not
    up."""

    def requires_command(self):
        return "tailscale"

    @staticmethod
    def default() -> dict[str, Any]:
        return {}

    def command(self):
        return "tailscale status --json 2>/dev/null || echo '{}'"

    def process(self, output) -> dict[str, Any]:
        return multipart.load_json(output)


class Listeners(FactBase[Listening]):
    """Sockets listening on addresses other than loopback, each
    ``{"proto", "address", "port", "process", "pid", "kit": bool}``, ``kit`` True for a process of
    the serving container (same cgroup as its main process); ``"policy"``: whether the rules
    file already holds the kit's default-drop policy (so the owner's listeners were checked
    before); ``"bridges"``: the interfaces of Docker's own bridge networks, as Docker names them
    (``docker0``, ``br-<id>``; names that are no plain interface name are left out); ``"sshd"``:
    the ports sshd listens on, from its own configuration (``sshd -T``: what a rented box behind a
    port mapping serves on, whatever port the control machine dials) and from its sockets.

    ``{"listeners": [...], "policy": bool, "bridges": [...], "sshd": [22]}``.
    """

    POLICY_MARK = "laguna-kit policy: new connections off the tailnet are dropped"

    @staticmethod
    def default() -> Listening:
        return {"listeners": [], "policy": False, "bridges": [], "sshd": []}

    def command(self, container, rules):
        c, r = shlex.quote(container), shlex.quote(rules)
        return (
            "ss -H -tulnp 2>/dev/null; echo __CGROUPS__; "
            "for p in $(ss -H -tulnp 2>/dev/null | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u); "
            "do echo \"$p $(tr '\\n' ' ' < /proc/$p/cgroup 2>/dev/null)\"; done; echo __KIT__; "
            f"p=$(docker inspect -f '{{{{.State.Pid}}}}' {c} 2>/dev/null) && [ \"$p\" != 0 ] && "
            "tr '\\n' ' ' < /proc/$p/cgroup 2>/dev/null; echo; echo __POLICY__; "
            f"grep -c {shlex.quote(self.POLICY_MARK)} {r} 2>/dev/null; echo __BRIDGES__; "
            "docker network ls --no-trunc -q --filter driver=bridge 2>/dev/null | xargs -r "
            "docker network inspect -f "
            "'{{.Id}} {{index .Options \"com.docker.network.bridge.name\"}}' 2>/dev/null; "
            "echo __SSHD__; sshd -T 2>/dev/null | awk '$1 == \"port\" {print $2}'; true"
        )

    def process(self, output) -> Listening:
        parts = multipart.split(
            ["__SS__", *output],
            ["__SS__", "__CGROUPS__", "__KIT__", "__POLICY__", "__BRIDGES__", "__SSHD__"],
        )
        cgroups = dict(line.split(" ", 1) for line in parts["__CGROUPS__"] if " " in line)
        kit = " ".join(parts["__KIT__"]).strip()
        out: list[Listener] = []
        for line in parts["__SS__"]:
            cols = line.split()
            if len(cols) < 5:
                continue
            address, _, port = cols[4].rpartition(":")
            address = address.strip("[]")
            if is_loopback(address) or not port.isdigit():
                continue
            proc = re.search(r'\("([^"]+)",pid=(\d+)', line)
            name, pid = (proc.group(1), proc.group(2)) if proc else ("?", "")
            out.append(
                {
                    "proto": cols[0],
                    "address": address,
                    "port": int(port),
                    "process": name,
                    "pid": int(pid) if pid else None,
                    "kit": bool(kit) and cgroups.get(pid, "").strip() == kit,
                }
            )
        policy = any(line.strip() not in ("", "0") for line in parts["__POLICY__"])
        sshd = {int(p) for p in (line.strip() for line in parts["__SSHD__"]) if p.isdigit()}
        sshd |= {
            ln["port"] for ln in out if ln["process"] in SSHD and ln["proto"].startswith("tcp")
        }
        return {
            "listeners": out,
            "policy": policy,
            "bridges": bridge_names(parts["__BRIDGES__"]),
            "sshd": sorted(p for p in sshd if 0 < p < 65536),
        }


IFNAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,14}")  # IFNAMSIZ, and nothing nft would read


def bridge_names(lines: list[str]) -> list[str]:
    """Docker's bridge interfaces from `<network id> <com.docker.network.bridge.name>` lines: the
    option's name, else Docker's own `br-<first 12 of the id>`."""
    out = set()
    for line in lines:
        net_id, _, option = line.strip().partition(" ")
        if not re.fullmatch(r"[0-9a-f]{12,64}", net_id):
            continue
        option = option.strip()
        name = option if option and option != "<no value>" else f"br-{net_id[:12]}"
        if IFNAME.fullmatch(name):
            out.add(name)
    return sorted(out)


SSHD = ("sshd", "sshd-session")  # OpenSSH's listener (and, from 9.8, its session processes)


def is_loopback(address: str) -> bool:
    """127.0.0.0/8, ::1, or an address scoped to lo (ss prints 127.0.0.53%lo)."""
    host, _, scope = address.partition("%")
    return host.startswith("127.") or host == "::1" or scope == "lo"


class FirewallState(FactBase[Table]):
    """``{"table": "loaded" | "missing" | "altered" | "unrecorded"}``: the kit's nftables table
    compared with what the kit recorded when it loaded `rules` (laguna_firewall.py state)."""

    @staticmethod
    def default() -> Table:
        return {"table": "missing"}

    def command(self, kit_dir, rules):
        launcher = shlex.quote(f"{kit_dir}/bin/laguna_firewall.py")
        return (
            f"if [ -x {launcher} ]; then "
            f"{tool_command(kit_dir, 'laguna_firewall.py', 'state', rules)}; fi"
        )

    def process(self, output) -> Table:
        return cast(Table, {**self.default(), **multipart.load_json(output)})
