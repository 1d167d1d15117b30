"""The box on the tailnet, and the kit's nftables table that keeps the API on it."""

from __future__ import annotations

import concurrent.futures
import os
import shlex
import socket

from pyinfra import host, logger
from pyinfra.api import FunctionCommand, OperationError, operation

from ..domain.box_commands import tool_command
from ..facts.network import FirewallState, Listeners, TailscaleStatus
from ..run import deploy_lock, memo, operator_inputs
from .secrets import secret_path, with_secret


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
    deploy_lock.hold(host, host.data.kit_dir, 60)  # the old connection's lock ended with it


@operation()
def firewall_applied(kit_dir: str, rules: str, revert_after_s: int = 0, fallback: str = ""):
    """
    Load the kit's nftables table atomically. With `revert_after_s` (rules that can cut SSH), the
    box restores the table loaded before unless a *new* SSH connection confirms in time.

    + kit_dir: the kit's folder on the box (laguna_firewall.py)
    + rules: the rules file on the box (replaces only the kit's table)
    + revert_after_s: seconds before an unconfirmed change reverts; 0: no revert (cannot cut SSH)
    + fallback: what the revert loads when no table was loaded before (the rules without the SSH
    limit)

    **Example:**

    .. code:: python

        firewall_applied(name="Firewall", kit_dir="/opt/laguna-kit",
        rules="/etc/laguna-kit/firewall.nft")
    """
    st = host.get_fact(FirewallState, kit_dir=kit_dir, rules=rules)
    if st.get("table") == "loaded":
        host.noop("firewall table loaded and unchanged")
        return
    revert = ["--revert-after", revert_after_s, "--fallback", fallback] if revert_after_s else []
    yield tool_command(kit_dir, "laguna_firewall.py", "load", rules, *revert)
    if revert_after_s:
        yield FunctionCommand(lambda state, host: reconnect(host, revert_after_s), (), {})
    yield tool_command(kit_dir, "laguna_firewall.py", "confirm", rules)


# Listeners the policy does not cut: DHCP clients (packet sockets, or replies only), tailscaled
# (the kit's; its port stays open) and docker-proxy (published ports are forwarded, not input).
NOT_CUT = {("udp", 68), ("udp", 546)}
NOT_CUT_PROCESSES = {"tailscaled", "docker-proxy"}


def parse_ports(specs: list[str]) -> dict[str, list[int]]:
    """firewall_open_ports ("tcp/9100", "udp/5353") as {"tcp": [...], "udp": [...]}."""
    out: dict[str, list[int]] = {"tcp": [], "udp": []}
    for spec in specs:
        proto, _, port = str(spec).partition("/")
        if proto not in out or not port.isdigit() or not 0 < int(port) < 65536:
            raise OperationError(f"firewall_open_ports: {spec!r} is not tcp/PORT or udp/PORT")
        out[proto].append(int(port))
    return {k: sorted(set(v)) for k, v in out.items()}


@operation()
def listeners_checked(
    container: str,
    rules: str,
    ssh_ports: list[int],
    api_port: int,
    open_ports: list[str],
    close_ok: bool = False,
):
    """
    Before the kit's default-drop policy is first loaded: nothing the owner serves off the tailnet
    may be cut silently. Every listener on a non-loopback address (other than SSH, the API and the
    kit's own) must be in `open_ports`, or the operator acknowledges the cut with `close_ok`.

    + container: the serving container (its processes are the kit's own)
    + rules: the rules file (holding the policy means this check was passed before)
    + ssh_ports: the ports sshd listens on (kept open)
    + api_port: the API port
    + open_ports: ports kept open off the tailnet (firewall_open_ports)
    + close_ok: cut the listed listeners anyway (firewall_close_listeners)

    **Example:**

    .. code:: python

        listeners_checked(name="Listeners", container="vllm-laguna",
        rules="/etc/laguna-kit/firewall.nft",
                          ssh_ports=[22], api_port=8080, open_ports=["tcp/9100"])
    """
    opened = parse_ports(open_ports)
    seen = memo.fact(host, Listeners, container=container, rules=rules)
    if seen["policy"]:
        host.noop("the default-drop policy is in place already (listeners were checked then)")
        return
    cut = sorted(
        {
            (ln["proto"][:3], ln["port"], ln["process"])
            for ln in seen["listeners"]
            if not ln["kit"]
            and ln["process"] not in NOT_CUT_PROCESSES
            and (ln["proto"][:3], ln["port"]) not in NOT_CUT
            and not (ln["proto"].startswith("tcp") and ln["port"] in (*ssh_ports, api_port))
            and ln["port"] not in opened.get(ln["proto"][:3], [])
        }
    )
    names = ", ".join(f"{proto}/{port} ({process})" for proto, port, process in cut)
    if cut and not close_ok:
        raise OperationError(
            f"{host.name}: the kit's firewall would make these listeners unreachable off the "
            f"tailnet: "
            f"{names}. Keep them open with firewall_open_ports = "
            f"{[f'{p}/{n}' for p, n, _ in cut]!r}, or acknowledge the cut with "
            "firewall_close_listeners = True; nothing was changed"
        )
    if cut:
        logger.warning(
            f"{host.name}: firewall_close_listeners: {names} will answer only on the tailnet"
        )
    host.noop(f"no owner's listener is cut{' (acknowledged: ' + names + ')' if cut else ''}")
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
    tailnet = (memo.fact(host, TailscaleStatus).get("Self") or {}).get("TailscaleIPs") or []
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


@operation()
def cache_clients_allowed(kit_dir: str, rules: str, peers_file: str):
    """
    On the fleet's image cache host: the kit's firewall lets the GPU boxes' tailnet addresses
    (read from each now, each parsed) reach the cache, and no other peer. A box whose address is
    unknown to this run adds none (closed to it).

    + kit_dir: the kit's folder on the host
    + rules: the kit's rules file (it includes `peers_file`)
    + peers_file: the set elements
    """
    from ..domain import fleet
    from .router import peers_synced

    boxes = [h for h in fleet.gpu_hosts(host.state.inventory) if h.name != host.name]
    yield from peers_synced(kit_dir, rules, peers_file, boxes, "pullers", "the image cache")


@operation()
def file_peers_allowed(kit_dir: str, rules: str, peers_file: str):
    """
    On a GPU box of a fleet: the kit's firewall lets the other GPU boxes' tailnet addresses (read
    from each now, each parsed) reach its checkpoint file server, and no other peer. A box whose
    address is unknown to this run adds none (closed to it).

    + kit_dir: the kit's folder on the box
    + rules: the kit's rules file (it includes `peers_file`)
    + peers_file: the set elements
    """
    from ..domain import fleet
    from .router import peers_synced

    others = [h for h in fleet.gpu_hosts(host.state.inventory) if h.name != host.name]
    yield from peers_synced(
        kit_dir, rules, peers_file, others, "peers", "the checkpoint file server"
    )
