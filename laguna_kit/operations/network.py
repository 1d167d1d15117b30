"""The box on the tailnet, and the kit's nftables table that keeps the API on it."""

from __future__ import annotations

import concurrent.futures
import os
import shlex
import socket

from pyinfra import host, logger
from pyinfra.api import OperationError, operation

from ..domain import fleet
from ..facts.network import TailscaleStatus
from ..run import memo, operator_inputs
from .secrets import secret_path, with_secret


@operation()
def tailscale_joined(
    auth_key_env: str, kit_dir: str, hostname: str = "", tags: list[str] | tuple = ()
):
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
    st = memo.fact(host, TailscaleStatus)
    if st.get("BackendState") == "Running":
        host.noop(f"on the tailnet as {', '.join(st.get('Self', {}).get('TailscaleIPs', []))}")
        return
    problem = operator_inputs.tailnet_problem(st, auth_key_env)  # the pre-flight's own rule
    if problem:
        if not host.state.is_executing:
            host.noop("joined once tailscaled runs")
            return
        raise OperationError(f"{host.name}: {problem}")
    key = os.environ[auth_key_env]
    key_file = secret_path("tailscale-authkey")
    words = ["tailscale", "up", f"--auth-key=file:{key_file}"]
    words += [f"--hostname={hostname}"] if hostname else []
    words += [f"--advertise-tags={','.join(tags)}"] if tags else []
    yield from with_secret(key, key_file, shlex.join(words))


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
    mine = set(memo.fact(host, TailscaleStatus).get("Self", {}).get("TailscaleIPs") or [])
    address = host.data.get("ssh_hostname") or host.name
    try:
        resolved = {
            str(info[4][0])
            for info in socket.getaddrinfo(address, ssh_port, proto=socket.IPPROTO_TCP)
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


def answers(address: str, port: int, timeout: float = 1.5) -> bool:
    """A TCP connection from the control machine to address:port succeeds (an open port answers
    a SYN in milliseconds on a LAN or a tailnet; a dropped one costs the timeout)."""
    try:
        with socket.create_connection((address, port), timeout=timeout):
            return True
    except OSError:
        return False


@operation()
def api_exposure_checked(port: int):
    """
    The network view from the control machine: the API answers on the box's tailnet address and
    not on its ordinary address (each where this machine reaches it). An answer on the ordinary
    address fails the deploy.

    + port: the API port

    **Example:**

    .. code:: python

        api_exposure_checked(name="API on the tailnet only, seen from here", port=8080)
    """
    if not host.state.is_executing:
        host.noop("checked once the release serves")
        return
    # (parsed: a probe goes to an address, never to text the box made up)
    tailnet = fleet.tailnet_addresses(memo.fact(host, TailscaleStatus), host.name)
    ordinary = host.data.get("ssh_hostname") or host.name
    # All addresses at once: a dropped SYN costs the timeout once, not once per address.
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(tailnet) + 1) as pool:
        answered = dict(
            zip([*tailnet, ordinary], pool.map(lambda a: answers(a, port), [*tailnet, ordinary]))
        )
    seen = []
    for address in tailnet:
        seen.append(f"{address}:{port} {'answers' if answered[address] else 'no answer from here'}")
    if ordinary in tailnet:
        seen.append("the ordinary address is not known (this run connects over the tailnet)")
    elif answered[ordinary]:
        raise OperationError(
            f"{host.name}: the API answers on {ordinary}:{port}, off the tailnet: the firewall is "
            f"not "
            "holding (tasks/status.py; TROUBLESHOOTING.md)"
        )
    else:
        seen.append(f"{ordinary}:{port} no answer (off the tailnet)")
    logger.info(f"[{host.name}] network view from the control machine: {'; '.join(seen)}")
    host.noop("; ".join(seen))
    yield from ()
