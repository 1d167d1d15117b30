"""The box on the tailnet, and what else listens on its network."""

from __future__ import annotations

import re
import shlex

from pyinfra.api import FactBase

from ..boxcli import tool_command
from . import sections


class TailscaleStatus(FactBase):
    """``tailscale status --json`` (BackendState, Self.TailscaleIPs), or {} when tailscaled is not
    up."""

    def requires_command(self):
        return "tailscale"

    @staticmethod
    def default():
        return {}

    def command(self):
        return "tailscale status --json 2>/dev/null || echo '{}'"

    def process(self, output):
        return sections.load_json(output)


class Listeners(FactBase):
    """Sockets listening on addresses other than loopback, each
    ``{"proto", "address", "port", "process", "pid", "kit": bool}``, ``kit`` True for a process of
    the serving container (same cgroup as its main process); and ``"policy"``: whether the rules
    file already holds the kit's default-drop policy (so the owner's listeners were checked before).

    ``{"listeners": [...], "policy": bool}``.
    """

    POLICY_MARK = "laguna-kit policy: new connections off the tailnet are dropped"

    @staticmethod
    def default():
        return {"listeners": [], "policy": False}

    def command(self, container, rules):
        c, r = shlex.quote(container), shlex.quote(rules)
        return (
            "ss -H -tulnp 2>/dev/null; echo __CGROUPS__; "
            "for p in $(ss -H -tulnp 2>/dev/null | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u); "
            "do echo \"$p $(tr '\\n' ' ' < /proc/$p/cgroup 2>/dev/null)\"; done; echo __KIT__; "
            f"p=$(docker inspect -f '{{{{.State.Pid}}}}' {c} 2>/dev/null) && [ \"$p\" != 0 ] && "
            "tr '\\n' ' ' < /proc/$p/cgroup 2>/dev/null; echo; echo __POLICY__; "
            f"grep -c {shlex.quote(self.POLICY_MARK)} {r} 2>/dev/null; true"
        )

    def process(self, output):
        parts = sections.split(
            ["__SS__", *output], ["__SS__", "__CGROUPS__", "__KIT__", "__POLICY__"]
        )
        cgroups = dict(line.split(" ", 1) for line in parts["__CGROUPS__"] if " " in line)
        kit = " ".join(parts["__KIT__"]).strip()
        out = []
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
        return {"listeners": out, "policy": policy}


def is_loopback(address: str) -> bool:
    """127.0.0.0/8, ::1, or an address scoped to lo (ss prints 127.0.0.53%lo)."""
    host, _, scope = address.partition("%")
    return host.startswith("127.") or host == "::1" or scope == "lo"


class FirewallState(FactBase):
    """``{"table": "loaded" | "missing" | "altered" | "unrecorded"}``: the kit's nftables table
    compared with what the kit recorded when it loaded `rules` (laguna_firewall.py state)."""

    @staticmethod
    def default():
        return {"table": "missing"}

    def command(self, kit_dir, rules):
        launcher = shlex.quote(f"{kit_dir}/bin/laguna_firewall.py")
        return (
            f"if [ -x {launcher} ]; then "
            f"{tool_command(kit_dir, 'laguna_firewall.py', 'state', rules)}; fi"
        )

    def process(self, output):
        return dict(self.default(), **sections.load_json(output))
