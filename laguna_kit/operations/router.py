"""The fleet router (HAProxy) and the boxes' side of it: firewall peers and the drain agent.

Both read the other side's tailnet addresses as they run (laguna_kit/domain/fleet.py), so a first
deploy of a whole fleet wires router and boxes in the same run.
"""

from __future__ import annotations

from pyinfra import host, logger
from pyinfra.api import OperationError, operation

from ..boxtools.layout import ROUTER_AGENT, ROUTER_DRAIN, UNIT_DIR
from ..domain import fleet, replicas
from ..facts.router import HaproxyBuild
from .files import kit_file
from .systemd import unit_installed, unit_removed


def backends(inventory) -> list[dict]:
    """The GPU boxes of the hosts file as HAProxy servers (one per replica), by their tailnet IPv4
    address now; a box not on the tailnet yet is left out (named)."""
    out = []
    for box in fleet.gpu_hosts(inventory):
        ips = fleet.tailnet_ips(box)
        v4 = [a for a in ips or [] if ":" not in a]
        if not v4:
            logger.warning(
                f"router: {box.name} is not on the tailnet (yet): left out of the backends; the "
                "next deploy adds it"
            )
            continue
        d = box.data
        for r in replicas.of(box):
            out.append(
                {
                    "name": fleet.server_name(box.name, r.number),
                    "address": v4[0],
                    "port": r.port,
                    "maxconn": fleet.max_seqs(d),
                    # the box's agent answers for the replica the check names
                    "replica": r.number,
                }
            )
    return out


@operation()
def router_keys_present(env: str, file: str = "", early_problem: str | None = None):
    """
    At least one API key is set for the fleet (refused, naming the variable, before any change).

    + env: the control machine's environment variable with the keys
    + file: or a file on the control machine, one key per line
    + early_problem: another missing input found before any change (a router host that is not a
      GPU box has no pre-flight of its own), refused here with the keys' problem if any
    """
    try:
        keys = fleet.api_keys(env, file)
    except OperationError as exc:
        raise OperationError("; ".join(x for x in (str(exc), early_problem) if x)) from None
    if early_problem:
        raise OperationError(f"{host.name}: {early_problem}. Nothing on the box was changed.")
    host.noop(f"{len(keys)} API key(s) from {' and '.join(x for x in (env, file) if x)}")
    yield from ()


# haproxy -c on the new configuration; on failure its own error, then the kit's word.
HAPROXY_CHECK = (
    "haproxy -c -q -f %s || { haproxy -c -f %s >&2; echo 'laguna: the new router configuration "
    "does not load; the running one is kept' >&2; exit 1; }"
)


@operation()
def router_configured(
    config: str,
    keys_file: str,
    metrics_keys_file: str,
    unit: str,
    settings: dict,
    keys_env: str,
    keys_path: str = "",
):
    """
    The router's unit and its HAProxy configuration: every GPU box on the tailnet and the hashes
    of the fleet's API keys. A new configuration is checked (`haproxy -c`) before it replaces the
    running one's, and the router reloads it (connections in flight finish on the old process); a
    new unit file restarts it. Both decided from the box (systemd.unit_installed), so a run cut
    after writing the configuration still reloads it next time.

    + config: the configuration file (the kit's own; the distribution's haproxy.cfg is left alone)
    + keys_file: sha256 of each accepted "Bearer <key>" (never the keys)
    + metrics_keys_file: sha256 of each metrics-only key (fleet.metrics_keys), accepted by the
      metrics page alone
    + unit: the router's systemd unit
    + settings: port, metrics_port, agent_port, session_header, timeout_s, queue_timeout_s,
      interval_ms, admin_socket
    + keys_env, keys_path: where the control machine holds the API keys (fleet.api_keys)
    """
    build = host.get_fact(HaproxyBuild)
    if build and not build.get("prometheus"):
        logger.warning(
            f"{host.name}: this haproxy ({build.get('version')}) has no prometheus-exporter: "
            "only the stats page (/stats) is served on the metrics port"
        )
    own = fleet.tailnet_ips(host)
    if not own:
        if not host.state.is_executing:
            host.noop("written once the router is on the tailnet")
            return
        raise OperationError(
            f"{host.name}: the router is not on the tailnet (tailscale status): it would have "
            "no address to listen on; nothing was changed"
        )
    text = kit_file(
        "files/haproxy.cfg.j2",
        **settings,
        keys_file=keys_file,
        metrics_keys_file=metrics_keys_file,
        servers=backends(host.state.inventory),
        prometheus=bool(build.get("prometheus")),
        # its own tailnet addresses alone, never every address: off the tailnet it has no socket
        binds=[f"ipv6@{a}" if ":" in a else f"ipv4@{a}" for a in own],
    )
    keys = fleet.api_keys(keys_env, keys_path)
    hashes = fleet.key_hashes(keys).encode()
    metrics_hash = fleet.key_hashes(fleet.metrics_keys(keys)).encode()
    unit_text = kit_file("files/laguna-router.service.j2", port=settings["port"], config=config)
    # The keys first (the running router holds its ACL in memory): the new configuration names
    # them, and is checked before it replaces the running one's.
    commands = list(
        unit_installed._inner(
            unit=unit,
            files=[
                (hashes, keys_file, "600"),
                (metrics_hash, metrics_keys_file, "600"),
                (text, config, "644"),
                (unit_text, unit_path(unit), "644"),
            ],
            reload=True,
            validate={config: HAPROXY_CHECK},
        )
    )
    if not commands:
        host.noop(f"{config} and the API key hashes are current")
        return
    yield from commands


def unit_path(unit: str) -> str:
    return f"{UNIT_DIR}/{unit}"


@operation()
def router_agent_removed(
    kit_dir: str,
    unit_files: list[str],
    peers_file: str,
    socket_unit: str,
    state_dirs: list[str] | None = None,
):
    """
    A GPU box no longer behind a router (the hosts file has none): its agent stops listening, the
    release manager stops draining before restarts, and the router's addresses leave the firewall
    folder (the rules no longer include it). Only the kit's own files are removed.

    + kit_dir: the kit's folder on the box
    + unit_files: the agent's socket and service unit files
    + peers_file: the router's addresses for the firewall
    + socket_unit: the agent's socket unit
    + state_dirs: the box's replicas' state folders (None: kit_dir alone)
    """
    kit_files = [
        *(f"{s}/{name}" for s in state_dirs or [kit_dir] for name in (ROUTER_AGENT, ROUTER_DRAIN)),
        peers_file,
    ]
    commands = list(unit_removed._inner(unit=socket_unit, paths=unit_files, also=kit_files))
    if not commands:
        host.noop("no router agent on this box")
        return
    logger.info(f"{host.name}: no router in the hosts file: removing this box's router agent")
    yield from commands
