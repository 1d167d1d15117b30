"""What to check when a host could not be reached over SSH, said at the end of the run: pyinfra's
own "Could not connect ([Errno 111] Connection refused)" names neither the address nor the next
step. Registered by inventory.py (the connections are made before any deploy code runs)."""

from __future__ import annotations

import atexit
import shlex
import sys


def never_connected(state) -> list:
    """The hosts of this run pyinfra failed before it ever had a connection to them."""
    return sorted(state.failed_hosts - state.activated_hosts, key=lambda h: h.name)


def advice(host) -> str:
    d = host.data
    address, port, user = (
        d.get("ssh_hostname") or host.name,
        d.get("ssh_port") or 22,
        d.get("ssh_user") or "root",
    )
    key = d.get("ssh_key")
    config = d.get("ssh_config_file")
    login = shlex.join(
        [
            "ssh",
            "-p",
            str(port),
            *(["-i", key] if key else []),
            *(["-F", config] if config else []),
            f"{user}@{address}",
            "true",
        ]
    )
    return (
        f"  {host.name}: no SSH connection to {user}@{address} port {port}. From this machine: "
        f"is the box up and does this address reach it (`ping {address}`)? Does sshd listen on "
        f"port {port} (a rented box: the provider's mapped port; through a jump host: "
        f"ssh_config_file)? Does `{login}` log in (it also says when the box's host key changed: "
        "known_hosts)? A box whose SSH the kit keeps to the tailnet (ssh_tailnet_only) answers "
        "on its tailnet address only."
    )


def report() -> None:
    from pyinfra.context import ctx_state

    if not ctx_state.isset():
        return
    hosts = never_connected(ctx_state.get())
    if hosts:
        print("\n".join(["--> Not reached:", *(advice(h) for h in hosts)]), file=sys.stderr)


def register() -> None:
    atexit.register(report)
