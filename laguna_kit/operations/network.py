"""The box on the tailnet, and the kit's nftables table that keeps the API on it."""

from __future__ import annotations

import os
import socket

from pyinfra import host
from pyinfra.api import FunctionCommand, OperationError, operation
from pyinfra.facts.server import Command

from ..facts.network import TailscaleStatus
from .secrets import with_secret


@operation()
def tailscale_joined(auth_key_env: str, kit_dir: str, hostname: str = "", tags: list[str] = ()):
    """
    The box is on the tailnet. A joined box is left alone; otherwise the auth key (from the control
    machine's environment) reaches the box only as a secret file for ``--auth-key=file:``.

    + auth_key_env: the control machine's environment variable with the auth key
    + kit_dir: the kit's folder on the box
    + hostname: the node's name on the tailnet ("" = the box's hostname)
    + tags: ACL tags to advertise

    **Example:**

    .. code:: python

        tailscale_joined(name="On the tailnet", auth_key_env="TS_AUTHKEY",
        kit_dir="/opt/laguna-kit")
    """
    st = host.get_fact(TailscaleStatus)
    if st.get("BackendState") == "Running":
        host.noop(f"on the tailnet as {', '.join(st.get('Self', {}).get('TailscaleIPs', []))}")
        return
    key = os.environ.get(auth_key_env, "")
    if not key:
        if not host.state.is_executing:
            host.noop("joined once tailscaled runs")
            return
        raise OperationError(
            f"{host.name} is not on the tailnet and {auth_key_env} is not set on the control "
            f"machine: export {auth_key_env}=tskey-auth-... (an auth key) and re-run"
        )
    key_file = f"{kit_dir}/secrets/tailscale-authkey"
    extra = (f" --hostname={hostname}" if hostname else "") + (
        f" --advertise-tags={','.join(tags)}" if tags else ""
    )
    yield from with_secret(key, key_file, f"tailscale up --auth-key=file:{key_file}{extra}")


@operation()
def ssh_over_tailnet_checked(ssh_port: int):
    """
    Before SSH is made tailnet-only: this very run must be connected over the tailnet.

    The address pyinfra uses (resolved on the control machine) has to be one of the box's own
    tailnet addresses; otherwise the rule would end this operator's access at the next login.

    + ssh_port: the port this run connects to

    **Example:**

    .. code:: python

        ssh_over_tailnet_checked(name="SSH over the tailnet", ssh_port=22)
    """
    if not host.state.is_executing:
        host.noop("checked when the box is on the tailnet")
        return
    mine = set(host.get_fact(TailscaleStatus).get("Self", {}).get("TailscaleIPs") or [])
    address = host.data.get("ssh_hostname") or host.name
    try:
        resolved = {
            info[4][0] for info in socket.getaddrinfo(address, ssh_port, proto=socket.IPPROTO_TCP)
        }
    except OSError:
        resolved = set()
    if not mine:
        raise OperationError(
            f"{host.name}: ssh_tailnet_only is set but the box has no tailnet address yet; "
            "the firewall was not changed"
        )
    if not resolved & mine:
        raise OperationError(
            f"{host.name}: ssh_tailnet_only is set but this run reaches the box at {address} "
            f"({', '.join(sorted(resolved)) or 'unresolved'}), not over the tailnet "
            f"({', '.join(sorted(mine))}). Connect over the tailnet first (set the host's address "
            f"to "
            f"{sorted(mine)[0]} or its MagicDNS name) and re-run; the firewall was not changed, "
            f"SSH stays open"
        )
    host.noop(
        f"this run is connected over the tailnet ({address}): SSH may be limited to tailscale0"
    )
    yield from ()


def reconnect(host, confirm_timeout_s: int) -> None:
    """A *new* SSH connection, or the rules revert themselves."""
    host.disconnect()
    host.connect(show_errors=True)
    if not host.connected:
        raise OperationError(
            f"{host.name}: no new SSH connection after the firewall change: it reverts itself "
            f"in {confirm_timeout_s} s"
        )


@operation()
def firewall_applied(rules: str, confirm_timeout_s: int):
    """
    Load the kit's nftables table atomically, with an automatic revert unless a *new* SSH
    connection confirms within `confirm_timeout_s` (so a rule that cuts the operator off undoes
    itself).

    + rules: the rules file on the box (replaces only the kit's table)
    + confirm_timeout_s: seconds before an unconfirmed change reverts

    **Example:**

    .. code:: python

        firewall_applied(name="Firewall", rules="/etc/laguna-kit/firewall.nft",
        confirm_timeout_s=60)
    """
    current = host.get_fact(
        Command,
        command="nft -s list table inet laguna_kit 2>/dev/null | sha256sum; "
        f"sha256sum {rules} 2>/dev/null; cat {rules}.loaded 2>/dev/null; true",
    )
    parts = (current or "").split()
    # Loaded = the file's hash was recorded at load time and the live table still hashes the same.
    if len(parts) >= 6 and parts[2] == parts[4] and parts[0] == parts[5]:
        host.noop("firewall table loaded and unchanged")
        return
    yield f"nft -c -f {rules}"
    yield (
        f"systemctl stop laguna-firewall-revert.timer 2>/dev/null; systemd-run --quiet "
        f"--unit laguna-firewall-revert --on-active={int(confirm_timeout_s)} "
        "/usr/sbin/nft delete table inet laguna_kit"
    )
    yield f"nft -f {rules}"
    yield FunctionCommand(lambda state, host: reconnect(host, confirm_timeout_s), (), {})
    yield (
        f"systemctl stop laguna-firewall-revert.timer laguna-firewall-revert.service 2>/dev/null; "
        f"echo \"$(sha256sum {rules} | cut -d' ' -f1) $(nft -s list table inet laguna_kit | "
        f"sha256sum "
        f"| cut -d' ' -f1)\" > {rules}.loaded"
    )
