"""The kit's nftables table on a box: loaded (self-reverting when the rules can cut SSH), checked
against the owner's listeners before its first load, and the sets of the fleet's hosts that may
reach each port of the kit's."""

from __future__ import annotations

from pyinfra import host, logger
from pyinfra.api import FunctionCommand, OperationError, operation
from pyinfra.facts.files import FileContents
from pyinfra.facts.server import Users

from ..boxtools import rejoin
from ..domain import fleet
from ..domain.box_commands import tool_command
from ..facts.network import FirewallState, Listeners
from ..run import deploy_lock, memo
from .files import files_synced


def _named(hosts) -> list[tuple[str, list[str] | None]]:
    return [(fleet.server_name(h.name), fleet.tailnet_ips(h)) for h in hosts]


def _one(other):
    """(name, addresses) of a one-host role, and (the host, its tailnet status): one read serves
    both the set's elements and the line the firewall watch finds it again by."""
    if other is None:
        return [], None
    status = fleet.tailnet_status(other)
    named = [(fleet.server_name(other.name), fleet.tailnet_ips(other, status or {}))]
    return named, (other, status)


def _router(h):
    named, single = _one(fleet.router_of(h.state.inventory))
    return named, "this box's API", single


def _monitor(h):
    what = "node exporter" + (" and the metrics relay" if "gpu" in fleet.roles(h) else "")
    named, single = _one(fleet.monitor_of(h.state.inventory))
    return named, what, single


def _other_gpu_boxes(what):
    def pick(h):
        boxes = [b for b in fleet.gpu_hosts(h.state.inventory) if b.name != h.name]
        return _named(boxes), what, None

    return pick


def _operators(h):
    return fleet.operators(h), "Prometheus and Alertmanager", None


# role -> (the (name, tailnet addresses or None) of that role for host h; what they may reach
# here; for a one-host role (the host, its tailnet status): the firewall watch lets it in again)
ROLES = {
    "router": _router,
    "monitor": _monitor,
    "peers": _other_gpu_boxes("the checkpoint file server"),
    "pullers": _other_gpu_boxes("the image cache"),
    "operators": _operators,
}


@operation()
def fleet_peers_allowed(role: str, kit_dir: str, rules: str, peers_file: str):
    """
    The kit's firewall lets the tailnet addresses of the fleet's hosts of `role` (read from each
    now, each parsed and in the tailnet's ranges) reach what that role is let in to here, and no
    other tailnet peer: a GPU box's API and agent (the router), node exporter and a box's metrics
    relay (the monitor), a box's checkpoint file server (the fleet's other GPU boxes, "peers"),
    the image cache (the GPU boxes, "pullers"), Prometheus and Alertmanager on the monitor host
    (monitor_operators: addresses, and tags read from its tailnet status, "operators"). A host
    whose address this run does not know adds none
    (fail closed: the set is emptied, never left holding an old address); the rules are loaded
    again when the set changed.

    + role: router, monitor, peers, pullers or operators (the nft sets fleet_<role>_v4/v6)
    + kit_dir: the kit's folder on the box (laguna_firewall.py)
    + rules: the kit's rules file (it includes `peers_file`)
    + peers_file: the set elements

    **Example:**

    .. code:: python

        fleet_peers_allowed(name="API for the router alone", role="router",
                            kit_dir="/opt/laguna-kit", rules=FIREWALL_RULES,
                            peers_file=FIREWALL_PEERS)
    """
    if role not in ROLES:
        raise OperationError(f"fleet_peers_allowed: role {role!r} is not one of {sorted(ROLES)}")
    others, what, single = ROLES[role](host)
    rejoin = rejoin_line(role, single[0], single[1], peers_file) if single is not None else None
    known: list[tuple[str, list[str]]] = []
    unknown: list[tuple[str, list[str]]] = []
    for name, ips in others:
        (known if ips else unknown).append((name, ips or []))
    ips = sorted({a for _, a_ in known for a in a_}, key=lambda a: (":" in a, a))
    name = ", ".join(n for n, _ in known + unknown) or "?"
    missing = ", ".join(n for n, _ in unknown)
    v4 = [a for a in ips if ":" not in a]
    v6 = [a for a in ips if ":" in a]
    text = (
        f"# Managed by the laguna kit: the fleet {role} {name}\n"
        + (f"add element inet laguna_kit fleet_{role}_v4 {{ {', '.join(v4)} }}\n" if v4 else "")
        + (f"add element inet laguna_kit fleet_{role}_v6 {{ {', '.join(v6)} }}\n" if v6 else "")
        + (
            "# its address is unknown to this run: no element, no peer\n"
            if not known
            else f"# not on the tailnet or not reachable by this run: {missing}\n"
            if unknown
            else ""
        )
        + (f"{rejoin}\n" if rejoin else "")
    ).encode()
    for n, _ in unknown:
        # Fail closed: the addresses of a host that is gone (replaced, not yet joined) must not
        # keep reaching the box.
        logger.warning(
            f"{host.name}: the {role} {n} is not on the tailnet or this run cannot reach it: "
            + (
                f"no tailnet peer reaches {what} until the {role} is back on the tailnet "
                "(the firewall watch lets it in again) or a deploy finds it"
                if single
                else f"it does not reach {what} until a deploy finds it"
            )
        )
    # (written as <name>.laguna-new first: nft's *.nft include does not read it half-written)
    commands = list(files_synced._inner(files=[(text, peers_file, "644")]))
    if not commands:
        host.noop(
            f"{what} answers the {role} {name} ({', '.join(ips)}) alone"
            if ips
            else f"{role} address unknown: {what} answers no tailnet peer"
        )
        return
    yield from commands
    yield tool_command(kit_dir, "laguna_firewall.py", "load", rules)
    yield tool_command(kit_dir, "laguna_firewall.py", "confirm", rules)


def rejoin_line(role: str, other, status: dict | None, peers_file: str) -> str | None:
    """The line the firewall watch finds `other` again by (boxtools/rejoin.py): its tailnet name and
    node key as its `status` gives them now; when this run cannot read them, the line an earlier
    deploy left, else the name the hosts file gives it (tailscale_hostname, or its name)."""
    me = (status or {}).get("Self") or {}
    if me.get("HostName") and me.get("PublicKey"):
        return rejoin.rejoin_line(f"fleet_{role}", str(me["HostName"]), str(me["PublicKey"]))
    for line in host.get_fact(FileContents, path=peers_file) or []:
        if rejoin.REJOIN.match(line) and line.split()[2] == f"fleet_{role}":
            return line
    name = other.data.get("tailscale_hostname") or other.name.split(".")[0]
    return rejoin.rejoin_line(f"fleet_{role}", name, "-")


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


@operation()
def local_users_present(users: list[str]):
    """
    The users the rules let reach the monitor's own ports (monitor_local_users) exist here: nft
    resolves each name when it loads the table, and an unknown one would fail the whole load.

    + users: user names (typed by the knob's shape)
    """
    if not users:
        host.noop("no local user besides Prometheus's and root")
        return
    known = host.get_fact(Users) or {}
    missing = [u for u in users if u not in known]
    if missing:
        raise OperationError(
            f"{host.name}: monitor_local_users names {', '.join(missing)}, not a user on this "
            "host: create the user first (its service's package does), or take it out of the "
            "list; nothing was changed"
        )
    host.noop(f"{', '.join(users)} may reach the monitor's ports from this host")
    yield from ()
