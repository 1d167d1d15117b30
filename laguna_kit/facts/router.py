"""The fleet router's host: which HAProxy it has."""

from __future__ import annotations

import re
from typing import TypedDict

from pyinfra.api import FactBase, QuoteString, StringCommand


class Build(TypedDict, total=False):
    version: str
    prometheus: bool  # built with the prometheus-exporter service


class Backend(TypedDict):
    name: str
    status: str
    running: int
    queued: int
    served: int
    check: str
    agent: str


class RouterState(TypedDict):
    unit: str
    servers: list[Backend]


class HaproxyBuild(FactBase[Build]):
    """``{"version": "2.6.12-1+deb12u4", "prometheus": bool}`` of /usr/sbin/haproxy, {} if none."""

    @staticmethod
    def default() -> Build:
        return {}

    def command(self):
        return "haproxy -vv 2>/dev/null | head -c 20000 || true"

    def process(self, output) -> Build:
        text = "\n".join(output)
        if "HAProxy version" not in text:
            return {}
        version = text.split("HAProxy version", 1)[1].split()[0]
        return {"version": version, "prometheus": "prometheus-exporter" in text}


STAT_SCRIPT = (
    "import socket, sys\n"
    "s = socket.socket(socket.AF_UNIX)\n"
    "s.settimeout(5)\n"
    "s.connect(sys.argv[1])\n"
    "s.sendall(b'show stat\\n')\n"
    "print(s.makefile().read())\n"
)


class RouterStatus(FactBase[RouterState]):
    """The router's unit state and each backend server's line of HAProxy's ``show stat`` (over
    its admin socket): ``{"unit": "active", "servers": [{"name", "status", "running", "queued",
    "served", "check", "agent"}]}``."""

    @staticmethod
    def default() -> RouterState:
        return {"unit": "unknown", "servers": []}

    def command(self, unit, admin_socket, backend="laguna"):
        return StringCommand(
            "echo unit=$(systemctl is-active",
            QuoteString(unit),
            "2>/dev/null); python3 -c",
            QuoteString(STAT_SCRIPT),
            QuoteString(admin_socket),
            "2>/dev/null | grep -E",
            QuoteString(f"^(# pxname|{re.escape(backend)},)"),
            "|| true",
        )

    def process(self, output) -> RouterState:
        unit, columns = "unknown", []
        servers: list[Backend] = []
        for line in output:
            if line.startswith("unit="):
                unit = line.split("=", 1)[1] or "unknown"
            elif line.startswith("# pxname,"):  # show stat's header names its CSV columns
                columns = line[2:].split(",")
            elif columns:
                row = dict(zip(columns, line.split(",")))
                if row.get("svname") in ("FRONTEND", "BACKEND", None):
                    continue
                servers.append(
                    {
                        "name": row["svname"],
                        "status": row.get("status", ""),
                        "running": int(row.get("scur") or 0),
                        "queued": int(row.get("qcur") or 0),
                        "served": int(row.get("stot") or 0),
                        "check": row.get("check_status", ""),
                        "agent": row.get("agent_status", ""),
                    }
                )
        return {"unit": unit, "servers": servers}
